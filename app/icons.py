"""Toolbar icons drawn in the theme's text colour (the platform's media icons are black, which vanishes
on the dark and high-contrast themes)."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPainterPath, QPalette, QPixmap

SIZES = (16, 24, 32, 48)


def _draw(kind: str, size: int, color: QColor) -> QPixmap:
    pix = QPixmap(size, size)
    pix.fill(Qt.GlobalColor.transparent)
    p = QPainter(pix)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(color)
    s = float(size)
    if kind == "start":
        path = QPainterPath(QPointF(0.28 * s, 0.18 * s))
        path.lineTo(0.82 * s, 0.5 * s)
        path.lineTo(0.28 * s, 0.82 * s)
        path.closeSubpath()
        p.drawPath(path)
    elif kind == "pause":
        p.drawRoundedRect(QRectF(0.24 * s, 0.2 * s, 0.18 * s, 0.6 * s), 0.04 * s, 0.04 * s)
        p.drawRoundedRect(QRectF(0.58 * s, 0.2 * s, 0.18 * s, 0.6 * s), 0.04 * s, 0.04 * s)
    elif kind == "stop":
        p.drawRoundedRect(QRectF(0.24 * s, 0.24 * s, 0.52 * s, 0.52 * s), 0.06 * s, 0.06 * s)
    elif kind == "record":
        p.drawEllipse(QRectF(0.22 * s, 0.22 * s, 0.56 * s, 0.56 * s))
    p.end()
    return pix


def media_icon(kind: str, palette: QPalette, accent: QColor | None = None) -> QIcon:
    """``kind`` is "start", "pause" or "stop"; drawn in ``accent`` (or the palette's button text), with a
    greyed variant for the disabled state."""
    normal = QColor(accent) if accent is not None else palette.color(QPalette.ColorRole.ButtonText)
    disabled = palette.color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText)
    icon = QIcon()
    for size in SIZES:
        icon.addPixmap(_draw(kind, size, normal), QIcon.Mode.Normal)
        icon.addPixmap(_draw(kind, size, disabled), QIcon.Mode.Disabled)
    return icon
