"""Voxtral's log-mel features (128 Slaney mels, n_fft 400, hop 160, periodic Hann), offline and incremental.

Parity contract: ``log_mel(x)`` equals the reference ``VoxtralRealtimeFeatureExtractor`` (center=True,
reflect padding, last frame dropped, ``global_log_mel_max`` 1.5) for any stream that starts and ends with at
least 200 zero samples, which the streaming protocol's left and right padding guarantees (reflecting zeros
gives zeros). ``MelStream`` emits frame k as soon as samples up to 160 k + 200 exist, and its frames equal
``log_mel`` of the whole stream.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from ...audio import SAMPLE_RATE

N_FFT, HOP, N_MELS = 400, 160, 128
LOG_FLOOR = 1.5 - 8.0  # global_log_mel_max - 8


def _hz_to_mel(f: np.ndarray) -> np.ndarray:
    """Slaney mel scale: linear below 1 kHz, logarithmic above."""
    f = np.asarray(f, dtype=np.float64)
    lin = 3.0 * f / 200.0
    return np.where(f >= 1000.0, 15.0 + np.log(np.maximum(f, 1e-9) / 1000.0) * (27.0 / np.log(6.4)), lin)


def _mel_to_hz(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float64)
    return np.where(m >= 15.0, 1000.0 * np.exp((m - 15.0) * (np.log(6.4) / 27.0)), 200.0 * m / 3.0)


@cache
def mel_filters(n_mels: int = N_MELS) -> np.ndarray:
    """Slaney-normalised triangular filters ``[201, n_mels]`` over 0..8 kHz (librosa / HF equivalent)."""
    fft_freqs = np.linspace(0, SAMPLE_RATE // 2, 1 + N_FFT // 2)
    mel_pts = np.linspace(_hz_to_mel(0.0), _hz_to_mel(8000.0), n_mels + 2)
    f = _mel_to_hz(mel_pts)
    slopes = f[None, :] - fft_freqs[:, None]
    fd = np.diff(f)
    down = -slopes[:, :-2] / fd[:-1]
    up = slopes[:, 2:] / fd[1:]
    w = np.maximum(0.0, np.minimum(down, up)).astype(np.float32)
    return w * (2.0 / (f[2 : n_mels + 2] - f[:n_mels]))[None, :].astype(np.float32)


@cache
def _window() -> np.ndarray:
    return (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)).astype(np.float64)  # periodic Hann


def frames_to_mel(windows: np.ndarray, n_mels: int = N_MELS) -> np.ndarray:
    """``[n, 400]`` raw sample windows -> ``[n, n_mels]`` float32 log-mel features."""
    spec = np.fft.rfft(windows.astype(np.float64) * _window(), n=N_FFT, axis=-1)
    power = (spec.real**2 + spec.imag**2).astype(np.float32)
    mel = power @ mel_filters(n_mels)
    log = np.log10(np.maximum(mel, 1e-10))
    return ((np.maximum(log, LOG_FLOOR) + 4.0) / 4.0).astype(np.float32)


def log_mel(x: np.ndarray, n_mels: int = N_MELS) -> np.ndarray:
    """Offline features ``[len(x) // 160, n_mels]`` (frame k centred on sample 160 k)."""
    n = len(x) // HOP
    padded = np.concatenate(
        [np.zeros(N_FFT // 2, np.float32), np.asarray(x, np.float32), np.zeros(N_FFT // 2, np.float32)]
    )
    idx = np.arange(n)[:, None] * HOP + np.arange(N_FFT)[None, :]
    return frames_to_mel(padded[idx], n_mels) if n else np.zeros((0, n_mels), np.float32)


class MelStream:
    """Incremental ``log_mel``: ``push(samples)`` returns the newly computable frames ``[k, n_mels]``."""

    def __init__(self, n_mels: int = N_MELS):
        self.n_mels = n_mels
        self.buf = np.zeros(N_FFT // 2, np.float32)  # the virtual left padding
        self.buf_start = -(N_FFT // 2)  # absolute sample index of buf[0]
        self.frames = 0  # frames emitted so far

    def push(self, x: np.ndarray) -> np.ndarray:
        """Append samples; frames whose windows are complete come back (maybe none)."""
        self.buf = np.concatenate([self.buf, np.asarray(x, np.float32).reshape(-1)])
        end = self.buf_start + len(self.buf)  # samples available (exclusive)
        n_ready = max(0, (end - N_FFT // 2) // HOP + 1 - self.frames)
        if n_ready == 0:
            return np.zeros((0, self.n_mels), np.float32)
        starts = (self.frames + np.arange(n_ready)) * HOP - N_FFT // 2 - self.buf_start
        out = frames_to_mel(self.buf[starts[:, None] + np.arange(N_FFT)[None, :]], self.n_mels)
        self.frames += n_ready
        keep = self.frames * HOP - N_FFT // 2  # first sample the next frame needs
        self.buf = self.buf[keep - self.buf_start :]
        self.buf_start = keep
        return out
