"""RoPE angles from absolute positions, computed in float64 (exact at hours-long positions), and a cache
of their cos/sin rows on the backend so a streaming step does no host work."""

from __future__ import annotations

import numpy as np


def inv_freq(rot_dim: int, theta: float) -> np.ndarray:
    """``theta^(-2i/rot_dim)`` for i < rot_dim/2, float64."""
    return 1.0 / (theta ** (np.arange(0, rot_dim, 2, dtype=np.float64) / rot_dim))


def rope_tables(positions: np.ndarray, inv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """cos/sin ``[n, len(inv)]`` of ``positions * inv``, computed in float64."""
    ang = np.asarray(positions, dtype=np.float64)[:, None] * inv[None, :]
    return np.cos(ang), np.sin(ang)


class RopeRows:
    """Backend cos/sin rows for a run of positions, refilled from the float64 formula only when a request
    leaves the rows held: once per ``chunk`` positions of a stream instead of once per step."""

    def __init__(self, B, inv: np.ndarray, dtype: str, chunk: int = 1024):
        self.B, self.inv, self.dtype, self.chunk = B, inv, dtype, chunk
        self.base, self.size, self.cos, self.sin = 0, 0, None, None

    def __call__(self, start: int, n: int):
        """``(cos, sin)`` backend arrays ``[n, len(inv)]`` for positions ``start .. start+n-1``."""
        if self.cos is None or start < self.base or start + n > self.base + self.size:
            self.size = max(self.chunk, n)
            cos, sin = rope_tables(np.arange(start, start + self.size), self.inv)
            self.cos, self.sin = self.B.asarray(cos, self.dtype), self.B.asarray(sin, self.dtype)
            self.base = start
        o = start - self.base
        if o == 0 and n == self.size:
            return self.cos, self.sin
        return self.cos[o : o + n], self.sin[o : o + n]
