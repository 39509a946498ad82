"""Capture: the bounded queue, device listing, the 16 kHz / native-rate choice, loss detection."""

from __future__ import annotations

import time

import numpy as np
import pytest

from app.capture import AudioQueue, Block, MicSource, list_input_devices, resolve_device
from engine.errors import AudioError
from tests.app.fake_sounddevice import FakeSoundDevice, make_device


def test_queue_drops_oldest_and_counts():
    """A stalled reader (no reads): each overflow drops only the oldest block; the newest second stays whole."""
    q = AudioQueue(max_seconds=1.0)
    for i in range(30):
        q.put(Block(np.full((1600, 1), i, dtype=np.float32), 16000, float(i)))
    assert q.dropped_blocks == 20
    assert abs(q.dropped_seconds - 2.0) < 1e-9
    blocks = q.take_all()
    assert [int(b.samples[0, 0]) for b in blocks] == list(range(20, 30))
    assert q.queued_seconds == 0


def test_one_stall_just_past_the_capacity_loses_only_the_overflow():
    """Review: the queue dropped down to half at any overflow, so a worker busy just over 10 s once (a first MLX
    compile, a long re-decode) lost ~5 s of speech where 128 ms had overflowed."""
    q = AudioQueue(max_seconds=10.0)
    q.put(Block(np.zeros((1024, 1), np.float32), 16000, 0.0))
    q.take_all()  # the reader had been reading
    for i in range(158):  # 10.112 s arrive while it is busy once
        q.put(Block(np.zeros((1024, 1), np.float32), 16000, float(i)))
    assert q.dropped_blocks == 2 and abs(q.dropped_seconds - 0.128) < 1e-9
    assert abs(q.queued_seconds - 9.984) < 1e-9


def test_a_second_stall_after_the_reader_caught_up_loses_only_the_overflow():
    """Review: a stall past the capacity, the reader catching up, 30 s read as they came, then the same stall: the
    second was taken for a reader falling behind and lost 5 s, where the first lost 128 ms."""
    q = AudioQueue(max_seconds=10.0)
    block = np.zeros((1024, 1), np.float32)
    losses = []
    for _ in range(2):
        for _ in range(470):  # ~30 s read as they come
            q.put(Block(block, 16000, 0.0))
            q.take_all(1.0)
        before = q.dropped_seconds
        for _ in range(158):  # 10.112 s while the reader is busy
            q.put(Block(block, 16000, 0.0))
        losses.append(q.dropped_seconds - before)
        while q.queued_seconds > 1.0:  # it catches up, faster than real time (a second read per block that comes)
            q.take_all(1.0)
            q.put(Block(block, 16000, 0.0))
        q.take_all()  # and has read everything
    assert [round(x, 3) for x in losses] == [0.128, 0.128]


def holes_behind_a_slow_reader(q: AudioQueue, blocks: int, slowness: float, read_s: float) -> list[tuple[int, int]]:
    """(first block, length) of each run of dropped blocks, 0.1 s blocks arriving in real time and a reader that
    takes at most ``read_s`` at a time and needs ``slowness`` times its audio's length to transcribe it."""
    busy_until, seen = 0.0, set()
    for i in range(blocks):
        q.put(Block(np.full((1600, 1), i, np.float32), 16000, i * 0.1))
        if i * 0.1 >= busy_until:
            got = [int(b.samples[0, 0]) for b in q.take_all(read_s)]
            seen.update(got)
            busy_until = i * 0.1 + slowness * 0.1 * len(got)
    seen.update(int(b.samples[0, 0]) for b in q.take_all())
    holes: list[list[int]] = []
    for m in sorted(set(range(blocks)) - seen):
        if holes and holes[-1][0] + holes[-1][1] == m:
            holes[-1][1] += 1
        else:
            holes.append([m, 1])
    return [(a, n) for a, n in holes]


def test_a_reader_behind_misses_whole_seconds_and_keeps_whole_stretches():
    """QA: a model slower than real time (1.5x, reading 1 s at a time) lost 0.6 s of every 1.7 s, a hole in every
    sentence. Full again soon after a drop, with reads between, the queue drops down to half at once: holes of
    seconds, the stretches between them whole."""
    holes = holes_behind_a_slow_reader(AudioQueue(max_seconds=10.0), 1200, 1.5, 1.0)
    assert len(holes) >= 4, holes
    later = holes[1:]  # the first overflow drops only what overflowed: nothing says yet that the reader is behind
    assert all(n >= 40 for _, n in later), holes  # >= 4 s
    gaps = [b - (a + n) for (a, n), (b, _) in zip(holes, holes[1:])]
    assert all(g >= 40 for g in gaps[1:]), holes  # >= 4 s transcribed whole between two holes


