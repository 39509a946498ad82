"""Memory over a long session: resident memory (RSS) sampled while an hour (or ``--minutes``) of audio goes
through a model's streaming session, or only through the audio decoder (``--decode-only``).

The audio is made on the fly, never held whole: the speech fixture clip followed by 2 s of silence, over and
over (``--audio speech``), or pure silence (``--audio silence``); or a file streamed through
``engine.audio.open_audio`` (``--file``, the CLI's path). It is fed in 80 ms chunks like the CLI does.
Each model runs in a fresh child process, so the RSS is its own. Prints one line per sample and a summary;
``--json`` writes the samples. Used by tests/reliability/test_long_run.py with short runs.

    .venv/bin/python benchmarks/memory_hour.py --model tests/fixtures/models/vox_tiny_hf \\
        --model tests/fixtures/models/moon_tiny_like --minutes 60 --every 5
    .venv/bin/python benchmarks/memory_hour.py --decode-only --file /tmp/hour.flac --every 5
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHUNK = 1280  # 80 ms at 16 kHz
RATE = 16000


def rss_mb() -> float:
    """This process's resident memory now (Linux /proc), else its peak so far, in MiB."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        scale = 1 if sys.platform == "darwin" else 1024
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def peak_mb() -> float:
    """This process's peak RSS in MiB (VmHWM on Linux: ru_maxrss would carry the parent's peak over exec)."""
    try:
        with open("/proc/self/status") as f:
            for row in f:
                if row.startswith("VmHWM:"):
                    return int(row.split()[1]) / 1024
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def chunks(kind: str, minutes: float, file: str | None):
    """80 ms chunks of 16 kHz audio: the looped speech clip with pauses, silence, or a streamed file."""
    import numpy as np

    if file:
        from engine.audio import open_audio

        with open_audio(file) as stream:
            while True:
                c = stream.read(CHUNK)
                if not len(c):
                    return
                yield c
        return
    total = int(minutes * 60 * RATE)
    if kind == "silence":
        cycle = np.zeros(RATE * 10, np.float32)
    else:
        from engine.audio import read_audio

        speech = read_audio(ROOT / "tests" / "fixtures" / "audio" / "speech.wav")
        cycle = np.concatenate([speech, np.zeros(2 * RATE, np.float32)])
    n = 0
    while n < total:
        for i in range(0, len(cycle), CHUNK):
            if n >= total:
                return
            c = cycle[i : i + CHUNK][: total - n]
            n += len(c)
            yield c


def child(args) -> dict:
    """One run in this process: returns the RSS samples ``[[audio minutes, MiB], ...]`` and timings."""
    t0 = time.perf_counter()
    session = None
    source = args.model[0] if args.model else None
    info: dict = {"model": source, "audio": args.file or args.audio}
    if not args.decode_only:
        from engine import load_model

        model = load_model(source, backend=args.backend)
        options = {"partial_ms": 160} if model.family == "moonshine_streaming" else {}
        session = model.start_session(**options)
        info["family"] = model.family
    samples = [[0.0, rss_mb()]]
    every = int(args.every * 60 * RATE)
    fed, next_mark, lines = 0, every, 0
    for c in chunks(args.audio, args.minutes, args.file):
        if session is not None:
            for ev in session.feed(c):
                lines += len(ev.committed)
        fed += len(c)
        if fed >= next_mark:
            samples.append([round(fed / RATE / 60, 2), rss_mb()])
            next_mark += every
    if session is not None:
        for ev in session.finish():
            lines += len(ev.committed)
    samples.append([round(fed / RATE / 60, 2), rss_mb()])
    info.update(samples=samples, lines=lines, seconds=round(time.perf_counter() - t0, 1), peak_mb=peak_mb())
    if session is not None and hasattr(session, "tokens"):
        info["tokens_kept"] = len(session.tokens)
    return info


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", action="append", default=[], help="a model folder (repeatable)")
    p.add_argument("--backend", default="numpy")
    p.add_argument("--minutes", type=float, default=60.0)
    p.add_argument("--every", type=float, default=5.0, help="minutes of audio between samples")
    p.add_argument("--audio", choices=("speech", "silence"), default="speech")
    p.add_argument("--file", help="stream this file instead (through engine.audio.open_audio)")
    p.add_argument("--decode-only", action="store_true", help="no model: only decode --file")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return 0
    runs = [None] if args.decode_only else args.model
    if not runs:
        p.error("give --model (or --decode-only --file)")
    results = []
    for model in runs:
        cmd = [
            sys.executable,
            __file__,
            "--child",
            "--backend",
            args.backend,
            "--minutes",
            str(args.minutes),
            "--every",
            str(args.every),
            "--audio",
            args.audio,
        ]
        cmd += ["--model", model] if model else []
        cmd += ["--file", args.file] if args.file else []
        cmd += ["--decode-only"] if args.decode_only else []
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        results.append(r)
        s = r["samples"]
        mid = s[len(s) // 2]
        print(
            f"{r.get('family', 'decode only')} {model or args.file}: RSS start {s[0][1]:.1f} MiB, "
            f"{mid[0]:g} min {mid[1]:.1f} MiB, end ({s[-1][0]:g} min) {s[-1][1]:.1f} MiB, "
            f"peak {r['peak_mb']:.1f} MiB; {r['lines']} lines, {r['seconds']} s"
        )
        for minute, mb in s:
            print(f"  {minute:7.2f} min  {mb:8.1f} MiB")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
