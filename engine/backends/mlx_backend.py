"""MLX backend: Metal on Apple Silicon, CUDA where built for it, CPU (``mlx[cpu]``) for tests.

Keeps the checkpoint dtype unless the model asks otherwise. Norm statistics and softmax run in float32.
"""

from __future__ import annotations

import os

import mlx.core as mx
import numpy as np

from ..errors import ModelError
from .base import Backend
from .quant import BITS, PAD_SHARE, QuantizedWeight

# The group sizes MLX's affine products take (``mx.quantize`` refuses others; ``mx.quantized_matmul`` accepts them
# lazily and fails at the first evaluation, which would be the first decode).
GROUP_SIZES = (32, 64, 128)

_DTYPES = {
    "float32": mx.float32,
    "float16": mx.float16,
    "bfloat16": mx.bfloat16,
    "int32": mx.int32,
    "int64": mx.int64,
    "uint32": mx.uint32,
    "uint8": mx.uint8,
    "bool": mx.bool_,
}


def has_gpu() -> bool:
    """Whether MLX has an accelerator here (Metal or CUDA)."""
    try:
        if mx.metal.is_available():
            return True
    except Exception:  # noqa: BLE001 - older/newer MLX layouts
        pass
    cuda = getattr(mx, "cuda", None)
    try:
        return bool(cuda is not None and cuda.is_available())
    except Exception:  # noqa: BLE001
        return False


def compile_wanted() -> bool:
    """``mx.compile`` on a GPU (fewer kernel launches, far less Python per step); off on MLX's CPU device,
    where each fused kernel is built by the system C++ compiler at first use (~0.6 s apiece) and the step
    is bound by the matrix products anyway. ``LIVECAP_MLX_COMPILE=1|0`` overrides."""
    env = os.environ.get("LIVECAP_MLX_COMPILE", "").strip()
    if env in ("0", "1"):
        return env == "1"
    return has_gpu()


