"""Float32 decoder blocks cut in two halves of their heads or hidden units, the second for the twin process.

Why: a decoder step's products each read 0.4-3 MB. Cut one by one into halves (``NumpyBackend.linear``), every
product costs a hand-off to ``cpu_twin``, and whatever lies between two products (a norm, RoPE, the attention
itself, an activation) runs on the caller alone while the other CPU waits; products under 512 KB are not
worth a hand-off and run on the caller alone too. A block cut by its heads (tensor parallelism over two
processes: a half's q, k, v rows, its RoPE, K/V cache writes and attention, and the matching columns of the
output projection) or by its hidden units (an MLP: a half's up and gate rows, activation, and columns of the
down matrix) is one hand-off, and both CPUs read all the time. Each half returns its share of the output and
the caller adds the shares. ``ort_kernels.GatedMlp`` does the same for 8/4-bit MLPs. A decoder runs its blocks
as one ``numpy_stack.SplitStack``: both processes run every block's halves in lockstep, without a hand-off
per block.

Contract:
- Results do not depend on the twin: a half is the same NumPy code on the same memory (one OpenBLAS thread)
  whoever computes it, and the shares are added in the same order.
- They differ from the uncut block in the last bits (the output projection's sum is cut in two).
- The matrices are rearranged in place into the halves' layout (each half one contiguous block, stored
  transposed where it has more outputs than inputs: ``step_layout``), so no copy stays: whoever gave them must
  not use them as they were.
- ``run_chunk`` / ``run_half`` run NumPy calls only (they run in the twin too); ``shape`` (and ``bounds``) are
  what ``cpu_twin`` asks of what it runs.
"""

from __future__ import annotations

import numpy as np

from . import cpu_pool, cpu_twin, numpy_attention

FEW_ROWS = 32  # up to this many rows, W @ x^T (~2x faster than x @ W^T for few rows), in L2-sized blocks


def block_bytes(rows: int) -> int:
    """Weight block for a product of ``rows`` rows (0 = one product over the whole matrix). Measured on a
    Xeon with 2 MB of L2 per core (benchmarks/RESULTS.md): 512 KB for 2-4 rows, 256 KB for 5-12; from 16
    rows on, OpenBLAS's own blocking wins."""
    return 512 * 1024 if 2 <= rows <= 4 else 256 * 1024 if 5 <= rows <= 12 else 0


