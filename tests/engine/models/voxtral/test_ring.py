"""The KV ring and the RoPE row cache against brute force: every slot's position, the window mask, the
growth (MLX; a NumPy ring has its full capacity from the start), on both backends, for blocks that wrap and
for single steps; RoPE rows equal the float64 formula."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.backends import get_backend
from engine.models.rope import RopeRows, inv_freq, rope_tables
from engine.models.voxtral.ring import KVRing


def brute(history: dict[int, float], start: int, n: int, window: int, keys: int, cap: int):
    """Expected visibility ``[n, keys]`` from the slot contents we wrote ourselves."""
    want = np.zeros((n, keys), bool)
    for qi in range(n):
        q = start + qi
        for s in range(keys):
            p = history.get(s)
            want[qi, s] = p is not None and q - window < p <= q
    return want


@pytest.mark.parametrize("backend", ["numpy", "mlx"])
@pytest.mark.parametrize("window,block,max_cap", [(6, 1, 6), (6, 4, 9), (16, 3, 20), (5, 7, 11)])
def test_ring_holds_the_window_and_masks_it_exactly(backend, window, block, max_cap):
    B = get_backend(backend)
    ring = KVRing(B, 1, 1, 1, max_cap, "float32", initial=2)
    slots: dict[int, float] = {}  # slot -> position, from the values actually stored
    pos = 0
    for step in range(40):
        n = block if step % 3 else 1  # mixed block sizes (single steps between blocks)
        claim = ring.advance(pos, n, window)
        val = np.arange(pos, pos + n, dtype=np.float32).reshape(1, n, 1)
        ring.write(0, claim, B.asarray(val), B.asarray(val))
        stored = B.to_numpy(ring.k[0])[0, :, 0]
        slots = {s: float(stored[s]) for s in range(claim.keys) if s < len(stored)}
        # slots never written hold 0.0 like position 0; only position 0 may legitimately be 0
        seen = {s: p for s, p in slots.items() if p != 0.0 or s == 0}
        assert claim.keys == min(pos + n, ring.cap)
        mask = np.ones((n, claim.keys), bool) if claim.mask is None else B.to_numpy(claim.mask)
        if claim.mask is None:
            assert n == 1
        assert (mask == brute(seen, pos, n, window, claim.keys, ring.cap)).all(), (step, pos, n)
        # every query sees exactly its window (no key it needs was overwritten)
        assert (mask.sum(axis=1) == np.minimum(np.arange(pos, pos + n) + 1, window)).all()
        pos += n
    assert ring.cap <= max_cap


def test_ring_refuses_positions_out_of_order():
    ring = KVRing(get_backend("numpy"), 1, 1, 1, 8, "float32")
    ring.advance(0, 3, 4)
    with pytest.raises(ValueError):
        ring.advance(5, 1, 4)


@pytest.mark.parametrize("backend", ["numpy", "mlx"])
def test_rope_cache_rows_equal_the_float64_formula(backend):
    B = get_backend(backend)
    rc = RopeRows(B, inv_freq(64, 1e6), "float32")
    for start, n in [(0, 1), (1, 4), (1020, 8), (2_000_000, 1), (2_000_001, 64), (5, 3000)]:
        cos, sin = rc(start, n)
        c, s = rope_tables(np.arange(start, start + n), inv_freq(64, 1e6))
        assert np.abs(B.to_numpy(cos) - c).max() < 1e-6 and np.abs(B.to_numpy(sin) - s).max() < 1e-6


def rss_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="Linux")
def test_a_numpy_ring_has_its_full_capacity_and_costs_memory_only_where_written():
    """Voxtral's decoder ring at the real size (8 KV heads x 8255 slots x 128, 34 MB per layer and side): a short
    session writes a few positions and must not hold the whole window in memory, nor keep it once dropped."""
    import gc

    from engine.backends.numpy_backend import NumpyBackend

    B = NumpyBackend()
    gc.collect()
    before = rss_kb()
    ring = KVRing(B, 4, 8, 128, 8255, "float32")
    assert ring.cap == 8255  # no growth: the keys a step sees stay where they were written
    claim = ring.advance(0, 40, 8192)
    kv = B.asarray(np.ones((8, 40, 128), np.float32))
    for layer in range(4):
        ring.write(layer, claim, kv, kv)
    grown = rss_kb() - before
    assert grown < 16 * 1024, f"{grown} kB for 40 positions (the full ring: {4 * 2 * 8255 * 8 * 128 * 4 >> 10} kB)"
    assert B.to_numpy(ring.keys(3, claim)[0]).sum() == 8 * 40 * 128
    del ring, claim
    gc.collect()
    B.twin.stop()
    assert rss_kb() - before < 16 * 1024
