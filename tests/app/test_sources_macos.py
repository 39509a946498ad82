"""macOS system audio against a fake PyObjC CoreAudio: the tap excludes livecap, lives in a private
aggregate device read like a microphone at its own channels, is rebuilt when the output changes and torn
down on close; a missing permission (zeros while something plays) is told in one sentence; before 14.4 the
message names BlackHole."""

from __future__ import annotations

import numpy as np
import pytest

from app.capture import Block
from app.sources import AudioSystem
from app.sources.macos_tap import PERMISSION, TOO_OLD, CoreAudioTap, MacBackend, MacTapSource
from engine.errors import AudioError
from tests.app.fake_coreaudio import FakeCoreAudio
from tests.app.fake_sounddevice import FakeSoundDevice, make_device


class Clock:
    def __init__(self) -> None:
        self.t = 10.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def sd() -> FakeSoundDevice:
    return FakeSoundDevice([make_device("MacBook Pro Microphone", 48000.0)], speed=8.0)


def open_tap(sd, ca, clock=None, version=(14, 4)) -> MacTapSource:
    source = MacTapSource(sd, CoreAudioTap(ca), version=version, clock=clock or Clock())
    source.open()
    return source


def test_before_14_4_system_audio_names_blackhole(sd):
    ca = FakeCoreAudio(sd)
    assert MacBackend(sd, ca, version=(14, 3)).unavailable_reason() == TOO_OLD and "BlackHole" in TOO_OLD
    assert AudioSystem(sd, MacBackend(sd, ca, version=(13, 6))).default_kind() == "mic"
    with pytest.raises(AudioError, match="macOS 14.4"):
        open_tap(sd, ca, version=(14, 2))
    assert not ca.taps


def test_global_tap_excluding_livecap_in_a_private_aggregate_read_like_a_microphone(sd):
    ca = FakeCoreAudio(sd, own_object=77)
    assert AudioSystem(sd, MacBackend(sd, ca, version=(15, 1))).default_kind() == "system"
    source = open_tap(sd, ca)
    try:
        ((tap, desc),) = ca.taps.items()
        assert desc.exclude == [77] and desc.private and desc.device_uid is None
        (spec,) = ca.aggregates.values()
        assert spec["IsPrivateKey"] is True and spec["TapAutoStartKey"] is True
        assert spec["TapListKey"] == [{"TapUID": desc.UUID().UUIDString(), "TapDrift": True}]
        assert sd.rescans == 1  # PortAudio re-scanned after the aggregate existed
        stream = sd.streams[-1]
        assert stream.device["name"] == spec["NameKey"] and (stream.channels, stream.samplerate) == (2, 48000)
        assert source.rate == 48000 and "follows the default output" in source.description
    finally:
        source.close()
    assert [kind for kind, _ in ca.destroyed] == ["aggregate", "tap"]
    assert not ca.taps and not ca.aggregates


def test_livecap_without_an_audio_object_yet_excludes_nothing(sd):
    ca = FakeCoreAudio(sd, own_object=0)  # livecap has not touched audio yet: not a permission problem
    source = open_tap(sd, ca)
    try:
        assert next(iter(ca.taps.values())).exclude == []
        assert source.notices() == []
    finally:
        source.close()


def feed_zeros(source: MacTapSource, seconds: float) -> None:
    source.queue.take_all()
    source.queue.put(Block(np.zeros((int(seconds * 48000), 2), np.float32), 48000, 0.0))
    source.read()


def test_silence_while_something_plays_is_a_permission_message(sd):
    quiet = FakeCoreAudio(sd, playing=False)
    source = open_tap(sd, quiet)
    feed_zeros(source, 4.0)
    assert source.notices() == []  # nothing plays: silence is just silence
    source.close()

    denied = FakeCoreAudio(sd, playing=True)
    source = open_tap(sd, denied)
    feed_zeros(source, 1.0)
    assert source.notices() == []
    feed_zeros(source, 2.5)
    assert source.notices() == [PERMISSION] and "System Audio Recording" in PERMISSION
    feed_zeros(source, 4.0)
    assert source.notices() == []  # once
    source.close()


def test_the_tap_is_rebuilt_when_the_default_output_changes(sd):
    ca = FakeCoreAudio(sd)
    clock = Clock()
    source = open_tap(sd, ca, clock)
    try:
        first_tap = next(iter(ca.taps))
        clock.t += 1.5
        source.read()
        assert source.rebuilds == 0 and len(sd.streams) == 1
        ca.default_output = 41  # AirPods connected
        clock.t += 1.5
        source.read()
        assert source.rebuilds == 1 and ("tap", first_tap) in ca.destroyed
        assert len(ca.taps) == 1 and len(ca.aggregates) == 1 and len(sd.streams) == 2
        assert sd.streams[-1].device["name"] == next(iter(ca.aggregates.values()))["NameKey"]
        assert source.notices() == ["The output changed; livecap follows it."]
        assert not source.lost
    finally:
        source.close()
    assert not ca.taps and not ca.aggregates
