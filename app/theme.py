"""Themes: light, dark and high contrast (a QPalette plus a style sheet from ``resources/themes``).

"system" leaves the platform's palette alone. Each theme sets its link colours too (links in rich-text labels
stay readable on a dark background). ``tail_color`` is the grey of the partial tail that keeps
enough contrast on each theme's background; ``tail_italic`` says whether the tail may be italic too.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QDir
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QPalette
from PySide6.QtWidgets import QApplication

from app.paths import resources_dir
from app.settings import THEMES

log = logging.getLogger(__name__)

_PALETTES: dict[str, dict[QPalette.ColorRole, str]] = {
    "light": {
        QPalette.ColorRole.Window: "#f3f3f3",
        QPalette.ColorRole.WindowText: "#1b1b1b",
        QPalette.ColorRole.Base: "#ffffff",
        QPalette.ColorRole.AlternateBase: "#f0f0f0",
        QPalette.ColorRole.Text: "#151515",
        QPalette.ColorRole.Button: "#e9e9e9",
        QPalette.ColorRole.ButtonText: "#1b1b1b",
        QPalette.ColorRole.Highlight: "#2f6fdb",
        QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.ToolTipBase: "#ffffe6",
        QPalette.ColorRole.ToolTipText: "#1b1b1b",
        QPalette.ColorRole.PlaceholderText: "#7a7a7a",
        QPalette.ColorRole.Mid: "#b8b8b8",
        QPalette.ColorRole.Link: "#1557b0",
        QPalette.ColorRole.LinkVisited: "#6a3bb0",
    },
    "dark": {
        QPalette.ColorRole.Window: "#23262b",
        QPalette.ColorRole.WindowText: "#e6e6e6",
        QPalette.ColorRole.Base: "#181a1e",
        QPalette.ColorRole.AlternateBase: "#202328",
        QPalette.ColorRole.Text: "#ececec",
        QPalette.ColorRole.Button: "#2e3238",
        QPalette.ColorRole.ButtonText: "#e6e6e6",
        QPalette.ColorRole.Highlight: "#3d7be0",
        QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.ToolTipBase: "#2e3238",
        QPalette.ColorRole.ToolTipText: "#e6e6e6",
        QPalette.ColorRole.PlaceholderText: "#8d939b",
        QPalette.ColorRole.Mid: "#4a4f57",
        QPalette.ColorRole.Link: "#8cbcff",
        QPalette.ColorRole.LinkVisited: "#c6a6ff",
    },
    "high-contrast": {
        QPalette.ColorRole.Window: "#000000",
        QPalette.ColorRole.WindowText: "#ffffff",
        QPalette.ColorRole.Base: "#000000",
        QPalette.ColorRole.AlternateBase: "#101010",
        QPalette.ColorRole.Text: "#ffffff",
        QPalette.ColorRole.Button: "#000000",
        QPalette.ColorRole.ButtonText: "#ffffff",
        QPalette.ColorRole.Highlight: "#ffff00",
        QPalette.ColorRole.HighlightedText: "#000000",
        QPalette.ColorRole.ToolTipBase: "#000000",
        QPalette.ColorRole.ToolTipText: "#ffffff",
        QPalette.ColorRole.PlaceholderText: "#c8c8c8",
        QPalette.ColorRole.Mid: "#ffffff",
        QPalette.ColorRole.Link: "#7fdfff",
        QPalette.ColorRole.LinkVisited: "#ffa8ff",
    },
}

_DISABLED = {"light": "#a3a3a3", "dark": "#6c7178", "high-contrast": "#9a9a9a"}
_TAIL = {"light": "#767676", "dark": "#9aa0a8", "high-contrast": "#ffd75e"}
TAIL_CONTRAST = 4.5  # WCAG AA for normal text: Ctrl+minus takes captions down to 8 pt, and the tail is italic


def tail_color(theme: str) -> QColor:
    """The partial tail's colour on ``theme``: a grey with at least ``TAIL_CONTRAST`` against the text background
    (light's was 4.23:1). On "system" it is mixed from the platform's own text and background colours (a fixed
    #888888 had 3.54:1 on white, and would be worse on a dark system palette)."""
    if theme in _TAIL:
        return QColor(_TAIL[theme])
    palette = QApplication.palette()
    text, base = palette.color(QPalette.ColorRole.Text), palette.color(QPalette.ColorRole.Base)
    for weight in (0.5, 0.6, 0.7, 0.8, 0.9):  # the most muted mix that is still readable
        mixed = QColor(*(round(weight * a + (1 - weight) * b) for a, b in zip(text.getRgb()[:3], base.getRgb()[:3])))
        if contrast(mixed, base) >= TAIL_CONTRAST:
            return mixed
    return text


def contrast(a: QColor, b: QColor) -> float:
    """The WCAG contrast ratio of two colours (1 to 21)."""

    def luminance(c: QColor) -> float:
        def channel(v: float) -> float:
            return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

        return 0.2126 * channel(c.redF()) + 0.7152 * channel(c.greenF()) + 0.0722 * channel(c.blueF())

    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def apply_theme(app: QApplication, theme: str) -> str:
    """Apply ``theme`` (one of ``THEMES``; unknown names fall back to "system"); returns the theme used."""
    if theme not in THEMES:
        theme = "system"
    if not hasattr(app, "_livecap_default_palette"):
        app._livecap_default_palette = QPalette(app.palette())  # type: ignore[attr-defined]
    if theme == "system":
        app.setPalette(app._livecap_default_palette)  # type: ignore[attr-defined]
    else:
        palette = QPalette(app._livecap_default_palette)  # type: ignore[attr-defined]
        for role, color in _PALETTES[theme].items():
            palette.setColor(role, QColor(color))
        disabled = QColor(_DISABLED[theme])
        for role in (QPalette.ColorRole.Text, QPalette.ColorRole.WindowText, QPalette.ColorRole.ButtonText):
            palette.setColor(QPalette.ColorGroup.Disabled, role, disabled)
        app.setPalette(palette)
    app.setStyleSheet(_style_sheet("base") + "\n" + (_style_sheet(theme) if theme != "system" else ""))
    return theme


def _style_sheet(name: str) -> str:
    """The style sheet ``name``; its images are named ``themes:FILE`` (a search path, not the folder's path written
    into a url: an apostrophe in it, as in C:\\Users\\O'Brien, made Qt drop the rule)."""
    path = resources_dir() / "themes" / f"{name}.qss"
    QDir.setSearchPaths("themes", [str(path.parent)])
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        log.debug("no style sheet %s", path)
        return ""


def tail_italic(font: QFont, text: str) -> bool:
    """Whether ``text`` may be drawn in ``font``'s italic: not when the italic face lacks a character the upright
    one has (DejaVu Sans Oblique has no Arabic: a grey italic Arabic tail was a row of empty boxes), as Qt then
    draws boxes rather than falling back. Grey alone marks the tail then."""
    upright = QFontMetricsF(font)
    slanted = QFont(font)
    slanted.setItalic(True)
    italic = QFontMetricsF(slanted)
    return all(italic.inFontUcs4(ord(ch)) or not upright.inFontUcs4(ord(ch)) for ch in set(text) if not ch.isspace())
