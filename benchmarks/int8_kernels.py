#!/usr/bin/env python3
"""One-row 8-bit products on ONNX Runtime's kernels, and what another kernel would cost in accuracy (issue #16).

A Moonshine small 8-bit decoder step spends most of the caller's time in ``MatMulNBits`` (8 bits, groups of 64,
int8 activations per block of 64: the engine's kernel), which reads a cold matrix at ~8-10 GB/s on one AVX2
core. ONNX Runtime's dynamic int8 graphs (the benchmark's ``ort-int8``) run ``DynamicQuantizeMatMul`` instead:
one int8 code per weight with one scale per output column, the input row quantized to uint8 as a whole. Two
commands:

- ``products``: ``x [1, K] @ W^T`` for a decoder's shapes, one thread, over enough distinct matrices that each
  call reads memory, interleaved, medians in microseconds. Sides: ``nbits-g64`` (the engine's), ``nbits-g256``
  (the same kernel over groups of 256), ``dqmm-s8`` (int8 weights; on AVX2 without VNNI the kernel adds pairs
  of uint8 x int8 products in int16 and saturates), ``dqmm-u8`` (uint8 weights with a zero point: no
  saturation), ``f32`` (OpenBLAS over float32 weights).
- ``with SIDE SCRIPT ARGS``: runs another benchmark (``quant_accuracy.py``, ``moonshine_ort.py``) with the
  engine's 8-bit graphs built on ``SIDE`` instead (``dqmm-s8``, ``dqmm-s7``: int8 codes limited to +-63, which
  cannot saturate; ``dqmm-u8``; ``nbits-g256``; ``f32-act``: the per-column codes dequantized and multiplied in
  float32, i.e. the weights' rounding alone). The per-column codes are taken from the engine's dequantized
  group-of-64 weights. ``--only normed|head`` limits the swap to the products whose input is a layer norm's
  output (and the head), or to the head.

Only ratios from one run compare; they hold for that machine.

    .venv/bin/python benchmarks/int8_kernels.py products --runs 300
    .venv/bin/python benchmarks/int8_kernels.py with dqmm-u8 quant_accuracy.py --bits 8 --models small
    .venv/bin/python benchmarks/int8_kernels.py with dqmm-u8 moonshine_ort.py --variants small --sides numpy-q8,ort-int8
"""

from __future__ import annotations

import argparse
import runpy
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (ROOT, HERE):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import _common  # noqa: E402  (before numpy: thread settings)

SHAPES = ((4096, 512), (512, 2048), (1536, 512), (512, 512), (8192, 512))  # [N, K]: small's up|gate, down, qkv, ...
INT8 = 3  # TensorProto.DataType


def _int8_tensor(name: str, a) -> bytes:
    """An int8 initializer (``onnx_proto.tensor`` writes float32, uint8 and int64 only)."""
    from engine.backends import onnx_proto as P

    body = b"".join(P._int(1, d) for d in a.shape) + P._int(2, INT8) + P._bytes(8, name)
    return body + P._bytes(9, a.tobytes())


def per_column(w, side: str, x: str, y: str, tag: str) -> tuple[list, list]:
    """Nodes and initializers of ``y = x @ w^T`` for float32 ``w [N, K]`` on ``side`` (``dqmm-*``, ``f32-act``)."""
    import numpy as np

    from engine.backends import onnx_proto as P

    lim = 63 if side == "dqmm-s7" else 127
    c = np.abs(w).max(1) / lim
    c[c == 0] = 1
    codes = np.clip(np.rint(w / c[:, None]), -lim, lim)
    if side == "f32-act":
        return [P.node("MatMul", [x, tag + "W"], [y])], [
            P.tensor(tag + "W", np.ascontiguousarray((codes * c[:, None]).T))
        ]
    names = [x, tag + "B", tag + "S"]
    if side == "dqmm-u8":
        inits = [P.tensor(tag + "B", np.ascontiguousarray(codes.T + 128).astype(np.uint8))]
        inits.append(P.tensor(tag + "Z", np.full(len(c), 128, np.uint8)))
        names.append(tag + "Z")
    else:
        inits = [_int8_tensor(tag + "B", np.ascontiguousarray(codes.T).astype(np.int8))]
    node = P.node("DynamicQuantizeMatMul", names, [y], domain="com.microsoft")
    return [node], [*inits, P.tensor(tag + "S", c.astype(np.float32))]


