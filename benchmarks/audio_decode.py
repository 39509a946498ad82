"""Audio decoding: time and peak memory to read an hour of 48 kHz stereo speech in each input format.

``--make DIR`` writes the files once (the speech recordings of shared/audio tiled to an hour, 48 kHz stereo):
WAV (16-bit), FLAC, OGG Vorbis, OGG Opus and MP3 through soundfile; AAC in M4A, AAC + a small video track
in MP4 and MKV, Opus + video in WebM through PyAV. Then each file is read in a fresh child process, three
ways where they apply:

- ``open_audio``: livecap's path (decode, downmix, resample to 16 kHz mono with soxr), all blocks;
- ``soundfile``: libsndfile alone, 2^17-frame blocks as float32 (no resampling);
- ``pyav``: PyAV alone, every frame of the first audio stream converted to float32 (no resampling).

For each: wall seconds, CPU seconds, and the peak RSS above the child's RSS after its imports (MiB).

    .venv/bin/python benchmarks/audio_decode.py --make /tmp/hour --json /tmp/hour/results.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RATE = 48000
KINDS = ("wav", "flac", "ogg", "opus", "mp3", "m4a", "mp4", "mkv", "webm")


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mb() -> float:
    """This process's peak RSS (VmHWM: unlike ru_maxrss, it does not carry the parent's peak over exec)."""
    with open("/proc/self/status") as f:
        for row in f:
            if row.startswith("VmHWM:"):
                return int(row.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def speech_minute():
    """A minute of 48 kHz stereo float32 speech (the shared recordings, resampled, end to end)."""
    import numpy as np
    import soundfile

    from engine.audio import resample

    folder = ROOT.parent / "shared" / "audio"
    if not folder.is_dir():
        folder = Path("/work/shared/audio")
    parts = []
    for p in sorted(folder.glob("*.wav")):
        x, r = soundfile.read(str(p), dtype="float32", always_2d=True)
        parts.append(resample(x.mean(axis=1), r, RATE))
    mono = np.concatenate(parts)
    mono = np.resize(mono, RATE * 60)
    right = np.roll(mono, 37)  # not identical channels, like a real stereo recording
    return np.stack([mono, right], axis=1).astype(np.float32)


def make(folder: Path, minutes: int = 60) -> None:
    import av
    import numpy as np
    import soundfile

    folder.mkdir(parents=True, exist_ok=True)
    minute = speech_minute()
    for kind, fmt, sub in (
        ("wav", "WAV", "PCM_16"),
        ("flac", "FLAC", "PCM_16"),
        ("ogg", "OGG", "VORBIS"),
        ("opus", "OGG", "OPUS"),
        ("mp3", "MP3", "MPEG_LAYER_III"),
    ):
        path = folder / f"hour.{kind}"
        if path.exists():
            continue
        t0 = time.time()
        with soundfile.SoundFile(str(path) + ".part", "w", RATE, 2, format=fmt, subtype=sub) as f:
            for _ in range(minutes):
                for i in range(0, len(minute), RATE):  # libsndfile 1.2.2 crashes on a minute in one OGG write
                    f.write(minute[i : i + RATE])
        os.replace(str(path) + ".part", path)
        print(f"wrote {path} ({path.stat().st_size / 2**20:.0f} MiB, {time.time() - t0:.0f} s)", flush=True)
    for kind, container, codec, video in (
        ("m4a", "ipod", "aac", None),
        ("mp4", "mp4", "aac", "mpeg4"),
        ("mkv", "matroska", "aac", "mpeg4"),
        ("webm", "webm", "libopus", "libvpx"),
    ):
        path = folder / f"hour.{kind}"
        if path.exists():
            continue
        t0 = time.time()
        out = av.open(str(path) + ".part", "w", format=container)
        a = out.add_stream(codec, rate=RATE, layout="stereo")
        v = None
        if video is not None and video in av.codecs_available:
            v = out.add_stream(video, rate=1)
            v.width, v.height, v.pix_fmt = 160, 120, "yuv420p"
        pts = 0
        for m in range(minutes):
            for i in range(0, len(minute), 9600):
                block = np.ascontiguousarray(minute[i : i + 9600].T)
                frame = av.AudioFrame.from_ndarray(block, format="fltp", layout="stereo")
                frame.sample_rate, frame.pts, frame.time_base = RATE, pts, Fraction(1, RATE)
                pts += block.shape[1]
                for packet in a.encode(frame):
                    out.mux(packet)
            if v is not None:
                for s in range(60):
                    img = av.VideoFrame.from_ndarray(
                        np.full((120, 160, 3), (m * 60 + s) % 255, np.uint8), format="rgb24"
                    )
                    img.pts = m * 60 + s
                    for packet in v.encode(img):
                        out.mux(packet)
        for packet in a.encode(None):
            out.mux(packet)
        if v is not None:
            for packet in v.encode(None):
                out.mux(packet)
        out.close()
        os.replace(str(path) + ".part", path)
        print(f"wrote {path} ({path.stat().st_size / 2**20:.0f} MiB, {time.time() - t0:.0f} s)", flush=True)


def child(path: str, how: str) -> dict:
    import numpy as np

    if how == "open_audio":
        from engine.audio import open_audio
    elif how == "soundfile":
        import soundfile
    else:
        import av
    base = _rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    n = 0
    if how == "open_audio":
        with open_audio(path) as stream:
            for block in stream:
                n += len(block)
        out_rate = 16000
    elif how == "soundfile":
        with soundfile.SoundFile(path) as f:
            out_rate = f.samplerate
            while True:
                block = f.read(1 << 17, dtype="float32", always_2d=True)
                if not len(block):
                    break
                n += len(block)
    else:
        with av.open(path) as c:
            s = next(s for s in c.streams if s.type == "audio")
            out_rate = s.codec_context.sample_rate
            conv = av.AudioResampler(format="fltp", layout=s.codec_context.layout.name, rate=out_rate)
            for frame in c.decode(s):
                for f in conv.resample(frame):
                    n += np.asarray(f.to_ndarray(), np.float32).shape[1]
    peak = _peak_mb()
    return {
        "file": path,
        "how": how,
        "minutes": n / out_rate / 60,
        "wall_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - c0,
        "base_mb": base,
        "peak_over_base_mb": peak - base,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--make", metavar="DIR", required=True, help="folder of the hour-long files (made if missing)")
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--json")
    p.add_argument("--child", nargs=2, metavar=("PATH", "HOW"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0
    folder = Path(args.make)
    make(folder)
    rows = []
    for kind in args.kinds.split(","):
        path = folder / f"hour.{kind}"
        hows = (
            ["open_audio"]
            + (["soundfile"] if kind in ("wav", "flac", "ogg", "opus", "mp3") else [])
            + (["pyav"] if kind != "wav" else [])
        )
        for how in hows:
            out = subprocess.run(
                [sys.executable, __file__, "--make", str(folder), "--child", str(path), how],
                check=True,
                stdout=subprocess.PIPE,
                text=True,
            ).stdout
            r = json.loads(out.strip().splitlines()[-1])
            r["size_mb"] = path.stat().st_size / 2**20
            rows.append(r)
            print(
                f"{kind:5s} {how:10s} {r['size_mb']:7.0f} MiB file  {r['minutes']:6.2f} min  "
                f"wall {r['wall_s']:6.1f} s  cpu {r['cpu_s']:6.1f} s  peak +{r['peak_over_base_mb']:6.1f} MiB",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
