"""The caption overlay: a frameless, translucent, always-on-top strip showing the last 2-5 lines.

Drag it anywhere to move it; drag an edge to resize it (``startSystemMove``/``startSystemResize``, which
also work on Wayland, with a manual fallback). From the keyboard, ``start_adjusting`` lets the arrow keys move
it and Shift+arrows resize it until Enter keeps or Esc undoes the change. Click-through makes it ignore the mouse
(``Qt.WindowTransparentForInput``; turn it off from the main window's View menu). Presentation mode
shows the captions full screen with a larger font (Esc leaves it), sized to the space the window really has
(a window manager may not make it full screen), so no line is ever cut. Text is laid out with a
QTextDocument and only the last ``lines`` wrapped lines are painted, bottom-aligned, so the newest
words are always visible.

Someone watching only the overlay (the main window behind a call) must see when no captions are coming: given
the session's state (``set_session_state``), a short note follows the last words, small, dimmed and in capitals
("Paused", "Stopped", "No audio input"; on a line of its own, one of the ``lines``, where the last line has no
room), or stands alone while there is nothing to show yet ("Waiting for speech\u2026", "Not captioning"). While
not running, the still-settling tail is drawn as settled text: no words are coming to change it.

Wayland compositors may ignore "always on top" and window positions; the View menu says so.
"""

from __future__ import annotations

import collections
import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from PySide6.QtCore import QPoint, QPointF, QRect, QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import (
    QCloseEvent,
    QColor,
    QContextMenuEvent,
    QCursor,
    QFocusEvent,
    QFont,
    QFontMetricsF,
    QGuiApplication,
    QKeyEvent,
    QMouseEvent,
    QMoveEvent,
    QPainter,
    QPaintEvent,
    QPen,
    QResizeEvent,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextOption,
)
from PySide6.QtWidgets import QMenu, QWidget

from app.theme import tail_italic
from engine.events import CaptionEvent, Line

PAD_X = 18
PAD_Y = 10
EDGE = 8
KEEP_LINES = 8
PRESENTATION_SCALE = 1.8
PRESENTATION_MARGIN = 0.08  # of the height, above and below the text in presentation mode
MIN_POINT_SIZE = 6.0
KEY_STEP = 20  # px an arrow key moves or resizes the overlay
ADJUST_HINT = "Arrows move \u00b7 Shift+arrows resize \u00b7 Enter keeps \u00b7 Esc undoes"
FULL_SCREEN_CHECK_MS = 400  # how long a window manager gets to make the presentation window full screen
DEFAULT_POINT_SIZE = 26
NOTE_SCALE = 0.6  # the state note's size, of the caption font's
MIN_NOTE_POINT_SIZE = 9.0

# waiting: running, but there is no audio input; starting: Start was pressed, the worker has not answered yet
SessionState = Literal["starting", "running", "waiting", "paused", "idle"]


def _note(state: SessionState | None, empty: bool) -> str:
    """The note the overlay shows in ``state`` (None: no state given, no note); ``empty``: it has no text."""
    if state == "running":
        return "Waiting for speech\u2026" if empty else ""
    if state == "starting":
        return "Starting\u2026" if empty else ""
    if state == "idle":
        return "Not captioning" if empty else "Stopped"
    return {"waiting": "No audio input", "paused": "Paused"}.get(state or "", "")


@dataclass(frozen=True)
class OverlayStyle:
    """How the overlay looks: number of lines (2-5), font, colours, background opacity, click-through."""

    lines: int = 2
    font: QFont | None = None
    text_color: str = "#ffffff"
    background_color: str = "#101010"
    opacity: float = 0.8
    click_through: bool = False

    def clamped(self) -> OverlayStyle:
        return replace(self, lines=max(2, min(5, int(self.lines))), opacity=max(0.0, min(1.0, float(self.opacity))))


def _direction(text: str) -> Qt.LayoutDirection | None:
    """The direction of ``text``'s first strong character; None when it has none (digits, punctuation)."""
    for ch in text:
        kind = unicodedata.bidirectional(ch)
        if kind == "L":
            return Qt.LayoutDirection.LeftToRight
        if kind in ("R", "AL"):
            return Qt.LayoutDirection.RightToLeft
    return None


