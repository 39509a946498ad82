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
