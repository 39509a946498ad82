"""The engine's sample door: every session's ``feed`` passes its input through :func:`door`.

A single NaN reaching a model poisons its state for as long as that state lives (Voxtral's encoder ring
held 6 ms of NaN samples for ~22 minutes of silence), so non-finite samples (NaN, +-inf) become zeros here
and are counted; sessions keep the count in ``nonfinite_samples`` for the CLI's warning and the app's
status bar. Finite samples pass unchanged, however large.
"""

from __future__ import annotations

import numpy as np


def door(pcm: np.ndarray) -> tuple[np.ndarray, int]:
    """``pcm`` as float32 ``[n]`` with non-finite samples set to 0.0, and how many there were.

    The input is never modified; a copy is made only when something is replaced (or the dtype/shape
    differs). No NumPy warning is raised.
    """
    x = np.asarray(pcm, dtype=np.float32).reshape(-1)
    bad = ~np.isfinite(x)
    n = int(np.count_nonzero(bad))
    if n:
        x = np.where(bad, np.float32(0.0), x)
    return x, n


def describe(samples: int, rate: int = 16000) -> str:
    """One sentence for the user about ``samples`` replaced samples (``rate`` Hz)."""
    ms = samples * 1000 / rate
    span = f"{ms:.0f} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"
    return (f"{samples} sample{'s' if samples != 1 else ''} ({span}) of the audio were not numbers (NaN or "
            "infinite) and were replaced by silence.")
