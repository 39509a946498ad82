"""NumPy backend: float32 everywhere, BLAS matmuls; the fast path on CPUs and the exactness reference.

Products with 8-bit / 4-bit weights (``quantize``, or a quantized checkpoint) run on ONNX Runtime's CPU
kernels (``ort_kernels``; a gated MLP of such weights as one fused graph per half, ``prepare_gated_mlp``, and a
layer norm inside the graph of the product after it, ``prepare_norm_linear``, ``prepare_residual_norm_linear``),
which NumPy has no equivalent for; so do GELU, the norms and large SiLUs (``ort_ops``: one fused pass instead
of NumPy's pass per operation), with NumPy formulas where ONNX Runtime is missing.
Float32 products are OpenBLAS calls on one thread each, cut into parts in a way that depends only on the
shapes and the CPU count, so results never depend on the machine's load: many-row products (encoders) run
their parts on ``cpu_pool``'s helper threads, few-row ones (decoder steps) hand half of them to ``cpu_twin``'s
helper process where the platform has one (on more than two CPUs, a large matrix's parts go over every core:
one CPU's share to the twin, the rest over ``cpu_pool``).
Attention is in ``numpy_attention``, memory placement in ``heap``."""

from __future__ import annotations

import json
import math
import struct
import sys
from dataclasses import replace

import numpy as np

from .. import memory
from ..errors import ModelError
from . import cpu_pool, cpu_twin, heap, numpy_attention, numpy_blocks, numpy_stack, ort_blocks, ort_kernels, ort_ops
from .base import Backend
from .blas import BlasThreads
from .quant import PAD_SHARE, QuantizedWeight, dequantize, quantize_affine

# NumPy has no erf. A float32 rational approximation, erf(x) = x P(x^2) / Q(x^2) on x clamped to [-4, 4]
# (the form used by Eigen and XLA), max abs error 4.2e-7 against math.erf; evaluated in cache-sized blocks
# with in-place ufuncs, since GELU runs over every encoder FFN activation.
_ERF_P = tuple(
    np.float32(c)
    for c in (
        -2.72614225801306e-10,
        2.77068142495902e-08,
        -2.10102402082508e-06,
        -5.69250639462346e-05,
        -7.34990630326855e-04,
        -2.95459980854025e-03,
        -1.60960333262415e-02,
    )
)
_ERF_Q = tuple(
    np.float32(c)
    for c in (
        -1.45660718464996e-05,
        -2.13374055278905e-04,
        -1.68282697438203e-03,
        -7.37332916720468e-03,
        -1.42647390514189e-02,
    )
)
_BLOCK = 16384
SPLIT_BYTES = 8 << 20  # few-row products over a matrix this large are cut into row ranges for cpu_pool
SPLIT_MACS = 1 << 26  # products (and convolutions) with this many multiply-adds are cut in halves for cpu_pool
CHUNKS = 2 * cpu_pool.CPUS  # ranges per split product (more than the threads: a late one is taken back)
TWIN_BYTES = 512 << 10  # few-row products over a matrix this large are cut in halves (cpu_twin may take one)
FLOAT_BLOCKS = (numpy_blocks.SplitAttention, numpy_blocks.SplitMlp)  # one row of their input: one_row_norm
ORT_SILU = 1 << 16  # SiLU over fewer values is faster in NumPy (one exp) than through a session


def _erf_block(t: np.ndarray, out: np.ndarray) -> None:
    """``out[:] = erf(t)`` for float32 ``t`` (``t`` is clobbered)."""
    np.clip(t, -4.0, 4.0, out=t)
    t2 = t * t
    p = np.full_like(t, _ERF_P[0])
    for c in _ERF_P[1:]:
        np.multiply(p, t2, out=p)
        np.add(p, c, out=p)
    q = np.full_like(t, _ERF_Q[0])
    for c in _ERF_Q[1:]:
        np.multiply(q, t2, out=q)
        np.add(q, c, out=q)
    np.multiply(p, t, out=p)
    np.divide(p, q, out=out)


