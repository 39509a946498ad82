"""Where windows open: the saved geometry where Qt can restore it on today's screens, else a first-start
placement that fits the screen.

Why: ``QWidget.restoreGeometry`` refuses data saved on a screen of another size (a laptop undocked from a large
monitor, another scale factor) and leaves the window where Qt puts a new one: 640 x 480 at the screen's corner,
so the always-on-top caption overlay covered the main window's menus. And sizes chosen for a large desktop
(a dialog's minimum of 800 x 640) put buttons out of reach on a small or scaled screen.
"""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QRect
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QWidget


def area(widget: QWidget | None = None) -> QRect | None:
    """The available geometry (without panels and docks) of ``widget``'s screen, or of the primary screen; None
    when there is no screen."""
    screen = widget.screen() if widget is not None else None
    screen = screen or QGuiApplication.primaryScreen()
    return screen.availableGeometry() if screen is not None else None


def restore(widget: QWidget, saved) -> bool:
    """Restore ``widget``'s geometry from ``saved`` (``saveGeometry`` bytes, or nothing); False when there was none
    or Qt refused it (damaged, or saved on a screen of another size): the caller then places the window anew."""
    if not saved:
        return False
    try:
        return bool(widget.restoreGeometry(QByteArray(saved)))
    except (TypeError, ValueError):  # not bytes (a settings file edited by hand)
        return False


def fit(widget: QWidget, width: int, height: int, share: float = 0.9) -> None:
    """Resize ``widget`` to ``width x height``, or to ``share`` of its screen's available area where that is
    smaller (a first start on a small or scaled screen)."""
    a = area(widget)
    if a is not None:
        width, height = min(width, int(a.width() * share)), min(height, int(a.height() * share))
    widget.resize(width, height)


def limit_minimum(widget: QWidget, width: int, height: int) -> None:
    """A minimum size of ``width x height``, but no larger than the screen's available area (a dialog whose
    minimum is larger than the screen keeps its buttons off it)."""
    a = area(widget)
    if a is not None:
        width, height = min(width, a.width()), min(height, a.height())
    widget.setMinimumSize(width, height)
