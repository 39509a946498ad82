"""Affine-quantized matrices in MLX's layout, the one exchange format for quantized weights.

A ``QuantizedWeight`` is what mlx-community checkpoints store and what ``Backend.quantize`` returns: an
``[out, in]`` matrix cut into groups of ``group_size`` columns, each value ``q`` (``bits`` wide) standing for
``q * scale + bias`` of its group; the values are packed least significant bit first into uint32 words, a
continuous little-endian bit stream along each row (so 3, 5 and 6-bit values may straddle words). A matrix
whose width is no multiple of the group (Moonshine small's encoder: 620 and 2480 columns) may be padded with
zero columns to whole groups (``quantize_affine(pad=True)``, NumPy's quantizer); ``cols`` then keeps the real
width, which is what ``shape`` reports and what a product multiplies (MLX checkpoints are never padded).

Models never look inside: they load it (``load_affine``), hand it to ``Backend.prepare_linear`` and call
``Backend.linear``; each backend chooses the form it computes with (MLX: packed, ``mx.quantized_matmul``;
NumPy: packed on ONNX Runtime's 4/8-bit kernels, ``ort_kernels``, or else dequantized to float32 by
``dequantize``, the exact formula MLX uses). ``quantize_affine`` is MLX's quantizer for NumPy; NumPy has
neither routine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ModelError

BITS = (2, 3, 4, 5, 6, 8)
_ROWS_PER_BLOCK = 256  # rows unpacked at a time (bounds the temporaries for large matrices)


PAD_SHARE = 8  # a quantized matrix's width is padded to whole groups when that adds at most 1 / PAD_SHARE of it


@dataclass
class QuantizedWeight:
    """An affine-quantized ``[out, in]`` matrix: packed ``w`` (uint32 ``[out, packed * bits / 32]``), per-group
    ``scales`` and ``biases`` (``[out, packed / group_size]``), as backend or NumPy arrays; ``cols``: the real
    width ``in`` when the packed width is padded past it with zero columns (0: not padded)."""

    w: Any
    scales: Any
    biases: Any
    group_size: int
    bits: int
    cols: int = 0

    @property
    def packed_cols(self) -> int:
        """The stored width, whole groups (``in`` plus any padding)."""
        return self.w.shape[1] * 32 // self.bits

    @property
    def shape(self) -> tuple[int, int]:
        """``(out, in)``: the matrix it stands for (without the padding)."""
        return (self.w.shape[0], self.cols or self.packed_cols)

    @property
    def padded(self) -> bool:
        """Whether the stored width runs past the real one (a product must feed the padding zeros)."""
        return 0 < self.cols < self.packed_cols


def load_affine(B, store, base: str, shape: tuple[int, int]) -> QuantizedWeight:
    """The quantized matrix ``base`` + ``weight`` / ``scales`` / ``biases`` of a ``TensorStore`` as backend
    arrays (scales in the file dtype where the backend keeps it); ModelError when it does not fit ``shape``."""
    w, s = store.info(base + "weight"), store.info(base + "scales")
    bits = 32 * w.shape[1] // shape[1] if len(w.shape) == 2 else 0
    group = shape[1] // s.shape[1] if len(s.shape) == 2 and s.shape[1] else 0
    if w.shape[0] != shape[0] or bits not in BITS or group * s.shape[1] != shape[1]:
        raise ModelError(f"The quantized tensor '{base}weight' does not fit the expected shape {list(shape)}.")
    return QuantizedWeight(
        B.load(store, base + "weight"), B.load(store, base + "scales"), B.load(store, base + "biases"), group, bits
    )


def unpack(w: np.ndarray, bits: int, n: int) -> np.ndarray:
    """The ``n`` unsigned ``bits``-wide values of each row of packed uint32 ``w [rows, words]`` (uint16)."""
    by = np.concatenate(
        [np.ascontiguousarray(w, dtype="<u4").view(np.uint8), np.zeros((w.shape[0], 1), np.uint8)], axis=1
    )  # one spare byte: reads may run over
    off = np.arange(n, dtype=np.int64) * bits  # bit offset of each value; a value spans at most 2 bytes
    lo, shift = off // 8, (off % 8).astype(np.uint16)
    pair = by[:, lo].astype(np.uint16) | (by[:, lo + 1].astype(np.uint16) << 8)
    return (pair >> shift) & np.uint16((1 << bits) - 1)


def dequantize(q: QuantizedWeight) -> np.ndarray:
    """The float32 ``[out, in]`` matrix ``q`` stands for, ``value * scale + bias`` in float32 (bit-identical
    to ``mx.dequantize`` with float32 scales and biases, whose padding columns it leaves out). ``q`` holds
    NumPy arrays."""
    out_dim = q.w.shape[0]
    full = np.empty((out_dim, q.shape[1]), np.float32)
    for a in range(0, out_dim, _ROWS_PER_BLOCK):
        b = min(out_dim, a + _ROWS_PER_BLOCK)
        full[a:b] = dequantize_rows(q, a, b)
    return full


def dequantize_rows(q: QuantizedWeight, a: int, b: int) -> np.ndarray:
    """Rows ``a:b`` of ``dequantize(q)`` (the same bits), as a new ``[b - a, in]`` float32 array."""
    in_dim, gs = q.packed_cols, q.group_size
    words = np.ascontiguousarray(np.asarray(q.w[a:b]), dtype="<u4")
    if q.bits == 8:  # least significant byte first: the values are the bytes in order
        vals = words.view(np.uint8).astype(np.float32)
    elif q.bits == 4:  # low nibble first
        by = words.view(np.uint8)
        vals = np.empty((b - a, in_dim), np.float32)
        vals[:, 0::2], vals[:, 1::2] = by & 15, by >> 4
    else:
        vals = unpack(words, q.bits, in_dim).astype(np.float32)
    vals = vals.reshape(b - a, in_dim // gs, gs)
    vals *= np.asarray(q.scales[a:b], dtype=np.float32)[:, :, None]
    vals += np.asarray(q.biases[a:b], dtype=np.float32)[:, :, None]
    vals = vals.reshape(b - a, in_dim)
    return vals if q.shape[1] == in_dim else np.ascontiguousarray(vals[:, : q.shape[1]])


def quantize_affine(w: np.ndarray, group_size: int, bits: int, pad: bool = False) -> QuantizedWeight:
    """MLX's affine quantization of float32 ``w [out, in]`` (``in`` a multiple of ``group_size``; bits 2, 4 or 8),
    in NumPy: bit-identical to ``mlx.core.quantize`` on float32 input (the same float32 operations in the same
    order: range over the group, the scale nudged so that the edge of larger magnitude is exact, round half to
    even): the same layout and values on either backend. NumPy has no such routine. ``pad``: a width that
    is no multiple of the group is first padded with zero columns to whole groups (``cols`` keeps it), which is
    exactly ``mlx.core.quantize`` of the padded matrix; else it is a ValueError."""
    w = np.asarray(w, dtype=np.float32)
    out_dim, cols = w.shape
    if pad and cols % group_size:
        w = np.concatenate([w, np.zeros((out_dim, -cols % group_size), np.float32)], axis=1)
    in_dim = w.shape[1]
    if in_dim % group_size or 32 % bits:
        raise ValueError(f"Cannot quantize {in_dim} columns in groups of {group_size} at {bits} bits.")
    groups, per_word = in_dim // group_size, 32 // bits
    packed = np.empty((out_dim, in_dim // per_word), np.uint32)
    scales = np.empty((out_dim, groups), np.float32)
    biases = np.empty((out_dim, groups), np.float32)
    n_bins = np.float32((1 << bits) - 1)
    shifts = np.arange(per_word, dtype=np.uint32) * np.uint32(bits)
    for a in range(0, out_dim, _ROWS_PER_BLOCK):
        g = w[a : a + _ROWS_PER_BLOCK].reshape(-1, groups, group_size)
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
        packed[a : a + _ROWS_PER_BLOCK] = np.bitwise_or.reduce(q, axis=-1)
        scales[a : a + _ROWS_PER_BLOCK], biases[a : a + _ROWS_PER_BLOCK] = scale, bias
    return QuantizedWeight(packed, scales, biases, group_size, bits, cols if cols < in_dim else 0)