class MlxBackend(Backend):
    """The op set on MLX (lazy arrays; ``eval`` is the barrier)."""

    name = "mlx"
    xp = mx

    def __init__(self, compile_enabled: bool | None = None):
        self.compile_enabled = compile_wanted() if compile_enabled is None else compile_enabled
        # MLX's CPU device has no native half-precision quantized product (bf16 x bf16-scaled is ~7x slower
        # than with float32 activations, measured in benchmarks/RESULTS.md), so there it runs in float32.
        self.cpu_quantized_f32 = mx.default_device() == mx.cpu

    def compile(self, fn):
        return mx.compile(fn) if self.compile_enabled else fn

    @property
    def compiles(self):
        return self.compile_enabled

    def compute_dtype(self, wanted):
        return wanted

    def asarray(self, a, dtype=None):
        if isinstance(a, mx.array):
            x = a
        else:
            a = np.asarray(a)
            if a.dtype == np.float64:
                a = a.astype(np.float32)
            x = mx.array(a)
        if dtype is not None and x.dtype != _DTYPES[dtype]:
            x = x.astype(_DTYPES[dtype])
        return x

    def load(self, store, name, shape=None, dtype=None):
        a = store.raw(name, shape)
        x = mx.array(a).view(mx.bfloat16) if store.info(name).dtype == "bfloat16" else mx.array(a)
        return x if dtype is None else x.astype(_DTYPES[dtype])

    def async_eval(self, *xs):
        mx.async_eval(*xs)

    def embed(self, table, ids):
        idx = ids if isinstance(ids, mx.array) else mx.array(np.asarray(ids, dtype=np.int32))
        if isinstance(table, QuantizedWeight):
            rows = mx.dequantize(
                table.w[idx], table.scales[idx], table.biases[idx], group_size=table.group_size, bits=table.bits
            )
            return rows[..., : table.shape[1]] if table.padded else rows
        return table[idx]

    def multiplies(self, q):
        return q.group_size in GROUP_SIZES and q.bits in BITS

    def prepare_linear(self, w):
        if isinstance(w, QuantizedWeight) and not self.multiplies(w):
            raise ModelError(
                f"A matrix is quantized in groups of {w.group_size} columns at {w.bits} bits, which the MLX backend "
                f"cannot compute with (it takes groups of {', '.join(map(str, GROUP_SIZES))})."
            )
        return w

    def quantize(self, w, group_size, bits):
        """Pads the width with zero columns to whole groups, as ``NumpyBackend.quantize`` does (the same rule and
        the same result: one cached copy serves both), when that adds at most an eighth of it, or in groups of 32
        when none of MLX's groups divides it (Moonshine small's 620 and 2480 columns stayed float before); else a
        ValueError, as for a group MLX does not multiply in (the caller tries the next group)."""
        cols, smallest = w.shape[-1], GROUP_SIZES[0]
        pad = -cols % group_size
        too_much = pad and PAD_SHARE * pad > cols and not (group_size == smallest and cols % smallest)
        if group_size not in GROUP_SIZES or too_much:
            raise ValueError(f"MLX does not quantize {cols} columns in groups of {group_size}.")
        if pad:
            w = mx.concatenate([w, mx.zeros((*w.shape[:-1], pad), dtype=w.dtype)], axis=-1)
        q, s, b = mx.quantize(w, group_size=group_size, bits=bits)
        mx.eval(q, s, b)
        return QuantizedWeight(q, s, b, group_size, bits, cols if pad else 0)

    def save_tensors(self, path, tensors):
        mx.save_safetensors(str(path), tensors)

    def to_numpy(self, x):
        if x.dtype in (mx.bfloat16, mx.float16):
            x = x.astype(mx.float32)
        return np.array(x)

    def zeros(self, shape, dtype="float32"):
        return mx.zeros(shape, dtype=_DTYPES[dtype])

    def astype(self, x, dtype):
        want = _DTYPES[dtype]
        return x if x.dtype == want else x.astype(want)

    def write(self, buf, index, value):
        if isinstance(index, tuple):
            index = tuple(mx.array(i) if isinstance(i, np.ndarray) else i for i in index)
        buf[index] = value
        return buf

    def eval(self, *xs):
        mx.eval(*xs)

    def erf(self, x):
        return mx.erf(x)

    def silu(self, x):
        return x * mx.sigmoid(x)

    def softmax(self, x, axis=-1):
        return mx.softmax(x, axis=axis, precise=True)

    def linear(self, x, w, b=None):
        if isinstance(w, QuantizedWeight):
            dt = x.dtype
            if self.cpu_quantized_f32 and dt != mx.float32:
                x = x.astype(mx.float32)
            if w.padded:  # a cached copy NumPy's quantizer padded to whole groups: zero columns meet the padding
                x = mx.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, w.packed_cols - w.cols)])
            y = mx.quantized_matmul(x, w.w, w.scales, w.biases, transpose=True, group_size=w.group_size, bits=w.bits)
            y = y if b is None else y + b
            return y if y.dtype == dt else y.astype(dt)
        if b is not None:
            return mx.addmm(b, x, w.T)
        return x @ w.T

    def layer_norm(self, x, weight, bias, eps):
        dt = x.dtype
        y = mx.fast.layer_norm(x.astype(mx.float32), weight, bias, eps)
        return y.astype(dt)

    def rms_norm(self, x, weight, eps):
        dt = x.dtype
        if weight is None:
            weight = mx.ones((x.shape[-1],), dtype=mx.float32)
        return mx.fast.rms_norm(x.astype(mx.float32), weight, eps).astype(dt)

    def attention(self, q, k, v, scale, mask=None):
        m = None
        if mask is not None:
            m = mask if isinstance(mask, mx.array) else mx.array(np.asarray(mask))
        out = mx.fast.scaled_dot_product_attention(q[None], k[None], v[None], scale=scale, mask=m)
        return out[0]

    def prepare_conv(self, w):
        return self.asarray(w).transpose(0, 2, 1)  # [C_out, K, C_in]

    def conv1d(self, x, w, b, stride=1):
        k = w.shape[1]
        if x.shape[0] < k:
            return mx.zeros((0, w.shape[0]), dtype=x.dtype)
        y = mx.conv1d(x[None], w.astype(x.dtype), stride=stride)[0]
        return y if b is None else y + b
