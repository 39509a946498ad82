"""The public seam for "what would the next start offer for recovery?", in one place for the suite.

It asks the app's SessionController (the object the main window asks at start-up) rather than reading
journal files, so the tests keep working when the journal's format changes.
"""

from __future__ import annotations

from pathlib import Path

from engine.events import Line


def recovered_lines(journal_dir: Path) -> list[Line]:
    """The lines the next ``livecap`` start would offer for recovery from ``journal_dir`` ([] if none)."""
    from PySide6.QtWidgets import QApplication

    from app.controller import SessionController

    _ = QApplication.instance() or QApplication([])
    controller = SessionController(loader=lambda *a, **k: None, journal_dir=journal_dir)
    try:
        recovered = controller.pending_recovery()
        return list(recovered.lines) if recovered is not None else []
    finally:
        controller.shutdown(5000)
