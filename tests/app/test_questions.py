"""The Yes/No question before a deletion or a replaced file: only Yes says yes; Enter and Escape keep things."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QMessageBox

from app import questions


def _answer_with(qtbot, press) -> list[str]:
    """Press ``press(box)`` on the question box once it is shown; returns the texts of the boxes seen."""
    seen: list[str] = []

    def press_when_shown():
        box = QApplication.activeModalWidget()
        if not isinstance(box, QMessageBox):
            QTimer.singleShot(20, press_when_shown)
            return
        seen.append(box.text())
        press(box)

    QTimer.singleShot(0, press_when_shown)
    return seen


@pytest.mark.parametrize(
    ("press", "expected"),
    [
        (lambda box: box.button(QMessageBox.StandardButton.Yes).click(), True),
        (lambda box: box.button(QMessageBox.StandardButton.No).click(), False),
        (lambda box: box.defaultButton().click(), False),  # Enter
        (lambda box: box.reject(), False),  # Escape, or the window closed
    ],
    ids=["yes", "no", "default", "escape"],
)
def test_ask_is_true_for_yes_only(qtbot, press, expected):
    seen = _answer_with(qtbot, press)
    assert questions.ask(None, "Delete sessions", "Delete 3 sessions?") is expected
    assert seen == ["Delete 3 sessions?"]


def test_enter_on_the_question_answers_no(qtbot):
    seen = _answer_with(qtbot, lambda box: qtbot.keyClick(box, Qt.Key.Key_Return))
    assert questions.ask(None, "Replace the file?", "a.srt already exists. Replace it?") is False
    assert seen