def test_device_list_and_resolution():
    sd = FakeSoundDevice([make_device("Mic A"), make_device("Speakers", inputs=0), make_device("Mic B", 48000.0)])
    sd.default.device = [2, -1]
    devices = list_input_devices(sd)
    assert [(d.index, d.name, d.is_default) for d in devices] == [(0, "Mic A", False), (2, "Mic B", True)]
    assert resolve_device(sd, "Mic B") == 2
    assert resolve_device(sd, "Gone") is None and resolve_device(sd, "") is None


def test_opens_at_16k_when_accepted_else_native_rate():
    sd = FakeSoundDevice([make_device("Both", 48000.0, rates=(16000, 48000)), make_device("Only48", 48000.0)])
    a = MicSource(sd, 0)
    a.open()
    b = MicSource(sd, 1)
    b.open()
    try:
        assert (a.rate, b.rate) == (16000, 48000)
        assert sd.streams[1].blocksize == int(48000 * 0.064)
        assert b.description == "Only48 (48 kHz)"
    finally:
        a.close()
        b.close()


def test_callback_copies_the_buffer():
    sd = FakeSoundDevice([make_device("Mic")], signal=np.full(16000, 0.5, np.float32), speed=8.0)
    source = MicSource(sd, None)
    source.open()
    time.sleep(0.1)
    source.close()
    blocks = source.read()
    assert blocks and all(np.all(b.samples == 0.5) for b in blocks)  # the fake zeroes its buffer after each call


def test_unplug_is_detected():
    sd = FakeSoundDevice([make_device("Mic")], speed=8.0)
    source = MicSource(sd, None)
    source.open()
    assert not source.lost
    sd.unplug("Mic")
    deadline = time.monotonic() + 2
    while not source.lost and time.monotonic() < deadline:
        time.sleep(0.01)
    assert source.lost
    source.close()


def test_no_device_and_denied_raise_one_sentence():
    with pytest.raises(AudioError, match=r"^No microphone was found; connect one and press Refresh\.$"):
        MicSource(FakeSoundDevice([]), None).open()
    with pytest.raises(AudioError, match="could not be opened"):
        MicSource(FakeSoundDevice([make_device("Mic")], deny=True), None).open()


@pytest.mark.parametrize("would_wait", [False, True])
def test_a_stream_whose_close_would_wait_for_the_sound_server_is_left_to_close(monkeypatch, would_wait):
    """A sound server that stopped answering held PortAudio's abort, and Stop and Quit with it (QA: 25 s). Where
    a backend says closing would wait, the close is aborted on a thread of its own and left after
    ``CLOSE_TIMEOUT_S``; else it stays on the calling thread (a killed server's stream closed on another thread
    once left PortAudio's capture thread spinning)."""
    import threading

    from app import capture

    monkeypatch.setattr(capture, "CLOSE_TIMEOUT_S", 0.2)
    monkeypatch.setattr(capture, "_left_closing", [])
    monkeypatch.setattr(capture, "_server_checks", [])
    capture.server_would_wait(lambda: would_wait)
    sd = FakeSoundDevice([make_device("Mic")], speed=8.0)
    source = MicSource(sd, None)
    source.open()
    time.sleep(0.1)  # delivering: a stream the old path stops
    stream, answer, calls = sd.streams[-1], threading.Event(), []

    def hangs(op):
        def call():
            calls.append((op, threading.current_thread()))
            if would_wait:
                answer.wait(30)

        return call

    stream.abort, stream.stop = hangs("abort"), hangs("stop")
    began = time.monotonic()
    source.close()
    took = time.monotonic() - began
    assert not source.is_open
    if not would_wait:
        assert calls[0][0] == "stop" and {thread for _, thread in calls} == {threading.current_thread()}
        assert not capture.streams_left_closing()
        return
    assert 0.2 <= took < 1.0 and capture.streams_left_closing()
    assert calls[0][0] == "abort" and calls[0][1] is not threading.current_thread()
    answer.set()
    deadline = time.monotonic() + 5
    while capture.streams_left_closing() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not capture.streams_left_closing()


@pytest.mark.parametrize("silent", [False, True])
def test_no_device_rescan_while_the_sound_server_does_not_answer(monkeypatch, silent):
    """Refresh (and the worker's recovery and Resume) re-scanned PortAudio's devices, whose start asks the sound
    server about them: with the server stopped, Pa_Initialize waited for it (an ``import sounddevice`` did not
    return in 20 s), the GUI thread with it."""
    from app import capture

    monkeypatch.setattr(capture, "_server_checks", [])
    capture.server_would_wait(lambda: silent)
    calls: list[str] = []
    sd = type("SD", (), {"_terminate": lambda: calls.append("terminate"), "_initialize": lambda: calls.append("init")})
    capture.refresh_devices(sd)
    assert calls == ([] if silent else ["terminate", "init"])
