"""Windows: what an output plays, through WASAPI loopback (PyAudioWPatch).

sounddevice's PortAudio release has no WASAPI loopback; PyAudioWPatch (a maintained PyAudio fork over a
PortAudio snapshot with loopback) lists each output's loopback twin and opens it like a microphone. Its quirks,
handled here: a loopback delivers no callbacks while nothing plays, so silence is filled in by the clock
(the timeline and the VAD keep moving); a mono open of a loopback fails, so it opens at the device's own
channel count and rate and ``read`` downmixes (the worker resamples); PortAudio's device list is frozen while
it is initialised, so to notice a new default output the stream is re-created, but only after the captured
output has been quiet for ``RECHECK_QUIET_S`` (then nothing can be lost), at most every ``RECHECK_EVERY_S``.

The callback (PortAudio's thread) only copies into the bounded queue. The module is injected.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from app.capture import BLOCK_SECONDS, LOST_AFTER_SECONDS, AudioQueue, Block, QueuedInput
from app.sources.base import Endpoint
from engine.audio.resample import Polarity
from engine.errors import AudioError

log = logging.getLogger(__name__)

LOOPBACK_SUFFIX = " [Loopback]"
FILL_AFTER_S = 0.2  # no callback for this long: the output is silent, fill the gap with zeros
RECHECK_QUIET_S = 2.0
RECHECK_EVERY_S = 3.0


def _module(pyaudio: Any) -> Any:
    if pyaudio is not None:
        return pyaudio
    try:
        import pyaudiowpatch
    except ImportError as exc:
        raise AudioError("System audio on Windows needs the PyAudioWPatch package.") from exc
    return pyaudiowpatch


def _human(name: str) -> str:
    return name[: -len(LOOPBACK_SUFFIX)] if name.endswith(LOOPBACK_SUFFIX) else name


class WasapiLoopbackSource(QueuedInput):
    """The loopback of the output called ``output`` ("" follows the default output)."""

    kind = "system"
    silence_hint = None

    def __init__(
        self,
        pyaudio: Any,
        output: str = "",
        max_queue_seconds: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._mod = pyaudio
        self.output = output
        self.follow = not output
        self.queue = AudioQueue(max_queue_seconds)
        self._clock = clock
        self._lock = threading.Lock()
        self._pa: Any = None
        self._stream: Any = None
        self._closing = False
        self.rate = 48000
        self.channels = 2
        self.device_name = ""
        self.description = ""
        self._last_end = 0.0  # when the audio queued so far ends (callbacks and filled silence)
        self._last_callback = 0.0
        self._next_check = 0.0
        self._notices: list[str] = []
        self._broken = False
        self.filled_seconds = 0.0
        self._polarity = Polarity(2)

    # -- lifecycle (engine worker thread) -----------------------------------------------------------
    def open(self) -> None:
        """Open the loopback at its own channel count and rate (``AudioError`` with one sentence)."""
        mod = _module(self._mod)
        self._mod = mod
        try:
            self._pa = mod.PyAudio()
            info = self._find(self._pa)
        except AudioError:
            self._terminate()
            raise
        except Exception as exc:  # no WASAPI, no output device
            self._terminate()
            raise AudioError("Windows reports no output whose sound can be captured.") from exc
        self.channels = max(int(info.get("maxInputChannels", 2)), 1)
        self.rate = int(round(float(info.get("defaultSampleRate", 48000))))
        self.device_name = _human(str(info.get("name", "output")))
        self._closing = False
        self._broken = False
        try:
            self._stream = self._pa.open(
                format=mod.paFloat32,
                channels=self.channels,
                rate=self.rate,
                input=True,
                input_device_index=int(info["index"]),
                frames_per_buffer=int(self.rate * BLOCK_SECONDS),
                stream_callback=self._callback,
            )
        except Exception as exc:
            self._stream = None
            self._terminate()
            raise AudioError(f"What \u201c{self.device_name}\u201d plays could not be captured.") from exc
        now = self._clock()
        with self._lock:
            self._last_end = self._last_callback = now
        self._next_check = now + RECHECK_EVERY_S
        follows = " \u2014 follows the default output" if self.follow else ""
        self.description = f"System audio: {self.device_name} ({self.rate / 1000:g} kHz){follows}"

    def _find(self, pa: Any) -> dict:
        if self.follow:
            return dict(pa.get_default_wasapi_loopback())
        for info in pa.get_loopback_device_info_generator():
            if str(info.get("name")) == self.output or _human(str(info.get("name"))) == self.output:
                return dict(info)
        raise AudioError(f"The output \u201c{_human(self.output)}\u201d is not available.")

    def close(self) -> None:
        stream, self._stream = self._stream, None
        self._closing = True
        if stream is not None:
            for op in ("stop_stream", "close"):
                with contextlib.suppress(Exception):
                    getattr(stream, op)()
        self._terminate()

    def _terminate(self) -> None:
        pa, self._pa = self._pa, None
        if pa is not None:
            with contextlib.suppress(Exception):
                pa.terminate()

    # -- worker tick ---------------------------------------------------------------------------------
    def read(self, max_seconds: float | None = None) -> list[Block]:
        """Captured blocks downmixed to mono, with silence filled in while the output plays nothing."""
        if self._stream is not None:
            self._fill_silence()
            if self.follow:
                self._maybe_recheck_default()
        out = []
        for block in super().read(max_seconds):
            samples = block.samples
            if samples.ndim == 2 and samples.shape[1] > 1:  # the mean, a channel in opposite phase turned over
                if self._polarity.signs.size != samples.shape[1]:  # another output since
                    self._polarity = Polarity(samples.shape[1])
                samples = self._polarity.mix(samples).reshape(-1, 1)
            out.append(Block(samples, block.rate, block.time))
        return out

    def _fill_silence(self) -> None:
        now = self._clock()
        with self._lock:
            gap = now - self._last_end
            if gap < FILL_AFTER_S:
                return
            frames = int(gap * self.rate)
            self._last_end = now
        self.queue.put(Block(np.zeros((frames, self.channels), np.float32), self.rate, now))
        self.filled_seconds += frames / self.rate

    def _maybe_recheck_default(self) -> None:
        now = self._clock()
        if now < self._next_check or now - self._last_callback < RECHECK_QUIET_S:
            return
        self._next_check = now + RECHECK_EVERY_S
        before = self.device_name
        self.close()
        try:
            self.open()
        except AudioError:
            log.warning("reopening the default output's loopback failed", exc_info=True)
            self._broken = True
            return  # ``lost`` reports it; the worker falls back
        if self.device_name != before:
            name = self.device_name
            self._notices.append(f"The default output changed; now captioning what \u201c{name}\u201d plays.")

    def notices(self) -> list[str]:
        out, self._notices = self._notices, []
        return out

    # -- PortAudio thread ----------------------------------------------------------------------------
    def _callback(self, in_data: bytes, frame_count: int, time_info: Any, status: Any) -> tuple[None, int]:
        now = self._clock()
        samples = np.frombuffer(in_data, dtype=np.float32).reshape(-1, self.channels).copy()
        with self._lock:
            self._last_end = self._last_callback = now
        self.queue.put(Block(samples, self.rate, now))
        return None, self._mod.paContinue

    # -- state ---------------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The output, as the user knows it."""
        return self.device_name

    @property
    def lost(self) -> bool:
        """True when the stream stopped by itself (the output was unplugged) or could not be reopened."""
        if self._broken:
            return True
        stream = self._stream
        if stream is None:
            return False
        try:
            active = bool(stream.is_active())
        except Exception:
            return True
        return not active and self._clock() - self._last_callback > LOST_AFTER_SECONDS

    @property
    def is_open(self) -> bool:
        return self._stream is not None


class WasapiBackend:
    """System audio on Windows; microphones stay with sounddevice."""

    name = "WASAPI loopback"

    def __init__(self, pyaudio: Any = None) -> None:
        self._mod = pyaudio

    def unavailable_reason(self) -> str | None:
        try:
            _module(self._mod)
        except AudioError as exc:
            return str(exc)
        return None

    def outputs(self) -> list[Endpoint]:
        mod = _module(self._mod)
        pa = mod.PyAudio()
        try:
            default = ""
            with contextlib.suppress(Exception):
                default = str(pa.get_default_wasapi_loopback().get("name", ""))
            return [
                Endpoint(str(i["name"]), _human(str(i["name"])), str(i["name"]) == default)
                for i in pa.get_loopback_device_info_generator()
            ]
        finally:
            pa.terminate()

    def microphones(self) -> list[Endpoint]:
        return []

    def system_source(self, output: str = "") -> WasapiLoopbackSource:
        return WasapiLoopbackSource(self._mod, output)

    def mic_source(self, device: str) -> None:
        return None
