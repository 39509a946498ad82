#!/usr/bin/env python3
"""What a second CPU can add to a decoder step's products, by how the work is handed to it.

The products of one Moonshine small decoder step (float32, one activation row: per layer q/k/v 1536 x 512,
o / cross-q / cross-o 512 x 512, fc1 4096 x 512, fc2 512 x 2048; ten layers; the 32768 x 512 head), over
distinct random matrices (~245 MB, so every pass reads memory, as a step does), with one OpenBLAS thread per
call unless said otherwise:

- ``one``: every product on the calling thread;
- ``thread``: each product's rows cut in two, the second half on a helper thread (``engine.backends.cpu_pool``,
  the engine's mechanism: the helper blocks between products and the GIL passes between the threads);
- ``process``: the second half on a forked helper process that spins on a shared counter between products
  (its own GIL; weights, activation and result in a shared mapping; parked while the other sides run, then one
  untimed pass to wake both cores; Linux only; the prototype of ``engine.backends.cpu_twin``; its spinning
  counts as another process's CPU time);
- ``openblas``: each product in one call on OpenBLAS's own pool of all CPUs (threads that spin between calls;
  OpenBLAS cuts some shapes along the inner dimension, so its sums can differ from one thread's in the last
  bits); run last in every round, 0.15 s before the next one, so that its spinning threads (~0.1 s after the
  last call) do not compete with the other sides.

``one``, ``thread`` and ``process`` compute every output element with the same single-threaded call, so
their results are bit-identical (checked). Interleaved rounds, each side timed on its second pass (this VM's
cores run the first milliseconds after an idle gap ~30 % slower), medians.

    .venv/bin/python benchmarks/handoff.py --runs 15
"""

from __future__ import annotations

import argparse
import mmap
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (ROOT, HERE):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import _common  # noqa: E402  (before numpy: thread settings)

LAYER = [(1536, 512), (512, 512), (512, 512), (512, 512), (4096, 512), (512, 2048)]
SHAPES = LAYER * 10 + [(32768, 512)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=15)
    a = p.parse_args(argv)
    _common.set_threads(os.cpu_count() or 1)
    import numpy as np
    from threadpoolctl import threadpool_limits

    from engine.backends import cpu_pool

    if not hasattr(os, "fork"):
        print("needs os.fork (Linux)")
        return 1
    total = sum(n * k for n, k in SHAPES)
    biggest = max(n for n, _ in SHAPES)
    region = mmap.mmap(-1, 4 * (total + 2048 + biggest) + 4096, flags=mmap.MAP_SHARED)
    ctrl = np.frombuffer(region, np.int64, 5, offset=0)  # job number, jobs done, matrix index, stop, spin
    x = np.frombuffer(region, np.float32, 2048, offset=64)
    y = np.frombuffer(region, np.float32, biggest, offset=64 + 4 * 2048)
    arena = np.frombuffer(region, np.float32, total, offset=64 + 4 * (2048 + biggest))
    rng = np.random.default_rng(0)
    ws, off = [], 0
    for n, k in SHAPES:
        w = arena[off : off + n * k].reshape(n, k)
        w[...] = rng.standard_normal((n, k), dtype=np.float32)
        ws.append(w)
        off += n * k
    xs = {k: rng.standard_normal(k, dtype=np.float32) for k in (512, 2048)}

    with threadpool_limits(1, user_api="blas"):
        pid = os.fork()
        if pid == 0:  # the helper process: spin on the job counter, compute the second half, count it done
            seen = 0
            while True:
                while ctrl[0] == seen:
                    if not ctrl[4]:  # parked while the other sides run: no spinning beside them
                        time.sleep(0.0005)
                seen = int(ctrl[0])
                if ctrl[3]:
                    os._exit(0)
                w = ws[int(ctrl[2])]
                h = w.shape[0] // 2
                np.matmul(w[h:], x[: w.shape[1]], out=y[h : w.shape[0]])
                ctrl[1] = seen

        out = np.empty(biggest, np.float32)
        jobs, spent = [0], [0.0]

        def one():
            for w in ws:
                np.matmul(w, xs[w.shape[1]], out=out[: w.shape[0]])
            return out

        def thread():
            for w in ws:
                n, h, v = w.shape[0], w.shape[0] // 2, xs[w.shape[1]]
                cpu_pool.run(
                    [
                        lambda w=w, h=h, v=v: np.matmul(w[:h], v, out=out[:h]),
                        lambda w=w, h=h, n=n, v=v: np.matmul(w[h:], v, out=out[h:n]),
                    ]
                )
            return out

        def process():
            ctrl[4] = 1  # the helper leaves its parking loop; a first, untimed pass warms both cores up
            for _ in range(2):
                t0 = time.perf_counter()
                for i, w in enumerate(ws):
                    k, h = w.shape[1], w.shape[0] // 2
                    x[:k] = xs[k]
                    ctrl[2] = i
                    jobs[0] += 1
                    ctrl[0] = jobs[0]
                    np.matmul(w[:h], x[:k], out=y[:h])
                    while ctrl[1] != jobs[0]:
                        pass
                spent[0] = time.perf_counter() - t0
            ctrl[4] = 0
            return y

        def openblas():
            with threadpool_limits(os.cpu_count() or 1, user_api="blas"):
                for w in ws:
                    np.matmul(w, xs[w.shape[1]], out=out[: w.shape[0]])
            return out

        sides = {"one": one, "thread": thread, "process": process, "openblas": openblas}
        last = {}
        for name, fn in sides.items():  # results of the last matrix (the head)
            last[name] = fn()[: SHAPES[-1][0]].copy()
        same = {name: bool(np.array_equal(last[name], last["one"])) for name in sides}
        times = {name: [] for name in sides}
        other = _common.OtherLoad().start()
        order = [(n, f) for n, f in sides.items() if n != "openblas"]
        for r in range(1 + a.runs):
            # OpenBLAS's pool last in every round, then 0.15 s for its threads to stop spinning (~0.1 s)
            for name, fn in (order if r % 2 == 0 else order[::-1]) + [("openblas", openblas)]:
                if name != "process":  # process() warms up inside (its helper parks between calls)
                    fn()
                t0 = time.perf_counter()
                fn()
                if r:
                    times[name].append(spent[0] if name == "process" else time.perf_counter() - t0)
            time.sleep(0.15)
        share = other.stop()
        ctrl[3] = 1
        jobs[0] += 1
        ctrl[0] = jobs[0]
        os.waitpid(pid, 0)

    nbytes = 4 * total
    rows = [
        [
            name,
            _common.fmt(1000 * float(np.median(v)), 2),
            _common.fmt(nbytes / float(np.median(v)) / 1e9, 1),
            _common.fmt(float(np.median(times["one"])) / float(np.median(v)), 2) + "x",
            "yes" if same[name] else "no",
        ]
        for name, v in times.items()
    ]
    print("\n".join(_common.machine_report(os.cpu_count() or 1, {"numpy": "numpy"})))
    print(
        f"- products of one step: {len(SHAPES)}, {nbytes / 1e6:.0f} MB; {a.runs} rounds; other processes used "
        f"{100 * (share or 0):.0f}% of the CPU time\n"
    )
    print(_common.markdown_table(["handoff", "ms per step's products", "GB/s", "vs one", "bit-identical to one"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