def _blocked(x: np.ndarray, fn) -> np.ndarray:
    """Apply ``fn(block_in, block_out)`` over ``x`` in cache-sized blocks (float32 result)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty_like(x)
    src, dst = x.reshape(-1), out.reshape(-1)
    for s in range(0, src.size, _BLOCK):
        fn(src[s : s + _BLOCK], dst[s : s + _BLOCK])
    return out


def _gelu_block(v: np.ndarray, out: np.ndarray) -> None:
    t = v * np.float32(0.7071067811865476)
    _erf_block(t, out)
    np.add(out, 1.0, out=out)
    np.multiply(out, v, out=out)
    np.multiply(out, 0.5, out=out)


def _check_norm(fused, norm, eps: float) -> None:
    """A fused graph's norm must be the one its op is called with (else it would compute another norm)."""
    same = fused.norm is norm or (fused.norm is not None and norm is not None and np.array_equal(fused.norm, norm))
    if not same or (norm is not None and fused.eps != eps):
        raise ValueError("This block was fused with another norm than the one it is called with.")


def one_row_norm(x: np.ndarray, weight: np.ndarray | None, eps: float) -> np.ndarray:
    """LayerNorm without bias of one float32 row ``x [..., D]`` (two-pass: mean, then the variance of ``x - mean``),
    as a new array of ``x``'s shape: the norm before a float32 decoder block in a step (the stack's and the blocks'
    one by one, the same bits) and before a float32 product of one row (``norm_linear``: a step's head). Between a
    step's products NumPy's few calls took ~5 us against ~9 for ONNX Runtime's fused kernel, equal when both are
    hot (benchmarks/RESULTS.md, round 12). The generic ``layer_norm`` stays on that kernel, which the 8/4-bit
    graphs that hold a norm reproduce bit for bit. Statistics in float64: within float32 rounding of the exact
    norm whatever the row's mean (a float32 mean of values near 30 is off by their last bit, 2e-6)."""
    v = x.reshape(-1).astype(np.float64)
    c = v - np.add.reduce(v) / v.shape[0]
    c *= 1.0 / math.sqrt(float(np.dot(c, c)) / v.shape[0] + eps)
    out = c.astype(np.float32)
    if weight is not None:
        out *= weight
    return out.reshape(x.shape)


class StackNorm:
    """The layer norm a ``numpy_stack.SplitStack`` applies before its sublayers (both processes run it), as
    ``_pre_norm``: ``one_row_norm`` for one row before a float32 block, else ONNX Runtime's kernel (``kernels``),
    else NumPy's formula. Pickled (for a started twin) as its arguments: the child makes its own kernel."""

    def __init__(self, eps: float, kernels: bool):
        self.eps, self.kernels = eps, kernels
        self.op = ort_ops.get("layer_norm", eps, False) if kernels else None  # made now: the twin forks after

    def __call__(self, x: np.ndarray, weight: np.ndarray, block) -> np.ndarray:
        if _one_row(x, isinstance(block, FLOAT_BLOCKS)):
            return one_row_norm(x, weight, self.eps)
        if self.op is not None:
            return self.op(x, weight)
        return Backend.layer_norm(NumpyBackend, x, weight, None, self.eps)

    def __reduce__(self):
        return StackNorm, (self.eps, self.kernels)


def _one_row(x: np.ndarray, plain: bool) -> bool:
    """Whether ``one_row_norm`` norms ``x`` (float32) before weights of this kind: one row, ``plain`` float32 ones
    (a matrix, or a block of ``FLOAT_BLOCKS``)."""
    return plain and x.size == x.shape[-1]


