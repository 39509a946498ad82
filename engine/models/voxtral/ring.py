"""A position-addressed KV ring: slot = absolute position mod capacity.

Positions are written in order from 0 (a session never skips or rewinds), so the position held by every
slot follows from the number written: slot j holds ``last - ((last - j) mod cap)``. Softmax attention
does not care about key order, so the keys live wherever their position maps and, once the ring has
wrapped, a mask computed on the device from that formula (``Backend.ring_mask``) selects the window.
Before it wraps, a single new position sees every slot written so far and needs no mask at all (the common
case: the decoder's 8192 window lasts 11 minutes). Nothing is built on the host per step.

Capacity must be at least ``window - 1 + block`` for blocks of ``block`` new positions written before they
attend (so no key still needed is overwritten). Where the backend's zero buffers cost memory only once
written (``Backend.lazy_zeros``: NumPy outside Windows) the ring has its full capacity from the start, in
``kv_zeros`` buffers (the CPU twin's shared memory, so it can take half of the heads); elsewhere (MLX,
Windows) it grows, doubling up to ``max_capacity``, so short sessions hold little memory. Either way a step
sees the same keys in the same slots: a ring only grows before it has wrapped, so growing is a plain prefix copy.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    """Where a block of new positions goes: ``spans`` of ``(slot, offset in block, length)``; attend to
    slots ``[0, keys)`` under ``mask`` (a backend bool ``[n, keys]``, or None = all of them, causally
    ordered already)."""

    spans: tuple[tuple[int, int, int], ...]
    keys: int
    mask: object | None


class KVRing:
    """Per-layer K/V buffers ``[Hkv, cap, hd]`` for positions ``0, 1, 2, ...`` written in order."""

    def __init__(
        self, B, n_layers: int, kv_heads: int, head_dim: int, max_capacity: int, dtype: str, initial: int = 256
    ):
        self.B, self.n_layers, self.shape, self.dtype = B, n_layers, (kv_heads, head_dim), dtype
        self.max_capacity = max_capacity
        self.cap = 0
        self.written = 0  # positions written so far (the next position to write)
        self.k: list = []
        self.v: list = []
        self._resize(max_capacity if B.lazy_zeros else min(initial, max_capacity))

    def _resize(self, cap: int) -> None:
        B, (h, d) = self.B, self.shape
        old_k, old_v, keep = self.k, self.v, min(self.written, self.cap)
        self.k = [B.kv_zeros((h, cap, d), self.dtype) for _ in range(self.n_layers)]
        self.v = [B.kv_zeros((h, cap, d), self.dtype) for _ in range(self.n_layers)]
        if keep:  # never wrapped yet (growth happens first), so the old ring is a prefix
            for i in range(self.n_layers):
                self.k[i] = B.write(self.k[i], (slice(None), slice(0, keep)), old_k[i][:, :keep])
                self.v[i] = B.write(self.v[i], (slice(None), slice(0, keep)), old_v[i][:, :keep])
        self.cap = cap

    def advance(self, start: int, n: int, window: int) -> Claim:
        """Claim slots for positions ``start .. start+n-1`` (``start`` must be the next position); the
        returned mask lets query q see keys q - window + 1 .. q."""
        if start != self.written:
            raise ValueError(f"KV ring positions must follow on: expected {self.written}, got {start}")
        end = start + n
        need = min(end, self.max_capacity)
        if need > self.cap:
            cap = self.cap
            while cap < need:
                cap *= 2
            self._resize(min(cap, self.max_capacity))
        cap = self.cap
        spans, off = [], 0
        while off < n:
            slot = (start + off) % cap
            ln = min(n - off, cap - slot)
            spans.append((slot, off, ln))
            off += ln
        self.written = end
        no_mask = n == 1 and end <= cap and end <= window  # one query, every slot written so far in its window
        mask = None if no_mask else self.B.ring_mask(start, n, window, cap)
        return Claim(tuple(spans), min(end, cap), mask)

    def write(self, layer: int, claim: Claim, k, v) -> None:
        """Store ``k, v [Hkv, n, hd]`` for one layer in the claimed slots."""
        B = self.B
        for slot, off, ln in claim.spans:
            idx = (slice(None), slice(slot, slot + ln))
            src = (slice(None), slice(off, off + ln))
            self.k[layer] = B.write(self.k[layer], idx, k if ln == k.shape[1] else k[src])
            self.v[layer] = B.write(self.v[layer], idx, v if ln == v.shape[1] else v[src])

    def keys(self, layer: int, claim: Claim) -> tuple:
        """The K and V slots ``[:, :claim.keys]`` of one layer to attend over."""
        k, v = self.k[layer], self.v[layer]
        if claim.keys == self.cap:
            return k, v
        return k[:, : claim.keys], v[:, : claim.keys]
