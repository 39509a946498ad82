"""Quantized matrix products on the CPU through ONNX Runtime's ``MatMulNBits`` kernels (MLAS).

Why a library: NumPy cannot multiply 8-bit or 4-bit weights fast (it would have to dequantize to float32
first and read four to eight times the bytes), and hand-written SIMD is not an option. ONNX Runtime's
``MatMulNBits`` (com.microsoft) takes blockwise 4/8-bit weights with a float scale per block and runs them
with AVX2 / AVX-512 (VNNI) kernels at memory bandwidth; the int8-activation mode (``accuracy_level`` 4)
quantizes each block of the input row on the fly, as ONNX Runtime's own int8 deployments do.

Those kernels are made for few rows (a decoder step): over many they are compute-bound, and without VNNI 2.3x
slower than a float32 product of the same shape. So from ``DEQUANT_ROWS`` rows (an encoder over a segment, a
prefill) an ``NBitsLinear`` dequantizes its weights a block at a time and multiplies in float32 on OpenBLAS
(``_dequantized``): the exact product of the quantized weights, within ~1.1x of float32's time.

Each matrix becomes one small ONNX graph per row chunk, each in its own single-threaded ``InferenceSession``
(it computes on the calling thread); ``cpu_pool`` runs the chunks of a large matrix in parallel when the
machine is not busy (see there why not ONNX Runtime's own pool).

Layout: an MLX affine matrix (``quant.QuantizedWeight``: each value ``q * scale + bias`` per group of
``group_size`` columns, packed least significant bit first in uint32 words) maps onto ``MatMulNBits``
without unpacking: for 4 and 8 bits the words viewed as little-endian bytes are exactly its blocks (low
nibble first) and the scales are used as they are. ``MatMulNBits`` has no float offset per block (its zero
points are integers; float ones run a slow path), so what the integers leave of the biases is added in the
same graph as
``(x summed over each group) @ rest^T``, an exact rewrite of ``sum_k x_k (q_k s + b)`` with integer zero
points ``z`` nearest ``-b / s`` and ``rest = b + z s`` (so the integer part stays centred, see ``NBitsLinear``).
MLX's own quantizer makes ``b`` a whole multiple of ``s``; the rest is then float rounding and is left out.

A gated MLP block (up and gate products, SiLU, the down product) runs as two graphs over halves of its middle
width (``GatedMlp``): a decoder step's MLP is then one session run per half, the second for a ``cpu_twin``. A
residual projection, the layer norm after it and the next projection run as one graph (``ResidualNormLinear``),
and a layer norm before a product or a gated MLP goes into its graphs (``norm``): a Moonshine 8-bit decoder step
runs 4 sessions per layer on the calling thread instead of 8.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from . import cpu_pool, cpu_twin
from . import onnx_proto as P
from .quant import QuantizedWeight, dequantize_rows

BITS = (4, 8)
ACCURACY = {8: 4, 4: 4}  # MatMulNBits accuracy_level per bit width: 4 = int8 activations (the fast kernels)
SPLIT_BYTES = 8 << 20  # a matrix this large is cut into row chunks that cpu_pool may run in parallel
HALF_BYTES = 512 << 10  # a smaller one from this size into two chunks where a cpu_twin may run the second
ALIGN = 64  # chunks start at multiples of this: MatMulNBits computes the last few columns of a range (its
# width modulo the kernel's tile) another way, so a cut elsewhere changed those columns' last bits (tested)
CHUNKS = 2 * cpu_pool.CPUS  # chunks of a split matrix (more than the threads, so that a late one is taken back)
DEQUANT_ROWS = 128  # products of this many rows dequantize their weights and run in float32 (NBitsLinear)
DEQUANT_BLOCK = 512  # output rows dequantized at a time there (bounds the temporary: 1.3 MB at 640 wide)
REST_ULPS = 2.0**-21  # a float rest within ~4 ulp of its group's largest value is rounding, not weight (NBitsLinear)
SESSION_THREADS = 1  # ONNX Runtime's own threads per session (1: none, the calling thread computes)
_lock = threading.Lock()
_ort: Any = None


def available() -> bool:
    """Whether ONNX Runtime imports here (the quantized CPU path needs it)."""
    try:
        runtime()
    except ImportError:
        return False
    return True


def runtime():
    """The ``onnxruntime`` module (imported on first use, its telemetry off: see ``engine``)."""
    global _ort
    with _lock:
        if _ort is None:
            import onnxruntime as ort

            ort.disable_telemetry_events()  # Windows builds (elsewhere ORT_DISABLE_TELEMETRY did it at import)
            _ort = ort
    return _ort


def supports(group_size: int, bits: int, in_dim: int) -> bool:
    """Whether a ``[*, in_dim]`` matrix quantized with ``group_size`` / ``bits`` runs on these kernels."""
    return bits in BITS and group_size >= 16 and group_size & (group_size - 1) == 0 and in_dim % group_size == 0


def _session(model: bytes):
    """A session that computes on the calling thread only (parallelism comes from ``cpu_pool``)."""
    ort = runtime()
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads, so.inter_op_num_threads = SESSION_THREADS, 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def runner(session):
    """``run(output_names, feed) -> outputs`` of a session: the binding's own ``run`` where the installed ONNX
    Runtime has it (``InferenceSession._sess``: the public ``run`` re-checks the input names on every call,
    ~1 us, a tenth of a small product), else the public one."""
    inner = getattr(session, "_sess", None)
    if inner is not None and hasattr(inner, "run"):
        return lambda names, feed: inner.run(names, feed, None)
    return session.run


def _aligned_bounds(out_dim: int, n: int) -> list[int]:
    """``0 = b_0 < ... < b_k = out_dim``: at most ``n`` ranges of about equal size starting at multiples of
    ``ALIGN``, none empty."""
    return sorted({out_dim * i // n // ALIGN * ALIGN for i in range(n)} | {out_dim})


class _RowChunks:
    """A ``[out, in]`` product as sessions over row chunks: ``make(a, b)`` returns the model bytes of rows
    ``a:b``. Matrices from ``SPLIT_BYTES`` are ``CHUNKS`` chunks (for ``cpu_pool``), from ``HALF_BYTES`` two
    where the platform has a ``cpu_twin`` (the second for the twin, set as ``twin``: one more session run
    costs ~10 us, 8 % of the Moonshine small 8-bit step when the caller computes both), smaller ones one.
    Products of more rows than the twin takes (an encoder over a whole segment: compute-bound) run their
    chunks over ``cpu_pool``'s threads.
    Chunks start at multiples of ``ALIGN``: ``MatMulNBits`` then computes every output column alike whatever
    the cut (tested), so results do not depend on the cut nor on who computes which chunk.
    ``chunks`` and ``lazy`` are for a started twin (``twin_spawn``), which rebuilds the product from its
    arguments: the caller's number of chunks, each chunk's session made when it is first run."""

    twin = None  # a cpu_twin.Twin that knows this product (set by the backend), or None

    def __init__(self, out_dim: int, in_dim: int, nbytes: int, make, chunks: int = 0, lazy: bool = False):
        self.shape, self.nbytes = (out_dim, in_dim), nbytes
        n = CHUNKS if nbytes >= SPLIT_BYTES and out_dim >= 8 * CHUNKS and cpu_pool.CPUS > 1 else 1
        threads = n > 1
        if n == 1 and nbytes >= HALF_BYTES and out_dim >= 16 and cpu_twin.enabled():
            n = 2
        n = chunks or n
        self.bounds = _aligned_bounds(out_dim, n)
        self._threads = threads and len(self.bounds) > 2
        spans = list(zip(self.bounds[:-1], self.bounds[1:]))
        self._make = make if lazy else None
        self._sessions = [None if lazy else _session(make(a, b)) for a, b in spans]
        self._runs = [None if lazy else runner(s) for s in self._sessions]

    def run_chunk(self, i: int, x: np.ndarray) -> np.ndarray:
        """Rows ``bounds[i]:bounds[i + 1]`` of the product: ``[rows, n_i]`` float32 for ``x [rows, in]``."""
        return (self._runs[i] or self._made(i))(["y"], {"x": x})[0]

    def _made(self, i: int):
        """A lazy copy's chunk ``i``, its session made now."""
        self._sessions[i] = _session(self._make(self.bounds[i], self.bounds[i + 1]))
        self._runs[i] = runner(self._sessions[i])
        return self._runs[i]

    def twin_ready(self) -> None:
        """In a started twin: make the sessions of the chunks a caller hands it (``cpu_twin.caller_share``) now,
        so that no job waits for one."""
        n = len(self._runs)
        for i in range(cpu_twin.caller_share(n) if n > 1 else 0, n):
            if self._runs[i] is None:
                self._made(i)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """``x [rows, in]`` (float32) -> ``[rows, out]`` float32."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        chunks = len(self._sessions)
        if chunks == 1:
            return self._runs[0](["y"], {"x": x})[0]
        rows = x.shape[0]
        out = np.empty((rows, self.shape[0]), np.float32)
        half = cpu_twin.caller_share(chunks)
        ticket = self.twin.submit(self, x, [half, chunks]) if self.twin is not None else None
        if ticket is not None:
            x = ticket[1]

        def job(i):
            def run():
                out[:, self.bounds[i] : self.bounds[i + 1]] = self._runs[i](["y"], {"x": x})[0]

            return run

        def place(theirs):
            at = 0
            for i in range(half, chunks):
                a, c = self.bounds[i], self.bounds[i + 1]
                out[:, a:c] = theirs[at : at + rows * (c - a)].reshape(rows, c - a)
                at += rows * (c - a)

        threads = self._threads or rows > cpu_twin.MAX_ROWS
        cpu_twin.run_parts(self.twin, ticket, [job(i) for i in range(chunks)], half, place, threads)
        return out


def _affine_blocks(q, rows: slice | np.ndarray = slice(None), groups: slice = slice(None)):
    """``MatMulNBits`` inputs for rows ``rows`` and column groups ``groups`` of a ``QuantizedWeight`` ``q``
    (NumPy arrays): ``(blob [n, g, group bytes], scales [n, g], zero points as the kernel packs them, rest [n, g],
    whether the rest is more than rounding)``.

    ``q s + b = (q - z) s + (b + z s)`` with the integer ``z`` nearest ``-b / s``: ``MatMulNBits`` sees centred
    values (its int8 activations then err as little as for a symmetric code) and the float rest is at most
    ``s / 2``. MLX's quantizer nudges each scale so that the bias is an integer multiple of it: the rest is
    then only float rounding (under half an ulp of the group's largest value, below what dequantizing rounds
    itself), and leaving it out saves a third of a small product's time (~12 us of ~35, four more nodes)."""
    bits, gs = q.bits, q.group_size
    in_dim = q.packed_cols
    w = np.ascontiguousarray(np.asarray(q.w)[rows], dtype="<u4").view(np.uint8)
    blob = w.reshape(w.shape[0], in_dim // gs, gs * bits // 8)[:, groups]
    s = np.ascontiguousarray(np.asarray(q.scales, dtype=np.float32)[rows][:, groups])
    b = np.asarray(q.biases, dtype=np.float32)[rows][:, groups]
    z = np.clip(np.rint(-b / s), 0, (1 << bits) - 1).astype(np.uint8)
    rest = b + z.astype(np.float32) * s
    with_rest = bool(np.any(np.abs(rest) > REST_ULPS * (np.abs(b) + ((1 << bits) - 1) * np.abs(s))))
    if bits == 4:
        z = np.concatenate([z, np.zeros((z.shape[0], z.shape[1] % 2), np.uint8)], axis=1)
        z = z[:, 0::2] | (z[:, 1::2] << 4)  # low nibble first, each row padded to whole bytes
    return np.ascontiguousarray(blob), s, z, rest, with_rest


def _matmul_nbits(x: str, y: str, tag: str, blob, s, z, group_size: int, bits: int, k: int = 0) -> tuple[list, list]:
    """The ``MatMulNBits`` node ``y = x @ W^T`` over ``_affine_blocks`` parts, and its initializers (named
    after ``tag``). ``k``: the width of ``x`` when the blocks are padded past it (``QuantizedWeight.cols``):
    the kernel reads only the first ``k`` values of the last block, exactly as if ``x`` were padded with zeros
    (tested)."""
    n, groups = s.shape
    node = P.node(
        "MatMulNBits",
        [x, tag + "B", tag + "S", tag + "Z"],
        [y],
        domain="com.microsoft",
        K=k or groups * group_size,
        N=n,
        bits=bits,
        block_size=group_size,
        accuracy_level=ACCURACY[bits],
    )
    return [node], [P.tensor(tag + "B", blob), P.tensor(tag + "S", s.reshape(-1)), P.tensor(tag + "Z", z.reshape(-1))]


def _norm(x: str, y: str, norm: np.ndarray, eps: float) -> tuple[bytes, bytes]:
    """The node ``y = layer_norm(x)`` with weight ``norm`` and no bias (the node ``ort_ops`` runs), and the
    initializer ``norm`` it reads."""
    node = P.node("LayerNormalization", [x, "norm"], [y], axis=-1, epsilon=float(eps))
    return node, P.tensor("norm", np.asarray(norm, np.float32))


def _model(nodes: list, inits: list, in_dim: int, out_dim: int) -> bytes:
    return P.model(
        nodes,
        inits,
        [P.value_info("x", ["rows", in_dim])],
        [P.value_info("y", ["rows", out_dim])],
        {"": 17, "com.microsoft": 1},
    )


class NBitsLinear(_RowChunks):
    """``x @ W.T`` for an affine-quantized ``W [out, in]`` (4 or 8 bits) on ONNX Runtime's CPU kernels.

    Built from the packed words, scales and biases of an MLX-layout matrix (NumPy arrays); the sessions hold
    their own packed copy, so the arrays may be dropped afterwards. Call it with a float32 ``[rows, in]`` array; it
    returns ``[rows, out]`` float32. Biases that are no whole multiple of their scale (another quantizer than
    MLX's) keep the float rest in the same graph, ``(x summed over each group) @ rest^T`` (``with_rest``).
    """

    q = None  # the QuantizedWeight it was built from (set by the backend: row lookups, fusing a gated MLP)
    _norm_run = None  # the norm alone, for products of many rows (``_dequantized``)

    def __init__(
        self,
        w: np.ndarray,
        scales: np.ndarray,
        biases: np.ndarray,
        group_size: int,
        bits: int,
        norm: np.ndarray | None = None,
        eps: float = 1e-5,
        cols: int = 0,
        chunks: int = 0,
        lazy: bool = False,
    ):
        """``norm``: a layer norm weight (no bias) applied to ``x`` first, in every chunk's graph: the product of
        ``layer_norm(x, norm, eps)`` (a pre-norm projection in one session run per chunk). ``cols``: the real
        width when the packed one is padded (``QuantizedWeight.cols``); ``x`` then has ``cols`` columns.
        ``chunks``, ``lazy``: as ``_RowChunks``'."""
        out_dim = w.shape[0]
        packed = w.shape[1] * 32 // bits
        if not supports(group_size, bits, packed):
            raise ValueError(f"MatMulNBits cannot run {bits}-bit weights in groups of {group_size} over {packed}.")
        self.group_size, self.bits = group_size, bits
        blob, s, z, rest, with_rest = _affine_blocks(QuantizedWeight(w, scales, biases, group_size, bits, cols))
        groups, in_dim = packed // group_size, cols or packed
        if with_rest and in_dim != packed:
            raise ValueError("Padded weights with a float rest do not run on MatMulNBits.")

        x = "x" if norm is None else "xn"
        self.norm, self.eps = norm, eps

        def make(a: int, c: int) -> bytes:
            y = "y0" if with_rest else "y"
            nodes, inits = _matmul_nbits(x, y, "", blob[a:c], s[a:c], z[a:c], group_size, bits, in_dim)
            if norm is not None:
                node, weight = _norm("x", "xn", norm, eps)
                nodes.insert(0, node)
                inits.append(weight)
            if with_rest:
                nodes += [
                    P.node("Reshape", [x, "gshape"], ["xg"]),
                    P.node("ReduceSum", ["xg", "gaxis"], ["xs"], keepdims=0),
                    P.node("MatMul", ["xs", "restT"], ["yb"]),
                    P.node("Add", ["y0", "yb"], ["y"]),
                ]
                inits += [
                    P.tensor("restT", np.ascontiguousarray(rest[a:c].T)),
                    P.tensor("gshape", np.array([-1, groups, group_size], np.int64)),
                    P.tensor("gaxis", np.array([2], np.int64)),
                ]
            return _model(nodes, inits, in_dim, c - a)

        self.with_rest = with_rest
        nbytes = blob.nbytes + s.nbytes + (rest.nbytes if with_rest else 0)
        super().__init__(out_dim, in_dim, nbytes, make, chunks, lazy)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """``x [rows, in]`` (float32) -> ``[rows, out]`` float32; from ``DEQUANT_ROWS`` rows (an encoder over a
        segment, a prefill) the weights are dequantized block by block and multiplied by OpenBLAS in float32."""
        if self.q is None or x.shape[0] < DEQUANT_ROWS:
            return super().__call__(x)
        return self._dequantized(np.ascontiguousarray(x, dtype=np.float32))

    def _dequantized(self, x: np.ndarray) -> np.ndarray:
        """Why: ``MatMulNBits``' int8-activation kernels are made for few rows; over many they are compute-bound,
        and without VNNI (AVX2 only) 2.3x slower than a float32 product of the same shape, where the dequantized
        product is 1.1x (its fixed cost, dequantizing, is spread over the rows; benchmarks/RESULTS.md round 25).
        It is also the exact product of the quantized weights (MLX's), not one of int8-rounded activations."""
        if self.norm is not None:  # the norm node the chunks' graphs hold, alone (made on first use)
            if self._norm_run is None:
                node, weight = _norm("x", "y", self.norm, self.eps)
                width = [P.value_info(n, ["rows", x.shape[1]]) for n in ("x", "y")]
                self._norm_run = runner(_session(P.model([node], [weight], width[:1], width[1:], {"": 17})))
            x = self._norm_run(["y"], {"x": x})[0]
        q, out_dim = self.q, self.shape[0]
        out = np.empty((x.shape[0], out_dim), np.float32)
        edges = _aligned_bounds(out_dim, cpu_pool.CPUS)

        def part(a: int, c: int):
            def run():
                for r in range(a, c, DEQUANT_BLOCK):
                    e = min(c, r + DEQUANT_BLOCK)
                    np.matmul(x, dequantize_rows(q, r, e).T, out=out[:, r:e])

            return run

        cpu_pool.run([part(a, c) for a, c in zip(edges[:-1], edges[1:])])
        return out

    def __reduce__(self):
        """For a started twin: rebuilt from ``q`` (its arrays in shared memory) with the same chunks, each
        chunk's session made on first use; without ``q`` it cannot go (TypeError)."""
        q = self.q
        if q is None:
            raise TypeError("an 8/4-bit product without its QuantizedWeight")
        return _rebuilt_nbits, (q, self.norm, self.eps, len(self.bounds) - 1)


def _rebuilt_nbits(q, norm, eps: float, chunks: int) -> NBitsLinear:
    k = NBitsLinear(q.w, q.scales, q.biases, q.group_size, q.bits, norm, eps, q.cols, chunks, lazy=True)
    k.q = q
    return k


def gated_halves(up_gate, down) -> bool:
    """Whether ``GatedMlp`` can run this pair of ``QuantizedWeight``s: 4/8-bit matrices on these kernels with
    at least two groups of ``down`` across the middle width."""
    f = down.shape[1]
    return (
        not (up_gate.padded or down.padded)
        and up_gate.bits == down.bits
        and up_gate.shape == (2 * f, down.shape[0])
        and supports(up_gate.group_size, up_gate.bits, up_gate.shape[1])
        and supports(down.group_size, down.bits, f)
        and f >= 2 * down.group_size
    )


class GatedMlp:
    """A gated MLP ``down(silu(gate) * up) + down_b`` with ``up | gate = x @ up_gate^T + up_gate_b`` (the first
    and second halves of its features), for 4/8-bit weights, as two ONNX Runtime graphs over halves of the
    middle width (cut at the whole group of ``down`` nearest the middle): half ``i`` takes its channels' rows
    of the up and of the gate matrix and their column groups of ``down``, and returns its share of the
    output; the caller adds the shares (``down_b`` comes with the first). One session run per half instead of
    two products, the activation and the bias adds in between (~16 us of ~65 per Moonshine small 8-bit MLP),
    and the second half is one job for a ``cpu_twin``. Biases that are no multiple of their scale (another
    quantizer than MLX's) are refused: ``NBitsLinear`` keeps their float rest.

    Results do not depend on the twin: the halves are the same whoever computes them, and added in the same
    order. They differ from the unfused products in the last bits (``down``'s sum is cut in two).
    ``run_chunk``, ``bounds`` and ``shape`` are what ``cpu_twin`` asks of a product it runs."""

    twin = None  # a cpu_twin.Twin that knows this MLP (set by the backend), or None

    def __init__(
        self,
        up_gate,
        up_gate_b,
        down,
        down_b,
        norm: np.ndarray | None = None,
        eps: float = 1e-5,
        keep: bool = False,
        lazy: bool = False,
    ):
        """``norm``: a layer norm weight (no bias) applied to ``x`` first, in both halves' graphs. ``keep``: hold
        on to the arguments, so that a started twin can rebuild it (pickled; else they may go once the graphs
        hold their copies); ``lazy``: such a rebuilt copy, each half's session made when it is first run."""
        if not gated_halves(up_gate, down):
            raise ValueError("These matrices cannot run as a fused gated MLP.")
        d_out, f = down.shape
        self.bits, self.group_size = down.bits, down.group_size
        self.shape, self.bounds = (d_out, up_gate.shape[1]), [0, d_out, 2 * d_out]
        self.norm, self.eps = norm, eps
        args = (up_gate, up_gate_b, down, down_b)
        self._args = args if keep or lazy else None
        cut = f // self.group_size // 2 * self.group_size
        self._halves = ((0, cut), (cut, f))
        self._runs: list = [None, None]
        self.nbytes = 0
        for i in () if lazy else (0, 1):
            self._runs[i] = self._half(i, args)

    def _half(self, i: int, args: tuple):
        """The runner of half ``i``'s graph (channels ``_halves[i]`` of the middle width)."""
        up_gate, up_gate_b, down, down_b = args
        (d_out, f), gs, norm = down.shape, self.group_size, self.norm
        a, c = self._halves[i]
        rows = np.r_[a:c, f + a : f + c]  # up rows, then the gate rows of the same channels
        b1, s1, z1, _, rest1 = _affine_blocks(up_gate, rows)
        b2, s2, z2, _, rest2 = _affine_blocks(down, slice(None), slice(a // gs, c // gs))
        if rest1 or rest2:
            raise ValueError("These matrices cannot run as a fused gated MLP.")
        x = "x" if norm is None else "xn"
        n1, i1 = _matmul_nbits(x, "u0", "up", b1, s1, z1, up_gate.group_size, self.bits)
        n2, i2 = _matmul_nbits("m", "y0" if i == 0 else "y", "down", b2, s2, z2, gs, self.bits)
        nodes = n1 + [
            P.node("Add", ["u0", "ub"], ["u"]),
            P.node("Split", ["u", "halves"], ["up", "gate"], axis=1),
            P.node("Sigmoid", ["gate"], ["sg"]),
            P.node("Mul", ["gate", "sg"], ["act"]),
            P.node("Mul", ["act", "up"], ["m"]),
            *n2,
        ]
        ub = np.zeros(2 * f, np.float32) if up_gate_b is None else np.asarray(up_gate_b, np.float32)
        inits = i1 + i2 + [P.tensor("ub", ub[rows]), P.tensor("halves", np.array([c - a, c - a], np.int64))]
        if i == 0:
            db = np.zeros(d_out, np.float32) if down_b is None else np.asarray(down_b, np.float32)
            nodes.append(P.node("Add", ["y0", "db"], ["y"]))
            inits.append(P.tensor("db", db))
        if norm is not None:
            node, weight = _norm("x", "xn", norm, self.eps)
            nodes.insert(0, node)
            inits.append(weight)
        self.nbytes += b1.nbytes + s1.nbytes + b2.nbytes + s2.nbytes
        return runner(_session(_model(nodes, inits, up_gate.shape[1], d_out)))

    def __reduce__(self):
        """For a started twin: rebuilt from its arguments (arrays in shared memory), each half made on first use;
        TypeError unless it kept them (``keep``)."""
        if self._args is None:
            raise TypeError("a fused gated MLP that did not keep its matrices")
        return GatedMlp, (*self._args, self.norm, self.eps, True, True)

    def run_chunk(self, i: int, x: np.ndarray) -> np.ndarray:
        """Half ``i``'s share of the output, ``[rows, out]`` float32, for ``x [rows, in]``."""
        run = self._runs[i]
        if run is None:
            run = self._runs[i] = self._half(i, self._args)
        return run(["y"], {"x": x})[0]

    def twin_ready(self) -> None:
        """In a started twin: make the second half's session (the one it is handed) now."""
        if self._runs[1] is None:
            self._runs[1] = self._half(1, self._args)

    def combine(self, share0: np.ndarray, share1: np.ndarray) -> np.ndarray:
        """The MLP's output from its halves' shares (``down_b`` is in the first)."""
        return share0 + share1

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """``x [rows, in]`` (float32) -> ``[rows, out]`` float32."""
        return cpu_twin.sum_of_halves(self, x)


def fusable(w) -> bool:
    """Whether ``NBitsLinear`` ``w`` runs as one session with no float rest (so it can join a larger graph)."""
    return isinstance(w, NBitsLinear) and len(w.bounds) == 2 and not w.with_rest and w.q is not None and not w.q.padded


class ResidualNormLinear:
    """``(y, layer_norm(y) @ w_out^T)`` with ``y = x + a @ w_res^T``, for two single-session ``NBitsLinear``
    (``fusable``), as one ONNX Runtime graph: one session run instead of two products and a norm (a Moonshine
    decoder layer's output projection, post-attention norm and cross-attention query; ~21 -> 11 us warm for
    small's 8-bit 512 x 512 matrices). The nodes are the ones the separate ops run (``MatMulNBits`` as
    ``NBitsLinear`` builds it, ``LayerNormalization`` as ``ort_ops``), so the results equal theirs bit for bit
    (tested). It holds its own packed copies; the separate products may be dropped."""

    def __init__(self, w_res: NBitsLinear, norm: np.ndarray, eps: float, w_out: NBitsLinear):
        if not (fusable(w_res) and fusable(w_out) and w_res.shape[0] == w_out.shape[1] == norm.shape[0]):
            raise ValueError("These matrices cannot run as one fused graph.")

        def product(x: str, y: str, tag: str, w: NBitsLinear) -> tuple[list, list]:
            blob, s, z, _, _ = _affine_blocks(w.q)
            return _matmul_nbits(x, y, tag, blob, s, z, w.group_size, w.bits)

        (res, res_w), (out, out_w) = product("a", "r", "res", w_res), product("h", "out", "out", w_out)
        norm_node, norm_w = _norm("y", "h", norm, eps)
        nodes = res + [P.node("Add", ["x", "r"], ["y"]), norm_node] + out
        inits = res_w + out_w + [norm_w]
        d = w_res.shape[0]
        model = P.model(
            nodes,
            inits,
            [P.value_info("x", ["rows", d]), P.value_info("a", ["rows", w_res.shape[1]])],
            [P.value_info("y", ["rows", d]), P.value_info("out", ["rows", w_out.shape[0]])],
            {"": 17, "com.microsoft": 1},
        )
        self.norm, self.eps = norm, eps
        self._run = runner(_session(model))

    def __call__(self, x: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``x [rows, d]``, ``a [rows, in]`` (float32) -> ``(y [rows, d], out [rows, out])``."""
        y, out = self._run(
            ["y", "out"],
            {"x": np.ascontiguousarray(x, dtype=np.float32), "a": np.ascontiguousarray(a, dtype=np.float32)},
        )
        return y, out
