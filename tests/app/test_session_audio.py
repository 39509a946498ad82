"""Kept session audio: raw while recording (crash-safe), FLAC after, read back exactly for 16-bit sources."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import soundfile

from app.session_audio import AudioRecorder, audio_seconds, compress, iter_audio, to_int16
from engine.errors import AudioError
from tests.app.conftest import REPO


def test_sixteen_bit_audio_reads_back_exactly(tmp_path):
    rng = np.random.default_rng(1)
    ints = rng.integers(-32768, 32768, 50_000).astype(np.int16)
    pcm = ints.astype(np.float32) / 32768
    rec = AudioRecorder(tmp_path / "audio.pcm")
    for i in range(0, len(pcm), 4321):
        rec.write(pcm[i : i + 4321])
    path = rec.close()
    assert path == tmp_path / "audio.flac" and not (tmp_path / "audio.pcm").exists()
    info = soundfile.info(str(path))
    assert (info.format, info.samplerate, info.channels) == ("FLAC", 16000, 1)
    back = np.concatenate(list(iter_audio(path, block=7000)))
    assert np.array_equal(back, pcm)
    assert audio_seconds(path) == pytest.approx(50_000 / 16000)


def test_float_audio_is_kept_to_sixteen_bits(tmp_path):
    pcm = np.sin(np.arange(16000) * 0.01).astype(np.float32) * 1.2  # clips above 1
    rec = AudioRecorder(tmp_path / "audio.pcm")
    rec.write(pcm)
    back = np.concatenate(list(iter_audio(rec.close())))
    assert np.max(np.abs(back - np.clip(pcm, -1, 32767 / 32768))) <= 0.5 / 32768 + 1e-7
    assert to_int16(np.array([np.nan, np.inf, -np.inf], dtype=np.float32)).tolist() == [0, 32767, -32768]


def test_a_crash_while_recording_leaves_readable_audio(tmp_path):
    script = (
        "import os, numpy as np\n"
        "from app.session_audio import AudioRecorder\n"
        f"rec = AudioRecorder({str(tmp_path / 'audio.pcm')!r})\n"
        "for i in range(50):\n"
        "    rec.write(np.full(1600, (i - 25) / 100, dtype=np.float32))\n"
        "os._exit(9)\n"
    )
    subprocess.run([sys.executable, "-c", script], cwd=REPO, check=False)
    raw = tmp_path / "audio.pcm"
    assert raw.stat().st_size == 50 * 1600 * 2
    assert sum(len(b) for b in iter_audio(raw)) == 80_000
    flac = compress(raw)
    assert flac.suffix == ".flac" and sum(len(b) for b in iter_audio(flac)) == 80_000


def test_unwritable_recording_is_reported_not_raised(tmp_path):
    rec = AudioRecorder(tmp_path / "missing" / "audio.pcm")
    assert rec.failed is not None and rec.failed.startswith("The session audio could not be kept")
    rec.write(np.zeros(100, dtype=np.float32))
    assert rec.close() is None


def test_damaged_audio_is_one_sentence(tmp_path):
    bad = tmp_path / "audio.flac"
    bad.write_bytes(b"not a flac file at all")
    with pytest.raises(AudioError, match="could not be read"):
        list(iter_audio(bad))
    assert audio_seconds(bad) == 0.0
