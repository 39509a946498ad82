"""Softmax attention for the NumPy backend: in place, and over a mask's band only.

Dense (no mask, or a few queries, e.g. a decoder step): scores, in-place softmax, one product into the result.

Windowed (a mask that shows each query a band of keys, e.g. Moonshine's encoder: 16 keys back, 3 ahead):
the queries are cut into blocks of ``SUB``; each block gets the narrowest run of ``W`` keys that covers
every key its rows may see (the same ``W`` for every block, so that all blocks go through one stacked
product), gathered with the mask. A block of 128 queries against 146 keys then does 4 x 32 x ~50 scores
instead of 128 x 146, in ~12 NumPy calls for all blocks together. The masked keys a block gathers
contribute exp(-inf) = 0, as in the full row. A row that sees no key at all takes the dense path (whose
NaN the reference produces too). Heads are split over ``cpu_pool`` when the work is large. The band of a mask
is remembered for the next few calls with an equal mask (an encoder's layers share theirs), and the windowed
softmax runs on ONNX Runtime's kernel when the backend passes it (one pass over the short rows, where NumPy's
reductions along a 34-wide axis cost more than the two products: 0.31 of ~0.8 ms for a Moonshine small layer).

A dense attention over K/V in the twin's shared arena (``cpu_twin``: Moonshine's cross-attention memory,
Voxtral's KV rings, masked or not) hands the second half of the heads to the twin process; every head is
computed by the same code either way, so the result does not depend on it (tested bit for bit).
"""

from __future__ import annotations

import threading

import numpy as np

from . import cpu_pool

SUB = 16  # queries per block of the windowed path
WINDOWED_MIN = 64  # queries from which a mask is looked at for its band
PAR_MACS = 1 << 22  # heads x queries x keys x head-dim from which heads are split over cpu_pool
TWIN_BYTES = 256 << 10  # K/V from this size (in the twin's arena) are split by heads with the twin


def attend(q, k, v, scale: float, mask=None, twin=None, softmax=None) -> np.ndarray:
    """``softmax(q k^T * scale, mask) v`` for ``q [Hq, Tq, d]``, ``k, v [Hkv, Tk, d]`` (Hq a multiple of Hkv),
    ``mask [Tq, Tk]`` boolean (True = may attend) or None; returns ``[Hq, Tq, d]`` float32. ``twin``: the
    backend's ``cpu_twin.Twin``, which may take half of the heads (same result). ``softmax``: a row-wise
    softmax over a float32 ``[rows, cols]`` array (``ort_ops``) for the windowed path, or None for NumPy's."""
    hq, hkv = q.shape[0], k.shape[0]
    if hq != hkv:  # grouped-query: fold the query groups into the time axis, no K/V copies
        g, tq = hq // hkv, q.shape[1]
        m = None if mask is None else np.tile(mask, (g, 1))
        out = attend(q.reshape(hkv, g * tq, q.shape[2]), k, v, scale, m, twin, softmax)
        return out.reshape(hq, tq, out.shape[-1])
    if mask is not None and q.shape[1] >= WINDOWED_MIN:
        band = _known_band(np.asarray(mask))
        if band is not None:
            return _windowed(q, k, v, scale, *band, softmax)
    out = np.empty((hq, q.shape[1], v.shape[2]), np.float32)
    if twin is not None and hq >= 2 and k.nbytes + v.nbytes >= TWIN_BYTES:
        h0 = hq // 2
        ticket = twin.submit_attention(q, k, v, scale, h0, mask)
        if ticket is not None:
            dense(q[:h0], k[:h0], v[:h0], scale, mask, out[:h0])
            theirs = twin.collect(ticket)
            if theirs is None:  # no answer in time (the twin is gone): these heads here too
                dense(q[h0:], k[h0:], v[h0:], scale, mask, out[h0:])
            else:
                out[h0:] = theirs[: out[h0:].size].reshape(out[h0:].shape)
            return out
    dense(q, k, v, scale, mask, out)
    return out


