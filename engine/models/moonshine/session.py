"""Moonshine sessions.

``WholeSession`` (``vad=False``): the whole input is one segment, decoded once at ``finish()``; its ids
equal the reference ``generate()`` on the same audio. The segment is limited to the decoder's 4096 memory
positions (81.92 s); longer input is refused as soon as it arrives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...audio import SAMPLE_RATE
from ...audio.finite import door
from ...errors import UsageError
from ...events import CaptionEvent, Line
from .decoding import greedy, token_cap

if TYPE_CHECKING:
    from .model import MoonshineModel


def max_segment_samples(model: MoonshineModel) -> int:
    """The longest segment the decoder can attend to, in samples (4096 encoder frames of 320 samples)."""
    e = model.cfg.encoder
    return model.cfg.max_position_embeddings * 4 * e.frame_len


def transcribe_segment(model: MoonshineModel, audio: np.ndarray, repetition_stop: int = 0) -> list[int]:
    """Greedy ids (after the start token, up to and including EOS) for one segment of 16 kHz audio; none for
    a segment shorter than one encoder frame (5 ms), which the encoder cannot see."""
    if len(audio) < model.cfg.encoder.frame_len:
        return []
    enc, valid = model.encode(audio)
    xkv = model.cross_kv(model.memory(enc))
    return greedy(model, xkv, token_cap(len(audio), model.cfg.encoder.sample_rate), valid, repetition_stop)


class WholeSession:
    """Buffers all audio; ``finish()`` commits one line for the whole input."""

    def __init__(self, model: MoonshineModel):
        self.model = model
        self.limit = max_segment_samples(model)
        self.invalid_samples = 0  # NaN/inf/huge samples zeroed at the door (engine.audio.finite)
        self.reset()

    def reset(self) -> None:
        """Forget all audio fed so far."""
        self._chunks: list[np.ndarray] = []
        self._n = 0

    def feed(self, pcm: np.ndarray) -> list[CaptionEvent]:
        """Buffer float32 16 kHz mono samples; no events until ``finish``."""
        pcm, bad = door(pcm)
        self.invalid_samples += bad
        if self._n + len(pcm) > self.limit:
            raise UsageError(
                f"Without voice-activity segmentation the input must be at most {self.limit / SAMPLE_RATE:.1f} s "
                "(the model's 4096-frame limit); drop --no-vad for longer audio."
            )
        self._chunks.append(pcm)
        self._n += len(pcm)
        return []

    def finish(self) -> list[CaptionEvent]:
        """Decode everything fed as one segment and commit it (no event for less than one 5 ms frame of audio)."""
        audio = np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.float32)
        self.reset()
        if len(audio) < self.model.cfg.encoder.frame_len:
            return []
        ids = transcribe_segment(self.model, audio)
        text = self.model.tokenizer.decode(ids) if self.model.tokenizer else ""
        line = Line(text=text.strip(), start=0.0, end=len(audio) / SAMPLE_RATE, tokens=tuple(ids))
        return [CaptionEvent(committed=(line,))]
