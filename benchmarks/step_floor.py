#!/usr/bin/env python3
"""The floor of a Moonshine float32 decoder step on this machine: its reads alone, in two processes (issue #16).

The engine's step runs each sublayer as two halves, one per process (``numpy_stack``): a half's products
(OpenBLAS, one thread, the engine's ``step_layout``), its attention over its heads' cross K/V, and between
them the norms, RoPE, the activation, the exchange of the shares and the Python that calls it all. This
benchmark keeps only the reads: each of two processes runs, step after step, the products of its half of every
layer and of the head (the engine's shapes and layouts, random float32 weights) and one attention call per layer
over its half of the cross K/V (``--frames``), with nothing in between and no exchange. What it takes is the
least a step built from these library calls can take here; against the bound of ``moonshine_ort.py`` (the
step's bytes over the read rate of a 512 MiB matrix-vector product, probed before and after every round),
it says how far any float32 step made of OpenBLAS's products can get on this machine.

Medians over ``--steps`` steps per round (the slower process counts), ``--runs`` rounds; the probe's best rate
gives "of bound (best rate)", the median of the probes "of bound (median rate)". ``--engine`` also times the
engine's own float32 step in every round (``moonshine_ort``'s 65 cached steps over 10 s of noise, its twin on),
right after the floor, so that the two are compared within the same minutes (this VM's read rate moves by half
between minutes). ``--library blis`` runs the floor's products on BLIS instead (``pip install blis``, the
``bench`` extra: cython-blis, BLIS's own kernels for the CPU at hand; its one-row product over the stored
``[out, in]`` matrix, the only form its Python binding gets right), to see whether another library's products
read faster here. It holds for this machine only.

    .venv/bin/python benchmarks/step_floor.py --variant small --runs 5 --engine
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (ROOT, HERE):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import _common  # noqa: E402  (before numpy: thread settings)


def half_shapes(cfg: dict) -> tuple[list[tuple[int, int]], tuple[int, int], tuple[int, int, int]]:
    """One process's share of a step: each layer's matrices ``[out, in]`` in the order the step reads them (its
    half of the self-attention's q/k/v rows and output columns, of the cross-attention's query rows and output
    columns, of the MLP's up and gate rows and down columns), the head's half, and its cross K (or V) per layer."""
    d, f, h, hd = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_attention_heads"], cfg["head_dim"]
    hkv = cfg["num_key_value_heads"]
    a = h // 2 * hd
    layer = [((h // 2 + hkv) * hd, d), (d, a), (a, d), (d, a), (f, d), (d, f // 2)]
    return layer, (cfg["vocab_size"] // 2, d), (hkv // 2, 0, hd)


def _process(cfg: dict, frames: int, steps: int, seed: int, start, done, library: str = "openblas") -> None:
    import numpy as np
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")  # one thread per process, as the engine's halves
    from engine.backends import numpy_attention
    from engine.backends.numpy_blocks import product, step_layout

    rng = np.random.default_rng(seed)
    layer, head_shape, (kvh, _, hd) = half_shapes(cfg)

    def matrix(shape):
        w = rng.standard_normal(shape, dtype=np.float32)
        return w if library == "blis" else step_layout(w)

    if library == "blis":
        import blis.py as blis

        def product(w, x):  # noqa: F811  (BLIS's one-row product over the stored [out, in] matrix)
            return blis.gemv(w, x[0])

    layers = [
        ([matrix(s) for s in layer], [rng.standard_normal((kvh, frames, hd), dtype=np.float32) for _ in range(2)])
        for _ in range(cfg["num_hidden_layers"])
    ]
    head = matrix(head_shape)
    x = {n: rng.standard_normal((1, n), dtype=np.float32) for n in {s[1] for s in layer} | {head_shape[1]}}
    q = rng.standard_normal((cfg["num_attention_heads"] // 2, 1, hd), dtype=np.float32)

    def step() -> None:
        for mats, (k, v) in layers:
            for i, w in enumerate(mats):
                product(w, x[w.shape[1]])
                if i == 2:  # the cross-attention's query product, then its attention
                    numpy_attention.attend(q, k, v, hd**-0.5)
        product(head, x[head_shape[1]])

    step()
    while True:
        if start.get() is None:
            return
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        done.put(statistics.median(times))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variant", default="small", help="tiny, small or medium (the benchmarks' random models)")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--frames", type=int, default=500, help="cross-attention length (500 = 10 s of audio)")
    p.add_argument("--engine", action="store_true", help="also time the engine's float32 step in every round")
    p.add_argument("--library", choices=("openblas", "blis"), default="openblas", help="whose products the floor runs")
    a = p.parse_args(argv)
    _common.set_threads(2)  # the probe reads with every thread; each process limits itself to one
    import moonshine_offline as mo
    import moonshine_ort as bench

    cfg = json.loads((mo.model_folder(a.variant) / "config.json").read_text())
    nbytes = bench.step_bytes(cfg, a.frames, 32.5, 4.0)  # moonshine_ort's mean past of 65 steps
    ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    starts, done = [ctx.Queue() for _ in range(2)], ctx.Queue()
    procs = [
        ctx.Process(target=_process, args=(cfg, a.frames, a.steps, i, starts[i], done, a.library)) for i in range(2)
    ]
    for proc in procs:
        proc.start()
    floors, rates, engine = [], [], []
    try:
        runner = _engine(mo, a.variant, a.frames) if a.engine else None
        for r in range(a.runs):
            rates.append(max(bench.read_bandwidth(runs=3).values()))
            for s in starts:
                s.put(r)
            floors.append(max(done.get(), done.get()))
            line = f"round {r + 1}: floor {floors[-1] * 1e3:.2f} ms per step"
            if runner is not None:
                engine.append(runner.decode()[1])
                line += f", engine {engine[-1] * 1e3:.2f} ms per token ({floors[-1] / engine[-1]:.0%} of its time)"
            print(f"{line}; read rate before {rates[-1]:.1f} GB/s", flush=True)
        rates.append(max(bench.read_bandwidth(runs=3).values()))
    finally:
        for s in starts:
            s.put(None)
        for proc in procs:
            proc.join()
    floor, best, median = statistics.median(floors), max(rates), statistics.median(rates)
    print(f"\n{_common.cpu_model()}; {a.variant}, {a.frames} frames: {nbytes / 1e6:.0f} MB per step; {a.library}")
    print(f"floor {floor * 1e3:.2f} ms per step (rounds {', '.join(f'{t * 1e3:.2f}' for t in floors)})")
    print(f"read rate best {best:.1f}, median {median:.1f} GB/s")
    print(f"of bound: {nbytes / best / 1e9 / floor:.0%} (best rate), {nbytes / median / 1e9 / floor:.0%} (median rate)")
    if engine:
        step = statistics.median(engine)
        per_round = statistics.median(f / e for f, e in zip(floors, engine))
        print(f"engine {step * 1e3:.2f} ms per token: {nbytes / best / 1e9 / step:.0%} of bound (best rate), ", end="")
        print(f"{nbytes / median / 1e9 / step:.0%} (median rate); floor / engine per round: median {per_round:.0%}")
    return 0


def _engine(mo, variant: str, frames: int):
    """``moonshine_ort``'s float32 engine side: 65 cached steps over 10 s of seeded noise (warmed up once)."""
    import numpy as np

    n = frames * 320
    audio = (np.random.default_rng(0).standard_normal(n) * 0.1).astype(np.float32)
    tokens = [int(t) for t in np.random.default_rng(1).integers(259, 32000, int(np.ceil(6.5 * n / 16000)))]
    runner = mo.EngineRunner(mo.model_folder(variant), "numpy", audio, tokens, None)
    runner.decode()
    return runner


if __name__ == "__main__":
    sys.exit(main())
