#!/usr/bin/env python3
"""One decoder step's cross-attention over K/V stored in float32, float16 or int8: time and error (issue #16).

A Moonshine small decoder step reads ~20 MB of cross-attention K/V in float32, every step, cold (the layers'
weights pass through the caches in between); on an AVX2 machine one thread reads a 512 KB block at ~7-9 GB/s,
half its streaming rate. Fewer bytes per value would read faster, but NumPy has no fast float16 or int8
products, so the narrow formats run as small ONNX Runtime graphs (one single-threaded session, as the engine's
kernels do). Sides, each one layer's half of the heads (``--heads`` x ``--frames`` x 64, a step's share of one
process), over ``--layers`` distinct K/V sets so that each pass reads memory:

- ``numpy-f32``: the engine's own one-query attention (``numpy_attention.dense``);
- ``ort-f32``: ``FusedMatMul`` (transB, the scale), ``Softmax``, ``MatMul`` over float32 K/V;
- ``ort-f16``: the same after a ``Cast`` of float16 K/V to float32;
- ``ort-int8``: K/V as int8 with one scale per frame (``Cast``, ``Mul``), the same graph after it;
- ``nbits-k``: the scores alone through ``MatMulNBits`` (8 bits, one block per frame) with K as a graph input
  instead of an initializer (what an appendable quantized K would need).

Interleaved rounds, medians, microseconds per layer half; the error is the largest difference from
``numpy-f32``'s result (or its scores). Only time ratios from one run compare; they hold for that machine.

    .venv/bin/python benchmarks/cross_kv_formats.py --runs 15
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (ROOT, HERE):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import _common  # noqa: E402  (before numpy: thread settings)


def graph(heads: int, frames: int, dim: int, kind: str) -> bytes:
    """An attention graph over ``kind`` K/V ("f32", "f16", "int8") or MatMulNBits scores ("nbits")."""
    from onnx import TensorProto as T
    from onnx import helper as h

    q = h.make_tensor_value_info("q", T.FLOAT, [heads, 1, dim])
    nodes, inits = [], []
    if kind == "nbits":
        ins = [q]
        for i in range(heads):
            ins += [
                h.make_tensor_value_info(f"k{i}", T.UINT8, [frames, 1, dim]),
                h.make_tensor_value_info(f"s{i}", T.FLOAT, [frames]),
            ]
            inits.append(h.make_tensor(f"i{i}", T.INT64, [], [i]))
            nodes += [
                h.make_node("Gather", ["q", f"i{i}"], [f"q{i}"], axis=0),
                h.make_node(
                    "MatMulNBits",
                    [f"q{i}", f"k{i}", f"s{i}"],
                    [f"o{i}"],
                    domain="com.microsoft",
                    K=dim,
                    N=frames,
                    bits=8,
                    block_size=dim,
                    accuracy_level=4,
                ),
            ]
        nodes.append(h.make_node("Concat", [f"o{i}" for i in range(heads)], ["o"], axis=0))
    else:
        elem = {"f32": T.FLOAT, "f16": T.FLOAT16, "int8": T.INT8}[kind]
        ins = [q] + [h.make_tensor_value_info(n, elem, [heads, frames, dim]) for n in ("k", "v")]
        k, v = "k", "v"
        if kind != "f32":
            nodes += [h.make_node("Cast", [n], [n + "c"], to=T.FLOAT) for n in ("k", "v")]
            k, v = "kc", "vc"
        if kind == "int8":
            ins += [h.make_tensor_value_info(n, T.FLOAT, [heads, frames, 1]) for n in ("ks", "vs")]
            nodes += [h.make_node("Mul", ["kc", "ks"], ["kf"]), h.make_node("Mul", ["vc", "vs"], ["vf"])]
            k, v = "kf", "vf"
        nodes += [
            h.make_node("FusedMatMul", ["q", k], ["s"], domain="com.microsoft", transB=1, alpha=dim**-0.5),
            h.make_node("Softmax", ["s"], ["p"], axis=-1),
            h.make_node("MatMul", ["p", v], ["o"]),
        ]
    g = h.make_graph(nodes, kind, ins, [h.make_tensor_value_info("o", T.FLOAT, None)], inits)
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return model.SerializeToString()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--frames", type=int, default=500)
    p.add_argument("--layers", type=int, default=40, help="distinct K/V sets (40 x 1 MB: past a 16 MB L3)")
    a = p.parse_args(argv)
    _common.set_threads(1)
    import numpy as np
    import onnxruntime as ort

    from engine.backends.numpy_attention import dense

    H, F, D, L = a.heads, a.frames, 64, a.layers
    rng = np.random.default_rng(0)
    q = rng.standard_normal((H, 1, D)).astype(np.float32)
    K = [rng.standard_normal((H, F, D)).astype(np.float32) for _ in range(L)]
    V = [rng.standard_normal((H, F, D)).astype(np.float32) for _ in range(L)]

    def per_frame_int8(x):
        s = np.abs(x).max(-1, keepdims=True) / 127
        return np.round(x / s).astype(np.int8), s.astype(np.float32)

    K16, V16 = [k.astype(np.float16) for k in K], [v.astype(np.float16) for v in V]
    K8, V8 = [per_frame_int8(k) for k in K], [per_frame_int8(v) for v in V]
    KN = [(np.ascontiguousarray((k8.astype(np.int16) + 128).astype(np.uint8)[..., None, :]), s[..., 0]) for k8, s in K8]
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    sess = {
        k: ort.InferenceSession(graph(H, F, D, k), so, providers=["CPUExecutionProvider"])
        for k in ("f32", "f16", "int8", "nbits")
    }
    out = np.empty((H, 1, D), np.float32)

    def nbits_feed(i):
        feed = {"q": q}
        for h in range(H):
            feed[f"k{h}"], feed[f"s{h}"] = KN[i][0][h], KN[i][1][h]
        return feed

    sides = {
        "numpy-f32": lambda i: dense(q, K[i], V[i], D**-0.5, None, out),
        "ort-f32": lambda i: sess["f32"].run(None, {"q": q, "k": K[i], "v": V[i]}),
        "ort-f16": lambda i: sess["f16"].run(None, {"q": q, "k": K16[i], "v": V16[i]}),
        "ort-int8": lambda i: sess["int8"].run(
            None, {"q": q, "k": K8[i][0], "v": V8[i][0], "ks": K8[i][1], "vs": V8[i][1]}
        ),
        "nbits-k": lambda i: sess["nbits"].run(None, nbits_feed(i)),
    }
    dense(q, K[0], V[0], D**-0.5, None, out)
    ref, ref_scores = out.copy(), np.matmul(q, K[0].transpose(0, 2, 1))[:, 0]
    err = {
        "numpy-f32": 0.0,
        "ort-f32": float(np.abs(sides["ort-f32"](0)[0] - ref).max()),
        "ort-f16": float(np.abs(sides["ort-f16"](0)[0] - ref).max()),
        "ort-int8": float(np.abs(sides["ort-int8"](0)[0] - ref).max()),
        "nbits-k": float(np.abs(sides["nbits-k"](0)[0].reshape(H, F) - ref_scores).max()),
    }
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(a.runs):
        for name, fn in sides.items():
            t = time.perf_counter()
            for i in range(L):
                fn(i)
            times[name].append((time.perf_counter() - t) / L * 1e6)
    base = float(np.median(times["numpy-f32"]))
    print("\n".join(_common.machine_report(1, {"numpy": "numpy", "onnxruntime": "onnxruntime"})))
    print(
        f"\n{H} heads x {F} frames x {D}, {L} K/V sets, {a.runs} interleaved rounds; "
        f"largest output {np.abs(ref).max():.3f}, largest score {np.abs(ref_scores).max():.1f}\n"
    )
    rows = []
    for name, ts in times.items():
        med = float(np.median(ts))
        rows.append([name, _common.fmt(med), f"{base / med:.2f}x", f"{err[name]:.1e}"])
    print(_common.markdown_table(["side", "us / layer half", "numpy-f32 / side", "max error"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
