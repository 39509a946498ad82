"""Caption events: what a session tells the UI after each ``feed``/``finish``.

A ``Line`` is a span of recognised text with times in seconds from the session start.
A ``CaptionEvent`` carries the lines committed since the last event (in order; they never change
afterwards) and the current partial (the open, still-changing text), or ``None`` when nothing is open.
``partial_stable`` is how many leading characters of the partial text are unlikely to change (the UI
shows them in the normal style and the rest as the grey tail).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Word:
    """One word with its audio span (seconds from session start)."""

    text: str
    start: float
    end: float


@dataclass(frozen=True)
class Line:
    """Recognised text with its speech span; ``tokens`` are the raw model ids behind it and ``span`` the
    audio the model decoded for it (pre-roll and some trailing silence included), when that differs."""

    text: str
    start: float
    end: float
    tokens: tuple[int, ...] = ()
    words: tuple[Word, ...] = ()
    span: tuple[float, float] | None = None


@dataclass(frozen=True)
class CaptionEvent:
    """Newly committed lines plus the current partial (``None``: no open text)."""

    committed: tuple[Line, ...] = ()
    partial: Line | None = None
    partial_stable: int = 0

    @property
    def stable_text(self) -> str:
        """The settled head of the partial text."""
        return self.partial.text[: self.partial_stable] if self.partial else ""

    @property
    def tail_text(self) -> str:
        """The still-changing tail of the partial text."""
        return self.partial.text[self.partial_stable :] if self.partial else ""
