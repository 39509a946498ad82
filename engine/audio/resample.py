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


def downmix(block: np.ndarray, channels: int | None = None) -> np.ndarray:
    """Return float32 mono: ``[n]`` is taken as mono, ``[n, c]`` is averaged over its channels.

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
    return x.astype(np.float32, copy=False).mean(axis=1, dtype=np.float32)


def resample(x: np.ndarray, in_rate: float, out_rate: float = SAMPLE_RATE) -> np.ndarray:
    """Resample mono float32 ``x`` from ``in_rate`` to ``out_rate`` in one go (a copy when equal)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if in_rate == out_rate or x.size == 0:
        return x.copy()
    return np.asarray(soxr.resample(x, in_rate, out_rate, quality=QUALITY), dtype=np.float32)


class Resampler:
    """Stateful streaming resampler: any block sizes in, float32 mono at ``out_rate`` out.

    ``process(block)`` accepts ``[n]`` (mono) or ``[n, channels]`` (downmixed by the mean) samples and
    returns what is ready; ``flush()`` returns the filter's tail and readies the resampler for a new,
    independent stream. With ``in_rate == out_rate`` it only downmixes (no delay, no filtering).
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
        if self.in_rate != self.out_rate:
            self._stream = soxr.ResampleStream(self.in_rate, self.out_rate, 1, dtype="float32", quality=QUALITY)

    def process(self, block: np.ndarray) -> np.ndarray:
        """Feed one block; return the resampled mono samples that are ready (possibly none)."""
        x = np.ascontiguousarray(downmix(block, self.channels))
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
