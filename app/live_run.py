"""``livecap --source mic|system|both --quit-after SECONDS``: capture live through the whole GUI path for a
wall-clock time, then stop, save the transcript and exit (unattended runs and end-to-end tests)."""

from __future__ import annotations

from PySide6.QtCore import QTimer

from app.main_window import MainWindow
from app.replay import UnattendedRun


class CaptureRun(UnattendedRun):
    """Starts capturing once the model is loaded, stops after ``seconds`` of session, writes ``save_to``
    (format by extension) and exits. ``exit_code`` is None until the run ends."""

    def __init__(self, window: MainWindow, seconds: float, save_to: str | None = None) -> None:
        super().__init__(window, save_to, quit_at_end=True)
        self.seconds = seconds
        c = window.controller
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(c.stop)
        c.state_changed.connect(self._on_state)

    def begin(self) -> None:
        self.window.start_or_resume()

    def _on_state(self, state: str) -> None:
        if state == "running" and not self._timer.isActive() and self.exit_code is None:
            self._timer.start(int(self.seconds * 1000))