def regrouped(w, group: int):
    """``w [N, K]`` quantized afresh to 8 bits in groups of ``group`` (padded): ``(blob, scales, zero points)``."""
    import numpy as np

    n, k = w.shape
    g = -(-k // group)
    wp = np.zeros((n, g * group), np.float32)
    wp[:, :k] = w
    wg = wp.reshape(n, g, group)
    lo, hi = np.minimum(wg.min(2), 0), np.maximum(wg.max(2), 0)
    s = (hi - lo) / 255
    s[s == 0] = 1
    z = np.clip(np.rint(-lo / s), 0, 255)
    q = np.clip(np.rint(wg / s[..., None]) + z[..., None], 0, 255).astype(np.uint8)
    return q, s.astype(np.float32), z.astype(np.uint8)


def patch(side: str, only: str | None) -> None:
    """Build the engine's 8-bit graphs on ``side`` from here on (``ort_kernels._matmul_nbits`` replaced)."""
    import numpy as np

    from engine.backends import ort_blocks, ort_kernels

    engine = ort_kernels._matmul_nbits

    def build(x, y, tag, blob, s, z, group_size, bits, k=0):
        n, g = s.shape
        head = n > 4096  # only the head's chunks are this tall in Moonshine
        keep = bits != 8 or (only == "head" and not head) or (only == "normed" and not head and x not in ("xn", "h"))
        if keep:
            return engine(x, y, tag, blob, s, z, group_size, bits, k)
        w = (blob.reshape(n, g, group_size).astype(np.float32) - z.reshape(n, g, 1)) * s.reshape(n, g, 1)
        w = w.reshape(n, -1)[:, : k or g * group_size]
        if side.startswith("nbits-g"):
            group = int(side[7:])
            q, s2, z2 = regrouped(w, group)
            return engine(x, y, tag, q, s2, z2, group, 8, w.shape[1])
        return per_column(w, side, x, y, tag)

    ort_kernels._matmul_nbits = ort_blocks._matmul_nbits = build


def products(runs: int) -> None:
    import numpy as np

    from engine.backends import onnx_proto as P
    from engine.backends.ort_kernels import _matmul_nbits, _session, runner

    rng = np.random.default_rng(0)
    sides = ("nbits-g64", "nbits-g256", "dqmm-s8", "dqmm-u8", "f32")

    def make(side: str, w):
        n, k = w.shape
        if side == "f32":
            wt = np.ascontiguousarray(w).T
            return lambda x: x @ wt
        if side.startswith("nbits-g"):
            nodes, inits = _matmul_nbits("x", "y", "", *regrouped(w, int(side[7:])), int(side[7:]), 8, k)
        else:
            nodes, inits = per_column(w, side, "x", "y", "")
        model = P.model(
            nodes,
            inits,
            [P.value_info("x", ["rows", k])],
            [P.value_info("y", ["rows", n])],
            {"": 17, "com.microsoft": 1},
        )
        run = runner(_session(model))
        return lambda x: run(["y"], {"x": x})

    rows = []
    for n, k in SHAPES:
        copies = max(4, 48_000_000 // (n * k))  # ~48 MB of int8 per side: three times the L3 of the development VM
        mats = [rng.standard_normal((n, k), dtype=np.float32) * 0.05 for _ in range(copies)]
        fns = {side: [make(side, w) for w in mats] for side in sides}
        x = rng.standard_normal((1, k), dtype=np.float32)
        times: dict[str, list[float]] = {side: [] for side in sides}
        for r in range(runs):
            order = sides if r % 2 else sides[::-1]
            for side in order:
                f = fns[side][r % copies]
                t = time.perf_counter()
                f(x)
                times[side].append(time.perf_counter() - t)
        med = {side: float(np.median(t)) * 1e6 for side, t in times.items()}
        rows.append(
            [f"{n} x {k}"] + [f"{med[s]:.0f} ({n * k * (4 if s == 'f32' else 1) / med[s] / 1e3:.1f})" for s in sides]
        )
        print(" | ".join(rows[-1]), flush=True)
    print()
    print(_common.markdown_table(["N x K", *(f"{s} us (GB/s)" for s in sides)], rows))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    pr = sub.add_parser("products", help="one-row products, one thread")
    pr.add_argument("--runs", type=int, default=300)
    w = sub.add_parser("with", help="run another benchmark with the 8-bit graphs on another kernel")
    w.add_argument("side", choices=("dqmm-s8", "dqmm-s7", "dqmm-u8", "nbits-g128", "nbits-g256", "f32-act"))
    w.add_argument("--only", choices=("normed", "head"))
    w.add_argument("script")
    w.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    if a.cmd == "products":
        _common.set_threads(1)
        print(f"# {_common.cpu_model()}; one thread; {a.runs} calls per side and shape, interleaved; medians")
        products(a.runs)
        return 0
    patch(a.side, a.only)
    script = HERE / a.script
    sys.argv = [str(script), *a.args]
    runpy.run_path(str(script), run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
