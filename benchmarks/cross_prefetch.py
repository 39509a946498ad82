#!/usr/bin/env python3
"""Can the twin's idle time warm the caller's next matrix? A probe for issue #16's float32 step (not the engine).

Between its products the caller of a decoder step runs ~2 ms of norms, exchanges and Python per small step while
the twin waits (``step_floor.py``). If the two CPUs shared a last-level cache, the twin could read the caller's
next matrix into it in that time, and the caller's product would then stream it from the cache instead of
memory. This measures the premise: one-row products (the engine's ``step_layout`` transpose, one OpenBLAS
thread, CPU 0) over a matrix just read by another process on CPU 1 (``other``), against the same product cold
(``cold``) and over a matrix this process has just read itself (``own``, the product alone timed). Each matrix
is read once per round out of ``--copies`` (more than the cache holds). Medians of ``--runs`` products per side,
sides interleaved. It holds for this machine only.

    .venv/bin/python benchmarks/cross_prefetch.py --runs 600
"""

from __future__ import annotations

import argparse
import mmap
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
for p in (HERE.parent, HERE):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import _common  # noqa: E402  (before numpy: thread settings)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=600)
    p.add_argument("--copies", type=int, default=40, help="matrices read in turn (40 x 4 MB: past a 16 MB L3)")
    p.add_argument("--shape", default="512x2048", help="the transposed matrix [in, out] (small's MLP up half)")
    args = p.parse_args(argv)
    if len(os.sched_getaffinity(0)) < 2 or not hasattr(os, "fork"):
        print("needs two CPUs and fork")
        return 1
    import numpy as np
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")
    k, n = (int(v) for v in args.shape.split("x"))
    buf = mmap.mmap(-1, args.copies * k * n * 4)  # shared with the child: the same physical pages
    mats = np.frombuffer(buf, np.float32).reshape(args.copies, k, n)
    mats[:] = np.random.default_rng(0).standard_normal(mats.shape, dtype=np.float32)
    ctl = np.frombuffer(mmap.mmap(-1, 64), np.int64)  # [job, warm it?, done]
    cpus = sorted(os.sched_getaffinity(0))[:2]

    def touch(m: np.ndarray) -> float:
        return float(m.reshape(-1)[::16].sum())  # one float per 64-byte line

    if os.fork() == 0:
        os.sched_setaffinity(0, {cpus[1]})
        seen = 0
        while True:
            while ctl[0] == seen:
                pass
            seen = int(ctl[0])
            if seen < 0:
                os._exit(0)
            if ctl[1]:
                touch(mats[seen % args.copies])
            ctl[2] = seen
    os.sched_setaffinity(0, {cpus[0]})
    x = np.ones((1, k), np.float32)
    times: dict[str, list[float]] = {"cold": [], "other": [], "own": []}
    try:
        for r in range(args.runs):
            side = ("cold", "other", "own")[r % 3]
            m = mats[(r + 1) % args.copies]
            if side == "own":
                touch(m)
            else:
                ctl[1], ctl[0] = side == "other", r + 1
                while ctl[2] != r + 1:
                    pass
            t = time.perf_counter()
            x @ m
            times[side].append(time.perf_counter() - t)
    finally:
        ctl[0] = -1
        os.wait()
    t0 = time.perf_counter()
    for m in mats:
        touch(m)
    warm_us = (time.perf_counter() - t0) / args.copies * 1e6
    machine = f"{_common.cpu_model()}, {_common.cpu_flags()}; load {_common.load_average()}"
    print(f"{k} x {n} float32 ({k * n * 4 / 1e6:.1f} MB), CPUs {cpus}; {machine}")
    for side, ts in times.items():
        med = float(np.median(ts))
        print(f"- {side}: {med * 1e6:.0f} us ({k * n * 4 / med / 1e9:.1f} GB/s)")
    print(f"- reading it once (the warming itself): {warm_us:.0f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
