"""``app.replay.UnattendedRun``: what an unattended run (``--input`` replay, ``--quit-after`` capture) tells its
user on stderr. The window is a stand-in that only carries the controller's signals."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from app.live_run import CaptureRun


class _Controller(QObject):
    model_changed = Signal(object)
    message = Signal(str, str)
    model_failed = Signal(str, int)
    session_failed = Signal(str, int)
    session_finished = Signal(str)
    state_changed = Signal(str)

    def stop(self) -> None:
        pass


class _Window(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.controller = _Controller()
        self.controller.lines = []


def test_a_failed_start_is_said_once_and_warnings_as_they_come(qtbot, capsys):
    """``livecap --source mic --quit-after 5`` with no microphone printed "No microphone was found" twice: the
    worker's failure comes as an error message and as ``session_failed``, and the capture run printed both."""
    window = _Window()
    run = CaptureRun(window, 5.0)
    run.quit_at_end = False  # nothing to quit in a test
    c = window.controller
    c.message.emit("info", "Listening")
    c.message.emit("warning", "The input was lost; reconnecting.")
    c.message.emit("error", "No microphone was found; connect one and press Refresh.")
    c.session_failed.emit("No microphone was found; connect one and press Refresh.", 4)
    assert capsys.readouterr().err == (
        "livecap: The input was lost; reconnecting.\nlivecap: No microphone was found; connect one and press Refresh.\n"
    )


def test_a_signal_while_the_model_loads_starts_nothing(qtbot, capsys):
    """SIGTERM or Ctrl+C during the model load of ``livecap --input ... --quit-at-end``: the window closed, the load
    ended, the replay started anyway and failed "Choose a model before starting." with exit 2 (QA)."""
    from app.replay import UnattendedRun

    class Run(UnattendedRun):
        began = 0

        def begin(self) -> None:
            self.began += 1

    window = _Window()
    run = Run(window, None, quit_at_end=False)
    run.interrupted = 143  # app.main's handler, when the signal came
    window.controller.model_changed.emit(object())
    assert run.began == 0 and capsys.readouterr().err == ""
    calm = Run(_Window(), None, quit_at_end=False)
    calm.window.controller.model_changed.emit(object())
    assert calm.began == 1


def test_a_signal_while_the_window_is_made_waits_for_it():
    """Ctrl+C 0.4 s after ``livecap --input`` started raised KeyboardInterrupt inside MainWindow's making, and the
    process aborted ("QThread: Destroyed while thread 'engine-worker' is still running", SIGABRT; QA). Until the
    window can close cleanly, the signal is noted, not raised."""
    import os
    import signal

    from app.main import _defer_interrupts

    before = {name: signal.getsignal(getattr(signal, name)) for name in ("SIGINT", "SIGTERM")}
    try:
        for name in ("SIGINT", "SIGTERM"):
            pending = _defer_interrupts()
            os.kill(os.getpid(), getattr(signal, name))
            assert pending == [getattr(signal, name)]
    finally:
        for name, handler in before.items():
            signal.signal(getattr(signal, name), handler)


def test_an_interrupt_before_anything_was_heard_keeps_the_file_there(qtbot, capsys, tmp_path):
    """QA: Ctrl+C 1 s into ``livecap --input x.wav --quit-at-end --save-transcript keep.srt`` replaced an existing
    transcript with an empty file; now it stays, and stderr says why. With lines, the file is written as before."""
    from app.replay import UnattendedRun
    from engine.events import Line

    class Run(UnattendedRun):
        def begin(self) -> None:
            pass

    keep = tmp_path / "keep.srt"
    keep.write_text("1\n00:00:00,000 --> 00:00:01,000\nold\n", encoding="utf-8")
    before = keep.read_bytes()
    window = _Window()
    run = Run(window, str(keep), quit_at_end=False)
    window.controller.model_changed.emit(object())
    run.interrupted = 130
    window.controller.session_finished.emit("stopped")
    assert run.exit_code == 130 and keep.read_bytes() == before
    assert capsys.readouterr().err == f"livecap: interrupted; nothing was heard, so {keep} was not written.\n"
    window = _Window()
    window.controller.lines = [Line("Hello.", 0.0, 1.0)]
    window.controller.audio_seconds = 1.0
    run = Run(window, str(keep), quit_at_end=False)
    window.controller.model_changed.emit(object())
    run.interrupted = 130
    window.controller.session_finished.emit("stopped")
    assert run.exit_code == 130 and "Hello." in keep.read_text(encoding="utf-8")


def test_a_signal_closes_the_window_from_the_event_loop_not_inside_the_code_it_interrupted(qtbot):
    """SIGTERM during ``livecap --input`` closed the window inside the signal handler, which Python runs between
    any two bytecodes of the main thread: the session ended (journal closed) in the middle of committing a line,
    which then failed ("unexpected error", QA). The close now waits for the event loop."""
    import signal

    from PySide6.QtWidgets import QWidget

    from app.main import _close_on_interrupt

    closed: list[bool] = []

    class Window(QWidget):
        def closeEvent(self, event) -> None:  # noqa: N802 - Qt's name
            closed.append(True)
            super().closeEvent(event)

    window = Window()
    qtbot.addWidget(window)
    before = {name: signal.getsignal(getattr(signal, name)) for name in ("SIGINT", "SIGTERM")}
    try:
        _close_on_interrupt(window)
        signal.raise_signal(signal.SIGTERM)  # its handler has run when this returns
        assert closed == []  # not in the middle of this code
        qtbot.waitUntil(lambda: closed == [True], timeout=2000)
    finally:
        for name, handler in before.items():
            signal.signal(getattr(signal, name), handler)
