"""Caption-safe text: what every tokenizer's output passes through before it reaches a caption event.

A model can emit tokens whose bytes are C0 (U+0000-U+001F), DEL (U+007F) or C1 (U+0080-U+009F) control
characters; drawn, they are boxes, and written to a journal or an SRT file they corrupt it. ``caption_safe``
turns the whitespace-like ones (tab, line and form feeds, carriage return, NEL, the information separators)
into a space and drops the rest; every other character, valid or replacement, is kept as it is.
"""

from __future__ import annotations

import re

# Controls that separate words (a space keeps the words apart); the other C0/C1 controls are dropped.
_SPACING = "\t\n\v\f\r\x1c\x1d\x1e\x1f\x85"
_TABLE: dict[int, str | None] = {c: None for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))}
_TABLE.update({ord(c): " " for c in _SPACING})
_SPACES = re.compile(r"\s+")


def caption_safe(text: str) -> str:
    """``text`` without C0/C1 control characters (spacing ones become one space each); nothing else changes."""
    return text.translate(_TABLE)


def one_line(text: str) -> str:
    """``caption_safe(text)`` with every run of whitespace collapsed to one space (a caption is one line)."""
    return _SPACES.sub(" ", caption_safe(text))
