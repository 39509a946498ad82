"""One voice segment's audio through the exact incremental encoder into the decoder's memory.

Audio queued for the open segment goes into ``StreamingEncoder`` when the session says so; each newly final
encoder frame gets its memory row and its cross-attention K/V written for every decoder layer (never
recomputed), into buffers sized once for the longest segment. Frames that are not final yet (the encoder's
look-ahead) can be written temporarily past the final ones for a partial or a final decode; later frames
overwrite them. The segment also keeps the loudness per 10 ms, which tightens a line's times.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...audio import SAMPLE_RATE
from ...vad import HOP
from .streaming import EncoderState, StreamingEncoder

if TYPE_CHECKING:
    from .model import MoonshineModel

WIN = 160  # 10 ms loudness windows for line times


class SegmentEncoder:
    """The open segment: encoder ``state``, ``fed`` samples given to it, the memory ``xkv`` (per decoder layer
    the cross K/V ``[Hkv, frames, hd]``) and the audio ``queued`` for the encoder. ``encoded`` counts every
    sample given to the encoder since the session began."""

    def __init__(self, model: MoonshineModel, max_seconds: float):
        self.m, self.B = model, model.B
        self.encoder = StreamingEncoder(model)
        c = model.cfg
        max_frames = int(max_seconds * SAMPLE_RATE) // (4 * c.encoder.frame_len) + 8
        self.frame_cap = min(max_frames + model.lookahead, c.max_position_embeddings)
        shape, dt = (c.num_key_value_heads, self.frame_cap, c.head_dim), model.dtype
        self.xkv = [(self.B.kv_zeros(shape, dt), self.B.kv_zeros(shape, dt)) for _ in model.dec_layers]
        self.encoded = 0
        self.start(0)

    def start(self, sample: int) -> None:
        """A new segment beginning at session sample ``sample``: all encoder state is dropped."""
        self.state = self.encoder.initial()
        self.start_sample = sample
        self.fed = 0
        self.queue: list[np.ndarray] = []
        self.rms: list[float] = []  # per 10 ms of segment audio
        self.rms_rest = np.zeros(0, np.float32)

    @property
    def queued(self) -> int:
        """Samples waiting for the encoder."""
        return sum(len(a) for a in self.queue)

    def take_queue(self) -> np.ndarray:
        """The queued audio, in one array; the queue is then empty."""
        pcm = np.concatenate(self.queue)
        self.queue = []
        return pcm

    def feed(self, pcm: np.ndarray) -> None:
        """Encode ``pcm`` and write the memory rows of the frames it made final."""
        if not len(pcm):
            return
        a = np.concatenate([self.rms_rest, pcm])
        n = len(a) // WIN
        if n:
            self.rms += np.sqrt(np.mean(a[: n * WIN].reshape(n, WIN) ** 2, axis=1)).tolist()
        self.rms_rest = a[n * WIN :]
        before = self.state.n_final
        self.state, x = self.encoder.advance(self.state, pcm)
        self.fed += len(pcm)
        self.encoded += len(pcm)
        if x is not None:
            self.write_memory(x, before)

    def write_memory(self, frames, offset: int) -> int:
        """Memory rows and cross K/V of encoder ``frames`` written from frame ``offset`` on; returns the frame
        count after them."""
        end = min(offset + frames.shape[0], self.frame_cap)
        if end <= offset:
            return offset
        frames = frames[: end - offset]
        for (k, v), (xk, xv) in zip(self.m.cross_kv(self.m.memory(frames, offset)), self.xkv):
            self.B.write(xk, (slice(None), slice(offset, end)), k)
            self.B.write(xv, (slice(None), slice(offset, end)), v)
        return end

    def provisional(self) -> int:
        """Frames of the audio fed so far, the not yet final ones computed with the look-ahead that exists and
        written temporarily; the state is unchanged."""
        n = self.state.n_final
        tail = self.encoder.provisional(self.state)
        return n if tail is None else self.write_memory(tail, n)

    def finalise(self, state: EncoderState, live: bool = False) -> int:
        """Frames of the audio encoded into ``state`` (this segment's, or a snapshot of it) with every pending
        frame made final and written; ``live``: ``state`` is the segment's own, which is then spent."""
        fin, x = self.encoder.advance(state, np.zeros(0, np.float32), final=True)
        if live:
            self.state = fin
        n = fin.n_final
        return n if x is None else self.write_memory(x, n - x.shape[0])

    def refine(self, first: int, last: int) -> tuple[int, int]:
        """Speech span ``(first, last)`` (session samples) tightened to the audio within 20 dB of the segment's
        speech level (the VAD's hops are 32 ms and its probability trails the sound)."""
        r, s0 = np.asarray(self.rms), self.start_sample
        i0 = max(0, (first - HOP - s0) // WIN)
        i1 = min(len(r), (last - s0) // WIN)
        if i1 - i0 < 2:
            return first, last
        seg = r[i0:i1]
        loud = np.nonzero(seg >= max(0.1 * np.percentile(seg, 90), 1e-3))[0]
        if len(loud) == 0:
            return first, last
        return s0 + (i0 + loud[0]) * WIN, s0 + (i0 + loud[-1] + 1) * WIN
