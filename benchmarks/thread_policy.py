#!/usr/bin/env python3
"""Thread policy of the NumPy backend's products, on an idle and on a deliberately loaded machine.

The Moonshine decoder step (ms per token, positions 1..N over 10 s of memory) and the offline encoder (ms per
second of audio) of one full-size random model under each policy, interleaved round-robin in one process
(medians of ``--runs`` rounds after a warm-up round):

- float32 (NumPy/OpenBLAS, one OpenBLAS thread per product range): ``f32-adaptive`` is the engine's policy
  (large products cut into row ranges that ``engine.backends.cpu_pool`` runs on the caller plus a helper
  thread unless other processes keep the CPU busy); ``f32-split``: always offered to the helper;
  ``f32-caller``: everything on the calling thread; ``blas-old``: the previous engine (no ranges;
  ``engine.backends.blas``'s policy: one OpenBLAS thread for products under 64M multiply-adds over matrices
  under 4M elements, else OpenBLAS's whole pool); ``blas-all``: OpenBLAS's whole pool for every product;
- 8-bit weights (ONNX Runtime kernels on row chunks): ``q8-adaptive`` (the engine's policy), ``q8-split``,
  ``q8-caller`` as above.

The default set leaves out ``blas-old`` and ``blas-all``: once OpenBLAS's pool has run, its threads keep
spinning and slow whatever runs next in the process, so those two are measured in their own invocation.

``--busy N`` runs N busy-looping processes during the rounds: a loaded machine, as when captions run beside
a video call.

    .venv/bin/python benchmarks/thread_policy.py --variant small
    .venv/bin/python benchmarks/thread_policy.py --variant small --busy 1
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (ROOT, HERE):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import _common  # noqa: E402

POLICIES = ("f32-adaptive", "f32-split", "f32-caller", "q8-adaptive", "q8-split", "q8-caller")
# "blas-old" and "blas-all" start OpenBLAS's pool, whose spinning threads slow whatever runs after them in the
# process: run those in their own invocation


def _busy_loop() -> None:
    x = 0
    while True:
        x += 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variant", default="small")
    p.add_argument("--policies", default=",".join(POLICIES))
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--busy", type=int, default=0)
    p.add_argument("--no-encoder", action="store_true")
    p.add_argument("--markdown", type=Path)
    a = p.parse_args(argv)
    _common.set_threads(os.cpu_count() or 1)
    import moonshine_offline as mo
    import numpy as np

    from engine.backends import cpu_pool
    from engine.backends.numpy_backend import NumpyBackend
    from engine.models import moonshine

    folder = mo.model_folder(a.variant)
    cfg = json.loads((folder / "config.json").read_text())
    policies = [x for x in a.policies.split(",") if x]
    with_kernels = moonshine.load(folder, cfg, NumpyBackend(kernels=True), quantize=8)
    with_blas = moonshine.load(folder, cfg, NumpyBackend(kernels=False))
    audio = (np.random.default_rng(0).standard_normal(160000) * 0.1).astype(np.float32)
    tokens = [int(t) for t in np.random.default_rng(1).integers(259, 32000, 65)]
    ctx = {}
    for m in (with_kernels, with_blas):
        enc, valid = m.encode(audio)
        ctx[id(m)] = (m.cross_kv(m.memory(enc)), valid)
    from engine.backends import numpy_backend as nb

    split = nb.SPLIT_BYTES, nb.SPLIT_MACS

    def setup(policy):
        """The model for ``policy``, with the process-wide switches set for it."""
        mode = policy.split("-", 1)[1]
        cpu_pool.contention.busy_share = {"split": 2.0, "caller": -1.0}.get(mode, cpu_pool.BUSY_SHARE)
        cpu_pool.contention._last = cpu_pool.contention._sample()  # noqa: SLF001 - fresh sample per policy
        cpu_pool.contention._busy = mode == "caller"  # noqa: SLF001
        blas = with_blas.B.blas
        old = policy in ("blas-old", "blas-all")
        nb.SPLIT_BYTES, nb.SPLIT_MACS = (1 << 62, 1 << 62) if old else split
        blas.pin({"blas-old": None, "blas-all": blas.full}.get(policy, 1))
        return with_kernels if policy.startswith("q8") else with_blas

    def step(m) -> float:
        xkv, valid = ctx[id(m)]
        cache = m.new_self_cache(len(tokens) + 1)
        m.decode([1], 0, cache, xkv, valid)
        t0 = time.perf_counter()
        for i, tok in enumerate(tokens):
            int(np.argmax(m.decode([tok], i + 1, cache, xkv, valid)))
        return (time.perf_counter() - t0) / len(tokens)

    def encode(m) -> float:
        t0 = time.perf_counter()
        m.encode(audio)
        return (time.perf_counter() - t0) / 10.0

    busy = [multiprocessing.Process(target=_busy_loop, daemon=True) for _ in range(a.busy)]
    for b in busy:
        b.start()
    samples = {x: {"tok": [], "enc": []} for x in policies}
    other = _common.OtherLoad().start()
    try:
        for r in range(1 + a.runs):
            for policy in policies if r % 2 == 0 else policies[::-1]:
                m = setup(policy)
                t = step(m)
                e = None if a.no_encoder else encode(m)
                if r:
                    samples[policy]["tok"].append(t)
                    if e is not None:
                        samples[policy]["enc"].append(e)
            print(f"round {r}/{a.runs} (load {_common.load_average()})", file=sys.stderr, flush=True)
    finally:
        share = other.stop()
        for b in busy:
            b.terminate()
    rows = []
    for policy, s in samples.items():
        rows.append([policy, _common.fmt(1000 * float(np.median(s["tok"])), 2),
                     _common.fmt(1000 * float(min(s["tok"])), 2),
                     _common.fmt(1000 * float(np.median(s["enc"])) if s["enc"] else None, 1)])
    lines = [f"variant {a.variant}; {a.busy} busy-looping process(es); other processes (busy loops included) used "
             f"{100 * (share or 0):.0f}% of the CPU time; load average at end {_common.load_average()}", "",
             _common.markdown_table(["policy", "decoder ms / token (median)", "(min)", "encoder ms / s audio"],
                                    rows)]
    print("\n".join(lines))
    if a.markdown:
        a.markdown.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
