"""The main caption view: committed lines in the normal style, the open partial's tail grey and italic.

Each committed line is a paragraph; the last paragraph holds the partial (its stable head in the normal
style, the still-changing tail grey + italic). Partial updates are coalesced to the screen rate
(``COALESCE_MS``): only the latest state is drawn. The view follows new text unless the user has
scrolled up; scrolling back to the bottom (mouse, Ctrl+End, Page Down) re-engages following, and a change of
font, theme or size keeps following (or keeps the reader's top line). It holds the last ``MAX_PARAGRAPHS`` lines (the
whole transcript is in the history and in Sessions); a user scrolled up keeps the line they read while the
oldest go from the top.

While it is empty it shows a hint for the session state (``show_state``), wrapped to the width it has. It
shows no text cursor (it is read-only), yet keyboard users can still select and copy text.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QPoint, Qt, QTimer
from PySide6.QtGui import (
    QColor,
    QFont,
    QPainter,
    QPaintEvent,
    QPalette,
    QTextBlock,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
)
from PySide6.QtWidgets import QTextEdit, QWidget

from app.theme import tail_italic
from engine.events import CaptionEvent, Line

COALESCE_MS = 50
MAX_PARAGRAPHS = 2000
#: The hint for each state; ``{start}`` and ``{models}`` are the keys of Start/Pause and of the model dialog
#: (``CaptionView.keys``: a user may change them).
HINTS = {
    "no-model": "Captions appear here. First choose a model (Model \u25b8 Models\u2026, {models}).",
    "loading": "Loading the model\u2026",
    "idle": "Ready. Press Start ({start}) and speak; captions appear here.",
    "running": "Listening\u2026 captions appear here as words are recognised.",
    "paused": "Paused. Press Resume ({start}) to continue.",
}


class CaptionView(QTextEdit):
    """Read-only caption text. Feed it with ``commit(line)`` and ``set_partial(event)`` (GUI thread)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._caption_font: QFont | None = None
        self.setObjectName("captionView")
        self.setReadOnly(True)
        self.setUndoRedoEnabled(False)
        self.setAcceptRichText(False)
        self.document().setMaximumBlockCount(MAX_PARAGRAPHS)
        self.setLineWrapMode(QTextEdit.LineWrapMode.WidgetWidth)
        self.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        self.setCursorWidth(0)  # read-only: no blinking caret (keyboard selection still works)
        self.setTabChangesFocus(True)
        self.setAccessibleName("Captions")
        self._hint = ""
        self.keys = {"start": "Space", "models": "Ctrl+M"}  # the keys the hints name (the main window's own)
        self.show_state("no-model")
        self._tail_color = QColor("#808080")
        self._pending: CaptionEvent | None = None
        self._has_pending = False
        self._drawn: CaptionEvent | None = None  # the partial on screen (drawn again in a new tail colour)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(COALESCE_MS)
        self._timer.timeout.connect(self.flush)
        block = QTextBlockFormat()
        block.setBottomMargin(10)
        self._block_format = block
        # Following the end is a state the reader sets by scrolling, not worked out from the scroll bar at each line:
        # a larger font, a theme or a window size changes the bar's range, and the view then stopped following (or
        # lost the reader's line) without anyone having scrolled.
        self._following = True
        self._top: QTextBlock | None = None  # the line at the top of the screen of a reader who scrolled back
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range)

    # -- styling ---------------------------------------------------------------------------------
    def set_caption_font(self, font: QFont) -> None:
        """The font of the caption text (kept when a style sheet is applied or changed later)."""
        self._caption_font = QFont(font)
        self.setFont(font)
        self.document().setDefaultFont(font)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        # Re-polishing under a style sheet (a theme change) puts back the font the widget had when it was
        # first polished; the caption font the user chose wins.
        wanted = self._caption_font
        if event.type() == QEvent.Type.FontChange and wanted is not None and self.font() != wanted:
            self.set_caption_font(wanted)

    def set_tail_color(self, color: QColor) -> None:
        """The colour of the partial's changing tail (the theme picks one with enough contrast); the partial on
        screen takes it at once."""
        self._tail_color = QColor(color)
        if self._drawn is not None and not self._has_pending:
            self.set_partial(self._drawn)
            self.flush()

    def committed_format(self) -> QTextCharFormat:
        """The char format of committed text and of the partial's stable head."""
        fmt = QTextCharFormat()
        fmt.setFontItalic(False)  # no foreground: the theme's text colour
        return fmt

    def tail_format(self, text: str = "") -> QTextCharFormat:
        """The char format of the partial's still-changing tail ``text``: grey, and italic where the font's italic
        face has its characters (``theme.tail_italic``)."""
        fmt = QTextCharFormat()
        fmt.setFontItalic(tail_italic(self.document().defaultFont(), text))
        fmt.setForeground(self._tail_color)
        return fmt

    # -- state hint ------------------------------------------------------------------------------
    def show_state(self, state: str) -> None:
        """Show the hint for session ``state`` ("no-model", "loading", "idle", "running", "paused") while the
        view is empty."""
        self.set_hint(HINTS.get(state, "").format(**self.keys))

    def set_hint(self, text: str) -> None:
        """The text drawn (grey, wrapped) while no caption is shown."""
        if text != self._hint:
            self._hint = text
            self.setAccessibleDescription(text)
            self.viewport().update()

    def hint(self) -> str:
        return self._hint

    def paintEvent(self, event: QPaintEvent) -> None:
        super().paintEvent(event)
        if not self._hint or not self.document().isEmpty():
            return
        margin = int(self.document().documentMargin())
        p = QPainter(self.viewport())
        p.setFont(self.font())
        p.setPen(self.palette().color(QPalette.ColorRole.PlaceholderText))
        rect = self.viewport().rect().adjusted(margin, margin, -margin, -margin)
        p.drawText(rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop | Qt.TextFlag.TextWordWrap, self._hint)
        p.end()

    # -- content ---------------------------------------------------------------------------------
    def clear_captions(self) -> None:
        """Remove all text (a new session)."""
        self._timer.stop()
        self._pending, self._has_pending, self._drawn = None, False, None
        self.clear()
        self._following, self._top = True, None

    @property
    def following(self) -> bool:
        """Whether the view keeps the newest line in sight (the reader has not scrolled back, or came back to the
        end: with the mouse, the keyboard's Ctrl+End or Page Down)."""
        return self._following

    def commit(self, line: Line) -> None:
        """Add a committed line (replaces the partial paragraph, then opens a new empty one)."""
        follow = self._following
        layout, bar = self.document().documentLayout(), self.verticalScrollBar()
        reading = None if follow else self.cursorForPosition(QPoint(0, 0)).block()  # the top line on screen
        above = 0.0 if reading is None else bar.value() - layout.blockBoundingRect(reading).top()
        cursor = self._partial_cursor()
        cursor.insertText(line.text, self.committed_format())
        cursor.insertBlock(self._block_format, self.committed_format())  # at MAX_PARAGRAPHS: the first goes
        self._drawn = None
        if reading is not None and reading.isValid():  # stays where it was on screen
            bar.setValue(round(layout.blockBoundingRect(reading).top() + above))
        self._follow(follow)

    def set_partial(self, event: CaptionEvent | None) -> None:
        """Show ``event``'s partial (``None``: nothing open). Drawn at most every ``COALESCE_MS``."""
        self._pending, self._has_pending = event, True
        if not self._timer.isActive():
            self._timer.start()

    def flush(self) -> None:
        """Draw the pending partial now."""
        self._timer.stop()
        if not self._has_pending:
            return
        event, self._pending, self._has_pending = self._pending, None, False
        self._drawn = event
        follow = self._following
        cursor = self._partial_cursor()
        if event is not None and event.partial is not None:
            if event.stable_text:
                cursor.insertText(event.stable_text, self.committed_format())
            if event.tail_text:
                cursor.insertText(event.tail_text, self.tail_format(event.tail_text))
        self._follow(follow)

    def partial_text(self) -> str:
        """The text currently shown as the partial (the last paragraph)."""
        return self.document().lastBlock().text()

    def set_lines(self, lines: list[Line]) -> None:
        """Replace everything with ``lines`` (committed; the last ``MAX_PARAGRAPHS - 1`` of them are kept)."""
        self.clear_captions()
        for line in lines[-(MAX_PARAGRAPHS - 1) :]:  # the rest would go again at once (a recovered 6000 took 5 s)
            self.commit(line)

    # -- internals -------------------------------------------------------------------------------
    def _partial_cursor(self) -> QTextCursor:
        """A cursor selecting the partial paragraph's text (removed), ready to insert at the end."""
        doc = self.document()
        cursor = QTextCursor(doc)
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.movePosition(QTextCursor.MoveOperation.StartOfBlock, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        cursor.setBlockFormat(self._block_format)
        return cursor

    def _at_bottom(self) -> bool:
        """At the end, give or take half a line (Ctrl+End leaves the caret's margin, a few pixels short of it)."""
        bar = self.verticalScrollBar()
        return bar.value() >= bar.maximum() - max(2, self.fontMetrics().lineSpacing() // 2)

    def _on_scrolled(self, _value: int) -> None:
        self._following = self._at_bottom()
        self._top = None if self._following else self.cursorForPosition(QPoint(0, 0)).block()

    def _on_range(self, _low: int, high: int) -> None:
        """The text's height changed (a line, a font, a theme, the window's size): the end stays in sight while
        following, else the reader's top line stays at the top."""
        bar = self.verticalScrollBar()
        if self._following:
            bar.setValue(high)
        elif self._top is not None and self._top.isValid():
            top = self._top
            bar.setValue(round(self.document().documentLayout().blockBoundingRect(top).top()))
            self._top = top

    def _follow(self, follow: bool) -> None:
        if follow:
            bar = self.verticalScrollBar()
            bar.setValue(bar.maximum())
