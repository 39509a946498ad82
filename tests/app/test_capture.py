"""Capture: the bounded queue, device listing, the 16 kHz / native-rate choice, loss detection."""

from __future__ import annotations

import time

import numpy as np
import pytest

from app.capture import AudioQueue, Block, MicSource, list_input_devices, resolve_device
from engine.errors import AudioError
from tests.app.fake_sounddevice import FakeSoundDevice, make_device


def test_queue_drops_oldest_and_counts():
    """Full, the queue drops its oldest audio down to half at once (it dropped one block per put: a model behind
    then lost a piece of every sentence, QA); the blocks kept are the newest, in order."""
    q = AudioQueue(max_seconds=1.0)
    for i in range(30):
        q.put(Block(np.full((1600, 1), i, dtype=np.float32), 16000, float(i)))
    # overflows at blocks 10, 16, 22, 28 (1.1 s queued): each time down to 0.5 s (5 blocks)
    assert q.dropped_blocks == 24
    assert abs(q.dropped_seconds - 2.4) < 1e-9
    blocks = q.take_all()
    assert [int(b.samples[0, 0]) for b in blocks] == list(range(24, 30))
    assert q.queued_seconds == 0


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