class NumpyBackend(Backend):
    """The op set on NumPy; computes in float32 whatever the checkpoint dtype."""

    name = "numpy"
    # fresh pages from the system (np.zeros, the twin's arena) cost memory once written (Windows charges its commit
    # limit at once: rings grow there)
    lazy_zeros = sys.platform != "win32"
    xp = np

    def __init__(self, kernels: bool | None = None):
        self.blas = BlasThreads()
        self.blas.pin(1)  # parallelism comes from cpu_pool (see there why not OpenBLAS's pool)
        heap.keep_temporaries()  # large temporaries reused from the heap, not faulted in per op
        self.twin = cpu_twin.Twin()  # a helper process for few-row products (where the platform allows)
        # weight matrices on huge pages, or in shared memory a started twin maps
        self.arena = heap.Arena(self.twin.weight_memory if self.twin.started else None)
        self.kernels = ort_kernels.available() if kernels is None else kernels
        self._ones_cache: dict[int, np.ndarray] = {}
        self._last_rotation = None  # (cos, sin, cos + i sin) of the last self_attention_block

    def quantized(self, w) -> bool:
        return isinstance(w, (QuantizedWeight, ort_kernels.NBitsLinear))

    def prepare_linear(self, w):
        if isinstance(w, QuantizedWeight):
            if self.kernels and ort_kernels.supports(w.group_size, w.bits, w.packed_cols):
                try:
                    return self._nbits(self._shared(w))
                except ValueError:  # a padded matrix with a float rest (another quantizer than ours)
                    pass
            return self.arena.place(dequantize(w))  # computed in float32 (dequantized once, at load)
        return self._place(w)

    def _nbits(self, w: QuantizedWeight, norm=None, eps: float = 1e-5) -> ort_kernels.NBitsLinear:
        k = ort_kernels.NBitsLinear(
            np.asarray(w.w),
            np.asarray(w.scales, dtype=np.float32),
            np.asarray(w.biases, dtype=np.float32),
            w.group_size,
            w.bits,
            norm,
            eps,
            w.cols,
        )
        k.q = w  # kept for row lookups (a tied embedding); memory-mapped when it came from a file
        if len(k.bounds) > 2:
            self._with_twin(k)
        return k

    def _shared(self, q: QuantizedWeight) -> QuantizedWeight:
        """``q`` with its arrays in the weight arena where the twin is a started process (which rebuilds the
        8/4-bit kernels from them: ``ort_kernels``' pickling), else ``q``."""
        if not self.twin.started or self.twin.failed:
            return q
        place = self.arena.place
        w, scales, biases = place(q.w, np.uint32), place(q.scales), place(q.biases)
        return QuantizedWeight(w, scales, biases, q.group_size, q.bits, q.cols)

    def _with_twin(self, work):
        """``work`` (a product in chunks, a block cut in halves, a stack) registered with the twin, which may then
        compute part of it (where the platform has one); returned."""
        if cpu_twin.enabled():
            self.twin.register(work)
            work.twin = self.twin
        return work

    def prepare_norm_linear(self, norm, eps, w):
        if isinstance(w, ort_kernels.NBitsLinear) and w.norm is None and w.q is not None and self._ln_op(eps):
            return self._nbits(w.q, np.asarray(norm, np.float32), eps)
        if isinstance(w, np.ndarray):  # a step's product (a head, a query): the layout few rows read fastest
            t = numpy_blocks.step_layout(w)
            if t is not w and t.nbytes >= TWIN_BYTES:
                self.twin.register(t)
            return t
        return w

    def norm_linear(self, x, norm, eps, w, dtype):
        if isinstance(w, ort_kernels.NBitsLinear) and w.norm is not None:
            _check_norm(w, norm, eps)
            return w(x.reshape(-1, x.shape[-1])).reshape(*x.shape[:-1], w.shape[0])
        return self.linear(self._pre_norm(x, norm, eps, dtype, isinstance(w, np.ndarray)), w)

    def _pre_norm(self, x, norm, eps: float, dtype: str, plain: bool):
        """The input of a pre-norm product or block: ``one_row_norm`` for one row before float32 weights
        (``plain``: a float32 matrix or block), else the generic norm (``_normed``), which the 8/4-bit graphs
        that hold a norm reproduce."""
        if dtype == "float32" and _one_row(x, plain):
            return one_row_norm(x, norm, eps)
        return self._normed(x, norm, eps, dtype)

    def _ln_op(self, eps: float) -> bool:
        """Whether ONNX Runtime runs a layer norm with ``eps`` here (fused graphs use its kernel)."""
        return self._op("layer_norm", float(eps), False) is not None

    def prepare_gated_mlp(self, up_gate, up_gate_b, down, down_b, norm=None, eps=1e-5):
        if isinstance(up_gate, np.ndarray) and isinstance(down, np.ndarray):
            try:
                mlp = numpy_blocks.SplitMlp(up_gate, up_gate_b, down, down_b)
            except ValueError:  # an odd middle width or a read-only matrix: uncut
                return up_gate, up_gate_b, down, down_b
            return self._with_twin(mlp), None, mlp, None
        if not (
            isinstance(up_gate, ort_kernels.NBitsLinear)
            and isinstance(down, ort_kernels.NBitsLinear)
            and not (up_gate.with_rest or down.with_rest)
            and up_gate.q is not None
            and down.q is not None
            and ort_kernels.gated_halves(up_gate.q, down.q)
        ):
            return up_gate, up_gate_b, down, down_b
        if norm is not None and not self._ln_op(eps):
            norm = None  # no ONNX Runtime layer norm: gated_mlp applies it before the fused block
        mlp = ort_kernels.GatedMlp(up_gate.q, up_gate_b, down.q, down_b, norm, eps, keep=self.twin.started)
        return self._with_twin(mlp), None, mlp, None

    def gated_mlp(self, x, up_gate, up_gate_b, down, down_b, norm=None, eps=1e-5, dtype="float32"):
        if isinstance(up_gate, (ort_kernels.GatedMlp, numpy_blocks.SplitMlp)):
            x = self._block_input(x, up_gate, norm, eps, dtype)
            return up_gate(x.reshape(-1, x.shape[-1])).reshape(*x.shape[:-1], up_gate.shape[0])
        return super().gated_mlp(x, up_gate, up_gate_b, down, down_b, norm, eps, dtype)

    def prepare_attention_block(
        self, w_in, w_out, heads, kv_heads, head_dim, scale, interleaved=None, norm=None, eps=1e-5
    ):
        try:
            if isinstance(w_in, np.ndarray):  # float32: the norm stays a separate op
                block = numpy_blocks.SplitAttention(w_in, w_out, heads, kv_heads, head_dim, scale, interleaved)
            else:  # 8/4-bit: the norm goes into the halves' graphs where ONNX Runtime runs it
                norm = norm if norm is not None and self._ln_op(eps) else None
                block = ort_blocks.QuantSplitAttention(
                    w_in, w_out, heads, kv_heads, head_dim, scale, interleaved, norm, eps, self.twin.started
                )
        except ValueError:  # odd head counts, halves that are no whole groups, other forms: separate ops
            return None
        return self._with_twin(block)

    def self_attention_block(self, h, block, k, v, start, cos, sin, norm=None, eps=1e-5):
        lead = h.shape[:-1]
        h = self._block_input(h, block, norm, eps)
        y = block(h.reshape(-1, h.shape[-1]), k, v, start, self._rotation(cos, sin))
        return y.reshape(*lead, -1), k, v

    def _block_input(self, h, block, norm, eps, dtype="float32"):
        """What a block takes: ``h`` normed here (as the generic op; one row before a float32 block as
        ``one_row_norm``, as the stack does), unless the block holds that norm itself."""
        if block.norm is None:
            return h if norm is None else self._pre_norm(h, norm, eps, dtype, isinstance(block, FLOAT_BLOCKS))
        _check_norm(block, norm, eps)
        return h

    def _rotation(self, cos, sin) -> np.ndarray:
        """``cos + i sin`` as float32 pairs ``[n, 2 F]`` (complex64 seen as float32, ``numpy_blocks.rotate``), made
        once for all the layers of a step (they pass the same ``cos`` and ``sin``)."""
        last = self._last_rotation
        if last is None or last[0] is not cos or last[1] is not sin:
            rot = np.empty(cos.shape, np.complex64)
            rot.real, rot.imag = cos, sin
            last = self._last_rotation = cos, sin, rot.view(np.float32)
        return last[2]

    def cross_attention_block(self, h, block, k, v, mask=None, norm=None, eps=1e-5):
        lead = h.shape[:-1]
        h = self._block_input(h, block, norm, eps)
        return block(h.reshape(-1, h.shape[-1]), k, v, mask=mask).reshape(*lead, -1)

    def prepare_block_stack(self, sublayers, eps):
        try:
            stack = numpy_stack.SplitStack(sublayers, StackNorm(float(eps), self.kernels), eps)
        except ValueError:  # blocks of other forms: one by one
            return None
        return self._with_twin(stack)

    def block_stack(self, x, stack, arrays, start, cos, sin, mask=None):
        lead = x.shape[:-1]
        y = stack(x.reshape(-1, x.shape[-1]), arrays, start, self._rotation(cos, sin), mask)
        return y.reshape(*lead, -1)

    def prepare_residual_norm_linear(self, w_res, norm, eps, w_out):
        if ort_kernels.fusable(w_res) and ort_kernels.fusable(w_out) and self._ln_op(eps):
            fused = ort_kernels.ResidualNormLinear(w_res, norm, eps, w_out)
            return fused, fused
        return w_res, w_out

    def residual_norm_linear(self, x, a, w_res, norm, eps, w_out, dtype):
        if not isinstance(w_res, ort_kernels.ResidualNormLinear):
            return super().residual_norm_linear(x, a, w_res, norm, eps, w_out, dtype)
        _check_norm(w_res, norm, eps)
        lead = x.shape[:-1]
        y, out = w_res(x.reshape(-1, x.shape[-1]), a.reshape(-1, a.shape[-1]))
        return y.reshape(*lead, -1), out.reshape(*lead, -1)

    def _place(self, w) -> np.ndarray:
        """A float32 weight matrix in the arena, known to the twin when products over it are cut in halves."""
        w = self.arena.place(w)
        if w.nbytes >= TWIN_BYTES:
            self.twin.register(w)
        return w

    def quantize(self, w, group_size, bits):
        """Pads the width to whole groups (``MatMulNBits`` takes that layout) when that adds at most an eighth
        of it (Moonshine small's 620 and 2480 columns in groups of 64: a quarter of the float32 bytes, against
        float32 and groups of 16), or when no group of 16 or more fits; else a width the group does not divide
        is a ValueError (the caller tries a smaller group that fits)."""
        cols, pad = w.shape[-1], -w.shape[-1] % group_size
        if pad and PAD_SHARE * pad > cols and cols % 16 == 0:
            raise ValueError(f"{cols} columns take smaller groups than {group_size} without padding.")
        return quantize_affine(w, group_size, bits, pad=True)

    def save_tensors(self, path, tensors):
        """A safetensors file of NumPy arrays (uint32, float32, ...): an 8-byte little-endian header length,
        the JSON header, the raw little-endian data (the format's whole definition; the safetensors package
        is not a runtime dependency)."""
        names = {
            np.dtype(np.float32): "F32",
            np.dtype(np.float16): "F16",
            np.dtype(np.uint32): "U32",
            np.dtype(np.int32): "I32",
            np.dtype(np.uint8): "U8",
            np.dtype(np.int64): "I64",
        }
        header, offset, arrays = {}, 0, []
        for name, a in tensors.items():
            a = np.ascontiguousarray(a)
            header[name] = {
                "dtype": names[a.dtype],
                "shape": list(a.shape),
                "data_offsets": [offset, offset + a.nbytes],
            }
            offset += a.nbytes
            arrays.append(a)
        blob = json.dumps(header, separators=(",", ":")).encode()
        blob += b" " * (-len(blob) % 8)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(blob)) + blob)
            for a in arrays:
                f.write(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())

    def linear(self, x, w, b=None):
        if isinstance(w, ort_kernels.NBitsLinear):
            if w.norm is not None:
                raise ValueError("This product was fused with a norm: compute it with norm_linear.")
            y = w(x.reshape(-1, x.shape[-1])).reshape(*x.shape[:-1], w.shape[0])
            if b is not None:
                y += b  # y is a new array
            return y
        rows = x.size // x.shape[-1]
        x2 = x.reshape(rows, -1)
        n = w.shape[0]
        if rows > 32:  # compute-bound: whole products, split by rows of w when large (bias added per part)
            return self._cols_split(x2, w, b).reshape(*x.shape[:-1], n)
        step = numpy_blocks.block_rows(w, rows)
        chunks = CHUNKS if (w.nbytes >= SPLIT_BYTES or rows * w.size >= SPLIT_MACS) and n >= 8 * CHUNKS else 1
        halves = chunks == 1 and w.nbytes >= TWIN_BYTES and n >= 16  # for the twin only: no helper thread
        if step >= n and not halves and chunks == 1:  # few rows: W @ x^T runs ~2x faster than x @ W^T
            y = np.ascontiguousarray(numpy_blocks.product(w, x2))  # (x @ W^T over a step_layout matrix)
        else:
            y = self._linear_split(x2, w, step, 2 if halves else chunks, threads=not halves)
        y = y.reshape(*x.shape[:-1], n)
        if b is not None:
            y += b  # y is a new array (also where it is a transposed view of one)
        return y

    @staticmethod
    def _cols_split(x, w, b=None):
        """``x @ w.T (+ b)`` for many rows of ``x``: one whole OpenBLAS product per range of ``w``'s rows (one range
        per CPU, cpu_pool) when the work is ``SPLIT_MACS`` or more, each writing its columns of the result in place
        and adding their bias there. Each thread packs only its part of ``w``: 1.8-1.95x one thread on the
        encoder's products, against 1.6-1.75x for ranges of ``x``'s rows (benchmarks/RESULTS.md)."""
        rows, n = x.shape[0], w.shape[0]
        parts = cpu_pool.CPUS if rows * w.size >= SPLIT_MACS and n >= 8 * cpu_pool.CPUS else 1
        if parts == 1:
            y = x @ w.T
            if b is not None:
                y += b
            return y
        out = np.empty((rows, n), np.float32)
        edges = [n * i // parts for i in range(parts + 1)]

        def part(a: int, c: int):
            def run():
                np.matmul(x, w[a:c].T, out=out[:, a:c])
                if b is not None:
                    out[:, a:c] += b[a:c]

            return run

        cpu_pool.run([part(a, c) for a, c in zip(edges[:-1], edges[1:])])
        return out

    @staticmethod
    def _rows_split(x, product, n: int, macs: int):
        """``product(x[a:b], out[a:b])`` over row ranges of ``x [rows, ...]`` into a new ``[rows, n]`` array: one
        range per CPU (cpu_pool) when the work is ``SPLIT_MACS`` or more, else one call (a convolution builds
        each range's im2col rows where they are used)."""
        rows = x.shape[0]
        out = np.empty((rows, n), np.float32)
        parts = cpu_pool.CPUS if macs >= SPLIT_MACS and rows >= 8 * cpu_pool.CPUS else 1
        if parts == 1:
            product(x, out)
            return out
        edges = [rows * i // parts for i in range(parts + 1)]
        cpu_pool.run([lambda a=a, c=c: product(x[a:c], out[a:c]) for a, c in zip(edges[:-1], edges[1:])])
        return out

    def _linear_split(self, x, w, step: int, chunks: int, threads: bool = True):
        """``x [rows <= 32, in] @ w.T`` as independent products over ``chunks`` row ranges of ``w``, one
        OpenBLAS thread each: the last ranges on the twin process where it runs (half of them on two CPUs, one
        CPU's share on more: ``cpu_twin.caller_share``), the others through ``cpu_pool`` (only the calling
        thread unless ``threads``). Within a range, 2-12 rows go over blocks of ``step`` weight rows:
        OpenBLAS's few-column GEMM over a whole large matrix runs at a third of the memory bandwidth, over
        blocks that stay in L2 at nearly all of it (1.3-2x faster; benchmarks/RESULTS.md). The ranges do not
        depend on who computes them, so neither do the results."""
        n, rows = w.shape[0], x.shape[0]
        out = np.empty((n, rows), np.float32)
        edges = [n * i // chunks for i in range(chunks + 1)]
        half = cpu_twin.caller_share(chunks)
        ticket = self.twin.submit(w, x, edges[half:], step)
        xs = x if ticket is None else ticket[1]

        def job(a: int, c: int):
            def run():
                for s in range(a, c, step):
                    e = min(c, s + step)
                    cpu_twin.product_into(w[s:e], xs, out[s:e])

            return run

        def place(theirs):
            out[edges[half] :] = theirs[: (n - edges[half]) * rows].reshape(-1, rows)

        jobs = [job(a, c) for a, c in zip(edges[:-1], edges[1:])]
        cpu_twin.run_parts(self.twin, ticket, jobs, half, place, threads)
        return np.ascontiguousarray(out.T)

    def embed(self, table, ids):
        if isinstance(table, ort_kernels.NBitsLinear):
            q, rows = table.q, np.asarray(ids, dtype=np.int64).reshape(-1)
            return dequantize(
                replace(
                    q, w=np.asarray(q.w)[rows], scales=np.asarray(q.scales)[rows], biases=np.asarray(q.biases)[rows]
                )
            )
        return super().embed(table, ids)

    def asarray(self, a, dtype=None):
        a = np.asarray(a)
        if dtype in (None, "float32", "float16", "bfloat16"):
            return a if a.dtype.kind in "iub" and dtype is None else np.asarray(a, dtype=np.float32)
        return np.asarray(a, dtype=dtype)

    def to_numpy(self, x):
        x = np.asarray(x)
        return x.astype(np.float32) if x.dtype.kind == "f" and x.dtype != np.float32 else x

    def zeros(self, shape, dtype="float32"):
        return np.zeros(shape, dtype=np.float32 if dtype in ("float16", "bfloat16") else dtype)

    def astype(self, x, dtype):
        return x.astype(np.float32 if dtype in ("float16", "bfloat16") else dtype, copy=False)

    def check_fits(self, store, what):
        """Weights become float32 here: refuse when that clearly exceeds the memory available now."""
        n = sum(int(np.prod(i.shape)) for i in store.infos.values() if i.dtype in ("float32", "float16", "bfloat16"))
        need, avail = 4 * n, memory.available_memory()
        if avail is not None and need > 0.9 * avail:
            raise ModelError(
                f"This {what} model needs about {need / 2**30:.1f} GiB as float32 for the NumPy backend but only "
                f"{avail / 2**30:.1f} GiB is available; use the MLX backend (Apple Silicon) or a quantized model."
            )

    def _op(self, *key):
        """The ONNX Runtime kernel for an elementwise op (``ort_ops``), or None: compute it with NumPy."""
        return ort_ops.get(*key) if self.kernels else None

    def _ones(self, n: int) -> np.ndarray:
        ones = self._ones_cache.get(n)
        if ones is None:
            ones = self._ones_cache[n] = np.ones(n, np.float32)
        return ones

    def erf(self, x):
        return _blocked(x, lambda v, o: _erf_block(v.copy(), o))

    def gelu(self, x):
        op = self._op("gelu")
        return op(x) if op is not None else _blocked(x, _gelu_block)

    def silu(self, x):
        op = self._op("silu") if x.size >= ORT_SILU else None
        if op is not None:
            return op(x)
        with np.errstate(over="ignore"):
            return x / (1.0 + np.exp(-x))

    def rope(self, x, cos, sin, interleaved):
        if interleaved and x.shape[-1] % 2 == 0 and x.dtype == np.float32:  # one complex product (numpy_blocks)
            return numpy_blocks.rotate(x, self._rotation(cos, sin).view(np.complex64))
        f = cos.shape[-1]
        out = np.empty(x.shape, np.float32)
        pick = (slice(0, 2 * f, 2), slice(1, 2 * f, 2)) if interleaved else (slice(0, f), slice(f, 2 * f))
        a, b = x[..., pick[0]], x[..., pick[1]]
        ya, yb = out[..., pick[0]], out[..., pick[1]]
        t = b * sin
        np.multiply(a, cos, out=ya)
        ya -= t  # a cos - b sin
        np.multiply(b, cos, out=t)
        np.multiply(a, sin, out=yb)
        yb += t  # a sin + b cos
        if 2 * f < x.shape[-1]:
            out[..., 2 * f :] = x[..., 2 * f :]
        return out

    def layer_norm(self, x, weight, bias, eps):
        op = self._op("layer_norm", float(eps), bias is not None)
        if op is None:
            return super().layer_norm(x, weight, bias, eps)
        w = self._ones(x.shape[-1]) if weight is None else weight
        return op(x, w) if bias is None else op(x, w, bias)

    def rms_norm(self, x, weight, eps):
        op = self._op("rms_norm", float(eps))
        if op is None:
            return super().rms_norm(x, weight, eps)
        return op(x, self._ones(x.shape[-1]) if weight is None else weight)

    def softmax(self, x, axis=-1):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        e /= np.sum(e, axis=axis, keepdims=True)
        return e

    def attention(self, q, k, v, scale, mask=None):
        softmax = self._op("softmax") if mask is not None else None  # for the windowed path (masked) only
        return numpy_attention.attend(q, k, v, scale, mask, self.twin, softmax)

    def kv_zeros(self, shape, dtype="float32"):
        a = self.twin.arena.zeros(tuple(shape)) if self.twin.arena is not None else None
        return a if a is not None else self.zeros(shape, dtype)

    def prepare_conv(self, w):
        c_out, c_in, k = w.shape
        # [C_out, K * C_in], a linear weight for im2col rows (k-major, then channel): streaming convs have
        # few rows, and go through linear's fast paths for those.
        return self._place(np.asarray(w, dtype=np.float32).transpose(0, 2, 1).reshape(c_out, k * c_in))

    def conv1d(self, x, w, b, stride=1):
        c_out, kc = w.shape
        c_in = x.shape[1]
        k = kc // c_in
        t_out = (x.shape[0] - k) // stride + 1
        if t_out <= 0:
            return np.zeros((0, c_out), dtype=np.float32)
        if t_out <= 32:  # streaming: im2col rows through linear's few-row paths
            span = stride * (t_out - 1) + 1
            return self.linear(np.concatenate([x[j : j + span : stride] for j in range(k)], axis=1), w, b)

        def product(ts, out):  # output frames ts (a range): their im2col rows, built where they are used
            t0, t1 = ts[0], ts[-1] + 1
            span = stride * (t1 - t0 - 1) + 1
            cols = np.concatenate([x[t0 * stride + j : t0 * stride + j + span : stride] for j in range(k)], axis=1)
            np.matmul(cols, w.T, out=out)
            if b is not None:
                out += b

        return self._rows_split(np.arange(t_out), product, c_out, t_out * w.size)
