"""A dismissible message strip under the toolbar: one sentence, a level colour, optional buttons.

Used for everything the user must notice but that must not block captioning: device loss, the
"pure silence" permission hint, model and export errors, crash recovery.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton, QWidget

LEVELS = ("info", "warning", "error")


class Banner(QFrame):
    """Shows one message at a time; ``show_message`` replaces the current one."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("banner")
        self.setProperty("level", "info")
        self.label = QLabel(self)
        self.label.setObjectName("bannerText")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._buttons: list[QPushButton] = []
        self.close_button = QToolButton(self)
        self.close_button.setObjectName("bannerClose")
        self.close_button.setText("\u2715")
        self.close_button.setToolTip("Dismiss")
        self.close_button.setAccessibleName("Dismiss the message")
        self.close_button.setAutoRaise(True)
        self.close_button.clicked.connect(lambda: self.dismiss())
        self._layout = QHBoxLayout(self)
        self._layout.setContentsMargins(10, 6, 6, 6)
        self._layout.addWidget(self.label, 1)
        self._layout.addWidget(self.close_button)
        self.level = "info"
        self.key = ""
        self.hide()

    def show_message(
        self,
        level: str,
        text: str,
        actions: list[tuple[str, Callable[[], None]]] | None = None,
        key: str = "",
    ) -> None:
        """Show ``text`` at ``level`` ("info", "warning", "error") with optional (label, callback) buttons;
        a button click runs its callback and dismisses the banner. ``key`` names what the message is about
        (e.g. "silence"), so that ``dismiss(key)`` removes it only while it is still the one shown."""
        self.key = key
        self.level = level if level in LEVELS else "info"
        self.setProperty("level", self.level)
        for widget in (self, self.label, self.close_button):  # re-evaluate the [level=...] style rules
            widget.style().unpolish(widget)
            widget.style().polish(widget)
        self.label.setText(text)
        self.setAccessibleDescription(text)
        for button in self._buttons:
            button.deleteLater()
        self._buttons = []
        for label, callback in actions or []:
            button = QPushButton(label, self)
            button.clicked.connect(lambda _=False, cb=callback: (self.dismiss(), cb()))
            self._layout.insertWidget(self._layout.count() - 1, button)
            self._buttons.append(button)
        self.show()

    def text(self) -> str:
        """The message shown (empty once dismissed)."""
        return self.label.text()

    def buttons(self) -> list[QPushButton]:
        return list(self._buttons)

    def dismiss(self, key: str | None = None) -> None:
        """Hide the message (with ``key``: only when the message shown has that key)."""
        if key is not None and key != self.key:
            return
        self.hide()
        self.label.clear()
        self.key = ""
