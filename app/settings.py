"""Typed application settings over QSettings (an INI file in the platformdirs config folder).

Every key is a member of ``Key`` with its default; ``Settings.value(key)`` returns the default's type, so
callers never parse strings. Keyboard shortcuts are ``Shortcut`` members; a user can override one by
setting ``shortcuts/<name>`` in the INI file.
"""

from __future__ import annotations

import enum
import math
from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray, QSettings
from PySide6.QtGui import QColor, QKeySequence

from engine.backends import BACKENDS
from engine.models.voxtral.session import DELAYS_MS

CAPTION_SIZES: tuple[int, int] = (8, 96)  # the caption font size range, in points
DELAY_CHOICES_MS: tuple[int, ...] = DELAYS_MS  # the Voxtral delays the engine accepts (one list, the engine's)
THEMES: tuple[str, ...] = ("system", "light", "dark", "high-contrast")
#: The weights a model is loaded with (``engine.load_model``'s ``quantize``): as stored (the exact reference), or
#: float matrices converted to 8 / 4 bits on load (cached), faster and smaller, results close but not identical.
WEIGHTS: dict[str, int] = {"stored": 0, "8-bit": 8, "4-bit": 4}


def weight_bits(value: str) -> int:
    """The bits of a ``Key.WEIGHTS`` value (0: as stored; an unknown value, e.g. a hand-edited INI, too)."""
    return WEIGHTS.get(value, 0)


class Key(enum.Enum):
    """Settings keys, ``(name, default)``: the default also fixes the value's type."""

    MODEL_SOURCE = ("model/source", "")
    BACKEND = ("model/backend", "auto")
    WEIGHTS = ("model/weights", "stored")  # a key of WEIGHTS: the precision float weights are loaded at
    DELAY_MS = ("model/delay-ms", 480)
    DEVICE = ("audio/device", "")  # device name; "" = system default
    DEVICE_NAME = ("audio/device-name", "")  # what the chosen microphone was called (said while it is not connected)
    SOURCE = ("audio/source", "")  # "system" | "mic" | "both"; "" = first run (System audio where available)
    OUTPUT = ("audio/output", "")  # output id for System audio; "" = the default output, followed
    OUTPUT_NAME = ("audio/output-name", "")  # what the chosen output was called (said while it is not there)
    CAPTION_FONT = ("captions/font", "")  # QFont.toString(); "" = application font, larger
    CAPTION_FONT_SIZE = ("captions/font-size", 18)
    THEME = ("ui/theme", "system")
    WINDOW_GEOMETRY = ("window/geometry", b"")
    WINDOW_PLACE = ("window/place", "")  # placement.relative(): where WINDOW_GEOMETRY is refused (another screen)
    WINDOW_STATE = ("window/state", b"")
    SPLITTER_STATE = ("window/splitter", b"")
    OVERLAY_VISIBLE = ("overlay/visible", False)
    OVERLAY_GEOMETRY = ("overlay/geometry", b"")
    OVERLAY_PLACE = ("overlay/place", "")  # placement.relative(), as WINDOW_PLACE
    OVERLAY_LINES = ("overlay/lines", 2)
    OVERLAY_FONT = ("overlay/font", "")
    OVERLAY_FONT_SIZE = ("overlay/font-size", 26)
    OVERLAY_TEXT_COLOR = ("overlay/text-color", "#ffffff")
    OVERLAY_BG_COLOR = ("overlay/background-color", "#101010")
    OVERLAY_OPACITY = ("overlay/opacity", 0.8)
    OVERLAY_CLICK_THROUGH = ("overlay/click-through", False)
    EXPORT_FOLDER = ("export/folder", "")
    EXPORT_FORMAT = ("export/format", "srt")
    LIVE_SRT_PATH = ("export/live-srt-path", "")  # "" = off
    SESSIONS_RETENTION = ("sessions/retention", "all")  # "all" | "days:N" | "sessions:N" (app.session_store)
    SESSIONS_KEEP_AUDIO = ("sessions/keep-audio", False)  # keep each session's audio for re-transcription
    SESSIONS_GEOMETRY = ("sessions/geometry", b"")

    @property
    def key(self) -> str:
        """The QSettings key, e.g. ``"model/source"``."""
        return self.value[0]

    @property
    def default(self) -> Any:
        """The value used when nothing (or nothing readable) is stored."""
        return self.value[1]


