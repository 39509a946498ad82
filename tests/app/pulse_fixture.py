"""A private PulseAudio server for tests of the real capture path (shared/notes/audio_testing.md): a FIFO-fed
virtual microphone and two null-sink outputs whose monitors System audio captures. The fixtures are
registered in tests/app/conftest.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

RATE = 16000


class PulseServer:
    """A private PulseAudio server: the FIFO-fed microphone ``fakemic`` ("Virtual Mic", the default source)
    and two null-sink outputs, ``virt_out`` ("Virtual Speakers", the default) and ``virt_alt`` ("Virtual
    Headphones"). ``env`` reaches it from a subprocess."""

    def __init__(self, sd, runtime: Path, env: dict) -> None:
        self.sd, self.runtime, self.env = sd, runtime, env
        self.fifo = runtime / "mic.fifo"
        self._players: list[subprocess.Popen] = []

    def pactl(self, *args: str) -> None:
        subprocess.run(["pactl", *args], env=self.env, capture_output=True, timeout=10, check=True)

    def play(self, audio: np.ndarray, sink: str, rate: int = RATE) -> subprocess.Popen:
        """Play mono float32 ``audio`` (at ``rate``) into ``sink`` with pacat, in the background."""
        raw = self.runtime / f"clip{len(self._players)}.raw"
        np.asarray(audio, dtype="<f4").tofile(raw)
        cmd = ["pacat", f"--device={sink}", "--format=float32le", f"--rate={rate}", "--channels=1", str(raw)]
        player = subprocess.Popen(cmd, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._players.append(player)
        return player

    def stop_players(self) -> None:
        for player in self._players:
            if player.poll() is None:
                player.kill()
            player.wait(5)


@pytest.fixture
def pulse_server(tmp_path_factory, monkeypatch):
    """Starts ``PulseServer`` (skips with the reason where PulseAudio or PortAudio cannot run) and points
    this process's PortAudio and pulsectl at it; stopped by its pid afterwards."""
    if shutil.which("pulseaudio") is None or shutil.which("pacat") is None:
        pytest.skip(
            "pulseaudio is not installed (Debian: pulseaudio pulseaudio-utils libasound2-plugins), so no "
            "virtual microphone or output"
        )
    try:
        import sounddevice as sd
    except OSError:
        pytest.skip("PortAudio is not installed (Debian: libportaudio2)")
    runtime = Path(tmp_path_factory.mktemp("pulse-runtime"))
    runtime.chmod(0o700)
    fifo = runtime / "mic.fifo"
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime), PULSE_SERVER=f"unix:{runtime / 'pulse' / 'native'}")
    cmd = [
        "pulseaudio",
        "--daemonize=yes",
        "--exit-idle-time=-1",
        "--disallow-exit",
        "-n",
        "--load=module-native-protocol-unix",
        f"--load=module-pipe-source source_name=fakemic file={fifo} format=float32le rate={RATE} channels=1 "
        "source_properties='device.description=\"Virtual Mic\"'",
        "--load=module-null-sink sink_name=virt_out sink_properties='device.description=\"Virtual Speakers\"'",
        "--load=module-null-sink sink_name=virt_alt sink_properties='device.description=\"Virtual Headphones\"'",
        f"--log-target=file:{runtime / 'pa.log'}",
    ]
    started = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=20)
    pid_file = runtime / "pulse" / "pid"
    if started.returncode != 0 or not pid_file.exists():
        pytest.skip(f"pulseaudio did not start here ({started.stderr.strip()[:200] or started.returncode})")
    server = PulseServer(sd, runtime, env)
    try:
        server.pactl("set-default-source", "fakemic")
        server.pactl("set-default-sink", "virt_out")
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
        monkeypatch.setenv("PULSE_SERVER", env["PULSE_SERVER"])
        sd._terminate()  # PortAudio lists devices at start-up: let it see the new server
        sd._initialize()
        if not any(d["name"] == "pulse" and d["max_input_channels"] > 0 for d in sd.query_devices()):
            pytest.skip("PortAudio has no 'pulse' ALSA device (Debian: libasound2-plugins)")
        yield server
    finally:
        server.stop_players()
        try:
            os.kill(int(pid_file.read_text().strip()), 15)
        except (OSError, ValueError):
            pass


@pytest.fixture
def pulse_mic(pulse_server):
    """``(sounddevice module, fifo path)`` of the private server's virtual microphone."""
    return pulse_server.sd, pulse_server.fifo


class FifoWriter(threading.Thread):
    """Feeds the virtual microphone at real-time pace: ``lead`` s of zeros, ``audio``, then zeros until
    stopped (PulseAudio only produces what is written). With ``wait=True`` it writes zeros until ``go`` is
    set before the lead starts."""

    def __init__(self, fifo: Path, audio: np.ndarray, lead: float = 0.3, wait: bool = False) -> None:
        super().__init__(daemon=True, name="fifo-writer")
        self.fifo, self.audio, self.lead = fifo, audio, lead
        self.stop = threading.Event()
        self.done = threading.Event()
        self.go = threading.Event()
        if not wait:
            self.go.set()

    def run(self) -> None:
        chunk = RATE // 50  # 20 ms
        signal = np.concatenate([np.zeros(int(self.lead * RATE), np.float32), self.audio.astype(np.float32)])
        fd = os.open(self.fifo, os.O_WRONLY)
        try:
            t0, pos, waited = time.monotonic(), 0, 0
            while not self.stop.is_set():
                if not self.go.is_set():
                    os.write(fd, np.zeros(chunk, "<f4").tobytes())
                    waited += chunk
                    time.sleep(max(0.0, t0 + waited / RATE - time.monotonic()))
                    continue
                block = signal[pos : pos + chunk]
                if len(block) < chunk:
                    self.done.set()
                    block = np.concatenate([block, np.zeros(chunk - len(block), np.float32)])
                os.write(fd, block.astype("<f4").tobytes())
                pos += chunk
                time.sleep(max(0.0, t0 + (waited + pos) / RATE - time.monotonic()))
        except BrokenPipeError:  # the server went first (a write waited on a source nobody recorded)
            pass
        finally:
            os.close(fd)
