"""A Yes/No question before something that cannot be undone (deleting a model or sessions, replacing a file).

No is the default button, so Enter or Escape keeps things as they are.
"""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox, QWidget


def ask(parent: QWidget | None, title: str, text: str) -> bool:
    """Ask ``text`` in a modal Yes/No box over ``parent``; True only for Yes."""
    buttons = QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No
    answer = QMessageBox.question(parent, title, text, buttons, QMessageBox.StandardButton.No)
    return answer == QMessageBox.StandardButton.Yes


def box(parent: QWidget | None, title: str, text: str) -> QMessageBox:
    """The Yes/No box ``ask`` shows (No the default), not yet shown: for a caller that may have to close it itself
    (``done(No)``) when the question becomes moot; ``exec()`` returns the button's value."""
    buttons = QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No
    question = QMessageBox(QMessageBox.Icon.Question, title, text, buttons, parent)
    question.setDefaultButton(QMessageBox.StandardButton.No)
    return question
