"""Voice-activity segmenting for the live session: audio in any chunking -> per 32 ms VAD hop, in order, the
audio of the open segment and the segment starts (with their pre-roll) and ends.

Decisions are made per 512-sample hop (``engine.vad``), so they never depend on how the audio was chunked;
the samples of an unfinished hop wait in ``pending``. While no segment is open, the last hops are kept in a
ring, so that a segment that opens can start ``VadOptions.preroll`` before its first speech hop.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from ...audio import SAMPLE_RATE
from ...vad import HOP, Segmenter, SegmentEvent, VadOptions


@dataclass(frozen=True)
class Step:
    """One thing that happened in a hop: ``"audio"`` (``audio`` is the hop, part of the open segment),
    ``"start"`` (``event`` opens a segment; ``audio`` lists its pre-roll pieces, speech hops that opened it
    included; ``hop_end`` is the sample after the hop) or ``"end"`` (``event`` closes the open segment)."""

    kind: str
    audio: np.ndarray | list[np.ndarray] | None = None
    event: SegmentEvent | None = None
    hop_end: int = 0


class Segmenting:
    """Hop framing, the VAD, the ``Segmenter`` and the pre-roll ring. ``pos`` counts samples received."""

    def __init__(self, opts: VadOptions, vad: Callable[[np.ndarray], float]):
        self.opts, self.vad = opts, vad
        self.segmenter = Segmenter(opts)
        self.reset()

    def reset(self) -> None:
        """Forget everything; the next sample is sample 0."""
        self.vad.reset()
        self.segmenter.reset()
        self.pos = 0
        self.pending = np.zeros(0, np.float32)  # < 1 hop, not yet seen by the VAD
        keep = -(-int(self.opts.preroll * SAMPLE_RATE) // HOP) + self.opts.start_hops + 1
        self.ring: deque[tuple[int, np.ndarray]] = deque(maxlen=keep)  # recent hops while no segment is open

    def push(self, pcm: np.ndarray) -> Iterator[Step]:
        """Yield the steps of every hop completed by ``pcm`` (float32 samples), hop by hop: the next hop is
        only looked at once the caller has handled the steps before it."""
        audio = np.concatenate([self.pending, pcm]) if len(self.pending) else pcm
        n = len(audio) // HOP
        hop_start = self.pos - len(self.pending)
        for i in range(n):
            yield from self._hop(hop_start + i * HOP, audio[i * HOP : (i + 1) * HOP])
        self.pending = audio[n * HOP :].copy()
        self.pos += len(pcm)

    def _hop(self, start: int, hop: np.ndarray) -> Iterator[Step]:
        p = self.vad(hop)
        if self.segmenter.in_speech:
            yield Step("audio", hop)
        else:
            self.ring.append((start, hop))
        for se in self.segmenter.step(start, p):
            if se.kind == "start":
                pre = [h[max(0, se.sample - s) :] for s, h in self.ring if s + HOP > se.sample]
                self.ring.clear()
                yield Step("start", pre, se, start + HOP)
            else:
                yield Step("end", event=se)

    def close(self) -> SegmentEvent:
        """End the open segment at ``pos`` (the input ended): its end event; the next segment starts later."""
        g = self.segmenter
        se = SegmentEvent("end", self.pos, (g.first_speech, max(g.last_speech, g.first_speech)), active=g.last_active)
        g.reset()
        g.floor = self.pos
        return se
