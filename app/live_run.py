"""``livecap --source mic|system|both --quit-after SECONDS``: capture live through the whole GUI path for a
wall-clock time, then stop, save the transcript and exit (unattended runs and end-to-end tests)."""

from __future__ import annotations

import sys

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QApplication

from app.main_window import MainWindow
from app.replay import save_transcript


class CaptureRun(QObject):
    """Starts capturing once the model is loaded, stops after ``seconds`` of session, writes ``save_to``
    (format by extension) and exits. ``exit_code`` is None until the run ends."""

    def __init__(self, window: MainWindow, seconds: float, save_to: str | None = None) -> None:
        super().__init__(window)
        self.window = window
        self.seconds = seconds
        self.save_to = save_to
        self.exit_code: int | None = None
        self._started = False
        c = window.controller
        c.model_changed.connect(self._on_model)
        c.model_failed.connect(self.fail)
        c.session_failed.connect(self.fail)
        c.session_finished.connect(self._on_finished)
        c.message.connect(lambda level, text: print(f"livecap: {text}", file=sys.stderr) if level != "info" else None)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(c.stop)
        c.state_changed.connect(self._on_state)

    def _on_model(self, info: object) -> None:
        if info is not None and not self._started:
            self._started = True
            self.window.start_or_resume()

    def _on_state(self, state: str) -> None:
        if state == "running" and not self._timer.isActive() and self.exit_code is None:
            self._timer.start(int(self.seconds * 1000))

    def _on_finished(self, reason: str) -> None:
        if not self._started or self.exit_code is not None:
            return
        code = 0 if reason != "error" else 1
        if self.save_to and not save_transcript(self.window, self.save_to):
            code = 1
        self._end(code)

    def fail(self, text: str, code: int) -> None:
        """The run cannot go on: report ``text`` and exit with ``code``."""
        if self.exit_code is not None:
            return
        print(f"livecap: {text}", file=sys.stderr)
        self._end(code)

    def _end(self, code: int) -> None:
        self.exit_code = code
        QTimer.singleShot(0, lambda: (self.window.close(), QApplication.exit(code)))
