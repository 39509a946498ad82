"""Moonshine live-session benchmark: cost per 80 ms chunk, partial cost, end of speech -> committed line.

Full-size random-weight tiny / small / medium (built by moonshine_offline.model_folder). Random weights never
emit a sensible EOS, so EOS is disabled and every decode runs to the realistic cap of 6.5 tokens per second
of audio, which is what real speech costs. The session is fed in 80 ms chunks as fast as it can go and every
feed is timed; inside it, partial decodes, speculative final decodes and commits are timed separately:

- chunk: a feed minus its partial / speculative / commit work (VAD + incremental encoder + cross-K/V append);
- partial: one partial (provisional tail + prefix-reusing decode of the open segment);
- spec: one speculative final decode (run when the fed audio reaches the last active VAD hop + tail pad,
  inside the hang-over; see engine/models/moonshine/speculation.py);
- commit@end: compute from the VAD's end-of-segment decision to the committed line, the like-for-like number
  for the vendor's "end-of-phrase VAD decision to final text" (~0 when the speculation served the line,
  else encoder flush + final decode);
- rt end->line, rt speech->line: the same lines on a simulated real-time clock (chunk i arrives at
  (i+1) x 80 ms of audio and waits while earlier feeds are still running; every feed costs what it took
  here): from the arrival of the chunk holding the VAD's end decision, and from the end of speech (the
  VAD's last speech hop, so the 350 ms hang-over is included), to the end of the feed that committed it.
  Backlog (RTF > 1) and a speculative decode that outlasts the rest of the hang-over both show up there.
- rt speech->text: from the end of speech to the feed that first showed the line's final text (the
  speculative decode's text goes out as the partial at once; the commit follows at the close, unchanged);
  this is what a reader sees, and it excludes the hang-over when the speculation served the line;
- spec: committed lines served by the speculative decode / all committed lines;
- chunk mean: feed cost per 80 ms chunk averaged over the file (encoder steps run every 160 ms, so the
  median chunk does no encoder work).

Each file runs ``--runs`` times (default 3); every cell is the median over the runs of that statistic
(spec/lines lists the lines served per run).

Usage: python benchmarks/moonshine_stream.py [--variants tiny,small,medium] [--backends numpy,numpy-q8,mlx]
       [--files two_cities.wav,beckett.wav] [--partial-ms 160] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import _common as C  # noqa: E402

AUDIO = HERE.parent.parent / "shared" / "audio"
RATE = 16000


def pct(xs, q):
    import numpy as np

    return float(np.percentile(np.asarray(xs) * 1000, q)) if xs else float("nan")


def run_file(model, audio, partial_ms: float, chunk: int = 1280) -> dict:
    sess = model.start_session(partial_ms=partial_ms, repetition_stop=0)
    partial_t, spec_t, commit_t, feed_t, inner = [], [], [], [], [0.0]
    closing = [False]
    ends = []  # per committed line: (end decision sample, last speech sample, served by the speculation)

    def timed(fn, sink):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            out = fn(*a, **k)
            dt = time.perf_counter() - t0
            sink.append(dt)
            inner[0] += dt
            return out

        return wrapper

    final_from = sess._final_from
    timed_spec = timed(final_from, spec_t)

    def final_wrapper(*a, **k):  # speculative when not called from the commit
        return final_from(*a, **k) if closing[0] else timed_spec(*a, **k)

    commit = timed(sess._commit, commit_t)

    def commit_wrapper(se):
        closing[0] = True
        served = sess.stats["speculative"]
        try:
            ev = commit(se)
        finally:
            closing[0] = False
        if ev.committed:
            ends.append((se.sample, se.speech[1], sess.stats["speculative"] > served))
        return ev

    sess._partial = timed(sess._partial, partial_t)
    sess._final_from = final_wrapper
    sess._commit = commit_wrapper
    clock, rt_end, rt_speech, rt_text, spec_clock = 0.0, [], [], [], None
    t_all = time.perf_counter()
    for i in range(0, len(audio) + chunk, chunk):
        inner[0] = 0.0
        n_before, n_spec = len(ends), len(spec_t)
        t0 = time.perf_counter()
        if i < len(audio):
            sess.feed(audio[i : i + chunk])
        else:
            sess.finish()
        dt = time.perf_counter() - t0
        feed_t.append(dt - inner[0])
        arrival = min(i + chunk, len(audio)) / RATE
        clock = max(clock, arrival) + dt
        if len(spec_t) > n_spec:
            spec_clock = clock  # the speculative line's text went out (as the partial) with this feed
        for end, speech_end, served in ends[n_before:]:
            rt_end.append(clock - (end + chunk - 1) // chunk * chunk / RATE)
            rt_speech.append(clock - speech_end / RATE)
            rt_text.append((spec_clock if served and spec_clock is not None else clock) - speech_end / RATE)
    total = time.perf_counter() - t_all
    return {
        "chunk": feed_t,
        "partial": partial_t,
        "spec": spec_t,
        "commit": commit_t,
        "lines": len(ends),
        "served": sum(s for *_, s in ends),
        "rt_end": rt_end,
        "rt_speech": rt_speech,
        "rt_text": rt_text,
        "rtf": total / (len(audio) / RATE),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", default="tiny,small,medium")
    p.add_argument(
        "--backends",
        default="numpy",
        help="comma list of numpy, numpy-q8, numpy-q4 (8/4-bit weights on the NumPy backend), mlx",
    )
    p.add_argument("--files", default="two_cities.wav,beckett.wav")
    p.add_argument("--partial-ms", type=float, default=160.0)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--runs", type=int, default=3, help="runs per file; every cell is the median over them")
    args = p.parse_args()
    C.set_threads(args.threads)
    from moonshine_offline import model_folder

    from engine import load_model
    from engine.audio import read_audio

    rows = []
    other = C.OtherLoad().start()
    for variant in args.variants.split(","):
        folder = model_folder(variant)
        for backend in args.backends.split(","):
            quantize = int(backend[-1]) if backend.startswith("numpy-q") else None
            m = load_model(folder, backend=backend.split("-")[0], quantize=quantize)
            m.cfg.eos_token_id = -1  # hold decode lengths at 6.5 tokens/s (random weights)
            for f in args.files.split(","):
                audio = read_audio(AUDIO / f)
                runs = [run_file(m, audio, args.partial_ms) for _ in range(args.runs)]

                def med(fn, runs=runs):  # the median over the runs of one statistic
                    return C.fmt(statistics.median(fn(r) for r in runs))

                served = "/".join(f"{r['served']}" for r in runs)
                rows.append(
                    [
                        variant,
                        backend,
                        f,
                        f"{served} of {runs[0]['lines']}",
                        med(lambda r: 1000 * sum(r["chunk"]) / max(len(r["chunk"]), 1)),
                        med(lambda r: pct(r["chunk"], 95)),
                        med(lambda r: pct(r["partial"], 50)),
                        med(lambda r: pct(r["partial"], 95)),
                        med(lambda r: pct(r["spec"], 50)),
                        med(lambda r: pct(r["commit"], 50)),
                        med(lambda r: pct(r["commit"], 95)),
                        med(lambda r: pct(r["rt_end"], 50)),
                        med(lambda r: pct(r["rt_end"], 95)),
                        med(lambda r: pct(r["rt_text"], 50)),
                        med(lambda r: pct(r["rt_text"], 95)),
                        med(lambda r: pct(r["rt_speech"], 50)),
                        f"{statistics.median(r['rtf'] for r in runs):.2f}",
                    ]
                )
                print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    print(
        C.markdown_table(
            [
                "model",
                "backend",
                "file",
                "spec/lines",
                "chunk mean ms",
                "chunk p95 ms",
                "partial p50 ms",
                "partial p95 ms",
                "spec p50 ms",
                "commit@end p50 ms",
                "commit@end p95 ms",
                "rt end->line p50 ms",
                "rt end->line p95 ms",
                "rt speech->text p50 ms",
                "rt speech->text p95 ms",
                "rt speech->line p50 ms",
                "RTF",
            ],
            rows,
        )
    )
    print()
    print("\n".join(C.machine_report(args.threads, {"numpy": "numpy"})))
    print(f"load: {C.load_average()}; other processes used {100 * (other.stop() or 0):.0f}% of the CPU time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
