"""A toolbar that shows its buttons' icons alone where their names would not fit (``ToolbarFit``).

Why: Qt's toolbar puts what does not fit behind its overflow button ("»"). With the high-contrast theme's bold,
bordered buttons, a 1280 px screen's first window size (1152 px) put Export and Sessions there; the icons alone
free ~200 px. The names stay the buttons' text (what a screen reader says) and tooltips. Qt has no such mode.

Contract: text beside the icons whenever the whole toolbar fits its width with them, else icons only; fitted
again when the toolbar is resized or its other widgets change size (a model's name, a device picker, a theme).
An entry that does not fit even then goes behind the overflow button as before.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtWidgets import QApplication, QToolBar, QToolButton

TEXT, ICONS = Qt.ToolButtonStyle.ToolButtonTextBesideIcon, Qt.ToolButtonStyle.ToolButtonIconOnly


class ToolbarFit(QObject):
    """Keeps ``bar``'s button style fitted (see the module); lives as long as the toolbar."""

    def __init__(self, bar: QToolBar):
        super().__init__(bar)
        self.bar = bar
        self._fitted: tuple | None = None  # what the last fit saw: it fits again only when that changes
        self._pending = False
        bar.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        if event.type() in (QEvent.Type.Resize, QEvent.Type.LayoutRequest) and not self._pending:
            self._pending = True  # one fit for many events, after the layout has settled; dropped with self
            QTimer.singleShot(0, self, self.fit)
        return False

    def fit(self) -> None:
        """Text beside the icons if the toolbar fits with it, else icons only."""
        self._pending = False
        seen = self._seen()
        if seen == self._fitted:  # e.g. the layout request that our own change of style made
            return
        bar = self.bar
        bar.setToolButtonStyle(TEXT)
        if bar.sizeHint().width() > bar.width():
            bar.setToolButtonStyle(ICONS)
        self._fitted = self._seen()

    def _seen(self) -> tuple:
        """The toolbar's width, the theme and the widths of the shown entries other than its action buttons (whose
        widths change with the style this sets)."""
        bar, app = self.bar, QApplication.instance()
        others = []
        for action in bar.actions():
            widget = bar.widgetForAction(action)
            own = isinstance(widget, QToolButton) and widget.defaultAction() is action
            if widget is not None and action.isVisible() and not own:
                others.append(widget.sizeHint().width())
        return bar.width(), app.styleSheet() if isinstance(app, QApplication) else "", tuple(others)
