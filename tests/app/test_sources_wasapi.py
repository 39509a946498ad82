"""Windows WASAPI loopback against a fake pyaudiowpatch: device choice, the device's own channels and rate
(downmixed), silence filled by the clock, reopening when the default output changed, loss."""

from __future__ import annotations

import numpy as np
import pytest

from app.sources import AudioSystem
from app.sources.wasapi import RECHECK_EVERY_S, RECHECK_QUIET_S, WasapiBackend, WasapiLoopbackSource
from engine.errors import AudioError
from tests.app.fake_pyaudiowpatch import FakeWasapi, loopback


class Clock:
    def __init__(self) -> None:
        self.t = 50.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def wasapi() -> FakeWasapi:
    return FakeWasapi(
        [loopback("Speakers (Realtek)", 7, 6, 48000.0), loopback("Headphones (USB)", 9, 2, 44100.0)],
        default="Speakers (Realtek)",
    )


def test_lists_outputs_by_name_and_opens_the_default_at_its_own_channels(wasapi):
    backend = WasapiBackend(wasapi)
    outputs = backend.outputs()
    assert [(o.name, o.is_default) for o in outputs] == [("Speakers (Realtek)", True), ("Headphones (USB)", False)]
    audio = AudioSystem(None, backend)
    assert audio.default_kind() == "system"
    source = WasapiLoopbackSource(wasapi, clock=Clock())
    source.open()
    stream = wasapi.streams[-1]
    assert (stream.device["index"], stream.channels, stream.rate) == (7, 6, 48000)  # 5.1, not mono
    assert "Speakers (Realtek)" in source.description and "follows the default output" in source.description
    chosen = WasapiLoopbackSource(wasapi, "Headphones (USB) [Loopback]", clock=Clock())
    chosen.open()
    assert (wasapi.streams[-1].device["index"], wasapi.streams[-1].rate) == (9, 44100)
    with pytest.raises(AudioError, match="^The output \u201cGone\u201d is not available\\.$"):
        WasapiLoopbackSource(wasapi, "Gone", clock=Clock()).open()


def test_blocks_are_downmixed_and_silence_is_filled_by_the_clock(wasapi):
    clock = Clock()
    source = WasapiLoopbackSource(wasapi, clock=clock)
    source.open()
    stream = wasapi.streams[-1]
    frames = np.zeros((3072, 6), np.float32)
    frames[:, 0], frames[:, 1] = 0.6, 0.0  # one channel loud, one silent, four more silent: the mean is 0.1
    clock.t += 0.064
    stream.play(frames)
    blocks = source.read()
    assert len(blocks) == 1 and blocks[0].samples.shape == (3072, 1)
    assert np.allclose(blocks[0].samples, 0.1) and blocks[0].rate == 48000
    clock.t += 1.0  # nothing plays: no callbacks at all
    filled = source.read()
    assert sum(len(b.samples) for b in filled) == pytest.approx(48000, abs=50)
    assert all(not b.samples.any() for b in filled)
    clock.t += 0.05
    assert source.read() == []  # a short gap is not filled yet (callbacks come every 64 ms)


def test_a_channel_in_opposite_phase_does_not_cancel_the_sound(wasapi):
    source = WasapiLoopbackSource(wasapi, "Headphones (USB) [Loopback]", clock=Clock())
    source.open()
    tone = (0.4 * np.sin(np.arange(4410) / 7)).astype(np.float32)
    wasapi.streams[-1].play(np.stack([tone, -tone], axis=1))
    samples = np.concatenate([b.samples for b in source.read()])
    np.testing.assert_array_equal(samples[:, 0], tone)


def test_reopens_when_the_default_output_changed_while_quiet(wasapi):
    clock = Clock()
    source = WasapiLoopbackSource(wasapi, clock=clock)
    source.open()
    first = wasapi.streams[-1]
    wasapi.default = "Headphones (USB)"
    clock.t += 1.0
    first.play(np.zeros((3072, 6), np.float32))  # still delivering: no re-check while audio flows
    source.read()
    assert len(wasapi.streams) == 1
    clock.t += max(RECHECK_QUIET_S, RECHECK_EVERY_S) + 0.1
    source.read()
    assert len(wasapi.streams) == 2 and first.closed
    assert wasapi.streams[-1].device["index"] == 9
    assert source.notices() == ["The default output changed; now captioning what \u201cHeadphones (USB)\u201d plays."]
    assert "Headphones (USB)" in source.description


def test_an_unplugged_output_is_lost_and_a_failed_open_is_one_sentence(wasapi):
    clock = Clock()
    source = WasapiLoopbackSource(wasapi, clock=clock)
    source.open()
    assert not source.lost
    wasapi.streams[-1].active = False  # the device went away
    clock.t += 3
    assert source.lost
    wasapi.fail_open = True
    with pytest.raises(AudioError, match="could not be captured"):
        WasapiLoopbackSource(wasapi, clock=clock).open()


def test_without_pyaudiowpatch_system_audio_says_what_is_missing(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pyaudiowpatch", None)  # import fails
    audio = AudioSystem(None, WasapiBackend())
    assert audio.system_unavailable() == "System audio on Windows needs the PyAudioWPatch package."
    assert audio.default_kind() == "mic"
