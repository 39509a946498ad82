"""The op set every model is written against, with generic implementations over an array module.

A backend wraps one array library (NumPy or MLX). Models call only these methods plus plain array
arithmetic (``+``, ``*``, comparisons, slicing, ``.reshape``, ``.transpose``), which both libraries share,
so each model family is written once; they never ask which backend they run on and never touch its array
module. Shapes are batch-free: a sequence is ``[T, D]``, heads are ``[H, T, hd]``.

The backend owns every decision that differs between libraries: the dtype a model computes in
(``compute_dtype``, ``astype``), the form of a weight (``prepare_linear`` for float and quantized matrices,
``prepare_conv``), quantization (``quantize``), masks built on the device (``ring_mask``), sampling on the
device (``argmax``), and whether it can hold a checkpoint at all (``check_fits``).

Weights: ``linear`` takes what ``prepare_linear`` returned for a PyTorch-layout ``[out, in]`` matrix or a
``QuantizedWeight`` (``quant.py``); ``conv1d`` takes what ``prepare_conv`` returned for a
``[C_out, C_in, K]`` kernel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BackendError
from .quant import QuantizedWeight

Array = Any


class Backend:
    """Generic op set; subclasses set ``xp`` (the array module, private to the backend) and override the
    fast paths."""

    name = "generic"
    xp: Any = np

    # ---- arrays -------------------------------------------------------------------------------
    def asarray(self, a: np.ndarray | Array, dtype: str | None = None) -> Array:
        """A backend array from a NumPy array (``dtype`` one of float32/float16/bfloat16/int32/...)."""
        raise NotImplementedError

    def to_numpy(self, x: Array) -> np.ndarray:
        """A NumPy copy of ``x``: floating arrays come back as float32, integer and boolean ones keep their
        dtype."""
        raise NotImplementedError

    def zeros(self, shape: tuple[int, ...], dtype: str = "float32") -> Array:
        """A zero-filled array."""
        raise NotImplementedError

    lazy_zeros = False  # True where a large zero buffer costs memory only where it is written

    def kv_zeros(self, shape: tuple[int, ...], dtype: str = "float32") -> Array:
        """A zero-filled key/value buffer that many later attention calls read (a decoder's cross-attention
        memory, a KV ring); a backend may place it where a helper process reads it too. Otherwise as
        ``zeros``. Where ``lazy_zeros`` is True, its pages cost memory only once written."""
        return self.zeros(shape, dtype)

    def compute_dtype(self, wanted: str) -> str:
        """The float dtype a model computes in here when ``wanted`` (asked for, or the checkpoint's) is
        asked: NumPy always computes in float32; MLX keeps ``wanted``."""
        return "float32"

    def astype(self, x: Array, dtype: str) -> Array:
        """``x`` converted to ``dtype`` (a dtype this backend computes in); ``x`` itself when it already is."""
        raise NotImplementedError

    def load(self, store: Any, name: str, shape: tuple[int, ...] | None = None, dtype: str | None = None) -> Array:
        """Tensor ``name`` of a ``TensorStore`` as a backend array (file dtype unless ``dtype``)."""
        return self.asarray(store.numpy(name, shape), dtype)

    def check_fits(self, store: Any, what: str) -> None:
        """Raise ModelError when this backend clearly cannot hold the float weights of ``store`` (a
        ``TensorStore``; ``what`` names the model in the sentence). The generic backend assumes it can."""

    def save_tensors(self, path: Path, tensors: dict[str, Array]) -> None:
        """Write ``tensors`` to a safetensors file, each in its own dtype."""
        raise BackendError(f"The {self.name} backend cannot write weight files.")

    def embed(self, table: Array, ids: Any) -> Array:
        """Rows ``ids`` (a list, or a backend int array) of an embedding table ``[V, D]`` -> ``[len(ids), D]``."""
        return table[np.asarray(ids, dtype=np.int32)]

    def concat(self, xs: list[Array], axis: int = 0) -> Array:
        """Concatenation along ``axis``."""
        return self.xp.concatenate(xs, axis=axis)

    def where(self, cond: Array, x: Array | float, y: Array | float) -> Array:
        """Elementwise ``x`` where ``cond`` holds, else ``y``."""
        return self.xp.where(cond, x, y)

    def write(self, buf: Array, index: Any, value: Array) -> Array:
        """``buf[index] = value``; returns the updated buffer (in place where the library allows)."""
        buf[index] = value
        return buf

    def eval(self, *xs: Array) -> None:
        """Barrier: force lazy computation of ``xs`` (no-op for eager libraries)."""

    def async_eval(self, *xs: Array) -> None:
        """Start computing ``xs`` without waiting (no-op for eager libraries)."""

    def compile(self, fn):
        """``fn`` (pure: arrays and trees of arrays in and out) compiled into one fused graph where the
        library can and it pays; otherwise ``fn`` itself."""
        return fn

    @property
    def compiles(self) -> bool:
        """Whether ``compile`` really compiles here (``LayerPiece`` then passes weights as inputs)."""
        return False

    def argmax(self, x: Array) -> Array:
        """Indices of the maxima along the last axis as a backend int32 array (sampled where the logits are,
        with no host transfer: ``to_numpy`` reads them)."""
        return self.xp.argmax(x, axis=-1).astype(self.xp.int32)

    def ring_mask(self, start: int, n: int, window: int, capacity: int) -> Array:
        """Visibility ``[n, min(start + n, capacity)]`` (bool, on the backend) for the block of positions
        ``start .. start+n-1`` just written to a ring of ``capacity`` slots in which slot ``j`` holds
        position ``last - ((last - j) mod capacity)`` (``last = start + n - 1``): query ``q`` sees the keys
        at positions ``q - window + 1 .. q``."""
        xp, end = self.xp, start + n
        j = xp.arange(min(end, capacity))
        p = (end - 1) - ((end - 1 - j) % capacity)  # the position each slot holds after this block
        q = xp.arange(start, end)[:, None]
        return (p[None, :] <= q) & (p[None, :] > q - window)

    # ---- elementwise ----------------------------------------------------------------------------
    def silu(self, x: Array) -> Array:
        """x * sigmoid(x)."""
        return x / (1.0 + self.xp.exp(-x))

    def gelu(self, x: Array) -> Array:
        """Exact GELU, 0.5 x (1 + erf(x / sqrt 2))."""
        return 0.5 * x * (1.0 + self.erf(x * 0.7071067811865476))

    def erf(self, x: Array) -> Array:
        """The error function."""
        return self.xp.erf(x)

    def softmax(self, x: Array, axis: int = -1) -> Array:
        """Softmax along ``axis``, computed stably."""
        xp = self.xp
        e = xp.exp(x - xp.max(x, axis=axis, keepdims=True))
        return e / xp.sum(e, axis=axis, keepdims=True)

    # ---- layers ---------------------------------------------------------------------------------
    def prepare_linear(self, w: Array | QuantizedWeight) -> Array:
        """The form ``linear`` computes with for an ``[out, in]`` weight: a float matrix (backend array) or a
        ``QuantizedWeight`` (affine, MLX layout). The backend owns that form: it may keep, repack or
        dequantize a quantized matrix."""
        return w

    def multiplies(self, q: QuantizedWeight) -> bool:
        """Whether ``prepare_linear`` and ``linear`` compute with ``q``'s layout (its group size and bits); the
        quantizer tries the next group size where not (NumPy's groups of 16 on MLX)."""
        return True

    def quantized(self, w: Array | QuantizedWeight) -> bool:
        """Whether ``w``, as ``prepare_linear`` returned it, holds quantized weights (a checkpoint stored
        quantized): ``--quantize`` leaves those as they are."""
        return isinstance(w, QuantizedWeight)

    def quantize(self, w: Array, group_size: int, bits: int) -> QuantizedWeight:
        """The affine quantization of float matrix ``w [out, in]`` (MLX layout and rounding), computed now
        (not lazily), so that ``w`` can be freed; give it to ``prepare_linear`` to compute with. A width that is
        no multiple of ``group_size`` is a ValueError, or padded to whole groups where the backend computes
        with such matrices (``QuantizedWeight.cols``); every backend's ``prepare_linear`` takes padded ones."""
        raise BackendError(f"Quantizing weights is not supported on the {self.name} backend.")

    def linear(self, x: Array, w: Array, b: Array | None = None) -> Array:
        """``x @ W.T + b`` for ``x [..., in]`` and a weight ``w`` from ``prepare_linear``."""
        y = x @ w.T
        return y if b is None else y + b

    def prepare_gated_mlp(
        self,
        up_gate: Array,
        up_gate_b: Array | None,
        down: Array,
        down_b: Array | None,
        norm: Array | None = None,
        eps: float = 1e-5,
    ) -> tuple:
        """The forms ``gated_mlp`` computes with, from weights ``prepare_linear`` returned: ``(up_gate, up_gate_b,
        down, down_b)``, unchanged here; a backend may fuse the block into one object (then passed as both
        matrices, with None for the biases it holds), and with it the norm ``gated_mlp`` will be called with."""
        return up_gate, up_gate_b, down, down_b

    def prepare_norm_linear(self, norm: Array, eps: float, w: Array) -> Array:
        """The form ``norm_linear`` computes with, from a weight ``prepare_linear`` returned: ``w`` here; a backend
        may fuse the norm into the product (the result is then for ``norm_linear`` with this ``norm`` only) or
        rearrange ``w`` in place (the caller must not use it as it was)."""
        return w

    def norm_linear(self, x: Array, norm: Array, eps: float, w: Array, dtype: str) -> Array:
        """``linear(astype(layer_norm(x, norm, None, eps), dtype), w)``, ``w`` from ``prepare_norm_linear``: a
        pre-norm projection."""
        return self.linear(self._normed(x, norm, eps, dtype), w)

    def _normed(self, x: Array, norm: Array, eps: float, dtype: str) -> Array:
        """``astype(layer_norm(x, norm, None, eps), dtype)``: the input of a pre-norm product or block."""
        return self.astype(self.layer_norm(x, norm, None, eps), dtype)

    def gated_mlp(
        self,
        x: Array,
        up_gate: Array,
        up_gate_b: Array | None,
        down: Array,
        down_b: Array | None,
        norm: Array | None = None,
        eps: float = 1e-5,
        dtype: str = "float32",
    ) -> Array:
        """``linear(silu(g) * u, down, down_b)`` where ``u`` and ``g`` are the first and second halves of
        ``linear(x, up_gate, up_gate_b)``'s features, with the forms ``prepare_gated_mlp`` returned. With ``norm``,
        ``x`` is first ``astype(layer_norm(x, norm, None, eps), dtype)``."""
        if norm is not None:
            x = self._normed(x, norm, eps, dtype)
        u = self.linear(x, up_gate, up_gate_b)
        f = u.shape[-1] // 2
        return self.linear(self.silu(u[..., f:]) * u[..., :f], down, down_b)

    def prepare_attention_block(
        self,
        w_in: Array,
        w_out: Array,
        heads: int,
        kv_heads: int,
        head_dim: int,
        scale: float,
        interleaved: bool | None = None,
        norm: Array | None = None,
        eps: float = 1e-5,
    ):
        """A fused form of an attention block for ``self_attention_block`` (``interleaved`` not None: ``w_in``
        stacks the q, k and v rows, RoPE of that kind) or ``cross_attention_block`` (``w_in``: the q rows), with
        ``w_out`` the output projection; or None where this backend computes the block as separate ops (the
        default; the caller then uses those). ``norm``: the layer norm (no bias) the block's input gets first,
        which a form may take into itself (its ``norm`` is then that weight); the block ops are then called with
        it. A form may reuse the matrices' memory: after a form is returned, ``w_in`` and ``w_out`` must not be
        used as they were."""
        return None

    def self_attention_block(
        self, h: Array, block, k: Array, v: Array, start: int, cos: Array, sin: Array, norm=None, eps: float = 1e-5
    ):
        """``(y, k, v)``: ``y [n, out]`` the output projection of a causal self-attention for ``h [n, in]`` at
        positions ``start..`` (queries, keys and values from ``h``, q and k rotated by ``cos, sin [n, F]``),
        after writing the new keys and values into the caches ``k, v [Hkv, capacity, hd]`` at those positions;
        ``k, v`` updated (in place where the library allows). ``block`` from ``prepare_attention_block``. With
        ``norm``, ``h`` is first ``layer_norm(h, norm, None, eps)`` (inside the block where it holds it)."""
        raise NotImplementedError("This backend has no fused attention blocks (prepare_attention_block said so).")

    def cross_attention_block(
        self, h: Array, block, k: Array, v: Array, mask: Array | None = None, norm=None, eps: float = 1e-5
    ) -> Array:
        """``y [n, out]``: the output projection of an attention of the queries from ``h [n, in]`` over ``k, v
        [Hkv, T, hd]`` (``mask [n, T]`` boolean, True = may attend). ``block`` from ``prepare_attention_block``;
        ``norm`` as for ``self_attention_block``."""
        raise NotImplementedError("This backend has no fused attention blocks (prepare_attention_block said so).")

    def prepare_block_stack(self, sublayers: list[tuple[Array, object]], eps: float):
        """A form for ``block_stack`` of a pre-norm decoder's residual sublayers ``(norm weight, block)`` in order,
        each block a self- or cross-attention block (``prepare_attention_block``) or a gated MLP
        (``prepare_gated_mlp``), each given its sublayer's norm where it was prepared with one; or None where this
        backend runs them one by one (the default)."""
        return None

    def block_stack(self, x: Array, stack, arrays: list, start: int, cos: Array, sin: Array, mask=None) -> Array:
        """``x [n, d]`` after ``x = x + block(layer_norm(x, norm, None, eps))`` for every sublayer of ``stack``
        (``prepare_block_stack``), as the one-by-one ops compute it: a self-attention block as
        ``self_attention_block`` at ``start`` with ``cos, sin``, a cross-attention block as
        ``cross_attention_block`` with ``mask``, a gated MLP as ``gated_mlp``. ``arrays``: each attention block's
        K and V in order (a self-attention's caches are written in place)."""
        raise NotImplementedError("This backend has no block stacks (prepare_block_stack said so).")

    def prepare_residual_norm_linear(self, w_res: Array, norm: Array, eps: float, w_out: Array) -> tuple:
        """The forms ``residual_norm_linear`` computes with, from weights ``prepare_linear`` returned: ``(w_res,
        w_out)``, unchanged here; a backend may fuse the three steps into one object (then returned twice)."""
        return w_res, w_out

    def residual_norm_linear(
        self, x: Array, a: Array, w_res: Array, norm: Array, eps: float, w_out: Array, dtype: str
    ) -> tuple[Array, Array]:
        """``(y, linear(astype(layer_norm(y, norm, None, eps), dtype), w_out))`` with ``y = x + linear(a, w_res)``:
        a residual projection, then the normed input of the next projection (the forms from
        ``prepare_residual_norm_linear``)."""
        y = x + self.linear(a, w_res)
        return y, self.norm_linear(y, norm, eps, w_out, dtype)

    def layer_norm(self, x: Array, weight: Array | None, bias: Array | None, eps: float) -> Array:
        """LayerNorm over the last axis, statistics in float32, result in ``x``'s dtype."""
        xp = self.xp
        mu = xp.mean(x, axis=-1, keepdims=True)
        c = x - mu
        y = c / xp.sqrt(xp.mean(c * c, axis=-1, keepdims=True) + eps)
        if weight is not None:
            y = y * weight
        if bias is not None:
            y = y + bias
        return y

    def rms_norm(self, x: Array, weight: Array | None, eps: float) -> Array:
        """RMSNorm over the last axis."""
        xp = self.xp
        y = x / xp.sqrt(xp.mean(x * x, axis=-1, keepdims=True) + eps)
        return y if weight is None else y * weight

    def rope(self, x: Array, cos: Array, sin: Array, interleaved: bool) -> Array:
        """Rotary embedding on the first ``2 * cos.shape[-1]`` channels of ``x [H, T, hd]``.

        ``cos``/``sin`` are ``[T, F]``. Interleaved rotates adjacent pairs (x[2i], x[2i+1]) (GPT-J);
        half-split rotates (x[i], x[i+F]) (Llama/NeoX). Channels past ``2F`` pass through unchanged.
        """
        xp = self.xp
        f = cos.shape[-1]
        h, t, hd = x.shape
        rot, rest = x[..., : 2 * f], x[..., 2 * f :]
        if interleaved:
            pairs = rot.reshape(h, t, f, 2)
            a, b = pairs[..., 0], pairs[..., 1]
            y = xp.stack([a * cos - b * sin, a * sin + b * cos], axis=-1).reshape(h, t, 2 * f)
        else:
            a, b = rot[..., :f], rot[..., f:]
            y = xp.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)
        return y if 2 * f == hd else xp.concatenate([y, rest], axis=-1)

    def attention(self, q: Array, k: Array, v: Array, scale: float, mask: Array | None = None) -> Array:
        """Softmax attention: ``q [Hq, Tq, d]``, ``k, v [Hkv, Tk, d]`` (Hq a multiple of Hkv).

        ``mask`` is a boolean ``[Tq, Tk]`` array (True = may attend) or None for full attention.
        Returns ``[Hq, Tq, d]``.
        """
        xp = self.xp
        hq, hkv = q.shape[0], k.shape[0]
        if hq != hkv:
            rep = hq // hkv
            k = xp.repeat(k, rep, axis=0)
            v = xp.repeat(v, rep, axis=0)
        s = (q * scale) @ k.transpose(0, 2, 1)
        if mask is not None:
            s = xp.where(mask, s, -xp.inf)
        return self.softmax(s, axis=-1) @ v

    def prepare_conv(self, w: Array) -> Array:
        """Backend-specific form of a PyTorch ``[C_out, C_in, K]`` conv kernel."""
        return w

    def conv1d(self, x: Array, w: Array, b: Array | None, stride: int = 1) -> Array:
        """Valid (unpadded) 1-D convolution of ``x [T, C_in]`` -> ``[T_out, C_out]``.

        ``T_out = (T - K) // stride + 1``; callers pad (or prepend state) for causal convolution.
        """
        raise NotImplementedError


def window_mask(q_pos: np.ndarray, k_pos: np.ndarray, left: int | None, right: int | None) -> np.ndarray:
    """Boolean ``[Tq, Tk]`` mask: query at position q may see key k iff ``-right < q - k < left``.

    ``left``/``right`` count the self position in (HF sliding-window semantics: window (16, 4) lets a
    query see keys q-15 .. q+3). ``left=None`` means unbounded past; ``right=None`` unbounded future;
    ``right=1`` (or 0) is causal.
    """
    d = np.asarray(q_pos)[:, None] - np.asarray(k_pos)[None, :]
    ok = np.ones(d.shape, dtype=bool) if left is None else d < left
    if right is not None:
        ok &= -d < max(right, 1)
    return ok
