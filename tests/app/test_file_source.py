"""File replay: blocks become due at wall-clock pace times ``speed``; pause stops the clock."""

from __future__ import annotations

import time

import numpy as np
import pytest

from app.file_source import FileSource
from engine.errors import AudioError
from tests.app import fake_engine


def test_replay_paces_and_ends(tmp_path):
    audio = fake_engine.speechlike([(0.5, 0.5)])
    path = fake_engine.write_wav(tmp_path / "a.wav", audio)
    source = FileSource(path, speed=10.0)
    source.open()
    got = source.read()
    time.sleep(0.06)  # about 0.6 s of audio is due at 10x
    got += source.read()
    assert 0 < sum(len(b.samples) for b in got) < len(audio)
    source.close()  # pause: nothing becomes due
    got += source.read()
    time.sleep(0.1)
    assert source.read() == [] and not source.ended
    source.open()  # resume where it stopped
    deadline = time.monotonic() + 2
    while not source.ended and time.monotonic() < deadline:
        got += source.read()
        time.sleep(0.01)
    samples = np.concatenate([b.samples.reshape(-1) for b in got])
    from engine.audio import read_audio

    assert source.ended and np.array_equal(samples, read_audio(path))  # every sample, in order


def test_what_was_due_when_the_replay_stops_is_still_read(tmp_path, monkeypatch):
    """A Stop while the engine was behind dropped the backlog: ~15 s of a replay at 4x never transcribed."""
    from app import file_source

    clock = [1000.0]
    monkeypatch.setattr(file_source.time, "monotonic", lambda: clock[0])
    audio = fake_engine.speechlike([(0.5, 0.5)] * 10)
    path = fake_engine.write_wav(tmp_path / "a.wav", audio)
    source = FileSource(path, speed=4.0)
    source.open()
    first = source.read()
    clock[0] += 1.5  # 6 s of audio due; the engine read none of it yet
    source.close()  # Stop
    clock[0] += 5.0
    backlog = source.read()
    assert sum(len(b.samples) for b in first + backlog) == 6 * 16000  # all that was due at the stop, no more
    assert source.read() == []


def test_unreadable_file_is_an_audio_error(tmp_path):
    with pytest.raises(AudioError):
        FileSource(tmp_path / "missing.wav").open()
    with pytest.raises(ValueError):
        FileSource(tmp_path / "x.wav", speed=0)


def test_replay_reads_compressed_files_as_they_become_due(tmp_path):
    """A FLAC file replays like a WAV (same samples), and opening a long file decodes nothing up front."""
    import tracemalloc

    import soundfile

    audio = fake_engine.speechlike([(0.5, 0.3)] * 3)
    flac = tmp_path / "a.flac"
    soundfile.write(str(flac), np.round(audio * 32767).astype(np.int16), 16000, format="FLAC")
    source = FileSource(flac, speed=50.0)
    source.open()
    got = []
    deadline = time.monotonic() + 3
    while not source.ended and time.monotonic() < deadline:
        got += source.read()
        time.sleep(0.01)
    from engine.audio import read_audio

    assert source.ended
    assert np.array_equal(np.concatenate([b.samples.reshape(-1) for b in got]), read_audio(flac))

    long = tmp_path / "long.flac"
    with soundfile.SoundFile(str(long), "w", 48000, 2, format="FLAC") as f:
        for _ in range(10):  # ten minutes: 38 MB at 16 kHz float32, 230 MB as 48 kHz stereo float32
            f.write(np.zeros((48000 * 60, 2), np.int16))
    tracemalloc.start()
    source = FileSource(long, speed=1.0)
    source.open()
    source.read(1.0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8 * 2**20, peak
    assert not source.ended and source.backlog_seconds < 60


def test_a_file_cut_short_is_said_once_when_its_audio_ends(tmp_path):
    audio = fake_engine.speechlike([(0.5, 0.5)])
    path = fake_engine.write_wav(tmp_path / "a.wav", audio)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    source = FileSource(path, speed=50.0)
    source.open()
    notes = []
    deadline = time.monotonic() + 5
    while not source.ended and time.monotonic() < deadline:
        source.read()
        notes += source.notices()
        time.sleep(0.01)
    assert source.ended and len(notes) == 1 and "ends early" in notes[0]
    assert source.notices() == []


def test_a_replay_waits_for_a_reader_that_falls_far_behind_and_loses_nothing(tmp_path, monkeypatch):
    """With a model slower than real time a replay's backlog grew without end: Pause and Stop, which transcribe
    it, took 16 s after 30 s of replay and 47 s after 90 s (QA). Beyond MAX_BEHIND_S the clock waits for the
    engine instead, as a microphone's queue holds that much; every sample is still read, in order. A fast replay
    may be read in larger steps (at one second a tick, --speed 200 ran at ~50x)."""
    from app import file_source
    from engine.audio import read_audio

    clock = [1000.0]
    monkeypatch.setattr(file_source.time, "monotonic", lambda: clock[0])
    audio = fake_engine.speechlike([(0.5, 0.5)] * 40)  # 40 s
    path = fake_engine.write_wav(tmp_path / "a.wav", audio)
    source = FileSource(path, speed=1.0)
    source.open()
    got = []
    for _ in range(20):  # the engine reads half a second for every second that passes
        clock[0] += 1.0
        assert source.backlog_seconds <= file_source.MAX_BEHIND_S
        got += source.read(0.5)
    assert source.backlog_seconds == pytest.approx(file_source.MAX_BEHIND_S - 0.5, abs=0.01)  # held there
    source.close()  # pause or stop: what is due is bounded too
    due = source.read()
    assert sum(len(b.samples) for b in due) <= file_source.MAX_BEHIND_S * 16000 + 1
    got += due
    source.open()
    while not source.ended:
        clock[0] += 1.0
        got += source.read()
    samples = np.concatenate([b.samples.reshape(-1) for b in got])
    assert np.array_equal(samples, read_audio(path))  # every sample, in order: the clock waited, nothing skipped
    assert FileSource(path, speed=200.0).max_read_s == pytest.approx(10.0) and FileSource(path).max_read_s == 1.0