def _runs(parts: list[tuple[str, str]]) -> list[tuple[Qt.LayoutDirection, list[tuple[str, str]]]]:
    """``(stable, tail)`` lines in runs of one direction: each run is one paragraph, laid out in its direction
    (an Arabic line after an English one ran on at the end of the English text, left-aligned); a line without
    a strong character stays in the run before it."""
    runs: list[tuple[Qt.LayoutDirection, list[tuple[str, str]]]] = []
    for part in parts:
        direction = _direction(part[0] + part[1])
        if runs and direction in (None, runs[-1][0]):
            runs[-1][1].append(part)
        else:
            runs.append((direction or Qt.LayoutDirection.LeftToRight, [part]))
    return runs


class CaptionOverlay(QWidget):
    """The overlay window. Feed it with ``commit(line)`` / ``set_partial(event)`` like the caption view."""

    geometry_changed = Signal()  # moved or resized by the user (debounced)
    presentation_changed = Signal(bool)
    adjust_finished = Signal(bool)  # keyboard moving/resizing ended: kept (Enter, the focus went) or undone (Esc)
    closed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Tool)
        self.setObjectName("captionOverlay")
        self.setWindowTitle("livecap captions")
        self.setAccessibleName("Captions")  # a screen reader found an empty window (keyboard QA): the latest lines
        self.setAttribute(Qt.WidgetAttribute.WA_TranslucentBackground)
        self.setAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating)
        self.setMouseTracking(True)
        self.setMinimumSize(240, 60)
        self._style = OverlayStyle().clamped()
        self._committed: collections.deque[str] = collections.deque(maxlen=KEEP_LINES)
        self._stable = ""
        self._tail = ""
        self._state: SessionState | None = None
        self._presentation = False
        self._menu: QMenu | None = None
        self._drag: tuple[QPoint, QRect, Qt.Edge] | None = None
        self._adjust_from: QRect | None = None  # the geometry before keyboard adjusting, while it lasts
        self._save_timer = QTimer(self)
        self._save_timer.setSingleShot(True)
        self._save_timer.setInterval(400)
        self._save_timer.timeout.connect(self.geometry_changed)
        self._apply_flags()
        self.resize(900, self._natural_height())

    # -- style -----------------------------------------------------------------------------------
    def overlay_style(self) -> OverlayStyle:
        return self._style

    def set_overlay_style(self, style: OverlayStyle) -> None:
        """Apply ``style``; the height follows the number of lines and the font."""
        old = self._style
        self._style = style.clamped()
        if self._style.click_through != old.click_through:
            self._apply_flags()
        self.fit_height()
        self.update()

    def fit_height(self) -> None:
        """Take the height the number of lines and the font need, within the screen (see ``_set_height``);
        nothing in presentation mode."""
        if not self._presentation:
            self._set_height(self._natural_height())

    def _set_height(self, height: int) -> None:
        """Take ``height``, staying on the screen: an overlay in the lower half of its screen keeps its bottom
        edge (it grows upward, as captions sit low), one in the upper half its top; either way it is then moved
        back inside the screen's available area (and no taller than it) when it would leave it."""
        g = self.geometry()
        screen = QGuiApplication.screenAt(g.center()) or self.screen()
        if screen is None:
            self.resize(g.width(), height)
            return
        area = screen.availableGeometry()
        height = max(self.minimumHeight(), min(height, area.height()))
        new = QRect(g.left(), g.top(), g.width(), height)
        if g.center().y() > area.center().y():
            new.moveBottom(g.bottom())
        if new.bottom() > area.bottom():
            new.moveBottom(area.bottom())
        if new.top() < area.top():
            new.moveTop(area.top())
        if new.topLeft() == g.topLeft():
            self.resize(new.size())  # not moved: a window never placed stays the window manager's to place
        else:
            self.setGeometry(new)

    def set_context_menu(self, menu: QMenu) -> None:
        """The menu shown on right-click (built by the main window)."""
        self._menu = menu

    def caption_font(self) -> QFont:
        if self._style.font is not None:
            font = QFont(self._style.font)
        else:
            font = QFont(self.font())
            font.setPointSize(DEFAULT_POINT_SIZE)
        if self._presentation:
            font.setPointSizeF(font.pointSizeF() * PRESENTATION_SCALE)
            room = self._presentation_area().height()
            while font.pointSizeF() > MIN_POINT_SIZE and self._text_height(font) > room:
                font.setPointSizeF(max(MIN_POINT_SIZE, font.pointSizeF() * 0.95))
        return font

    def _text_height(self, font: QFont) -> float:
        """The height of ``lines`` lines in ``font``, as the document lays them out: each line on whole pixels
        (sized by the unrounded spacing, the overlay lost its top line to the whole-lines rule at 24 pt, 3 lines)."""
        return math.ceil(QFontMetricsF(font).lineSpacing()) * self._style.lines + 1

    def _presentation_area(self) -> QRectF:
        """Where the text goes in presentation mode: inside the padding, less a margin above and below."""
        area = QRectF(self.rect()).adjusted(PAD_X, PAD_Y, -PAD_X, -PAD_Y)
        margin = area.height() * PRESENTATION_MARGIN
        return area.adjusted(0, margin, 0, -margin)

    # -- content -----------------------------------------------------------------------------------
    def commit(self, line: Line) -> None:
        self._committed.append(line.text.strip())
        self._stable = self._tail = ""
        self._changed()

    def set_partial(self, event: CaptionEvent | None) -> None:
        self._stable = event.stable_text if event is not None else ""
        self._tail = event.tail_text if event is not None else ""
        self._changed()

    def set_lines(self, lines: Sequence[Line]) -> None:
        """Show ``lines`` (the last of them) in place of everything the overlay holds: a transcript that was
        replaced (a new session, a recovered one, the last one back after a failed start)."""
        self._committed.clear()
        self._committed.extend(line.text.strip() for line in lines[-KEEP_LINES:])
        self._stable = self._tail = ""
        self._changed()

    def clear(self) -> None:
        """Show no lines."""
        self.set_lines([])

    def set_session_state(self, state: SessionState | None) -> None:
        """What the session is doing, for the note after the captions; None (the start): no note."""
        self._state = state
        self._changed()

    def note(self) -> str:
        """The state note shown now ("" when none)."""
        return _note(self._state, not self.text())

    def _changed(self) -> None:
        """Repaint; the accessible description is the last committed lines (no churn from the partial) and the
        note, or the note alone while there is nothing to read ("Waiting for speech\u2026")."""
        note = self.note()
        description = " ".join(list(self._committed)[-3:]) + (f" ({note})" if note and self._committed else note)
        if description != self.accessibleDescription():
            self.setAccessibleDescription(description)
        self.update()

    def text(self) -> str:
        """All the text the overlay holds (the painted part is its last ``lines`` lines)."""
        parts = [*self._committed, (self._stable + self._tail).strip()]
        return " ".join(p for p in parts if p)

    def visible_lines(self) -> list[str]:
        """The wrapped lines that are painted, top to bottom (the note included)."""
        doc = self._layout_document()
        return [text for text, _, _ in self._shown(self._wrapped_lines(doc))]

    def _text_area(self) -> QRectF:
        if self._presentation:
            return self._presentation_area()
        return QRectF(self.rect()).adjusted(PAD_X, PAD_Y, -PAD_X, -PAD_Y)

    def _shown(self, lines: list[tuple[str, float, float]]) -> list[tuple[str, float, float]]:
        """The last ``lines`` wrapped lines, less those at the top that do not fit whole: an overlay kept within
        the screen, or made shorter by hand, cut its top line through the letters (the newest one always shows)."""
        shown = lines[-self._style.lines :]
        room = self._text_area().height() + 0.5
        while len(shown) > 1 and shown[-1][2] - shown[0][1] > room:
            shown = shown[1:]
        return shown

    # -- modes -------------------------------------------------------------------------------------
    @property
    def presentation(self) -> bool:
        return self._presentation

    def set_presentation(self, on: bool) -> None:
        """Full-screen presentation mode (opaque, larger font); Esc leaves it."""
        if on == self._presentation:
            return
        self._presentation = on
        self._apply_flags()
        if on:
            self._normal_geometry = self.geometry()
            self.showFullScreen()
            QTimer.singleShot(FULL_SCREEN_CHECK_MS, self, self._cover_screen)
            self.activateWindow()
            self.setFocus()
        else:
            self.showNormal()
            if getattr(self, "_normal_geometry", None) is not None:
                self.setGeometry(self._normal_geometry)
        self.presentation_changed.emit(on)
        self.update()

    def _cover_screen(self) -> None:
        """Some window managers ignore full screen for a tool window: then cover the screen by hand."""
        screen = self.screen()
        if self._presentation and screen is not None and self.geometry() != screen.geometry():
            self.setGeometry(screen.geometry())

    def _apply_flags(self) -> None:
        visible = self.isVisible() and not self.testAttribute(Qt.WidgetAttribute.WA_WState_Hidden)
        flags = Qt.WindowType.Tool | Qt.WindowType.FramelessWindowHint | Qt.WindowType.WindowStaysOnTopHint
        if self._style.click_through and not self._presentation and self._adjust_from is None:
            flags |= Qt.WindowType.WindowTransparentForInput
        self.setWindowFlags(flags)
        if visible:
            self.show()

    def _natural_height(self) -> int:
        return int(self._text_height(self.caption_font()) + 2 * PAD_Y + 1)

    # -- painting ----------------------------------------------------------------------------------
    def _layout_document(self) -> QTextDocument:
        doc = QTextDocument()
        doc.setDocumentMargin(0)
        doc.setDefaultFont(self.caption_font())
        option = QTextOption()
        option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        option.setAlignment(Qt.AlignmentFlag.AlignCenter if self._presentation else Qt.AlignmentFlag.AlignLeft)
        doc.setDefaultTextOption(option)
        doc.setTextWidth(max(self.width() - 2 * PAD_X, 50))
        cursor = QTextCursor(doc)
        normal = QTextCharFormat()
        normal.setForeground(QColor(self._style.text_color))
        tail = QTextCharFormat()
        color = QColor(self._style.text_color)
        color.setAlphaF(0.62)
        if self._state in (None, "running"):  # words may still change: grey (and italic)
            tail.setForeground(color)
            tail.setFontItalic(tail_italic(doc.defaultFont(), self._tail))
        else:  # nothing is coming to change them
            tail = normal
        parts = [(text, "") for text in self._committed if text]
        if self._stable or self._tail:
            parts.append((self._stable, self._tail))
        for i, (direction, run) in enumerate(_runs(parts)):
            block = QTextBlockFormat()
            block.setLayoutDirection(direction)
            if i == 0:
                cursor.setBlockFormat(block)
            else:
                cursor.insertBlock(block)
            for j, (stable, partial_tail) in enumerate(run):
                cursor.insertText((" " if j else "") + stable.lstrip(), normal)
                if partial_tail:
                    cursor.insertText(partial_tail, tail)
        note = self.note()
        if note:  # after the last words (on the left of a right-to-left line), a label rather than words said
            label = QTextCharFormat()
            label.setForeground(color)
            label.setFontPointSize(max(MIN_NOTE_POINT_SIZE, doc.defaultFont().pointSizeF() * NOTE_SCALE))
            label.setFontCapitalization(QFont.Capitalization.AllUppercase)
            label.setFontLetterSpacing(110)
            cursor.insertText("\u2003" if parts else "", normal)
            cursor.insertText(f"\u2066{note}\u2069", label)  # isolated: kept whole after Arabic
        return doc

    @staticmethod
    def _wrapped_lines(doc: QTextDocument) -> list[tuple[str, float, float]]:
        """(text, top, bottom) of every laid-out line in ``doc``."""
        out = []
        layout = doc.documentLayout()
        block = doc.begin()
        while block.isValid():
            top = layout.blockBoundingRect(block).top()
            text_layout = block.layout()
            for i in range(text_layout.lineCount()):
                line = text_layout.lineAt(i)
                text = block.text()[line.textStart() : line.textStart() + line.textLength()]
                out.append((text, top + line.y(), top + line.y() + line.height()))
            block = block.next()
        return out

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        bg = QColor(self._style.background_color)
        bg.setAlphaF(1.0 if self._presentation else self._style.opacity)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(bg)
        if self._presentation:
            p.drawRect(self.rect())
        else:
            p.drawRoundedRect(QRectF(self.rect()), 10, 10)
        doc = self._layout_document()
        lines = self._wrapped_lines(doc)
        if lines:
            shown = self._shown(lines)
            first_top, last_bottom = shown[0][1], shown[-1][2]
            area = self._text_area()
            if self._presentation:  # the lines sit low on the screen, like subtitles
                area.setTop(max(area.top(), area.bottom() - (last_bottom - first_top)))
            p.save()
            if self._adjust_from is not None:  # the keys' hint goes over the captions
                p.setOpacity(0.35)
            p.setClipRect(area)
            p.translate(QPointF(area.left(), area.bottom() - last_bottom))
            doc.drawContents(p, QRectF(0, first_top, doc.textWidth(), last_bottom - first_top))
            p.restore()
        if self._adjust_from is not None:
            self._paint_adjust_hint(p)
        p.end()

    def _paint_adjust_hint(self, p: QPainter) -> None:
        """A border and the keys, over the captions, while the keyboard moves and resizes the overlay."""
        color = QColor(self._style.text_color)
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.setPen(QPen(color, 3))
        p.drawRoundedRect(QRectF(self.rect()).adjusted(1.5, 1.5, -1.5, -1.5), 10, 10)
        font = QFont(self.font())
        font.setPointSizeF(max(9.0, self.caption_font().pointSizeF() * 0.45))
        room = QRectF(self.rect()).adjusted(PAD_X / 2, PAD_Y / 2, -PAD_X / 2, -PAD_Y / 2)
        flags = Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap
        p.setFont(font)
        while font.pointSizeF() > MIN_POINT_SIZE:  # every key shown: smaller until it fits (a small overlay)
            needed = p.boundingRect(room, int(flags), ADJUST_HINT)
            if needed.height() <= room.height() and needed.width() <= room.width():
                break
            font.setPointSizeF(max(MIN_POINT_SIZE, font.pointSizeF() * 0.9))
            p.setFont(font)
        box = p.boundingRect(room, int(flags), ADJUST_HINT).adjusted(-8, -3, 8, 3).intersected(room)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(QColor(self._style.background_color))
        p.drawRoundedRect(box, 4, 4)
        p.setPen(color)
        p.drawText(room, int(flags), ADJUST_HINT)

    def sizeHint(self) -> QSize:
        return QSize(900, self._natural_height())

    # -- keyboard: move and resize ---------------------------------------------------------------
    @property
    def adjusting(self) -> bool:
        return self._adjust_from is not None

    def start_adjusting(self) -> None:
        """Take the keyboard: arrows move the overlay, Shift+arrows resize it, Enter keeps the change and Esc
        undoes it (either ends it, as does the keyboard going elsewhere: ``adjust_finished``). Click-through is
        off meanwhile. Nothing happens in presentation mode."""
        if self._presentation or self._adjust_from is not None:
            return
        self._adjust_from = self.geometry()
        self._apply_flags()
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.show()
        self.raise_()
        self.activateWindow()
        self.setFocus(Qt.FocusReason.OtherFocusReason)
        self.update()

    def finish_adjusting(self, keep: bool) -> None:
        """End keyboard adjusting, keeping the new place and size or going back to the old (``adjust_finished``)."""
        start, self._adjust_from = self._adjust_from, None
        if start is None:
            return
        if not keep:
            self.setGeometry(start)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self._apply_flags()
        self._save_timer.start()
        self.update()
        self.adjust_finished.emit(keep)

    def _adjust(self, key: int, resize: bool) -> None:
        dx = {Qt.Key.Key_Left: -KEY_STEP, Qt.Key.Key_Right: KEY_STEP}.get(Qt.Key(key), 0)
        dy = {Qt.Key.Key_Up: -KEY_STEP, Qt.Key.Key_Down: KEY_STEP}.get(Qt.Key(key), 0)
        g = QRect(self.geometry())
        if resize:
            g.setWidth(max(self.minimumWidth(), g.width() + dx))
            g.setHeight(max(self.minimumHeight(), g.height() + dy))
        else:
            g.translate(dx, dy)
        screen = QGuiApplication.screenAt(self.geometry().center()) or self.screen()
        if screen is not None:  # stays on its screen
            area = screen.availableGeometry()
            g.setWidth(min(g.width(), area.width()))
            g.setHeight(min(g.height(), area.height()))
            g.moveLeft(max(area.left(), min(g.left(), area.right() - g.width() + 1)))
            g.moveTop(max(area.top(), min(g.top(), area.bottom() - g.height() + 1)))
        self.setGeometry(g)

    def focusOutEvent(self, event: QFocusEvent) -> None:
        super().focusOutEvent(event)
        if self._adjust_from is not None and event.reason() != Qt.FocusReason.PopupFocusReason:
            QTimer.singleShot(0, self, self._keyboard_went)  # not inside a hide(): its flags are re-applied

    def _keyboard_went(self) -> None:
        if self._adjust_from is not None and not self.hasFocus():
            self.finish_adjusting(keep=True)

    # -- mouse: move and resize ------------------------------------------------------------------
    def _edges_at(self, pos: QPoint) -> Qt.Edge:
        edges = Qt.Edge(0)
        r = self.rect()
        if pos.x() <= EDGE:
            edges |= Qt.Edge.LeftEdge
        elif pos.x() >= r.width() - EDGE:
            edges |= Qt.Edge.RightEdge
        if pos.y() <= EDGE:
            edges |= Qt.Edge.TopEdge
        elif pos.y() >= r.height() - EDGE:
            edges |= Qt.Edge.BottomEdge
        return edges

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() != Qt.MouseButton.LeftButton or self._presentation:
            return super().mousePressEvent(event)
        edges = self._edges_at(event.position().toPoint())
        handle = self.windowHandle()
        if handle is not None:
            started = handle.startSystemResize(edges) if edges else handle.startSystemMove()
            if started:
                self._save_timer.start()
                return None
        self._drag = (event.globalPosition().toPoint(), self.geometry(), edges)
        return None

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if self._drag is None:
            self._update_cursor(self._edges_at(event.position().toPoint()))
            return
        origin, geometry, edges = self._drag
        delta = event.globalPosition().toPoint() - origin
        if not edges:
            self.move(geometry.topLeft() + delta)
            return
        g = QRect(geometry)
        if edges & Qt.Edge.LeftEdge:
            g.setLeft(min(g.left() + delta.x(), g.right() - self.minimumWidth()))
        if edges & Qt.Edge.RightEdge:
            g.setRight(g.right() + delta.x())
        if edges & Qt.Edge.TopEdge:
            g.setTop(min(g.top() + delta.y(), g.bottom() - self.minimumHeight()))
        if edges & Qt.Edge.BottomEdge:
            g.setBottom(g.bottom() + delta.y())
        self.setGeometry(g)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if self._drag is not None:
            self._drag = None
            self._save_timer.start()
        super().mouseReleaseEvent(event)

    def _update_cursor(self, edges: Qt.Edge) -> None:
        horizontal = bool(edges & (Qt.Edge.LeftEdge | Qt.Edge.RightEdge))
        vertical = bool(edges & (Qt.Edge.TopEdge | Qt.Edge.BottomEdge))
        if horizontal and vertical:
            forward = edges in (Qt.Edge.TopEdge | Qt.Edge.LeftEdge, Qt.Edge.BottomEdge | Qt.Edge.RightEdge)
            shape = Qt.CursorShape.SizeFDiagCursor if forward else Qt.CursorShape.SizeBDiagCursor
        elif horizontal:
            shape = Qt.CursorShape.SizeHorCursor
        elif vertical:
            shape = Qt.CursorShape.SizeVerCursor
        else:
            shape = Qt.CursorShape.SizeAllCursor
        self.setCursor(QCursor(shape))

    def moveEvent(self, event: QMoveEvent) -> None:
        super().moveEvent(event)
        if not self._presentation and self.isVisible():
            self._save_timer.start()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if not self._presentation and self.isVisible():
            self._save_timer.start()

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:
        if self._menu is not None:
            self._menu.exec(event.globalPos())

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        if key == Qt.Key.Key_Escape and self._presentation:
            self.set_presentation(False)
            return
        if self._adjust_from is not None:
            if key in (Qt.Key.Key_Left, Qt.Key.Key_Right, Qt.Key.Key_Up, Qt.Key.Key_Down):
                self._adjust(key, bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier))
                return
            if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Escape):
                self.finish_adjusting(keep=key != Qt.Key.Key_Escape)
                return
        super().keyPressEvent(event)

    def closeEvent(self, event: QCloseEvent) -> None:
        if self._presentation:
            self.set_presentation(False)
        super().closeEvent(event)
        self.closed.emit()
