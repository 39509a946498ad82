"""Affine-quantized matrices in MLX's layout, the one exchange format for quantized weights.

A ``QuantizedWeight`` is what mlx-community checkpoints store and what ``Backend.quantize`` returns: an
``[out, in]`` matrix cut into groups of ``group_size`` columns, each value ``q`` (``bits`` wide) standing for
``q * scale + bias`` of its group; the values are packed least significant bit first into uint32 words, a
continuous little-endian bit stream along each row (so 3, 5 and 6-bit values may straddle words).

Models never look inside: they load it (``load_affine``), hand it to ``Backend.prepare_linear`` and call
``Backend.linear``; each backend chooses the form it computes with (MLX: packed, ``mx.quantized_matmul``;
NumPy: dequantized to float32 by ``dequantize``, the exact formula MLX uses, written here because NumPy
has no such routine).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ModelError

BITS = (2, 3, 4, 5, 6, 8)
_ROWS_PER_BLOCK = 256  # rows unpacked at a time (bounds the temporaries for large matrices)


@dataclass
class QuantizedWeight:
    """An affine-quantized ``[out, in]`` matrix: packed ``w`` (uint32 ``[out, in * bits / 32]``), per-group
    ``scales`` and ``biases`` (``[out, in / group_size]``), as backend or NumPy arrays."""

    w: Any
    scales: Any
    biases: Any
    group_size: int
    bits: int

    @property
    def shape(self) -> tuple[int, int]:
        return (self.w.shape[0], self.w.shape[1] * 32 // self.bits)


def load_affine(B, store, base: str, shape: tuple[int, int]) -> QuantizedWeight:
    """The quantized matrix ``base`` + ``weight`` / ``scales`` / ``biases`` of a ``TensorStore`` as backend
    arrays (scales in the file dtype where the backend keeps it); ModelError when it does not fit ``shape``."""
    w, s = store.info(base + "weight"), store.info(base + "scales")
    bits = 32 * w.shape[1] // shape[1] if len(w.shape) == 2 else 0
    group = shape[1] // s.shape[1] if len(s.shape) == 2 and s.shape[1] else 0
    if w.shape[0] != shape[0] or bits not in BITS or group * s.shape[1] != shape[1]:
        raise ModelError(f"The quantized tensor '{base}weight' does not fit the expected shape {list(shape)}.")
    return QuantizedWeight(B.load(store, base + "weight"), B.load(store, base + "scales"),
                           B.load(store, base + "biases"), group, bits)


def unpack(w: np.ndarray, bits: int, n: int) -> np.ndarray:
    """The ``n`` unsigned ``bits``-wide values of each row of packed uint32 ``w [rows, words]`` (uint16)."""
    by = np.concatenate([np.ascontiguousarray(w, dtype="<u4").view(np.uint8),
                         np.zeros((w.shape[0], 1), np.uint8)], axis=1)  # one spare byte: reads may run over
    off = np.arange(n, dtype=np.int64) * bits  # bit offset of each value; a value spans at most 2 bytes
    lo, shift = off // 8, (off % 8).astype(np.uint16)
    pair = by[:, lo].astype(np.uint16) | (by[:, lo + 1].astype(np.uint16) << 8)
    return (pair >> shift) & np.uint16((1 << bits) - 1)


def dequantize(q: QuantizedWeight) -> np.ndarray:
    """The float32 ``[out, in]`` matrix ``q`` stands for, ``value * scale + bias`` in float32 (bit-identical
    to ``mx.dequantize`` with float32 scales and biases). ``q`` holds NumPy arrays."""
    out_dim, in_dim = q.shape
    scales = np.asarray(q.scales, dtype=np.float32)
    biases = np.asarray(q.biases, dtype=np.float32)
    groups = in_dim // q.group_size
    full = np.empty((out_dim, in_dim), np.float32)
    for a in range(0, out_dim, _ROWS_PER_BLOCK):
        b = min(out_dim, a + _ROWS_PER_BLOCK)
        vals = unpack(np.asarray(q.w[a:b]), q.bits, in_dim).astype(np.float32).reshape(b - a, groups, q.group_size)
        vals *= scales[a:b, :, None]
        vals += biases[a:b, :, None]
        full[a:b] = vals.reshape(b - a, in_dim)
    return full
