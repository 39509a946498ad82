"""App test set-up: offscreen Qt, private settings/data folders, the fake engine and fake sounddevice."""

from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # before any Qt import

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import app  # noqa: E402,F401 - pins None/True/False on an affected PySide6 build before any Qt use
from tests.app import fake_engine  # noqa: E402
from tests.app.fake_sounddevice import FakeSoundDevice, make_device  # noqa: E402
from tests.app.pulse_fixture import pulse_mic, pulse_server  # noqa: E402,F401 - fixtures
from tests.helpers import private_xdg_dirs  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def private_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every platformdirs folder (settings, journals, logs) into tmp_path."""
    return private_xdg_dirs(tmp_path / "home", monkeypatch)


@pytest.fixture(autouse=True)
def no_sound_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reaches a sound server by accident: PulseAudio clients look for one at a path that does not
    exist (the private-server fixtures in test_capture_pulse.py point them at theirs)."""
    monkeypatch.setenv("PULSE_SERVER", f"unix:{tmp_path / 'no-pulse-server'}")


@pytest.fixture
def settings(tmp_path: Path):
    from app.settings import Settings

    return Settings(tmp_path / "settings.ini")


@pytest.fixture
def journal_dir(tmp_path: Path) -> Path:
    path = tmp_path / "journal"
    path.mkdir()
    return path


@pytest.fixture
def speech() -> np.ndarray:
    """About 3.6 s: three voiced bursts with pauses; the fake engine commits one line per burst."""
    return fake_engine.speechlike([(0.8, 0.5), (1.0, 0.5), (0.5, 0.4)])


@pytest.fixture
def fake_sd(speech: np.ndarray) -> FakeSoundDevice:
    """One 16 kHz microphone playing ``speech`` at four times real time, then exact zeros."""
    return FakeSoundDevice([make_device("Fake Mic", 16000.0)], signal=speech, speed=4.0)


@pytest.fixture
def controller(qtbot, journal_dir: Path, fake_sd: FakeSoundDevice):
    """A SessionController with the fake engine and fake sounddevice; shut down after the test."""
    from app.controller import SessionController

    c = SessionController(loader=fake_engine.load_model, sounddevice=fake_sd, journal_dir=journal_dir)
    yield c
    c.shutdown(5000)


@pytest.fixture
def loaded(qtbot, controller):
    """The controller with the fake model loaded."""
    with qtbot.waitSignal(controller.model_changed, timeout=5000):
        controller.load_model("fake-model", "auto")
    return controller