class Shortcut(enum.Enum):
    """Keyboard shortcuts, ``(settings name, default key sequence, description)``."""

    START_PAUSE = ("start-pause", "Space", "Start, pause or resume captioning")
    STOP = ("stop", "Ctrl+.", "Stop the session")
    OPEN_MODEL = ("open-model", "Ctrl+M", "Choose, download or add a model")
    REPLAY_FILE = ("replay-file", "Ctrl+R", "Replay an audio file")
    EXPORT = ("export", "Ctrl+E", "Export the transcript")
    COPY_ALL = ("copy-all", "Ctrl+Shift+C", "Copy the whole transcript")
    FIND = ("find", "Ctrl+F", "Search the history")
    SESSIONS = ("sessions", "Ctrl+Shift+S", "Show the sessions library")
    OVERLAY = ("overlay", "Ctrl+Shift+O", "Show or hide the caption overlay")
    PRESENTATION = ("presentation", "F11", "Full-screen presentation mode")
    LARGER_TEXT = ("larger-text", "Ctrl++", "Larger caption text")
    SMALLER_TEXT = ("smaller-text", "Ctrl+-", "Smaller caption text")
    QUIT = ("quit", "Ctrl+Q", "Quit")


class Settings:
    """Typed access to the app's QSettings. ``path`` is the INI file (tests pass one under tmp_path)."""

    def __init__(self, path: str | Path) -> None:
        self._qs = QSettings(str(path), QSettings.Format.IniFormat)

    @property
    def path(self) -> str:
        """The backing INI file."""
        return self._qs.fileName()

    def value(self, key: Key) -> Any:
        """The stored value converted to the type of ``key.default`` (the default when missing or bad);
        numbers are finite and kept within ``RANGES`` where the key has one."""
        try:
            raw = self._qs.value(key.key)
        except (RuntimeError, ValueError, OverflowError):  # a value Qt cannot turn into a Python object
            return key.default
        value = _coerce(raw, key.default)
        bounds = RANGES.get(key)
        if bounds is not None:
            value = type(key.default)(min(max(value, bounds[0]), bounds[1]))
        if (key in CHOICES and value not in CHOICES[key]) or (key in COLORS and not QColor.isValidColorName(value)):
            return key.default
        return value

    def set_value(self, key: Key, value: Any) -> None:
        """Store ``value`` (it must have the type of ``key.default``; bytes may be a QByteArray)."""
        if isinstance(value, QByteArray):
            value = bytes(value.data())
        expected = type(key.default)
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise TypeError(f"{key.name} takes {expected.__name__}, not {type(value).__name__}")
        self._qs.setValue(key.key, QByteArray(value) if isinstance(value, bytes) else value)

    def shortcut(self, shortcut: Shortcut) -> str:
        """The key sequence for ``shortcut``: the user's override, or the default where there is none or Qt cannot
        read it (``NotAKey+Q`` gave the action no shortcut while Help listed it)."""
        raw = self._qs.value(f"shortcuts/{shortcut.value[0]}")
        return raw if isinstance(raw, str) and raw and QKeySequence(raw).toString() else shortcut.value[1]

    def sync(self) -> None:
        """Write pending changes to disk."""
        self._qs.sync()

    def problem(self) -> str | None:
        """A sentence when changes cannot be saved (a read-only settings file, a folder that cannot be written), else
        None."""
        if self._qs.isWritable():
            return None
        return f"Settings cannot be saved ({self.path} cannot be written); changes last until livecap quits."


#: Usable ranges of numeric keys: a value outside is brought to the nearest end (a hand-edited or corrupt
#: INI file must not give a 100000-point or negative font).
RANGES: dict[Key, tuple[float, float]] = {
    Key.CAPTION_FONT_SIZE: (6, 200),
    Key.OVERLAY_FONT_SIZE: (6, 200),
    Key.OVERLAY_LINES: (2, 5),
    Key.OVERLAY_OPACITY: (0.0, 1.0),
}
#: Keys whose text must be one of these (a hand edit, or a value of a newer version): anything else reads as the
#: default, as with no value (an unknown backend stopped every model load; nothing was checked in its menu).
CHOICES: dict[Key, tuple[str, ...]] = {
    Key.BACKEND: BACKENDS,
    Key.WEIGHTS: tuple(WEIGHTS),
    Key.THEME: THEMES,
}
#: Colour keys: a name Qt cannot read as a colour reads as the default (it was black: black text on the overlay's
#: black background).
COLORS: tuple[Key, ...] = (Key.OVERLAY_TEXT_COLOR, Key.OVERLAY_BG_COLOR)
_INT_LIMIT = 1 << 31


def _coerce(raw: Any, default: Any) -> Any:
    if raw is None:
        return default
    try:
        if isinstance(default, bool):
            if isinstance(raw, str):
                return raw.strip().lower() in ("1", "true", "yes", "on")
            return bool(raw)
        if isinstance(default, int):
            value = int(raw)
            return value if -_INT_LIMIT <= value < _INT_LIMIT else default
        if isinstance(default, float):
            value = float(raw)
            return value if math.isfinite(value) else default
        if isinstance(default, bytes):
            if isinstance(raw, QByteArray):
                return bytes(raw.data())
            return bytes(raw) if isinstance(raw, (bytes, bytearray)) else default
        return str(raw)
    except (TypeError, ValueError, OverflowError):
        return default
