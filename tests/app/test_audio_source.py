"""Every input the worker drives satisfies ``app.audio_source.AudioSource``: the microphone, a replayed file,
System audio on each platform, and Both."""

from __future__ import annotations

from app.audio_source import AudioSource
from app.capture import MicSource
from app.file_source import FileSource
from tests.app import fake_engine
from tests.app.fake_sounddevice import FakeSoundDevice, make_device


def test_microphone_and_file_are_audio_sources(tmp_path):
    mic = MicSource(FakeSoundDevice([make_device("Mic")]), None)
    path = fake_engine.write_wav(tmp_path / "a.wav", fake_engine.speechlike([(0.2, 0.2)]))
    for source in (mic, FileSource(path)):
        assert isinstance(source, AudioSource), type(source).__name__
    assert not isinstance(object(), AudioSource)


def test_system_audio_and_both_are_audio_sources():
    from app.sources.macos_tap import CoreAudioTap, MacTapSource
    from app.sources.mix import MixSource
    from app.sources.pulse import PulseServer, PulseSystemSource
    from app.sources.wasapi import WasapiLoopbackSource
    from tests.app.fake_coreaudio import FakeCoreAudio
    from tests.app.fake_pyaudiowpatch import FakeWasapi

    sd = FakeSoundDevice([make_device("Mic")])
    pulse = PulseSystemSource(sd, PulseServer(object()))
    mac = MacTapSource(sd, CoreAudioTap(FakeCoreAudio(sd)), version=(14, 4))
    wasapi = WasapiLoopbackSource(FakeWasapi([], default=""))
    both = MixSource(MicSource(sd, None), pulse)
    for source in (pulse, mac, wasapi, both):
        assert isinstance(source, AudioSource), type(source).__name__
