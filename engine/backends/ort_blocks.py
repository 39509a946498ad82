"""8/4-bit attention blocks cut in two halves of their heads, the quantized counterpart of
``numpy_blocks.SplitAttention`` (tensor parallelism over the twin process, run in lockstep by ``numpy_stack``).

Why: an 8-bit Moonshine small step ran its output projection, norm and cross-attention query (one fused graph,
~52 us per layer), its cross-attention output projection (~31 us) and its RoPE and self-attention on the caller
alone while the twin waited; ``MatMulNBits`` reads a cold matrix at ~10-13 GB/s on one core, so the halves pay.
Each half here is its rows of the input projection (its heads' q, k, v rows, one ``MatMulNBits`` graph), RoPE,
its K/V cache writes and attention (NumPy, ``SplitAttention``'s code), and its column groups of the output
projection (a second graph) returning its share of the output; the shares add up to the block's output.

Contract: as ``SplitAttention``'s (results do not depend on the twin; they differ from the uncut products in the
last bits: the output projection's sum is cut in two, the input projection's rows are regrouped). Only where each
half's columns of the output projection are whole groups (``heads / 2 * head_dim`` a multiple of the group size:
Moonshine small and medium in groups of 64; tiny's 160 columns in the groups of 32 its output projections are
quantized in, ``models/moonshine/quantize.half_head_groups``) and the weights are MLX-affine without a float
rest, padding or a norm of their own (``ort_kernels.NBitsLinear`` with ``q``); else ValueError. The layer norm before
the block may go into both halves' input graphs (``norm``, as ``ort_kernels.GatedMlp`` does), which saves its own
session run. The graphs hold their own packed copies; nothing is rearranged.
"""

from __future__ import annotations

import numpy as np

from .numpy_blocks import SplitAttention, check_heads, half_rows
from .ort_kernels import NBitsLinear, _affine_blocks, _matmul_nbits, _model, _norm, _session, runner


class QuantSplitAttention(SplitAttention):
    """``SplitAttention`` over two ``NBitsLinear`` products (``w_in``: q, k, v rows stacked for a self-attention, q
    rows for a cross-attention; ``w_out``: the output projection); the other arguments are ``SplitAttention``'s."""

    def __init__(
        self,
        w_in,
        w_out,
        heads: int,
        kv_heads: int,
        head_dim: int,
        scale: float,
        interleaved=None,
        norm=None,
        eps=1e-5,
        keep: bool = False,
        lazy: bool = False,
    ):
        """``norm``: a layer norm weight (no bias) applied to the input first, in both halves' input graphs.
        ``keep``: hold on to the matrices' ``QuantizedWeight``s, so that a started twin can rebuild the block
        (pickled); ``lazy``: such a rebuilt copy, each half's sessions made when it is first run."""
        fits = all(_whole(w) for w in (w_in, w_out))
        qkv = check_heads(w_in, w_out, heads, kv_heads, head_dim, interleaved, fits)
        hs, ks, hd = heads // 2, kv_heads // 2, head_dim
        if hs * hd % w_out.q.group_size:
            raise ValueError("A half of this block's output projection is no whole number of groups.")
        self.heads, self.kv_heads, self.head_dim, self.scale, self.interleaved = hs, ks, hd, scale, interleaved
        self.norm, self.eps = norm, eps
        self.shape = (w_out.shape[0], w_in.shape[1] + hd)
        self._rows = half_rows(heads, kv_heads, head_dim, qkv)
        args = (w_in.q, w_out.q, heads, kv_heads, head_dim, scale, interleaved, norm, eps)
        self._args = args if keep or lazy else None
        self._in_runs, self._out_runs, self.nbytes = [None, None], [None, None], 0
        for i in () if lazy else (0, 1):
            self._half(i, w_in.q, w_out.q)

    def _half(self, i: int, q_in, q_out) -> None:
        """Make half ``i``'s input and output graphs (its heads' rows of ``q_in``, its column groups of ``q_out``)."""
        hs, hd = self.heads, self.head_dim
        groups = hs * hd // q_out.group_size
        for q, kept, cols, runs in (
            (q_in, (self._rows[i], slice(None)), q_in.shape[1], self._in_runs),
            (q_out, (slice(None), slice(i * groups, (i + 1) * groups)), hs * hd, self._out_runs),
        ):
            blob, s, z, _, rest = _affine_blocks(q, *kept)
            if rest:
                raise ValueError("Weights with a float rest do not run in these blocks.")
            normed = self.norm is not None and q is q_in
            nodes, inits = _matmul_nbits("xn" if normed else "x", "y", "", blob, s, z, q.group_size, q.bits)
            if normed:
                node, weight = _norm("x", "xn", self.norm, self.eps)
                nodes.insert(0, node)
                inits.append(weight)
            runs[i] = runner(_session(_model(nodes, inits, cols, s.shape[0])))
            self.nbytes += blob.nbytes + s.nbytes

    def __reduce__(self):
        """For a started twin: rebuilt from its ``QuantizedWeight``s (arrays in shared memory), each half made on
        first use; TypeError unless it kept them (``keep``)."""
        if self._args is None:
            raise TypeError("an 8/4-bit attention block that did not keep its matrices")
        return _rebuilt, self._args

    def _in_product(self, i: int, h: np.ndarray) -> np.ndarray:
        if self._in_runs[i] is None:
            self._lazy_half(i)
        return self._in_runs[i](["y"], {"x": np.ascontiguousarray(h, dtype=np.float32)})[0]

    def _out_product(self, i: int, a: np.ndarray) -> np.ndarray:
        if self._out_runs[i] is None:
            self._lazy_half(i)
        return self._out_runs[i](["y"], {"x": np.ascontiguousarray(a, dtype=np.float32)})[0]

    def twin_ready(self) -> None:
        """In a started twin: make the second half's sessions (the half it is handed) now."""
        if self._in_runs[1] is None:
            self._lazy_half(1)

    def _lazy_half(self, i: int) -> None:
        self._half(i, *self._args[:2])


def _rebuilt(q_in, q_out, heads, kv_heads, head_dim, scale, interleaved, norm, eps) -> QuantSplitAttention:
    """A started twin's copy of a ``QuantSplitAttention`` (``__reduce__``), its halves made on first use."""
    w_in, w_out = _Shape(q_in), _Shape(q_out)
    return QuantSplitAttention(w_in, w_out, heads, kv_heads, head_dim, scale, interleaved, norm, eps, lazy=True)


class _Shape:
    """What ``QuantSplitAttention`` asks of an ``NBitsLinear`` it is built from, for a rebuilt copy (no sessions)."""

    with_rest, norm = False, None

    def __init__(self, q):
        self.q, self.shape = q, q.shape


def _whole(w) -> bool:
    """Whether ``w`` is an ``NBitsLinear`` these blocks can regroup: its ``QuantizedWeight`` known, no padding, no
    float rest, no norm inside."""
    known = isinstance(w, (NBitsLinear, _Shape)) and w.q is not None
    return known and not w.q.padded and not w.with_rest and w.norm is None
