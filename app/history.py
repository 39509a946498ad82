"""The history pane: every committed line with its timestamp, a search box and copy buttons.

It follows new lines unless the user scrolled up (LiveCaptions #66/#90). Search hides non-matching
lines (case-insensitive) and highlights the matches in the lines it keeps (``MatchDelegate`` draws each
line as a small text document with the matches marked). "Copy" copies the selected lines (all when none is
selected) as plain text; the context menu also copies with timestamps.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QModelIndex, QObject, QPoint, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QAction,
    QColor,
    QGuiApplication,
    QKeySequence,
    QPainter,
    QPalette,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextOption,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

from app.export import clock
from engine.events import Line

LINE_ROLE = Qt.ItemDataRole.UserRole
MATCH_BACKGROUND = QColor("#ffd54f")  # with black text: readable on every theme
MATCH_TEXT = QColor("#000000")
HEIGHT_CACHE = 20000
ITEM_PAD = QSize(4, 6)  # horizontal and vertical padding inside a row, in pixels (both sides together)


def fold_matches(text: str, needle: str, start: int = 0) -> list[tuple[int, int]]:
    """``(start, end)`` in ``text`` of each occurrence of the casefolded ``needle`` in ``text`` casefolded (a
    character may fold to several, "ß" to "ss": a match covers the characters whose folds it touches)."""
    if not needle:
        return []
    folded, owner = [], []  # the folded text, and the index in ``text`` of each of its characters
    for i in range(start, len(text)):
        f = text[i].casefold()
        folded.append(f)
        owner += [i] * len(f)
    haystack = "".join(folded)
    out, at = [], haystack.find(needle)
    while at >= 0:
        first, last = owner[at], owner[at + len(needle) - 1]
        if not out or first >= out[-1][1]:
            out.append((first, last + 1))
        at = haystack.find(needle, at + len(needle))
    return out


class MatchDelegate(QStyledItemDelegate):
    """Draws a history row as wrapped text with every occurrence of ``needle`` highlighted."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.needle = ""
        self._heights: dict[tuple[str, int], int] = {}
        self._rows: list[QSize | None] = []  # each row's size at ``_rows_width`` (rows only ever get appended)
        self._rows_width = -1
        self._width: float | None = None  # the text width, kept while the view's width is unchanged
        parent.installEventFilter(self)  # its font changes (eventFilter)
        if isinstance(parent, QAbstractItemView):
            parent.viewport().installEventFilter(self)  # its width changes

    def document(self, text: str, width: float, option: QStyleOptionViewItem, skip: int = 0) -> QTextDocument:
        """``text`` laid out at ``width`` with the matches of ``needle`` after its first ``skip`` characters
        (the timestamp) marked."""
        doc = QTextDocument()
        doc.setDocumentMargin(0)
        doc.setDefaultFont(option.font)
        wrap = QTextOption()
        wrap.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        # every row in the view's direction, whatever its words: a right-to-left line (Arabic, Hebrew) took its
        # direction from its first letter and moved its timestamp to the other side of the column
        wrap.setTextDirection(option.direction)
        doc.setDefaultTextOption(wrap)
        doc.setPlainText(text)
        doc.setTextWidth(max(width, 1.0))
        for start, end in self.matches(text, skip):
            cursor = QTextCursor(doc)
            cursor.setPosition(start)
            cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
            fmt = QTextCharFormat()
            fmt.setBackground(MATCH_BACKGROUND)
            fmt.setForeground(MATCH_TEXT)
            cursor.mergeCharFormat(fmt)
        return doc

    def matches(self, text: str, start: int = 0) -> list[tuple[int, int]]:
        """``(start, end)`` of each occurrence of ``needle`` (casefolded) in ``text`` from ``start`` on, compared
        casefolded as the search itself (and the Sessions window's search) does: "strasse" finds "Straße"."""
        return fold_matches(text, self.needle, start)

    def _text_width(self, option: QStyleOptionViewItem) -> float:
        view = self.parent()
        width = view.viewport().width() if isinstance(view, QAbstractItemView) else option.rect.width()
        return float(width - ITEM_PAD.width())

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        text, opt.text = opt.text, ""
        style = opt.widget.style() if opt.widget is not None else QGuiApplication.instance().style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)  # background, selection
        line = index.data(LINE_ROLE)
        skip = len(text) - len(line.text) if isinstance(line, Line) and text.endswith(line.text) else 0
        doc = self.document(text, opt.rect.width() - ITEM_PAD.width(), opt, skip)
        context = QAbstractTextDocumentLayout.PaintContext()
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        role = QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text
        context.palette.setColor(QPalette.ColorRole.Text, opt.palette.color(role))
        painter.save()
        painter.translate(QPointF(opt.rect.left() + ITEM_PAD.width() / 2, opt.rect.top() + ITEM_PAD.height() / 2))
        painter.setClipRect(QRectF(0, 0, opt.rect.width(), opt.rect.height()))
        doc.documentLayout().draw(painter, context)
        painter.restore()

    def forget_rows(self) -> None:
        """The view's rows were removed (its next rows are other lines)."""
        self._rows = []

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex) -> QSize:
        # The list sizes every row again for each new line (rows of different heights: 6000 rows each time, 34 ms
        # a line, after five hours), so a known row costs a list look-up only, by row at the width it was sized
        # for; heights are also cached per text and width (highlighting never changes the layout). Both go when
        # the view's font changes, the rows' when its width does (``eventFilter``).
        width = self._width
        if width is None:
            width = self._width = self._text_width(option)
        row = index.row()
        if self._rows_width == int(width) and row < len(self._rows):
            known = self._rows[row]
            if known is not None:
                return known
        size = self._size(option, index, width)
        if self._rows_width != int(width):
            self._rows, self._rows_width = [], int(width)
        if row >= len(self._rows):
            self._rows.extend([None] * (row + 1 - len(self._rows)))
        self._rows[row] = size
        return size

    def _size(self, option: QStyleOptionViewItem, index: QModelIndex, width: float) -> QSize:
        key = (index.data(), int(width))
        height = self._heights.get(key)
        if height is None:
            opt = QStyleOptionViewItem(option)
            self.initStyleOption(opt, index)
            if len(self._heights) > HEIGHT_CACHE:
                self._heights.clear()
            height = self._heights[key] = int(self.document(opt.text, width, opt).size().height())
        return QSize(int(width), height + ITEM_PAD.height())

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._heights.clear()
            self._rows = []
        elif event.type() == QEvent.Type.Resize:
            self._width = None  # read again from the view at the next row sized
        return False


