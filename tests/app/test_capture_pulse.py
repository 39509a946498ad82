"""One honest test of the real capture path: sounddevice -> PortAudio -> ALSA -> PulseAudio, with a
private PulseAudio server whose pipe source is a virtual microphone (shared/notes/audio_testing.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from app.worker import SessionSpec
from tests.app import fake_engine

RATE = 16000


@pytest.fixture
def pulse_mic(tmp_path_factory, monkeypatch):
    """A private PulseAudio server with a FIFO-fed source ``fakemic`` (the default source). Yields
    ``(sounddevice module, fifo path)``; the server is stopped by its pid afterwards."""
    if shutil.which("pulseaudio") is None:
        pytest.skip(
            "pulseaudio is not installed (Debian: pulseaudio libasound2-plugins), so no virtual microphone"
        )
    try:
        import sounddevice as sd
    except OSError:
        pytest.skip("PortAudio is not installed (Debian: libportaudio2)")
    runtime = Path(tmp_path_factory.mktemp("pulse-runtime"))
    runtime.chmod(0o700)
    fifo = runtime / "mic.fifo"
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime))
    cmd = [
        "pulseaudio",
        "--daemonize=yes",
        "--exit-idle-time=-1",
        "--disallow-exit",
        "-n",
        "--load=module-native-protocol-unix",
        f"--load=module-pipe-source source_name=fakemic file={fifo} format=float32le rate={RATE} channels=1",
        "--load=module-null-sink",
        f"--log-target=file:{runtime / 'pa.log'}",
    ]
    started = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=20)
    pid_file = runtime / "pulse" / "pid"
    if started.returncode != 0 or not pid_file.exists():
        pytest.skip(f"pulseaudio did not start here ({started.stderr.strip()[:200] or started.returncode})")
    try:
        subprocess.run(["pactl", "set-default-source", "fakemic"], env=env, capture_output=True, timeout=10)
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
        monkeypatch.setenv("PULSE_SERVER", f"unix:{runtime / 'pulse' / 'native'}")
        sd._terminate()  # PortAudio lists devices at start-up: let it see the new server
        sd._initialize()
        if not any(d["name"] == "pulse" and d["max_input_channels"] > 0 for d in sd.query_devices()):
            pytest.skip("PortAudio has no 'pulse' ALSA device (Debian: libasound2-plugins)")
        yield sd, fifo
    finally:
        try:
            os.kill(int(pid_file.read_text().strip()), 15)
        except (OSError, ValueError):
            pass


class FifoWriter(threading.Thread):
    """Feeds the virtual microphone at real-time pace: ``lead`` s of zeros, ``audio``, then zeros until
    stopped (PulseAudio only produces what is written)."""

    def __init__(self, fifo: Path, audio: np.ndarray, lead: float = 0.3) -> None:
        super().__init__(daemon=True, name="fifo-writer")
        self.fifo, self.audio, self.lead = fifo, audio, lead
        self.stop = threading.Event()
        self.done = threading.Event()

    def run(self) -> None:
        chunk = RATE // 50  # 20 ms
        signal = np.concatenate([np.zeros(int(self.lead * RATE), np.float32), self.audio.astype(np.float32)])
        fd = os.open(self.fifo, os.O_WRONLY)
        try:
            t0, pos = time.monotonic(), 0
            while not self.stop.is_set():
                block = signal[pos : pos + chunk]
                if len(block) < chunk:
                    self.done.set()
                    block = np.concatenate([block, np.zeros(chunk - len(block), np.float32)])
                os.write(fd, block.astype("<f4").tobytes())
                pos += chunk
                time.sleep(max(0.0, t0 + pos / RATE - time.monotonic()))
        finally:
            os.close(fd)


def test_real_portaudio_capture_through_pulseaudio(qtbot, pulse_mic, journal_dir, speech):
    from app.controller import SessionController

    sd, fifo = pulse_mic
    writer = FifoWriter(fifo, speech)
    writer.start()
    c = SessionController(loader=fake_engine.load_model, sounddevice=sd, journal_dir=journal_dir)
    try:
        with qtbot.waitSignal(c.model_changed, timeout=5000):
            c.load_model("fake", "auto")
        levels = []
        c.stats_changed.connect(lambda s: levels.append(s.level_db))
        with qtbot.waitSignal(c.state_changed, timeout=5000):
            c.start(SessionSpec(device="pulse"))
        assert c.input_description.startswith("pulse")
        qtbot.waitUntil(writer.done.is_set, timeout=15000)
        qtbot.waitUntil(lambda: len(c.lines) >= 3, timeout=5000)
        with qtbot.waitSignal(c.session_finished, timeout=5000):
            c.stop()
        assert [line.text for line in c.lines] == [line.text for line in fake_engine.transcribe(speech)]
        assert max(levels) > -20  # the tone (rms ~0.2, about -14 dBFS) reached the level meter
    finally:
        writer.stop.set()
        c.shutdown(5000)
        writer.join(2)
