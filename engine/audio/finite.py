"""The engine's sample door: every session's ``feed`` passes its input through :func:`door`.

A single NaN reaching a model poisons its state for as long as that state lives (Voxtral's encoder ring
held 6 ms of NaN samples for ~22 minutes of silence); a finite sample of 1e30 overflows the log-mel power
to infinity and does the same. So samples that are not finite, or larger in magnitude than ``MAX_ABS``
(2^16: 96 dB above full scale, past even 16-bit integers mistakenly stored as floats), become zeros here
and are counted; sessions keep the count in ``invalid_samples`` for the CLI's warning and the app's status
bar. Every other sample passes unchanged.
"""

from __future__ import annotations

import numpy as np

from engine.audio.resample import SAMPLE_RATE
from engine.errors import AudioError

MAX_ABS = 65536.0


def door(pcm: np.ndarray) -> tuple[np.ndarray, int]:
    """``pcm`` as float32 ``[n]`` with invalid samples (NaN, +-inf, beyond +-``MAX_ABS``) set to 0.0, and
    how many there were.

    ``pcm`` is mono: one dimension, or two with one of them of size 1 (``[n, 1]`` or ``[1, n]``); its
    values are floating-point samples in -1..1 (an array of any float dtype, or a list of numbers, whole ones
    too). Anything else (more channels, an integer array (PCM), booleans, complex numbers, text) raises
    :class:`AudioError` with one sentence rather than turning into a wrong transcript. The input is never
    modified; a copy is made only when something is replaced (or the dtype/shape differs). No NumPy warning is
    raised.
    """
    x = _mono_floats(pcm)
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(x) <= MAX_ABS)  # NaN compares false
    n = int(np.count_nonzero(bad))
    if n:
        x = np.where(bad, np.float32(0.0), x)
    return x, n


def _mono_floats(pcm) -> np.ndarray:
    """``pcm`` as a 1-D float32 array, or :class:`AudioError` saying why it is not mono float samples."""
    try:
        a = np.asarray(pcm)
    except (ValueError, TypeError, RuntimeError):  # ragged nested lists; an array NumPy cannot take (bfloat16)
        if isinstance(pcm, (list, tuple)):
            raise AudioError("The audio samples must be a flat sequence of numbers (one channel).") from None
        raise AudioError(
            f"The audio samples ({type(pcm).__name__}) cannot be read as numbers; pass float32 samples in -1..1."
        ) from None
    if a.dtype.kind in "iu" and isinstance(pcm, (list, tuple)):  # [0, 0, 0]: a list of numbers; buffers are PCM
        a = a.astype(np.float64)
    if a.dtype.kind in "iu":
        bits = 8 * a.dtype.itemsize
        hint = f" (divide {bits}-bit PCM by {2 ** (bits - 1)})" if a.dtype.kind == "i" and bits in (16, 32) else ""
        raise AudioError(
            f"The audio samples are integers ({a.dtype}); sessions take floating-point samples in -1..1{hint}."
        )
    if a.dtype.kind != "f":
        kinds = {"b": "booleans", "c": "complex numbers", "U": "text", "S": "bytes"}
        kind = kinds.get(a.dtype.kind, "not numbers")
        raise AudioError(f"The audio samples are {kind}; sessions take floating-point samples in -1..1.")
    if a.ndim > 2 or (a.ndim == 2 and min(a.shape) > 1):
        shape = " x ".join(str(d) for d in a.shape)
        raise AudioError(
            f"The audio has shape {shape}, not one channel; mix it down or pick a channel before feeding it."
        )
    return np.asarray(a, dtype=np.float32).reshape(-1)


def span_text(samples: int, rate: int = SAMPLE_RATE) -> str:
    """How long ``samples`` samples at ``rate`` Hz last: ``"120 ms"``, or ``"12.5 s"`` from ten seconds on."""
    ms = samples * 1000 / rate
    return f"{ms:.0f} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"


def describe(samples: int, rate: int = SAMPLE_RATE) -> str:
    """One sentence for the user about ``samples`` replaced samples (``rate`` Hz)."""
    span = span_text(samples, rate)
    return (
        f"{samples} sample{'s' if samples != 1 else ''} ({span}) of the audio were not valid numbers (NaN, "
        "infinite or absurdly large) and were replaced by silence."
    )
