"""A fake ``sounddevice`` module: devices, sample-rate checks, and input streams whose callbacks run on a
thread at (a multiple of) real-time pace and play a test signal. Devices can be unplugged mid-stream."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np


class PortAudioError(Exception):
    pass


class CallbackFlags:
    def __init__(self, flags: int = 0) -> None:
        self.flags = flags

    def __bool__(self) -> bool:
        return bool(self.flags)


class _Default:
    def __init__(self) -> None:
        self.device = [0, -1]


def make_device(name: str, rate: float = 16000.0, inputs: int = 1, rates: tuple[int, ...] | None = None) -> dict:
    """A device dict like sounddevice's; ``rates`` lists the rates the device accepts (default: its own)."""
    return {
        "name": name,
        "hostapi": 0,
        "max_input_channels": inputs,
        "max_output_channels": 0,
        "default_samplerate": rate,
        "_rates": rates if rates is not None else (int(rate),),
    }


class FakeInputStream:
    def __init__(
        self,
        sd: FakeSoundDevice,
        device: dict,
        samplerate: float,
        channels: int,
        blocksize: int,
        callback: Callable,
        finished_callback: Callable | None,
        **_: object,
    ) -> None:
        self.sd = sd
        self.device = device
        self.samplerate = samplerate
        self.channels = channels
        self.blocksize = blocksize or 1024
        self.callback = callback
        self.finished_callback = finished_callback
        self.active = False
        self.closed = False
        self.callback_seconds: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pos = 0

    def start(self) -> None:
        self.active = True
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="fake-portaudio", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        signal = self.sd.signal_for(self.device["name"], int(self.samplerate))
        period = self.blocksize / self.samplerate / self.sd.speed
        next_t = time.monotonic()
        while not self._stop.is_set():
            while self.sd.frozen.is_set() and not self._stop.is_set():
                time.sleep(0.005)  # the schedule runs on: once thawed, the blocks due come back to back
            if self.device["name"] in self.sd.unplugged:
                self.active = False
                if self.finished_callback:
                    self.finished_callback()
                return
            block = signal[self._pos : self._pos + self.blocksize]
            self._pos += self.blocksize
            if len(block) < self.blocksize:
                block = np.concatenate([block, np.zeros(self.blocksize - len(block), dtype=np.float32)])
            indata = np.repeat(block.reshape(-1, 1), self.channels, axis=1).astype(np.float32)
            t = time.perf_counter()
            self.callback(indata, self.blocksize, None, CallbackFlags())
            self.callback_seconds.append(time.perf_counter() - t)
            indata[:] = 0  # PortAudio reuses its buffer: a callback that kept a view would see zeros
            next_t += period
            self._stop.wait(max(0.0, next_t - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(2)
        was_active, self.active = self.active, False
        if was_active and self.finished_callback:
            self.finished_callback()

    def abort(self) -> None:  # PortAudio: stop without waiting for pending buffers (the same here)
        self.stop()

    def close(self) -> None:
        if self.active:
            self.stop()
        self.closed = True


class FakeSoundDevice:
    """The parts of the sounddevice module the app uses."""

    PortAudioError = PortAudioError
    CallbackFlags = CallbackFlags

    def __init__(
        self,
        devices: list[dict] | None = None,
        signal: np.ndarray | None = None,
        speed: float = 4.0,
        deny: bool = False,
    ) -> None:
        self.devices = devices if devices is not None else [make_device("Fake Mic")]
        self.default = _Default()
        self.default.device = [0 if self.devices else -1, -1]
        self.signal = signal if signal is not None else np.zeros(16000, dtype=np.float32)
        self.signals: dict[str, np.ndarray] = {}
        self.speed = speed
        self.deny = deny
        self.unplugged: set[str] = set()
        self.frozen = threading.Event()  # set: no callbacks (the process stopped); cleared: the backlog at once
        self.streams: list[FakeInputStream] = []
        self.rescans = 0
        self._pending: list[dict] | None = None

    # -- test controls -----------------------------------------------------------------------------
    def signal_for(self, name: str, rate: int) -> np.ndarray:
        base = self.signals.get(name, self.signal)
        if rate == 16000:
            return base
        n = int(len(base) * rate / 16000)
        return np.interp(np.arange(n) * 16000 / rate, np.arange(len(base)), base).astype(np.float32)

    def unplug(self, name: str, new_devices: list[dict] | None = None) -> None:
        """The device vanishes: its streams end; after the next rescan the list is ``new_devices``."""
        self.unplugged.add(name)
        remaining = [d for d in self.devices if d["name"] != name]
        self._pending = new_devices if new_devices is not None else remaining

    # -- sounddevice API ---------------------------------------------------------------------------
    def _initialize(self) -> None:
        self.rescans += 1
        if self._pending is not None:
            self.devices, self._pending = self._pending, None
            self.default.device = [0 if self.devices else -1, -1]

    def _terminate(self) -> None:
        for stream in self.streams:
            if stream.active:
                stream.stop()

    def query_hostapis(self, index: int | None = None):
        apis = [{"name": "Fake API", "devices": list(range(len(self.devices)))}]
        return apis if index is None else apis[index]

    def _resolve(self, device) -> dict:
        if device is None:
            index = self.default.device[0]
            if index < 0 or index >= len(self.devices):
                raise PortAudioError("Error querying device -1")
            return self.devices[index]
        if isinstance(device, int):
            if device >= len(self.devices):
                raise PortAudioError(f"Error querying device {device}")
            return self.devices[device]
        for dev in self.devices:
            if device in dev["name"]:
                return dev
        raise ValueError(f"No input device matching {device!r}")

    def query_devices(self, device=None, kind=None):
        if device is None and kind is None:
            return [dict(d) for d in self.devices]
        dev = dict(self._resolve(device))
        if kind == "input" and dev["max_input_channels"] < 1:
            raise ValueError("not an input device")
        return dev

    def check_input_settings(self, device=None, channels=None, dtype=None, extra_settings=None, samplerate=None):
        dev = self._resolve(device)
        if samplerate is not None and int(samplerate) not in dev["_rates"]:
            raise PortAudioError("Error opening InputStream: Invalid sample rate [PaErrorCode -9997]")

    def InputStream(
        self,
        *,
        device=None,
        samplerate=None,
        channels=1,
        dtype="float32",
        blocksize=0,
        callback=None,
        finished_callback=None,
        **kw,
    ):  # sounddevice spells it this way
        dev = self._resolve(device)
        if self.deny:
            raise PortAudioError("Error opening InputStream: Unanticipated host error [PaErrorCode -9999]")
        if samplerate is not None and int(samplerate) not in dev["_rates"]:
            raise PortAudioError("Error opening InputStream: Invalid sample rate [PaErrorCode -9997]")
        stream = FakeInputStream(self, dev, samplerate, channels, blocksize, callback, finished_callback)
        self.streams.append(stream)
        return stream
