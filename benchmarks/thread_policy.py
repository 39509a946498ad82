#!/usr/bin/env python3
"""Thread policy of the NumPy backend's products, on an idle and on a deliberately loaded machine.

The Moonshine decoder step (ms per token, positions 1..N over 10 s of memory) and the offline encoder (ms per
second of audio) of one full-size random model under each policy, interleaved round-robin in one process
(medians of ``--runs`` rounds after a warm-up round):

- float32 (NumPy/OpenBLAS, one OpenBLAS thread per product range): ``f32-adaptive`` is the engine's policy
  (large products cut into ranges that ``engine.backends.cpu_pool`` runs on the caller plus a helper thread
  unless other processes keep the CPU busy); ``f32-split``: always offered to the helper; ``f32-caller``:
  everything on the calling thread; ``blas-all``: OpenBLAS's own pool (all CPUs, its threads spin between
  products) for every float product;
- 8-bit weights (ONNX Runtime kernels on row chunks): ``q8-adaptive`` (the engine's policy), ``q8-split``,
  ``q8-caller`` as above; ``q8-ortpool``: every ONNX Runtime session on the process-wide pool of all CPUs
  (ONNX Runtime's ``set_global_thread_pool_sizes``; its threads spin ~30 ms after work), no row chunks.

The default set leaves out ``blas-all`` and ``q8-ortpool``: once OpenBLAS's pool has run, its threads keep
spinning and slow whatever runs next in the process, and a global ONNX Runtime pool is the only one a process
may have once set; run each in its own invocation. Each float32 policy's first-step logits are compared with
``f32-caller``'s (the engine's results may not depend on the policy: ``max |diff|``).

``--busy N`` runs N busy-looping processes during the rounds: a loaded machine, as when captions run beside
a video call.

    .venv/bin/python benchmarks/thread_policy.py --variant small
    .venv/bin/python benchmarks/thread_policy.py --variant small --busy 1
    .venv/bin/python benchmarks/thread_policy.py --variant small --policies f32-caller,blas-all
    .venv/bin/python benchmarks/thread_policy.py --variant small --policies q8-caller,q8-ortpool
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
ALONE = ("blas-all", "q8-ortpool")  # each in an invocation of its own (see the docstring)


def _global_ort_pool(threads: int) -> None:
    """Every ONNX Runtime session of this process on one global pool of ``threads`` (before any session)."""
    import onnxruntime as ort

    ort.capi.onnxruntime_pybind11_state.set_global_thread_pool_sizes(threads, 1)
    base = ort.InferenceSession

    class Pooled(base):
        def __init__(self, model, so=None, **kw):
            so = so or ort.SessionOptions()
            so.use_per_session_threads = False
            so.intra_op_num_threads = so.inter_op_num_threads = 0
            super().__init__(model, so, **kw)

    ort.InferenceSession = Pooled


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
    for x in policies:
        if x not in POLICIES + ALONE:
            p.error(f"unknown policy {x!r}")
    if "q8-ortpool" in policies:
        _global_ort_pool(os.cpu_count() or 1)
        from engine.backends import ort_kernels

        ort_kernels.SPLIT_BYTES = 1 << 62  # one session per matrix: ONNX Runtime's pool splits it
    with_kernels = moonshine.load(folder, cfg, NumpyBackend(kernels=True), quantize=8)
    with_blas = moonshine.load(folder, cfg, NumpyBackend())
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
        pool = policy == "blas-all"
        nb.SPLIT_BYTES, nb.SPLIT_MACS = (1 << 62, 1 << 62) if pool else split
        blas.pin((os.cpu_count() or 1) if pool else 1)  # not blas.full: an earlier backend pinned the pool to 1
        return with_kernels if policy.startswith("q8") else with_blas

    def outputs(policy):
        """Encoder output and the logits of the 10th cached step under ``policy``."""
        m = setup(policy)
        enc, valid = m.encode(audio)
        xkv = m.cross_kv(m.memory(enc))
        cache = m.new_self_cache(12)
        logits = m.decode([1], 0, cache, xkv, valid)
        for i, tok in enumerate(tokens[:10]):
            logits = m.decode([tok], i + 1, cache, xkv, valid)
        return m.B.to_numpy(enc), logits

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
    f32 = [x for x in policies if not x.startswith("q8")]
    ref = outputs("f32-caller") if f32 else None
    diffs = {}
    for policy in f32:
        enc, logits = outputs(policy)
        diffs[policy] = (float(np.abs(enc - ref[0]).max()), float(np.abs(logits - ref[1]).max()))
    rows = []
    for policy, s in samples.items():
        d = diffs.get(policy)
        rows.append(
            [
                policy,
                _common.fmt(1000 * float(np.median(s["tok"])), 2),
                _common.fmt(1000 * float(min(s["tok"])), 2),
                _common.fmt(1000 * float(np.median(s["enc"])) if s["enc"] else None, 1),
                "-" if d is None else f"{d[0]:.1e} / {d[1]:.1e}",
            ]
        )
    lines = [
        f"variant {a.variant}; {a.busy} busy-looping process(es); other processes (busy loops included) used "
        f"{100 * (share or 0):.0f}% of the CPU time; load average at end {_common.load_average()}",
        "",
        _common.markdown_table(
            [
                "policy",
                "decoder ms / token (median)",
                "(min)",
                "encoder ms / s audio",
                "max |diff| vs f32-caller (encoder / step-10 logits)",
            ],
            rows,
        ),
    ]
    print("\n".join(lines))
    if a.markdown:
        a.markdown.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
