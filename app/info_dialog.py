"""A message that may be longer than the screen (Help > Keyboard shortcuts): rich text in a scrolling area, sized
to its text but never larger than the screen, with a Close button.

Why not ``QMessageBox.information``: a message box narrows itself on a small screen, its text wraps, and it grows
taller than the screen with its button below the edge (1024 x 768 at 150 %: 630 px on a 512 px screen).
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QScrollArea, QVBoxLayout, QWidget

from app import placement


class InfoDialog(QDialog):
    """``html`` under ``title``; ``label`` holds the text. Shown with ``open()`` (modal, does not block)."""

    def __init__(self, parent: QWidget | None, title: str, html: str) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.label = QLabel(html, self)
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        area = QScrollArea(self)
        area.setWidget(self.label)
        area.setWidgetResizable(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(area, 1)
        layout.addWidget(buttons)
        hint = self.label.sizeHint()
        placement.fit(self, hint.width() + 60, hint.height() + 90)
