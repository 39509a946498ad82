"""The history pane: every committed line with its timestamp, a search box and copy buttons.

It follows new lines unless the user scrolled up (LiveCaptions #66/#90). Search hides non-matching
lines (case-insensitive). "Copy" copies the selected lines (all when none is selected) as plain text;
the context menu also copies with timestamps.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.export import clock
from engine.events import Line

LINE_ROLE = Qt.ItemDataRole.UserRole


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
        self.search.textChanged.connect(self._apply_filter)
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
        self.list.customContextMenuRequested.connect(self._context_menu)
        self.copy_button = QPushButton("Copy", self)
        self.copy_button.setToolTip("Copy the selected lines, or the whole transcript when none is selected")
        self.copy_button.clicked.connect(lambda: self.copy(timestamps=False))

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

    def add_line(self, line: Line) -> None:
        """Append a committed line (keeps following the end unless the user scrolled up)."""
        bar = self.list.verticalScrollBar()
        follow = bar.value() >= bar.maximum() - 2
        item = QListWidgetItem(f"{clock(line.start)}   {line.text}")
        item.setData(LINE_ROLE, line)
        item.setToolTip(f"{clock(line.start)} \u2013 {clock(line.end)}")
        self.list.addItem(item)
        needle = self.search.text().strip().lower()
        if needle:
            item.setHidden(needle not in line.text.lower())
            self._update_matches()
        if follow:
            self.list.scrollToBottom()

    def set_lines(self, lines: list[Line]) -> None:
        """Replace the content with ``lines``."""
        self.clear()
        for line in lines:
            self.add_line(line)

    def clear(self) -> None:
        self.list.clear()
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
        """Copy the selected lines (all when none is selected) to the clipboard."""
        text = self.copy_text(timestamps)
        QGuiApplication.clipboard().setText(text)
        self.copied.emit(text.count("\n") + 1 if text else 0)

    def focus_search(self) -> None:
        self.search.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.search.selectAll()

    def _apply_filter(self, text: str) -> None:
        needle = text.strip().lower()
        for i in range(self.list.count()):
            item = self.list.item(i)
            item.setHidden(bool(needle) and needle not in item.data(LINE_ROLE).text.lower())
        self._update_matches()

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
