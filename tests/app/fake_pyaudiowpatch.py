"""A fake ``pyaudiowpatch`` module: WASAPI loopback devices whose callbacks the test drives by hand (a real
loopback delivers nothing while its output is silent), a default output that can change, and a device that
refuses mono like the real ones."""

from __future__ import annotations

import numpy as np

paFloat32 = 1
paContinue = 0


class FakeWasapi:
    """The test's handle: devices, the default, and the streams opened."""

    def __init__(self, devices: list[dict], default: str) -> None:
        self.devices = devices
        self.default = default
        self.streams: list[FakeStream] = []
        self.instances = 0
        self.terminated = 0
        self.fail_open = False

    # what ``import pyaudiowpatch`` gives
    paFloat32 = paFloat32
    paContinue = paContinue

    def PyAudio(self) -> FakePyAudio:  # noqa: N802 - PyAudio's spelling
        self.instances += 1
        return FakePyAudio(self, self.default)  # the default is frozen per instance, like PortAudio's list


def loopback(name: str, index: int, channels: int = 2, rate: float = 48000.0) -> dict:
    return {
        "index": index,
        "name": f"{name} [Loopback]",
        "maxInputChannels": channels,
        "defaultSampleRate": rate,
        "isLoopbackDevice": True,
    }


class FakePyAudio:
    def __init__(self, wasapi: FakeWasapi, default: str) -> None:
        self.w = wasapi
        self._default = default

    def get_default_wasapi_loopback(self) -> dict:
        return next(d for d in self.w.devices if d["name"] == f"{self._default} [Loopback]")

    def get_loopback_device_info_generator(self):
        yield from self.w.devices

    def open(self, *, format, channels, rate, input, input_device_index, frames_per_buffer, stream_callback):
        device = next(d for d in self.w.devices if d["index"] == input_device_index)
        if self.w.fail_open or channels != device["maxInputChannels"]:
            raise OSError("[Errno -9998] Invalid number of channels")
        assert format == paFloat32 and input
        stream = FakeStream(device, channels, rate, frames_per_buffer, stream_callback)
        self.w.streams.append(stream)
        return stream

    def terminate(self) -> None:
        self.w.terminated += 1


class FakeStream:
    def __init__(self, device: dict, channels: int, rate: int, frames: int, callback) -> None:
        self.device, self.channels, self.rate, self.frames, self.callback = device, channels, rate, frames, callback
        self.active = True
        self.closed = False

    def play(self, samples: np.ndarray) -> None:
        """What the output plays, as one callback (``samples``: frames x channels float32)."""
        data = np.ascontiguousarray(samples, dtype=np.float32)
        result = self.callback(data.tobytes(), len(data), {}, 0)
        assert result == (None, paContinue)

    def is_active(self) -> bool:
        return self.active

    def stop_stream(self) -> None:
        self.active = False

    def close(self) -> None:
        self.closed = True