class HistoryPane(QWidget):
    """Timestamped committed lines with search and copy. GUI thread only."""

    copied = Signal(int)  # number of lines copied

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("historyPane")
        self.search = QLineEdit(self)
        self.search.setObjectName("historySearch")
        self.search.setPlaceholderText("Search the transcript")
        self.search.setClearButtonEnabled(True)
        self.search.setAccessibleName("Search the transcript")
        self.search.textChanged.connect(self._apply_filter)
        clear = QAction("Clear the search", self.search)  # Esc, as in most search fields (only the x cleared it)
        clear.setShortcut(QKeySequence(Qt.Key.Key_Escape))
        clear.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        clear.triggered.connect(self.search.clear)
        self.search.addAction(clear)
        self.matches = QLabel(self)
        self.matches.setObjectName("historyMatches")
        self.list = QListWidget(self)
        self.list.setObjectName("historyList")
        self.list.setWordWrap(True)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setResizeMode(QListWidget.ResizeMode.Adjust)
        self.list.setUniformItemSizes(False)
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.setAccessibleName("Transcript history")
        self.delegate = MatchDelegate(self.list)
        self.list.setItemDelegate(self.delegate)
        # Following the end is a state the reader sets by scrolling (as in the caption view), not worked out from the
        # bar when a line arrives: a smaller window, a font or a scale factor raises the bar's range without anyone
        # scrolling, and the pane then stopped following (the newest line went off screen).
        self._following = True
        self._kept_following: bool | None = None  # while a search hides rows: the state before it, kept
        bar = self.list.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range)
        self.list.customContextMenuRequested.connect(self._context_menu)
        self.copy_button = QPushButton("Copy", self)
        self.copy_button.setToolTip("Copy the selected lines, or the whole transcript when none is selected")
        self.copy_button.setAccessibleName("Copy lines")
        self.copy_button.clicked.connect(lambda: self.copy(timestamps=False))
        self.copy_button.setEnabled(False)  # until there is a line

        self._copy_action = QAction("Copy", self.list)
        self._copy_action.setShortcut(QKeySequence.StandardKey.Copy)
        self._copy_action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        self._copy_action.triggered.connect(lambda: self.copy(timestamps=False))
        self.list.addAction(self._copy_action)
        self._select_all_action = QAction("Select all", self.list)
        self._select_all_action.triggered.connect(self.list.selectAll)

        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.search, 1)
        top.addWidget(self.matches)
        top.addWidget(self.copy_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 4, 0)
        layout.addLayout(top)
        layout.addWidget(self.list, 1)

    @property
    def following(self) -> bool:
        """Whether the pane keeps the newest line in sight (until the reader scrolls up)."""
        return self._following

    def _on_scrolled(self, value: int) -> None:
        if self._kept_following is None:  # hiding rows for a search moves the bar: not the reader's scrolling
            self._following = value >= self.list.verticalScrollBar().maximum() - 2

    def _on_range(self, _low: int, high: int) -> None:
        if self._following and self._kept_following is None:
            self.list.verticalScrollBar().setValue(high)

    def add_line(self, line: Line) -> None:
        """Append a committed line (keeps following the end unless the user scrolled up)."""
        follow = self._following
        needle = self.search.text().strip().casefold()
        self._append(line, needle)
        self.copy_button.setEnabled(True)
        if needle:
            self._update_matches()
        if follow:
            self.list.scrollToBottom()

    def set_lines(self, lines: list[Line]) -> None:
        """Replace the content with ``lines``, showing the end. One scroll and one count for all of them: per
        line, each scroll lays out every row before it (an hour's session took 3 s to open, three hours ~30)."""
        self.clear()
        self._following = True  # new content shows its end (nothing scrolls when the old one was at its top)
        needle = self.search.text().strip().casefold()
        for line in lines:
            self._append(line, needle)
        self.copy_button.setEnabled(bool(lines))
        self._update_matches()
        self.list.scrollToBottom()

    def _append(self, line: Line, needle: str) -> None:
        item = QListWidgetItem(f"{clock(line.start)}   {line.text}")
        item.setData(LINE_ROLE, line)
        item.setToolTip(f"{clock(line.start)} \u2013 {clock(line.end)}")
        self.list.addItem(item)
        if needle:
            item.setHidden(needle not in line.text.casefold())

    def clear(self) -> None:
        self._following = True
        self.list.clear()
        self.delegate.forget_rows()
        self.copy_button.setEnabled(False)  # nothing to copy (it would empty the clipboard)
        self._update_matches()

    def lines(self, selected_only: bool = False) -> list[Line]:
        """The lines in order: the selected (visible) ones, or all."""
        items = [self.list.item(i) for i in range(self.list.count())]
        if selected_only:
            items = [item for item in items if item.isSelected() and not item.isHidden()]
        return [item.data(LINE_ROLE) for item in items]

    def copy_text(self, timestamps: bool = False) -> str:
        """What ``copy`` puts on the clipboard: the selected lines, or all lines."""
        lines = self.lines(selected_only=True) or self.lines()
        if timestamps:
            return "\n".join(f"[{clock(line.start)}] {line.text}" for line in lines)
        return "\n".join(line.text for line in lines)

    def copy(self, timestamps: bool = False) -> None:
        """Copy the selected lines (all when none is selected) to the clipboard; with no lines the clipboard keeps
        what it holds (``copied`` says 0)."""
        if not self.list.count():
            self.copied.emit(0)
            return
        text = self.copy_text(timestamps)
        QGuiApplication.clipboard().setText(text)
        self.copied.emit(text.count("\n") + 1)

    def focus_search(self) -> None:
        self.search.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.search.selectAll()

    def _apply_filter(self, text: str) -> None:
        needle = text.strip().casefold()
        if needle and self._kept_following is None:
            self._kept_following = self._following
        elif not needle and self._kept_following is not None:
            self._following, self._kept_following = self._kept_following, None
        self.delegate.needle = needle
        for i in range(self.list.count()):
            item = self.list.item(i)
            item.setHidden(bool(needle) and needle not in item.data(LINE_ROLE).text.casefold())
        self._update_matches()
        self.list.viewport().update()

    def _update_matches(self) -> None:
        if not self.search.text().strip():
            self.matches.setText("")
            return
        shown = sum(not self.list.item(i).isHidden() for i in range(self.list.count()))
        self.matches.setText(f"{shown} match{'es' if shown != 1 else ''}")

    def context_menu(self) -> QMenu:
        """The list's context menu: copy, copy with timestamps, select all."""
        menu = QMenu(self)
        menu.addAction(self._copy_action)
        menu.addAction("Copy with timestamps").triggered.connect(lambda: self.copy(timestamps=True))
        menu.addSeparator()
        menu.addAction(self._select_all_action)
        return menu

    def _context_menu(self, pos: QPoint) -> None:
        self.context_menu().exec(self.list.viewport().mapToGlobal(pos))
