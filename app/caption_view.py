"""The main caption view: committed lines in the normal style, the open partial's tail grey and italic.

Each committed line is a paragraph; the last paragraph holds the partial (its stable head in the normal
style, the still-changing tail grey + italic). Partial updates are coalesced to the screen rate
(``COALESCE_MS``): only the latest state is drawn. The view follows new text unless the user has
scrolled up; scrolling back to the bottom (mouse, Ctrl+End, Page Down) re-engages following, and a change of
font, theme or size keeps following (or keeps the reader's top line). It holds the last ``MAX_PARAGRAPHS`` lines (the
whole transcript is in the history and in Sessions); a user scrolled up keeps their place to the pixel while the
partial grows and the oldest lines go from the top. While the mouse selects text (left button held) the text stays
still under the pointer; a follower goes back to the end on release.

While it is empty it shows a hint for the session state (``show_state``), wrapped to the width it has and made
smaller where it would not fit; screen readers get the hint as the view's description while it shows. It shows no
text cursor (it is read-only), yet keyboard users can still select and copy text.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QPoint, QRect, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QColor,
    QFocusEvent,
    QFont,
    QFontInfo,
    QFontMetricsF,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPalette,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QWheelEvent,
)
from PySide6.QtWidgets import QStyle, QStyleOption, QTextEdit, QWidget

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
    "starting": "Starting\u2026 opening the audio input.",
    "running": "Listening\u2026 captions appear here as words are recognised.",
    "paused": "Paused. Press Resume ({start}) to continue.",
}
#: The smallest size the hint shrinks to (points) to fit a narrow or short view at a large caption font.
HINT_MIN_POINTS = 6.0
_HINT_FLAGS = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop | Qt.TextFlag.TextWordWrap


@dataclass
class _Place:
    """Where a reader is: the paragraph at the top of the screen and how many pixels of it are above the screen."""

    anchor: QTextCursor  # at the paragraph's start; text inserted there (the partial's) does not move it
    above: float
    height: float  # the paragraph's height then: reflowed, it keeps the same share of it above the screen
    laid_out: tuple[float, str]  # what its line breaks depended on (``CaptionView._laid_out``)


class CaptionView(QTextEdit):
    """Read-only caption text. Feed it with ``commit(line)`` and ``set_partial(event)`` (GUI thread)."""

    size_step_requested = Signal(int)  # Ctrl+wheel: notches up (+) or down (-), for the window to size the text

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
        self.setCursorWidth(0)  # read-only: no caret (paintEvent draws none; keyboard selection still works)
        self.setTabChangesFocus(True)
        self.setAccessibleName("Captions")
        self._hint = ""
        self._wheel = 0  # Ctrl+wheel turned less than a notch (touchpads send small steps)
        self.document().contentsChanged.connect(self._describe)
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
        self._place: _Place | None = None  # the reader's place (kept while not following, or while selecting)
        self._selecting = False  # a mouse selection is in progress: the text holds still under the pointer
        self._self_scrolling = False  # the bar moves because the text changed, not because the reader scrolled
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
        """Show the hint for session ``state`` ("no-model", "loading", "idle", "starting", "running", "paused")
        while the view is empty."""
        self.set_hint(HINTS.get(state, "").format(**self.keys))

    def set_hint(self, text: str) -> None:
        """The text drawn (grey, wrapped) while no caption is shown; also the view's accessible description then."""
        if text != self._hint:
            self._hint = text
            self._describe()
            self.viewport().update()

    def hint(self) -> str:
        """The hint for the current state (drawn only while the view is empty)."""
        return self._hint

    def hint_font(self) -> QFont:
        """The font the hint is drawn in: the caption font, made smaller (down to ``HINT_MIN_POINTS``) where the
        wrapped hint would not fit the view (48 pt in a 300 px pane cut it after "Start")."""
        font = QFont(self.font())
        size = QFontInfo(font).pointSizeF()
        room = QRectF(self._hint_rect())
        while size > HINT_MIN_POINTS:
            needed = QFontMetricsF(font).boundingRect(room, _HINT_FLAGS, self._hint)
            if needed.width() <= room.width() and needed.height() <= room.height():
                break
            size = max(HINT_MIN_POINTS, size * 0.9)
            font.setPointSizeF(size)
        return font

    def _hint_rect(self) -> QRect:
        margin = int(self.document().documentMargin())
        return self.viewport().rect().adjusted(margin, margin, -margin, -margin)

    def _describe(self) -> None:
        """Screen readers get the hint while it shows; with captions on screen, no stale "Listening…"."""
        text = self._hint if self.document().isEmpty() else ""
        if self.accessibleDescription() != text:
            self.setAccessibleDescription(text)

    def paintEvent(self, event: QPaintEvent) -> None:
        """Draw the text as ``QTextEdit`` does, but with no caret: a caret of width 0 still drew its right-to-left
        flag (a small "‹" by an Arabic or Hebrew line) while the view had the keyboard focus."""
        p = QPainter(self.viewport())
        hbar, vbar = self.horizontalScrollBar(), self.verticalScrollBar()
        dx = hbar.maximum() - hbar.value() if self.isRightToLeft() else hbar.value()
        p.translate(-dx, -vbar.value())
        clip = event.rect().translated(dx, vbar.value())
        p.setClipRect(clip, Qt.ClipOperation.IntersectClip)
        context = QAbstractTextDocumentLayout.PaintContext()  # cursorPosition -1: no caret
        context.palette = self.palette()
        context.clip = QRectF(clip)
        context.selections = [self._selection(extra.cursor, extra.format) for extra in self.extraSelections()]
        if self.textCursor().hasSelection():
            group = QPalette.ColorGroup.Active if self.hasFocus() else QPalette.ColorGroup.Inactive
            fmt = QTextCharFormat()
            fmt.setBackground(context.palette.brush(group, QPalette.ColorRole.Highlight))
            fmt.setForeground(context.palette.brush(group, QPalette.ColorRole.HighlightedText))
            option = QStyleOption()
            option.initFrom(self)
            if self.style().styleHint(QStyle.StyleHint.SH_RichText_FullWidthSelection, option, self):
                fmt.setProperty(QTextCharFormat.Property.FullWidthSelection, True)
            context.selections = [*context.selections, self._selection(self.textCursor(), fmt)]
        self.document().documentLayout().draw(p, context)
        p.end()
        if self._hint and self.document().isEmpty():
            p = QPainter(self.viewport())
            p.setFont(self.hint_font())
            p.setPen(self.palette().color(QPalette.ColorRole.PlaceholderText))
            p.drawText(self._hint_rect(), _HINT_FLAGS, self._hint)
            p.end()

    @staticmethod
    def _selection(cursor: QTextCursor, fmt: QTextCharFormat) -> QAbstractTextDocumentLayout.Selection:
        selection = QAbstractTextDocumentLayout.Selection()
        selection.cursor, selection.format = cursor, fmt
        return selection

    # -- content ---------------------------------------------------------------------------------
    def clear_captions(self) -> None:
        """Remove all text (a new session)."""
        self._timer.stop()
        self._pending, self._has_pending, self._drawn = None, False, None
        self.clear()
        self._following, self._place = True, None

    @property
    def following(self) -> bool:
        """Whether the view keeps the newest line in sight (the reader has not scrolled back, or came back to the
        end: with the mouse, the keyboard's Ctrl+End or Page Down)."""
        return self._following

    def commit(self, line: Line) -> None:
        """Add a committed line (replaces the partial paragraph, then opens a new empty one)."""
        with self._scrolling_itself():
            cursor = self._partial_cursor()
            cursor.insertText(line.text, self.committed_format())
            cursor.insertBlock(self._block_format, self.committed_format())  # at MAX_PARAGRAPHS: the first goes
        self._drawn = None
        self._keep_place()

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
        with self._scrolling_itself():
            cursor = self._partial_cursor()
            if event is not None and event.partial is not None:
                if event.stable_text:
                    cursor.insertText(event.stable_text, self.committed_format())
                if event.tail_text:
                    cursor.insertText(event.tail_text, self.tail_format(event.tail_text))
        self._keep_place()

    def partial_text(self) -> str:
        """The text currently shown as the partial (the last paragraph)."""
        return self.document().lastBlock().text()

    def set_lines(self, lines: list[Line]) -> None:
        """Replace everything with ``lines`` (committed; the last ``MAX_PARAGRAPHS - 1`` of them are kept)."""
        self.clear_captions()
        for line in lines[-(MAX_PARAGRAPHS - 1) :]:  # the rest would go again at once (a recovered 6000 took 5 s)
            self.commit(line)

    def wheelEvent(self, event: QWheelEvent) -> None:  # noqa: N802 - Qt's name
        """Ctrl+wheel asks for larger or smaller text (``size_step_requested``), as the View menu's keys do, so that
        it is remembered; QTextEdit's own zoom was undone at the next font change."""
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            self._wheel += event.angleDelta().y()
            notches = int(self._wheel / 120)  # toward zero: what is left keeps its sign
            self._wheel -= notches * 120
            if notches:
                self.size_step_requested.emit(notches)
            event.accept()
            return
        super().wheelEvent(event)

    # -- mouse selection -------------------------------------------------------------------------
    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self._start_selecting()
        super().mousePressEvent(event)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:  # a double-click drag selects word by word
            self._start_selecting()
        super().mouseDoubleClickEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        super().mouseReleaseEvent(event)
        if event.button() == Qt.MouseButton.LeftButton:
            self._stop_selecting()

    def focusOutEvent(self, event: QFocusEvent) -> None:
        super().focusOutEvent(event)
        self._stop_selecting()  # a release lost to a dialog or another window must not stop following for good

    def _start_selecting(self) -> None:
        """Following scrolled the text under a dragging pointer and the selection took in the lines that came."""
        self._selecting = True
        self._place = self._reading_place()

    def _stop_selecting(self) -> None:
        if self._selecting:
            self._selecting = False
            self._keep_place()  # a follower goes back to the end

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

    def _reading_place(self) -> _Place:
        """The reader's place now (the paragraph at the top of the screen, and how far into it)."""
        block = self.cursorForPosition(QPoint(0, 0)).block()
        rect = self.document().documentLayout().blockBoundingRect(block)
        anchor = QTextCursor(block)
        anchor.setKeepPositionOnInsert(True)
        return _Place(anchor, self.verticalScrollBar().value() - rect.top(), rect.height(), self._laid_out())

    def _laid_out(self) -> tuple[float, str]:
        """What the paragraphs' line breaks depend on: the text's width and font."""
        doc = self.document()
        return doc.pageSize().width(), doc.defaultFont().key()

    @contextmanager
    def _scrolling_itself(self) -> Iterator[None]:
        """While the text changes, the bar's moves (a shorter text clamps it) are not the reader's: following and
        the reader's place stay as they were."""
        was, self._self_scrolling = self._self_scrolling, True
        try:
            yield
        finally:
            self._self_scrolling = was

    def _keep_place(self) -> None:
        """Scroll to the end while following (and not selecting with the mouse), else back to the reader's place:
        the same pixel of the same paragraph at the top of the screen (a paragraph that grew keeps its lines; one
        laid out again for a new font or width keeps the same share of it above the screen)."""
        bar = self.verticalScrollBar()
        with self._scrolling_itself():
            if self._following and not self._selecting:
                bar.setValue(bar.maximum())
            elif (place := self._place) is not None:
                rect = self.document().documentLayout().blockBoundingRect(place.anchor.block())
                if place.laid_out != self._laid_out() and place.height > 0:
                    above = place.above * rect.height() / place.height
                    self._place = place = _Place(place.anchor, above, rect.height(), self._laid_out())
                bar.setValue(round(rect.top() + place.above))

    def _on_scrolled(self, _value: int) -> None:
        if self._self_scrolling:
            return
        self._following = self._at_bottom()
        self._place = self._reading_place()

    def _on_range(self, _low: int, _high: int) -> None:
        """The text's height changed (a line, the partial wrapping, a font, a theme, the window's size)."""
        self._keep_place()
