"""Both inputs the worker drives satisfy ``app.audio_source.AudioSource``."""

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
