"""Moonshine live-session benchmark: cost per 80 ms chunk, partial latency, end-of-speech -> committed line.

Full-size random-weight tiny / small / medium (built by moonshine_offline.model_folder). Random weights never
emit a sensible EOS, so EOS is disabled and every decode runs to the realistic cap of 6.5 tokens per second
of audio, which is what real speech costs. The session is fed in 80 ms chunks as fast as it can go and every
feed is timed; inside it, partial decodes and commits are timed separately:

- chunk cost: a feed minus its partial/commit work (VAD + incremental encoder + cross-K/V append);
- partial latency: one partial (provisional tail + prefix-reusing decode of the open segment);
- commit latency: from the VAD's end-of-segment decision to the committed line (encoder flush + final decode);
  the VAD hang-over (350 ms of silence by default) comes before that decision and is reported apart.

Usage: python benchmarks/moonshine_stream.py [--variants tiny,small,medium] [--backends numpy,mlx]
       [--files two_cities.wav,beckett.wav] [--partial-ms 160]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import _common as C  # noqa: E402

AUDIO = HERE.parent.parent / "shared" / "audio"


def pct(xs, q):
    import numpy as np

    return float(np.percentile(np.asarray(xs) * 1000, q)) if xs else float("nan")


def run_file(model, audio, partial_ms: float, chunk: int = 1280) -> dict:
    sess = model.start_session(partial_ms=partial_ms, repetition_stop=0)
    partial_t, commit_t, feed_t, inner = [], [], [], [0.0]

    def timed(fn, sink):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            out = fn(*a, **k)
            dt = time.perf_counter() - t0
            sink.append(dt)
            inner[0] += dt
            return out
        return wrapper

    sess._partial = timed(sess._partial, partial_t)
    sess._commit = timed(sess._commit, commit_t)
    lines = 0
    t_all = time.perf_counter()
    for i in range(0, len(audio), chunk):
        inner[0] = 0.0
        t0 = time.perf_counter()
        evs = sess.feed(audio[i : i + chunk])
        feed_t.append(time.perf_counter() - t0 - inner[0])
        lines += sum(len(e.committed) for e in evs)
    lines += sum(len(e.committed) for e in sess.finish())
    total = time.perf_counter() - t_all
    return {"chunk": feed_t, "partial": partial_t, "commit": commit_t, "lines": lines,
            "rtf": total / (len(audio) / 16000)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", default="tiny,small,medium")
    p.add_argument("--backends", default="numpy")
    p.add_argument("--files", default="two_cities.wav,beckett.wav")
    p.add_argument("--partial-ms", type=float, default=160.0)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = p.parse_args()
    C.set_threads(args.threads)
    from moonshine_offline import model_folder

    from engine import load_model
    from engine.audio import read_audio

    rows = []
    for variant in args.variants.split(","):
        folder = model_folder(variant)
        for backend in args.backends.split(","):
            m = load_model(folder, backend=backend)
            m.cfg.eos_token_id = -1  # hold decode lengths at 6.5 tokens/s (random weights)
            for f in args.files.split(","):
                audio = read_audio(AUDIO / f)
                r = run_file(m, audio, args.partial_ms)
                rows.append([variant, backend, f, str(r["lines"]), C.fmt(pct(r["chunk"], 50)),
                             C.fmt(pct(r["chunk"], 95)), C.fmt(pct(r["partial"], 50)), C.fmt(pct(r["partial"], 95)),
                             C.fmt(pct(r["commit"], 50)), C.fmt(pct(r["commit"], 95)), f"{r['rtf']:.2f}"])
                print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    print(C.markdown_table(["model", "backend", "file", "lines", "chunk p50 ms", "chunk p95 ms", "partial p50 ms",
                            "partial p95 ms", "commit p50 ms", "commit p95 ms", "RTF"], rows))
    print()
    print("\n".join(C.machine_report(args.threads, {"numpy": "numpy"})))
    print(f"load: {C.load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
