"""Elementwise and normalization ops of the NumPy backend on ONNX Runtime's fused CPU kernels.

Why: NumPy evaluates a formula one pass over memory per operation (GELU's erf polynomial is ~27 passes,
a layer norm ~9) and pays ~1-3 us of dispatch per call; ONNX Runtime's kernels (MLAS) do each op in one
vectorized pass, and a single-node session runs in ~3 us. Measured on the AMD EPYC development machine
(benchmarks/RESULTS.md): GELU over 500 x 2480 values 0.48 ms against 2.9 ms, a layer norm over one
512-wide row 3.2 us against 10 us. ONNX Runtime is already the backend's kernel library (``ort_kernels``).

Each op is one small graph with symbolic ``[rows, cols]`` shapes, built once per process and shared
(``InferenceSession.run`` may be called from several threads at once). Large inputs are cut into row ranges
that ``cpu_pool`` runs in parallel, each writing its rows of the result in place (an ``IOBinding`` over the
output). Results do not depend on the cut: every op works row by row. Ops whose graph the installed ONNX
Runtime cannot build are ``None`` here, and the backend computes them with NumPy.
"""

from __future__ import annotations

import threading

import numpy as np

from . import cpu_pool
from . import onnx_proto as P
from .ort_kernels import runner, runtime

PAR_ELEMS = 1 << 20  # inputs with at least this many values are cut into row ranges, one per CPU (cpu_pool)
_lock = threading.Lock()
_cache: dict = {}


class RowOp:
    """``y = f(x, *params)`` row by row over a float32 ``[..., cols]`` array, on one ONNX Runtime session."""

    def __init__(self, session, n_params: int):
        self._s, self.n_params = session, n_params
        self._run = runner(session)
        self._names = ["x"] + [f"p{i}" for i in range(n_params)]

    def __call__(self, x: np.ndarray, *params: np.ndarray) -> np.ndarray:
        shape = x.shape
        x2 = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, shape[-1])
        feed = dict(zip(self._names[1:], params))
        rows = x2.shape[0]
        if x2.size < PAR_ELEMS or rows < 2 or cpu_pool.CPUS < 2:
            return self._run(["y"], {"x": x2, **feed})[0].reshape(shape)
        out = np.empty_like(x2)
        ort = runtime()
        parts = min(rows, cpu_pool.CPUS)
        edges = [rows * i // parts for i in range(parts + 1)]

        def job(a: int, b: int):
            def run():
                binding = self._s.io_binding()
                binding.bind_cpu_input("x", x2[a:b])
                for name, p in feed.items():
                    binding.bind_cpu_input(name, p)
                binding.bind_ortvalue_output("y", ort.OrtValue.ortvalue_from_numpy(out[a:b]))
                self._s.run_with_iobinding(binding)

            return run

        cpu_pool.run([job(a, b) for a, b in zip(edges[:-1], edges[1:])])
        return out.reshape(shape)


def _build(key: tuple) -> RowOp | None:
    """The session of op ``key``; None where this ONNX Runtime cannot build it."""
    op, *args = key
    x, y = P.value_info("x", ["rows", "cols"]), P.value_info("y", ["rows", "cols"])
    vec = [P.value_info(f"p{i}", ["cols"]) for i in range(2)]
    opsets = {"": 17, "com.microsoft": 1}
    if op == "gelu":
        nodes, inputs = [P.node("Gelu", ["x"], ["y"], domain="com.microsoft")], [x]
    elif op == "silu":  # QuickGelu is x * sigmoid(alpha x)
        nodes, inputs = [P.node("QuickGelu", ["x"], ["y"], domain="com.microsoft", alpha=1.0)], [x]
    elif op == "softmax":
        nodes, inputs = [P.node("Softmax", ["x"], ["y"], axis=-1)], [x]
    elif op == "layer_norm":
        eps, with_bias = args
        ins = ["x", "p0", "p1"] if with_bias else ["x", "p0"]
        nodes = [P.node("LayerNormalization", ins, ["y"], axis=-1, epsilon=float(eps))]
        inputs = [x] + vec[: len(ins) - 1]
    elif op == "rms_norm":
        (eps,) = args
        nodes = [P.node("SimplifiedLayerNormalization", ["x", "p0"], ["y"], axis=-1, epsilon=float(eps))]
        inputs = [x, vec[0]]
    else:
        raise ValueError(op)
    try:
        ort = runtime()
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.intra_op_num_threads, so.inter_op_num_threads = 1, 1  # parallelism comes from cpu_pool
        session = ort.InferenceSession(P.model(nodes, [], inputs, [y], opsets), so, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - an older runtime without this op: the backend falls back to NumPy
        return None
    return RowOp(session, len(inputs) - 1)


def get(op: str, *args) -> RowOp | None:
    """The shared session for ``op`` ("gelu", "silu", "softmax", ("layer_norm", eps, with_bias), ("rms_norm", eps)),
    or None when ONNX Runtime is missing or cannot build it."""
    key = (op, *args)
    with _lock:
        if key not in _cache:
            try:
                _cache[key] = _build(key)
            except ImportError:
                _cache[key] = None
        return _cache[key]
