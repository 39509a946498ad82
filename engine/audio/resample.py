"""Resampling to the engine's rate (16 kHz mono float32) with soxr, offline and streaming.

:func:`resample` is the offline path used by :func:`engine.audio.read_audio`; :class:`Resampler` is the
streaming path for live capture. Both use the same soxr quality, and soxr's streaming filter is exact
across block boundaries, so the concatenated output of a :class:`Resampler` (all ``process`` calls plus
``flush``) does not depend on how the input was cut into blocks and equals :func:`resample` of the
whole signal (to float rounding).
"""

from __future__ import annotations

import numpy as np
import soxr

SAMPLE_RATE = 16000
QUALITY = "HQ"


def downmix(block: np.ndarray, channels: int | None = None, signs: np.ndarray | None = None) -> np.ndarray:
    """Return float32 mono: ``[n]`` is taken as mono, ``[n, c]`` is averaged over its channels, each times its
    entry of ``signs`` (+1 or -1) when given.

    When ``channels`` is given, a 2-D block must have exactly that many columns (ValueError otherwise).
    """
    x = np.asarray(block)
    if x.ndim == 1:
        return x.astype(np.float32, copy=False)
    if x.ndim != 2:
        raise ValueError(f"audio blocks must be [n] or [n, channels], got shape {x.shape}")
    if channels is not None and x.shape[1] != channels:
        raise ValueError(f"expected {channels} channel(s), got a block of shape {x.shape}")
    if x.shape[1] == 1:
        return x[:, 0].astype(np.float32, copy=False)
    x = x.astype(np.float32, copy=False)
    if signs is not None and (signs < 0).any():
        x = x * signs.astype(np.float32)
    return x.mean(axis=1, dtype=np.float32)


class Polarity:
    """The sign each channel gets in the downmix, so that a channel wired in opposite phase (L = -R: some
    recordings, some microphones' second capsule) adds to the first instead of cancelling it to silence.

    ``update(block)`` looks at a ``[n, c]`` block: a channel whose samples run against channel 0's (correlation
    under -0.5, both above -80 dBFS, over a block of 64 samples or more) gets -1, one that runs with them (over
    0.5) +1; otherwise its sign stays. Ordinary stereo (one voice in both, or a voice per channel) keeps +1
    throughout: the plain mean. Until the first block that tells (a sound's first few milliseconds), such a
    channel still cancels."""

    FLOOR = 1e-8  # mean square below which a channel says nothing (-80 dBFS)
    SAMPLES = 64  # fewer samples than this say nothing either (their correlation can be large by chance)

    def __init__(self, channels: int) -> None:
        self.signs = np.ones(channels, np.float32)

    def mix(self, block: np.ndarray) -> np.ndarray:
        """``update`` with ``[n, c]`` ``block``, then its float32 mono downmix with these signs."""
        self.update(block)
        return downmix(block, len(self.signs), self.signs)

    def update(self, block: np.ndarray) -> None:
        x = np.asarray(block, np.float32)
        if x.ndim != 2 or not 2 <= x.shape[1] == len(self.signs) or len(x) < self.SAMPLES:
            return  # (a block of another width is the downmix's error to raise)
        energy = np.einsum("ij,ij->j", x, x, dtype=np.float64)
        if energy[0] < self.FLOOR * len(x):
            return
        cross = x[:, 0].astype(np.float64) @ x
        for i in range(1, x.shape[1]):
            if energy[i] >= self.FLOOR * len(x):
                corr = cross[i] / np.sqrt(energy[0] * energy[i])
                if abs(corr) > 0.5:
                    self.signs[i] = 1.0 if corr > 0 else -1.0


def resample(x: np.ndarray, in_rate: float, out_rate: float = SAMPLE_RATE) -> np.ndarray:
    """Resample mono float32 ``x`` from ``in_rate`` to ``out_rate`` in one go (a copy when equal)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if in_rate == out_rate or x.size == 0:
        return x.copy()
    return np.asarray(soxr.resample(x, in_rate, out_rate, quality=QUALITY), dtype=np.float32)


class Resampler:
    """Stateful streaming resampler: any block sizes in, float32 mono at ``out_rate`` out.

    ``process(block)`` accepts ``[n]`` (mono) or ``[n, channels]`` (downmixed by the mean, a channel in
    opposite phase turned over first: :class:`Polarity`) samples and returns what is ready; ``flush()`` returns
    the filter's tail and readies the resampler for a new, independent stream. With ``in_rate == out_rate`` it
    only downmixes (no delay, no filtering). Output does not depend on the block cuts as long as the channels'
    polarity does not change within the stream (a channel is either in phase or opposite throughout).
    """

    def __init__(self, in_rate: float, out_rate: float = SAMPLE_RATE, channels: int = 1) -> None:
        if not in_rate > 0 or not out_rate > 0:
            raise ValueError(f"sample rates must be positive, got {in_rate} and {out_rate}")
        if channels < 1:
            raise ValueError(f"channels must be at least 1, got {channels}")
        self.in_rate = in_rate
        self.out_rate = out_rate
        self.channels = channels
        self._stream: soxr.ResampleStream | None = None
        self._new_stream()

    def _new_stream(self) -> None:
        self._polarity = Polarity(self.channels)
        if self.in_rate != self.out_rate:
            self._stream = soxr.ResampleStream(self.in_rate, self.out_rate, 1, dtype="float32", quality=QUALITY)

    def process(self, block: np.ndarray) -> np.ndarray:
        """Feed one block; return the resampled mono samples that are ready (possibly none)."""
        x = np.ascontiguousarray(self._polarity.mix(block) if self.channels > 1 else downmix(block, self.channels))
        if self._stream is None:
            return x.copy()
        return self._stream.resample_chunk(x, last=False)

    def flush(self) -> np.ndarray:
        """End the stream: return the remaining samples and reset for the next stream."""
        if self._stream is None:
            return np.zeros(0, dtype=np.float32)
        tail = self._stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True)
        self._new_stream()
        return tail

    def reset(self) -> None:
        """Drop any buffered input and start a fresh stream."""
        self._new_stream()