def dense(q, k, v, scale: float, mask, out: np.ndarray) -> None:
    """``out[:] = softmax(q k^T * scale, masked) v`` for one block of ``[H, T, d]`` heads, in place."""
    if q.shape[1] == 1 and mask is None:  # one query per head (a decoder step): 6 calls instead of 10
        h, _, d = q.shape
        s = np.matmul(k, (q * np.float32(scale)).reshape(h, d, 1)).reshape(h, 1, k.shape[1])
        s -= np.maximum.reduce(s, axis=-1, keepdims=True)
        np.exp(s, out=s)
        np.matmul(s, v, out=out)
        out /= np.add.reduce(s, axis=-1, keepdims=True)  # over d values after the product, not T before it
        return
    if k.shape[1] >= 64:  # K @ q^T: NumPy's stacked matmul against a transposed K view runs 2-3x slower
        qt = np.empty((q.shape[0], q.shape[2], q.shape[1]), np.float32)
        np.multiply(q.transpose(0, 2, 1), np.float32(scale), out=qt)
        s = np.ascontiguousarray(np.matmul(k, qt).transpose(0, 2, 1))
    else:
        s = np.matmul(q * np.float32(scale), k.transpose(0, 2, 1))
    if mask is not None:
        np.copyto(s, np.float32(-np.inf), where=~np.asarray(mask))
    _softmax_(s)
    np.matmul(s, v, out=out)


def _softmax_(s: np.ndarray) -> None:
    s -= np.maximum.reduce(s, axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= np.add.reduce(s, axis=-1, keepdims=True)


def _band(mask: np.ndarray, sub: int):
    """``(idx [nb, W], seen [nb, sub, W])``: for each block of ``sub`` query rows the ``W`` keys it gathers and
    what its rows may see of them (the padding rows of the last block see everything and are dropped); None
    when some row sees no key, or when the band is not narrower than all keys."""
    tq, tk = mask.shape
    nb = -(-tq // sub)
    if not np.logical_or.reduce(mask, axis=1).all():
        return None
    rows = np.zeros((nb * sub, tk), bool)
    rows[:tq] = mask
    rows = rows.reshape(nb, sub, tk)
    cols = np.logical_or.reduce(rows, axis=1)
    lo = np.argmax(cols, axis=1)
    w = int((tk - np.argmax(cols[:, ::-1], axis=1) - lo).max())
    if 2 * w > tk:
        return None
    idx = np.minimum(lo, tk - w)[:, None] + np.arange(w)
    seen = np.take_along_axis(rows, np.broadcast_to(idx[:, None, :], (nb, sub, w)), axis=2)
    seen[-1, tq - (nb - 1) * sub :] = True
    return idx, seen


_bands: dict = {}  # (shape, packed mask bits) -> _band(mask, SUB), the last BANDS_KEPT masks
_bands_lock = threading.Lock()  # two models may encode on two threads
BANDS_KEPT = 8


def _known_band(mask: np.ndarray):
    """``_band(mask, SUB)``, from ``_bands`` when an equal mask came recently (packing and hashing a 500 x 520
    mask costs ~1/5 of finding its band)."""
    key = (mask.shape, np.packbits(mask).tobytes())
    with _bands_lock:
        band = _bands.pop(key, False)
    if band is False:
        band = _band(mask, SUB)
    with _bands_lock:
        _bands[key] = band  # most recent last
        while len(_bands) > BANDS_KEPT:
            del _bands[next(iter(_bands))]
    return band


def _windowed(q, k, v, scale: float, idx: np.ndarray, seen: np.ndarray, softmax=None) -> np.ndarray:
    h, tq, d = q.shape
    nb, sub, w = seen.shape
    out = np.empty((h, nb * sub, v.shape[2]), np.float32)
    hidden = ~seen

    def heads(a: int, b: int):
        def run():
            qb = np.zeros((b - a, nb * sub, d), np.float32)
            np.multiply(q[a:b], np.float32(scale), out=qb[:, :tq])
            s = np.matmul(qb.reshape(b - a, nb, sub, d), k[a:b][:, idx].swapaxes(-1, -2))  # [h, nb, SUB, W]
            np.copyto(s, np.float32(-np.inf), where=hidden)
            if softmax is None:
                _softmax_(s)
            else:
                s = softmax(s.reshape(-1, w)).reshape(s.shape)
            np.matmul(s, v[a:b][:, idx], out=out[a:b].reshape(b - a, nb, sub, v.shape[2]))

        return run

    parts = cpu_pool.CPUS if h * tq * w * d >= PAR_MACS and h >= cpu_pool.CPUS else 1
    edges = [h * i // parts for i in range(parts + 1)]
    cpu_pool.run([heads(a, b) for a, b in zip(edges[:-1], edges[1:])])
    return out[:, :tq]
