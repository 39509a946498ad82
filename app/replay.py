"""``livecap --input FILE``: replay a file through the whole GUI path, save the transcript, maybe quit.

``UnattendedRun`` is what every unattended run shares (this replay, and ``app.live_run``'s timed capture):
start once the model is loaded, save the transcript when the session ends, report a failure, exit."""

from __future__ import annotations

import sys

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QApplication

from app.export import export
from app.main_window import MainWindow
from engine.errors import user_message


def save_transcript(window: MainWindow, save_to: str) -> bool:
    """Write the session's lines to ``save_to`` (format by extension) at the end of an unattended run. On
    failure: one sentence in the window and on stderr, the session's journal left unfinished so that its lines
    are offered for recovery at the next start, and False. A transcript with no words is written, and stderr says
    so (an empty SRT file looks broken: ffmpeg refuses it)."""
    try:
        export(window.controller.lines, save_to, audio_end=window.controller.audio_seconds)
    except Exception as exc:  # one sentence, no traceback; the lines stay in the session backup
        window.controller.keep_session_backup()
        kept = "Its lines are kept and offered for recovery at the next start."
        window.show_message("error", user_message(exc, f"The transcript could not be saved to {save_to}") + " " + kept)
        print(f"livecap: {user_message(exc, 'The transcript could not be saved')} {kept}", file=sys.stderr)
        return False
    if not any(line.text.strip() for line in window.controller.lines):  # an empty SRT: players refuse the file
        print(f"livecap: warning: nothing was recognised; {save_to} holds no captions.", file=sys.stderr)
    return True


class UnattendedRun(QObject):
    """Calls ``begin()`` once the model is loaded; when the session ends writes ``save_to`` (format by its
    extension; ``save_transcript``) and, with ``quit_at_end``, exits the app. ``exit_code`` is None until the
    run ends. Subclasses say how the session begins. With ``delay_ms`` (``livecap --delay-ms``) a model without
    a delay fails the run (usage, exit 2) instead of beginning it."""

    delay_ms: int | None = None
    interrupted = 0  # 128 + the signal that stopped the run (app.main; Ctrl+C: 130): its transcript is partial

    def __init__(self, window: MainWindow, save_to: str | None, quit_at_end: bool) -> None:
        super().__init__(window)
        self.window = window
        self.save_to = save_to
        self.quit_at_end = quit_at_end
        self.exit_code: int | None = None
        self._started = False
        self._error = ""  # the last error sentence of the session (the worker's, before it ends with "error")
        self._said: set[str] = set()  # sentences already on stderr (a failure comes as a message and a signal)
        c = window.controller
        c.model_changed.connect(self._on_model)
        c.message.connect(self._on_message)
        c.model_failed.connect(self.fail)
        c.session_failed.connect(self.fail)
        c.session_finished.connect(self._on_finished)

    def begin(self) -> None:
        """Start the session (once, when the model is loaded)."""
        raise NotImplementedError

    def _on_model(self, info: object) -> None:
        if self.interrupted:  # Ctrl+C or SIGTERM during the load: the window is closing, nothing starts
            return
        if info is not None and not self._started:
            from engine.cli import check_delay_ms
            from engine.errors import UsageError

            try:
                check_delay_ms(self.delay_ms, getattr(info, "family", None))
            except UsageError as exc:
                self.fail(str(exc), exc.exit_code)
                return
            self._started = True
            self._error = ""
            self.begin()

    def _on_message(self, level: str, text: str) -> None:
        """Warnings and errors go to stderr as they come (an unattended run's user reads nothing else)."""
        if level == "error":
            self._error = text
        if level != "info":
            self._say(text)

    def _say(self, text: str) -> None:
        if text not in self._said:
            self._said.add(text)
            print(f"livecap: {text}", file=sys.stderr)

    def _on_finished(self, reason: str) -> None:
        if not self._started or self.exit_code is not None:
            return
        code = 0 if reason != "error" else 1
        if reason == "error":  # the window's banner has the sentence; an unattended run's user reads stderr
            self._say(self._error or "Captioning stopped because the engine failed.")
        stats = getattr(self.window.controller, "last_stats", None)
        if stats is not None and stats.invalid_samples:  # shown in the status bar only: said here as the CLI does
            from engine.audio.finite import describe

            self._say(f"warning: {describe(stats.invalid_samples)}")
        heard = any(line.text.strip() for line in self.window.controller.lines)
        if self.interrupted and self.save_to and not heard:  # an earlier file there stays as it was (QA: 0 bytes)
            print(f"livecap: interrupted; nothing was heard, so {self.save_to} was not written.", file=sys.stderr)
            self._end(self.interrupted)
            return
        if self.save_to and not save_transcript(self.window, self.save_to):
            code = 1
        if self.interrupted and code == 0:
            print("livecap: interrupted; the transcript holds what was heard until then.", file=sys.stderr)
            code = self.interrupted  # 130 for Ctrl+C, 143 for SIGTERM (app.main)
        self._end(code)

    def fail(self, text: str, code: int) -> None:
        """The run cannot go on: report ``text`` and (with ``quit_at_end``) exit with ``code``."""
        if self.exit_code is not None:
            return
        self._say(text)
        if self.quit_at_end:
            self._end(code)

    def _end(self, code: int) -> None:
        self.exit_code = code
        if self.quit_at_end:
            QTimer.singleShot(0, lambda: (self.window.close(), QApplication.exit(code)))


class ReplayRun(UnattendedRun):
    """Starts the replay once the model is loaded; when the file ends writes ``save_to`` (format by its
    extension) and, with ``quit_at_end``, exits the app. ``exit_code`` is None until the run ends. When that
    write fails, the session's journal is left unfinished (``keep_session_backup``) for recovery."""

    def __init__(
        self,
        window: MainWindow,
        path: str,
        *,
        speed: float = 1.0,
        save_to: str | None = None,
        quit_at_end: bool = False,
    ) -> None:
        super().__init__(window, save_to, quit_at_end)
        self.path = path
        self.speed = speed

    def begin(self) -> None:
        self.window.start_file(self.path, self.speed)