def block_rows(w: np.ndarray, rows: int) -> int:
    """Rows of ``w`` per OpenBLAS call in a product over ``rows`` rows of input (all of them: one call)."""
    block = block_bytes(rows)
    if not block or w.nbytes < 2 * block or not w.flags.c_contiguous:  # a step_layout matrix: one call
        return w.shape[0]
    return max(8, block // (4 * w.shape[1]))


def step_layout(w: np.ndarray) -> np.ndarray:
    """``w [out, in]`` in the layout few-row products read fastest: where it has more outputs than inputs, its
    transpose written over its own memory and returned as a Fortran-ordered ``[out, in]`` view (so ``w`` no
    longer holds what it did), else ``w``. A one-row product then streams the rows of ``w^T`` (an AXPY-shaped
    GEMV) instead of taking dot products along short rows: 1.5-1.7x faster on an AMD EPYC (Zen 2: Moonshine's
    MLP up and head halves), within a few per cent on an Intel Xeon (benchmarks/RESULTS.md, round 20)."""
    if w.shape[0] <= w.shape[1] or not _splittable(w):
        return w
    t = np.ascontiguousarray(w.T)
    flat = w.reshape(-1)
    flat[...] = t.reshape(-1)
    return flat.reshape(t.shape).T


def product(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``x [rows, in] @ w.T`` on the calling thread: for few rows as ``w @ x^T`` over ``block_rows`` (a
    transposed view), else one call; over a ``step_layout`` matrix (Fortran-ordered), one call."""
    rows = x.shape[0]
    if rows > FEW_ROWS or not w.flags.c_contiguous:
        return x @ w.T
    n, step = w.shape[0], block_rows(w, rows)
    if step >= n:
        return (w @ x.T).T
    out = np.empty((n, rows), np.float32)
    xt = x.T
    for s in range(0, n, step):
        np.matmul(w[s : s + step], xt, out=out[s : s + step])
    return out.T


def rotate(x: np.ndarray, rot: np.ndarray) -> np.ndarray:
    """Interleaved RoPE (``Backend.rope(x, cos, sin, True)``) over ``x [..., d]`` (``d`` even): the channel pairs
    ``(x[2i], x[2i + 1])`` taken as complex numbers times ``rot = cos + i sin`` (complex64 ``[..., F]``), one
    complex product instead of six real ones; the channels past ``2 F`` are kept."""
    f = rot.shape[-1]
    if x.strides[-1] != 4:
        x = np.ascontiguousarray(x)
    out = np.empty(x.shape, np.float32)
    xc, oc = x.view(np.complex64), out.view(np.complex64)
    np.multiply(xc[..., :f], rot, out=oc[..., :f])
    if f < xc.shape[-1]:
        oc[..., f:] = xc[..., f:]
    return out


def half_rows(heads: int, kv_heads: int, head_dim: int, qkv: bool) -> list[np.ndarray]:
    """The rows of each half of an attention's input projection (q, k, v rows stacked when ``qkv``, else q rows):
    half ``i``'s q rows, then its k rows, then its v rows (``heads`` and ``kv_heads`` even)."""
    hs, ks, hd = heads // 2, kv_heads // 2, head_dim
    k0, v0 = heads * hd, (heads + kv_heads) * hd
    return [
        np.r_[
            i * hs * hd : (i + 1) * hs * hd,
            k0 + i * ks * hd : k0 + (i + 1) * ks * hd,
            v0 + i * ks * hd : v0 + (i + 1) * ks * hd,
        ]
        if qkv
        else np.arange(i * hs * hd, (i + 1) * hs * hd)
        for i in (0, 1)
    ]


def check_heads(w_in, w_out, heads: int, kv_heads: int, head_dim: int, interleaved, fits: bool) -> bool:
    """Whether an attention block with these matrices and heads is a self-attention (``interleaved`` not None);
    ValueError when it cannot be cut into halves of its heads (odd heads or key/value heads, an odd head size
    for RoPE pairs, RoPE other than interleaved, matrices of another form: ``fits`` False, or of other sizes)."""
    qkv = interleaved is not None
    rows = (heads + 2 * kv_heads if qkv else heads) * head_dim
    odd = heads % 2 or kv_heads % 2 or heads % kv_heads or (qkv and head_dim % 2)
    if odd or interleaved is False or not fits:
        raise ValueError("This attention block cannot be cut into halves.")
    if w_in.shape[0] != rows or w_out.shape[1] != heads * head_dim:
        raise ValueError("This attention block's matrices do not fit its heads.")
    return qkv


def halves_on_threads(half) -> tuple:
    """``(half(0), half(1))`` computed over ``cpu_pool``'s threads (many rows: a long prefill, no twin)."""
    shares: list = [None, None]

    def job(i: int):
        def run():
            shares[i] = half(i)

        return run

    cpu_pool.run([job(0), job(1)])
    return shares[0], shares[1]


def _split_columns(w: np.ndarray) -> list[np.ndarray]:
    """``w [out, in]``'s first and second halves of columns as two C-contiguous ``[out, in / 2]`` blocks, written
    over ``w``'s own memory (so ``w`` no longer holds what it did)."""
    out, cut = w.shape[0], w.shape[1] // 2
    halves = np.concatenate([w[:, :cut], w[:, cut:]])
    w.reshape(-1)[...] = halves.reshape(-1)
    both = w.reshape(2 * out, cut)
    return [both[:out], both[out:]]


def _splittable(*ws) -> bool:
    """Whether matrices can be rearranged in place: C-contiguous, writable float32 arrays."""
    return all(
        isinstance(w, np.ndarray) and w.dtype == np.float32 and w.flags.c_contiguous and w.flags.writeable for w in ws
    )


class SplitAttention:
    """An attention block ``y = merge(attention(q, K, V)) @ w_out^T`` with its queries from ``h @ w_in^T``, cut
    into two halves of the heads (each half: its query heads and the key/value heads they read).

    Self-attention (``interleaved`` given; True only: the RoPE of ``rotate``): ``w_in`` stacks the q, k and v
    rows; q and k are rotated and k, v written into the caches at ``start`` before the half attends (causally)
    over positions ``0 .. start + n``. Cross-attention: ``w_in`` holds the q rows; the half attends over its
    heads of the given K/V. Heads and key/value heads (and a self-attention's head size) must be even, else
    ValueError (nothing is changed then)."""

    twin = None  # a cpu_twin.Twin that knows this block (set by the backend), or None
    norm, eps = None, 1e-5  # no norm inside: the caller norms the input first

    def __init__(self, w_in, w_out, heads: int, kv_heads: int, head_dim: int, scale: float, interleaved=None):
        qkv = check_heads(w_in, w_out, heads, kv_heads, head_dim, interleaved, _splittable(w_in, w_out))
        hs, ks, hd = heads // 2, kv_heads // 2, head_dim
        if qkv:  # per half: its q rows, then its k rows, then its v rows
            w_in[...] = w_in[np.concatenate(half_rows(heads, kv_heads, head_dim, True))]
        half = w_in.shape[0] // 2
        self._in = [step_layout(w_in[:half]), step_layout(w_in[half:])]
        self._out = [step_layout(w) for w in _split_columns(w_out)]
        self.heads, self.kv_heads, self.head_dim, self.scale, self.interleaved = hs, ks, hd, scale, interleaved
        self.shape = (w_out.shape[0], w_in.shape[1] + hd)  # inputs: a row of h, and of the rotation (self)
        self.nbytes = w_in.nbytes + w_out.nbytes

    def run_half(self, i: int, inputs: list, arrays: list, ints: list) -> np.ndarray:
        """Half ``i``'s share of ``y``, ``[n, out]``: ``inputs`` = h and, for a self-attention, its rotation (as
        float32 pairs), for a cross-attention its mask where it has one (float32, > 0 = may attend); ``arrays`` =
        K and V (the caches of a self-attention, written here), ``ints`` = n (and start)."""
        n, hs, ks, hd = ints[0], self.heads, self.kv_heads, self.head_dim
        h = inputs[0].reshape(n, -1)
        kv = slice(i * ks, (i + 1) * ks)
        k, v = arrays
        if self.interleaved is not None:
            start = ints[1]
            rot = inputs[1].reshape(n, -1).view(np.complex64)
            qkv = self._in_product(i, h).reshape(n, hs + 2 * ks, hd).transpose(1, 0, 2)
            qk = rotate(qkv[: hs + ks], rot)
            k[kv, start : start + n] = qk[hs:]
            v[kv, start : start + n] = qkv[hs + ks :]
            q, k, v = qk[:hs], k[kv, : start + n], v[kv, : start + n]
            mask = None if n == 1 else np.tri(n, start + n, start, dtype=bool)
        else:
            q = self._in_product(i, h).reshape(n, hs, hd).transpose(1, 0, 2)
            k, v, mask = k[kv], v[kv], (None if len(inputs) < 2 else inputs[1].reshape(n, -1) > 0)
        a = numpy_attention.attend(q, k, v, self.scale, mask)
        return self._out_product(i, a.transpose(1, 0, 2).reshape(n, hs * hd))

    def _in_product(self, i: int, h: np.ndarray) -> np.ndarray:
        """Half ``i``'s rows of the input projection for ``h [n, in]``: its q (and k, v) rows, ``[n, rows]``."""
        return product(self._in[i], h)

    def _out_product(self, i: int, a: np.ndarray) -> np.ndarray:
        """Half ``i``'s share of the output projection for its heads' attention output ``a [n, heads * head_dim]``."""
        return product(self._out[i], a)

    def combine(self, share0: np.ndarray, share1: np.ndarray) -> np.ndarray:
        """The block's output from its halves' shares, ``share0 + share1`` (the same arithmetic wherever it runs)."""
        return share0 + share1

    def __call__(self, h: np.ndarray, k: np.ndarray, v: np.ndarray, start: int = 0, rot=None, mask=None):
        """``y [n, out]`` for ``h [n, in]``; a self-attention (``rot``: ``cos + i sin`` as float32 pairs ``[n,
        2 F]``) also writes its K/V rows into ``k``, ``v``."""
        h = np.ascontiguousarray(h, dtype=np.float32)
        n = h.shape[0]
        inputs, ints, arrays = [h], [n], [k, v]
        if self.interleaved is not None:
            inputs.append(rot)
            ints.append(start)
        elif mask is not None:
            inputs.append(np.asarray(mask, np.float32))
        twin = self.twin
        if twin is not None:
            twin.settle(arrays, ints)  # a late twin job writing rows this block writes again finishes first
        if n > cpu_twin.MAX_ROWS:  # many rows (a long prefill): both halves over cpu_pool's threads
            return self.combine(*halves_on_threads(lambda i: self.run_half(i, inputs, arrays, ints)))
        ticket = twin.submit_block(self, inputs, arrays, ints) if twin is not None else None
        mine = self.run_half(0, inputs, arrays, ints)
        theirs = twin.collect(ticket) if ticket is not None else None
        if theirs is None:  # no twin, or it did not answer in time: the second half here too
            return self.combine(mine, self.run_half(1, inputs, arrays, ints))
        return self.combine(mine, theirs[: mine.size].reshape(mine.shape))


class SplitMlp:
    """A float32 gated MLP ``down(silu(gate) * up) + down_b`` with ``up | gate = x @ up_gate^T + up_gate_b``
    (the first and second halves of its features), cut into two halves of the middle width.

    ``up_gate`` and ``down`` (C-contiguous, writable float32, an even middle width, else ValueError) are
    rearranged in place into the halves' layout, so that each half is one contiguous block of each and no
    copy stays: the caller must not use them as they were."""

    twin = None  # a cpu_twin.Twin that knows this MLP (set by the backend), or None
    norm, eps = None, 1e-5  # no norm inside: gated_mlp applies it first

    def __init__(self, up_gate: np.ndarray, up_gate_b, down: np.ndarray, down_b):
        d_out, f = down.shape
        if not _splittable(up_gate, down) or f % 2 or up_gate.shape[0] != 2 * f:
            raise ValueError("These matrices cannot be cut into halves in place.")
        h = f // 2
        order = np.r_[0:h, f : f + h, h:f, f + h : 2 * f]  # per half: its up rows, then its gate rows
        up_gate[...] = up_gate[order]
        self.shape, self.bounds = (d_out, up_gate.shape[1]), [0, d_out, 2 * d_out]
        self._up = [step_layout(up_gate[:f]), step_layout(up_gate[f:])]
        ub = None if up_gate_b is None else np.asarray(up_gate_b, np.float32)[order]
        self._up_b = [None, None] if ub is None else [ub[:f], ub[f:]]
        self._down = [step_layout(w) for w in _split_columns(down)]
        self.down_b = None if down_b is None else np.asarray(down_b, np.float32)
        self.nbytes = up_gate.nbytes + down.nbytes

    def run_chunk(self, i: int, x: np.ndarray) -> np.ndarray:
        """Half ``i``'s share of the output (no ``down_b``): ``[rows, out]`` float32 for ``x [rows, in]``."""
        u = product(self._up[i], x)
        if self._up_b[i] is not None:
            u = u + self._up_b[i]
        h = u.shape[1] // 2
        gate = u[:, h:]
        with np.errstate(over="ignore"):
            act = gate / (1.0 + np.exp(-gate))
        act *= u[:, :h]
        return product(self._down[i], act)

    def combine(self, share0: np.ndarray, share1: np.ndarray) -> np.ndarray:
        """The MLP's output from its halves' shares: their sum plus ``down_b``."""
        y = share0 + share1
        if self.down_b is not None:
            y += self.down_b
        return y

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """``x [rows, in]`` (float32) -> ``[rows, out]`` float32."""
        y = cpu_twin.sum_of_halves(self, x, threads=x.shape[0] > cpu_twin.MAX_ROWS)  # many rows: cpu_pool's threads
        if self.down_b is not None:
            y += self.down_b
        return y
