"""The speculative final decode of a line that ends in silence.

A segment that ends by silence decodes its audio only up to the last active VAD hop plus
``VadOptions.tail_pad``: the "span end". The hang-over that closes the segment is longer than that pad, so
the line's decode can run before the close: when the encoder has been fed up to the span end, its
(immutable) state is kept here, a finalised copy of it gives the last memory frames, and the final decode
runs at once; its text goes out as the partial. When the segment then closes with no new activity, the line
is committed from that result with no work left. A hop at or above ``release`` before the close moves the
span end and drops the speculation: the segment's own encoder state was never touched, and the copy's memory
rows lie past its final frames, which later frames overwrite.
"""

from __future__ import annotations

from dataclasses import dataclass

from .streaming import EncoderState


@dataclass(frozen=True)
class FinalDecode:
    """A segment's final decode: ``ids`` (None: too little speech, no line), the segment samples decoded
    (``fed``), the refined speech span (``first``, ``last``) and the VAD's ``speech`` span it was made for."""

    ids: list[int] | None
    fed: int
    first: int
    last: int
    speech: tuple[int, int]


class Speculation:
    """The encoder ``state`` kept when exactly ``end`` segment samples had been fed (the span end at the time),
    and the ``line`` decoded from it (None: not yet, or not speculating); ``shown`` once its text went out."""

    def __init__(self):
        self.drop()

    def drop(self) -> None:
        """Forget the snapshot and its line."""
        self.state: EncoderState | None = None
        self.end = -1
        self.line: FinalDecode | None = None
        self.shown = False

    def hold(self, state: EncoderState, end: int) -> None:
        """Keep the encoder ``state`` reached at segment sample ``end``, the span end."""
        self.state, self.end = state, end

    def holds(self, span_end: int) -> bool:
        """Whether a snapshot is kept and it was taken at ``span_end``."""
        return self.state is not None and self.end == span_end

    def serves(self, speech: tuple[int, int]) -> FinalDecode | None:
        """The line decoded ahead for a segment whose VAD speech span is ``speech`` (None when there is none,
        or it was made for another span)."""
        return self.line if self.line is not None and self.line.speech == speech else None
