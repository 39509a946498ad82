"""Quantized matrix products on the CPU through ONNX Runtime's ``MatMulNBits`` kernels (MLAS).

Why a library: NumPy cannot multiply 8-bit or 4-bit weights fast (it would have to dequantize to float32
first and read four to eight times the bytes), and hand-written SIMD is not an option. ONNX Runtime's
``MatMulNBits`` (com.microsoft) takes blockwise 4/8-bit weights with a float scale per block and runs them
with AVX2 / AVX-512 (VNNI) kernels at memory bandwidth; the int8-activation mode (``accuracy_level`` 4)
quantizes each block of the input row on the fly, as ONNX Runtime's own int8 deployments do.

Each matrix becomes one small ONNX graph in its own ``InferenceSession``; all sessions share one
process-wide thread pool (``THREADS``), which splits a product dynamically: when another process holds a
core, the calling thread finishes the work itself instead of waiting for a descheduled worker.

Layout: an MLX affine matrix (``quant.QuantizedWeight``: each value ``q * scale + bias`` per group of
``group_size`` columns, packed least significant bit first in uint32 words) maps onto ``MatMulNBits``
without unpacking: for 4 and 8 bits the words viewed as little-endian bytes are exactly its blocks (low
nibble first) and the scales are used as they are. ``MatMulNBits`` has no float offset per block (its zero
points are integers; float ones run a slow path), so what the integers leave of the biases is added in the
same graph as
``(x summed over each group) @ rest^T``, an exact rewrite of ``sum_k x_k (q_k s + b)`` with integer zero
points ``z`` nearest ``-b / s`` and ``rest = b + z s`` (so the integer part stays centred, see ``NBitsLinear``).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from . import onnx_proto as P

BITS = (4, 8)
THREADS = max(1, min(os.cpu_count() or 1, 8))
ACCURACY = {8: 4, 4: 4}  # MatMulNBits accuracy_level per bit width: 4 = int8 activations (the fast kernels)
_lock = threading.Lock()
_ort: Any = None


def available() -> bool:
    """Whether ONNX Runtime imports here (the quantized CPU path needs it)."""
    try:
        _runtime()
    except ImportError:
        return False
    return True


def _runtime():
    """The ``onnxruntime`` module, its global thread pool set up on first use."""
    global _ort
    with _lock:
        if _ort is None:
            import onnxruntime as ort

            try:  # before any session exists: one pool for every session of this process
                from onnxruntime.capi import _pybind_state

                _pybind_state.set_global_thread_pool_sizes(THREADS, 1)
            except Exception:  # noqa: BLE001 - an environment created elsewhere first: sessions get own pools
                pass
            _ort = ort
    return _ort


def supports(group_size: int, bits: int, in_dim: int) -> bool:
    """Whether a ``[*, in_dim]`` matrix quantized with ``group_size`` / ``bits`` runs on these kernels."""
    return bits in BITS and group_size >= 16 and group_size & (group_size - 1) == 0 and in_dim % group_size == 0


def _session(model: bytes):
    ort = _runtime()
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.use_per_session_threads = False
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    try:
        return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - the global pool may be missing (environment created elsewhere)
        so.use_per_session_threads = True
        so.intra_op_num_threads = THREADS
        return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


class NBitsLinear:
    """``x @ W.T`` for an affine-quantized ``W [out, in]`` (4 or 8 bits) on ONNX Runtime's CPU kernels.

    Built from the packed words, scales and biases of an MLX-layout matrix (NumPy arrays); the session
    holds its own packed copy, so the arrays may be dropped afterwards. Call it with a float32
    ``[rows, in]`` array; it returns ``[rows, out]`` float32.
    """

    def __init__(self, w: np.ndarray, scales: np.ndarray, biases: np.ndarray, group_size: int, bits: int):
        out_dim = w.shape[0]
        in_dim = w.shape[1] * 32 // bits
        if not supports(group_size, bits, in_dim):
            raise ValueError(f"MatMulNBits cannot run {bits}-bit weights in groups of {group_size} over {in_dim}.")
        groups = in_dim // group_size
        self.shape = (out_dim, in_dim)
        self.group_size, self.bits = group_size, bits
        blob = np.ascontiguousarray(w, dtype="<u4").view(np.uint8).reshape(out_dim, groups, group_size * bits // 8)
        s = np.asarray(scales, dtype=np.float32)
        b = np.asarray(biases, dtype=np.float32)
        # q s + b = (q - z) s + (b + z s) with the integer z nearest -b / s: MatMulNBits sees centred values
        # (its int8 activations then err as little as for a symmetric code) and the float rest is at most s / 2
        z = np.clip(np.rint(-b / s), 0, (1 << bits) - 1).astype(np.uint8)
        rest = (b + z.astype(np.float32) * s).T  # [groups, out]
        if bits == 4:
            z = np.concatenate([z, np.zeros((out_dim, groups % 2), np.uint8)], axis=1)
            z = z[:, 0::2] | (z[:, 1::2] << 4)  # low nibble first, each row padded to whole bytes
        s, z, bias_t = s.reshape(-1), z.reshape(-1), np.ascontiguousarray(rest)
        self.nbytes = blob.nbytes + s.nbytes + bias_t.nbytes
        nodes = [
            P.node("MatMulNBits", ["x", "B", "S", "Z"], ["y0"], domain="com.microsoft", K=in_dim, N=out_dim,
                   bits=bits, block_size=group_size, accuracy_level=ACCURACY[bits]),
            P.node("Reshape", ["x", "gshape"], ["xg"]),
            P.node("ReduceSum", ["xg", "gaxis"], ["xs"], keepdims=0),
            P.node("MatMul", ["xs", "biasT"], ["yb"]),
            P.node("Add", ["y0", "yb"], ["y"]),
        ]
        inits = [P.tensor("B", blob), P.tensor("S", s), P.tensor("Z", z), P.tensor("biasT", bias_t),
                 P.tensor("gshape", np.array([-1, groups, group_size], np.int64)),
                 P.tensor("gaxis", np.array([2], np.int64))]
        model = P.model(nodes, inits, [P.value_info("x", ["rows", in_dim])], [P.value_info("y", ["rows", out_dim])],
                        {"": 17, "com.microsoft": 1})
        self._sess = _session(model)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float32)
        return self._sess.run(None, {"x": x})[0]


class FloatLinear:
    """``x @ W.T`` for a float32 ``W [out, in]`` on ONNX Runtime's CPU kernels (MLAS SGEMM, shared pool)."""

    def __init__(self, w: np.ndarray):
        w = np.asarray(w, dtype=np.float32)
        self.shape = w.shape
        self.nbytes = w.nbytes
        nodes = [P.node("Gemm", ["x", "W"], ["y"], transB=1)]
        model = P.model(nodes, [P.tensor("W", w)], [P.value_info("x", ["rows", w.shape[1]])],
                        [P.value_info("y", ["rows", w.shape[0]])], {"": 17})
        self._sess = _session(model)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self._sess.run(None, {"x": np.ascontiguousarray(x, dtype=np.float32)})[0]
