"""MLX's affine quantization written for NumPy (the NumPy backend's ``quantize``): each group of
``group_size`` columns of a float32 ``[out, in]`` matrix becomes ``bits``-wide values ``q`` with a float32
scale and bias, ``w ~ q * scale + bias``, packed least significant bit first into uint32 words.

Bit-identical to ``mlx.core.quantize`` on float32 input (same float32 operations in the same order: range
over the group, the scale nudged so that the edge of larger magnitude is exact, round half to even), so a
cached copy reads the same on either backend. NumPy has no such routine, hence this module.
"""

from __future__ import annotations

import numpy as np

from .base import QuantizedWeight

_ROWS = 1024  # rows quantized at a time (bounds the temporaries)


def quantize_affine(w: np.ndarray, group_size: int, bits: int) -> QuantizedWeight:
    """The affine quantization of ``w [out, in]`` (``in`` a multiple of ``group_size``; bits 2, 4 or 8)."""
    w = np.asarray(w, dtype=np.float32)
    out_dim, in_dim = w.shape
    if in_dim % group_size or 32 % bits:
        raise ValueError(f"Cannot quantize {in_dim} columns in groups of {group_size} at {bits} bits.")
    groups, per_word = in_dim // group_size, 32 // bits
    packed = np.empty((out_dim, in_dim // per_word), np.uint32)
    scales = np.empty((out_dim, groups), np.float32)
    biases = np.empty((out_dim, groups), np.float32)
    n_bins = np.float32((1 << bits) - 1)
    shifts = np.arange(per_word, dtype=np.uint32) * np.uint32(bits)
    for a in range(0, out_dim, _ROWS):
        g = w[a : a + _ROWS].reshape(-1, groups, group_size)
        w_max, w_min = g.max(axis=-1), g.min(axis=-1)
        mask = np.abs(w_min) > np.abs(w_max)
        scale = np.maximum((w_max - w_min) / n_bins, np.float32(1e-7))
        scale = np.where(mask, scale, -scale)
        edge = np.where(mask, w_min, w_max)
        q0 = np.rint(edge / scale)
        nonzero = q0 != 0
        scale = np.where(nonzero, edge / np.where(nonzero, q0, np.float32(1)), scale).astype(np.float32)
        bias = np.where(nonzero, edge, np.float32(0)).astype(np.float32)
        q = np.clip(np.rint((g - bias[..., None]) / scale[..., None]), 0, n_bins).astype(np.uint32)
        q = q.reshape(q.shape[0], -1, per_word) << shifts
        packed[a : a + _ROWS] = np.bitwise_or.reduce(q, axis=-1)
        scales[a : a + _ROWS], biases[a : a + _ROWS] = scale, bias
    return QuantizedWeight(packed, scales, biases, group_size, bits)


def dequantize_rows(q: QuantizedWeight, ids) -> np.ndarray:
    """Rows ``ids`` of the float32 matrix ``q`` stands for (``value * scale + bias``; bits 2, 4 or 8)."""
    ids = np.asarray(ids, dtype=np.int64)
    words = np.asarray(q.w)[ids]
    per_word = 32 // q.bits
    shifts = np.arange(per_word, dtype=np.uint32) * np.uint32(q.bits)
    vals = ((words[..., None] >> shifts) & np.uint32((1 << q.bits) - 1)).astype(np.float32)
    vals = vals.reshape(len(ids), -1, q.group_size)
    vals *= np.asarray(q.scales, dtype=np.float32)[ids][..., None]
    vals += np.asarray(q.biases, dtype=np.float32)[ids][..., None]
    return vals.reshape(len(ids), -1)
