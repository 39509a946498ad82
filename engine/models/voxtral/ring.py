"""A position-addressed KV ring: slot = absolute position mod capacity, masked by position.

Softmax attention does not care about key order, so keys live wherever their position maps and a mask
built from the stored positions selects the window. Capacity must be at least ``window - 1 + block`` for
blocks of ``block`` new positions written before they attend (so no key still needed is overwritten).
The ring grows (doubling, up to ``max_capacity``) so short sessions hold little memory.
"""

from __future__ import annotations

import numpy as np


class KVRing:
    """Per-layer K/V buffers ``[Hkv, cap, hd]`` plus the absolute position held by each slot (-1 empty)."""

    def __init__(self, B, n_layers: int, kv_heads: int, head_dim: int, max_capacity: int, dtype: str,
                 initial: int = 256):
        self.B, self.n_layers, self.shape, self.dtype = B, n_layers, (kv_heads, head_dim), dtype
        self.max_capacity = max_capacity
        self.cap = 0
        self.pos = np.zeros(0, np.int64)
        self.k: list = []
        self.v: list = []
        self._resize(min(initial, max_capacity))

    def _resize(self, cap: int) -> None:
        B, (h, d) = self.B, self.shape
        old_pos, old_k, old_v = self.pos, self.k, self.v
        self.k = [B.zeros((h, cap, d), self.dtype) for _ in range(self.n_layers)]
        self.v = [B.zeros((h, cap, d), self.dtype) for _ in range(self.n_layers)]
        self.pos = np.full(cap, -1, np.int64)
        valid = np.nonzero(old_pos >= 0)[0]
        if len(valid):
            slots = old_pos[valid] % cap
            for i in range(self.n_layers):
                self.k[i] = B.write(self.k[i], (slice(None), slots), old_k[i][:, B.asarray(valid, "int32")])
                self.v[i] = B.write(self.v[i], (slice(None), slots), old_v[i][:, B.asarray(valid, "int32")])
            self.pos[slots] = old_pos[valid]
        self.cap = cap

    def advance(self, positions: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
        """Claim slots for ``positions`` (ascending, contiguous); returns ``(slots, mask [n, cap])`` where
        the mask lets query q see keys q - window + 1 .. q."""
        need = min(int(positions[-1]) + 1, self.max_capacity)
        if need > self.cap:
            cap = self.cap
            while cap < need:
                cap *= 2
            self._resize(min(cap, self.max_capacity))
        slots = positions % self.cap
        self.pos[slots] = positions
        q = positions[:, None]
        p = self.pos[None, :]
        mask = (p >= 0) & (p <= q) & (p > q - window)
        return slots, mask

    def write(self, layer: int, slots: np.ndarray, k, v) -> None:
        """Store ``k, v [Hkv, n, hd]`` for one layer at ``slots``."""
        B = self.B
        if len(slots) == 1 or np.all(np.diff(slots) == 1):
            idx = (slice(None), slice(int(slots[0]), int(slots[-1]) + 1))
        else:
            idx = (slice(None), slots)
        self.k[layer] = B.write(self.k[layer], idx, k)
        self.v[layer] = B.write(self.v[layer], idx, v)
