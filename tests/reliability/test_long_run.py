"""Long inputs at flat memory (RSS of a child process, sampled as the audio goes through).

What these tests cover, exactly:
- an hour of 48 kHz stereo FLAC (silence, so the file is small) decoded and resampled through
  ``engine.audio.open_audio``, the path of the CLI and of the app's replay: RSS sampled every 5 minutes of
  audio stays within a few MiB (reading a file whole took ~3.5x its size: ~2.4 GB for such an hour as WAV);
- each family's streaming session over several minutes of speech with pauses (the fixture models, NumPy):
  RSS sampled every minute does not grow after the first minutes. This catches leaks of about 1 MiB per
  minute or more; the slow growth of Voxtral's id list (a few kB per minute) is caught by the exact
  tracemalloc test in tests/engine/models/voxtral/test_session.py, and the figures for a whole hour of each
  family come from benchmarks/memory_hour.py (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.reliability.conftest import FIXTURES, REPO

SCRIPT = REPO / "benchmarks" / "memory_hour.py"


def samples(*args: str) -> list[list[float]]:
    """Run benchmarks/memory_hour.py in a child process; its RSS samples ``[[minutes, MiB], ...]``."""
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--child", *args],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])["samples"]


def test_an_hour_of_48k_stereo_flac_streams_at_flat_memory(tmp_path):
    import soundfile

    path = tmp_path / "hour.flac"
    with soundfile.SoundFile(str(path), "w", 48000, 2, format="FLAC", subtype="PCM_16") as f:
        minute = np.zeros((48000 * 60, 2), np.int16)
        for _ in range(60):
            f.write(minute)
    s = samples("--decode-only", "--file", str(path), "--every", "5")
    assert s[-1][0] == pytest.approx(60.0, abs=0.01)  # the whole hour went through
    after_start = [mb for minute, mb in s if minute >= 5]
    assert max(after_start) - after_start[0] < 4, s  # flat: no more than block-sized wobble
    # a few blocks and the decoders' libraries (loaded after the first sample: 24 MiB in one venv, 28-32 in a fresh
    # one), not the file (the hour is 1.3 GB as float)
    assert max(mb for _, mb in s) - s[0][1] < 64, s


@pytest.mark.parametrize("name,minutes", [("vox_tiny_hf", 12), ("moon_tiny_like", 4)])
def test_sessions_run_at_flat_memory(name, minutes):
    s = samples("--model", str(FIXTURES / "models" / name), "--minutes", str(minutes), "--every", "1")
    steady = [mb for minute, mb in s[:-1] if minute >= 2]  # (the last sample is after finish())
    assert len(steady) >= minutes - 1
    assert max(steady) - steady[0] < 2, s
