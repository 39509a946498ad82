"""Where windows open: the saved geometry where Qt can restore it on today's screens, else a first-start
placement that fits the screen.

Why: ``QWidget.restoreGeometry`` refuses data saved on a screen of another size (a laptop undocked from a large
monitor, another scale factor) and leaves the window where Qt puts a new one: 640 x 480 at the screen's corner,
so the always-on-top caption overlay covered the main window's menus. So a window's place is also kept as shares
of its screen's available area (``relative``), and where Qt refuses the saved geometry the window goes to the same
shares of today's screen (``place_relative``): an overlay moved to the bottom-right corner stays there. And sizes
chosen for a large desktop (a dialog's minimum of 800 x 640) put buttons out of reach on a small or scaled screen.
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
        width, height = min(width, int(a.width() * share)), min(height, int(a.height() * share), _room(a))
    widget.resize(width, height)


def limit_minimum(widget: QWidget, width: int, height: int) -> None:
    """A minimum size of ``width x height``, but no larger than the screen's available area (a dialog whose
    minimum is larger than the screen keeps its buttons off it)."""
    a = area(widget)
    if a is not None:
        width, height = min(width, a.width()), min(height, _room(a))
    widget.setMinimumSize(width, height)


TITLE_BAR = 40  # logical px a window manager's title bar takes above a window's content (Windows 31, GNOME 37)


def _room(a: QRect) -> int:
    """The content height a framed window can have in the available area ``a``: a dialog as tall as the area (the
    model dialog on 1366 x 768 at 125 %) had its bottom buttons pushed off the screen by its title bar."""
    return max(a.height() - TITLE_BAR, a.height() // 2)


def relative(widget: QWidget) -> str:
    """``widget``'s geometry as shares of its screen's available area, ``"x y width height"`` (for
    ``place_relative``); "" when there is no screen."""
    a = area(widget)
    if a is None or a.width() <= 0 or a.height() <= 0:
        return ""
    g = widget.geometry()
    shares = ((g.x() - a.x()) / a.width(), (g.y() - a.y()) / a.height(), g.width() / a.width(), g.height() / a.height())
    return " ".join(f"{v:.4f}" for v in shares)


def place_relative(widget: QWidget, saved: str) -> bool:
    """Put ``widget`` at the shares ``saved`` by ``relative`` of its screen's available area, its size within the
    area and its minimum, the whole window inside it. False (nothing moved) when ``saved`` is not such a text."""
    a = area(widget)
    try:
        x, y, w, h = (float(v) for v in saved.split())
    except (AttributeError, ValueError):
        return False
    if a is None or not all(0.05 <= v <= 1.5 for v in (w, h)) or not all(-1 <= v <= 1 for v in (x, y)):
        return False  # not shares a window was saved with ("0 0 0 0" opened the main window at its minimum)
    width = max(widget.minimumWidth(), min(round(w * a.width()), a.width()))
    height = max(widget.minimumHeight(), min(round(h * a.height()), a.height()))
    left = min(max(a.x() + round(x * a.width()), a.left()), a.right() + 1 - width)
    top = min(max(a.y() + round(y * a.height()), a.top()), a.bottom() + 1 - height)
    widget.setGeometry(QRect(max(left, a.left()), max(top, a.top()), width, height))
    return True
