"""Microphone capture: a sounddevice InputStream whose callback only copies into a bounded queue.

The PortAudio callback runs on a real-time thread. It copies the block (PortAudio reuses the buffer),
appends it to an ``AudioQueue`` and returns; nothing else happens there. When the queue is full the
oldest block is dropped and counted, so memory stays bounded when the engine cannot keep up.

The stream opens at 16 kHz when the device accepts it, else at the device's own default rate (many USB
microphones only do 44.1/48 kHz); the engine worker resamples. The ``sounddevice`` module is injected,
so tests can drive the whole path with a fake one.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.audio import SAMPLE_RATE, Resampler
from engine.errors import AudioError

log = logging.getLogger(__name__)

BLOCK_SECONDS = 0.064
KEEP_AFTER_DROP = 0.5  # a reader falling behind: a full AudioQueue drops its oldest audio down to this share
BEHIND_WINDOW = 6.0  # x max_seconds: a queue full again this soon after a drop, with reads between, has a reader behind
LOST_AFTER_SECONDS = 2.0
CLOSE_TIMEOUT_S = 1.5  # a stream not closed by then is left to close on its own thread (a frozen sound server)
STALLED_SECONDS = 0.5  # no block for this long: close aborts (a stop would wait for the stalled capture thread)
FIRST_BLOCK_GRACE_SECONDS = 6.0  # a PulseAudio monitor of an idle null sink starts after ~2 s


_left_closing: list[threading.Thread] = []  # streams whose close did not end in time (``MicSource.close``)
_server_checks: list[Callable[[], bool]] = []  # see ``server_would_wait``


def server_would_wait(check: Callable[[], bool]) -> None:
    """Register ``check``, a sound-server backend's answer to "would PortAudio wait for the server now?" (True while
    its server does not answer): asked on every ``MicSource.close`` (the stream is then aborted on a thread of its
    own, waited for ``CLOSE_TIMEOUT_S`` at most) and before a re-scan (``refresh_devices``: then none)."""
    _server_checks.append(check)


def _server_would_wait() -> bool:
    return any(check() for check in _server_checks)


def streams_left_closing() -> bool:
    """Whether a stream that did not close in time is still closing: PortAudio's re-scan and its end at exit
    (sounddevice's exit handler) would wait for it, for as long as the sound server does not answer."""
    _left_closing[:] = [t for t in _left_closing if t.is_alive()]
    return bool(_left_closing)


@dataclass(frozen=True)
class Block:
    """A block of captured audio: ``samples`` is float32 (frames, channels); ``time`` is when it arrived
    (``time.monotonic()``), used to measure the audio-to-caption latency."""

    samples: np.ndarray
    rate: int
    time: float

    @property
    def seconds(self) -> float:
        return len(self.samples) / self.rate


class BlockResampler:
    """Blocks of any rate and channel count to 16 kHz mono float32, statefully: one streaming
    ``engine.audio.Resampler`` while the rate and channel count stay the same; a change starts a new one."""

    def __init__(self) -> None:
        self._resampler: Resampler | None = None
        self._key: tuple[int, int] | None = None

    def process(self, block: Block) -> np.ndarray:
        """``block``'s samples at 16 kHz mono: what the resampler has ready (16 kHz mono passes as it is)."""
        samples = block.samples
        channels = samples.shape[1] if samples.ndim == 2 else 1
        key = (block.rate, channels)
        if key == (SAMPLE_RATE, 1):
            return np.ascontiguousarray(samples.reshape(-1), dtype=np.float32)
        if self._resampler is None or self._key != key:  # the first block, or the input changed
            self._resampler, self._key = Resampler(block.rate, SAMPLE_RATE, channels=channels), key
        data = samples if channels > 1 else samples.reshape(-1)
        return np.asarray(self._resampler.process(data), dtype=np.float32).reshape(-1)

    def flush(self) -> np.ndarray:
        """The tail of the current stream (none when nothing was resampled); the next block starts afresh."""
        if self._resampler is None:
            return np.zeros(0, dtype=np.float32)
        tail = np.asarray(self._resampler.flush(), dtype=np.float32).reshape(-1)
        self.reset()
        return tail

    def reset(self) -> None:
        """Drop the current stream (its tail is lost)."""
        self._resampler = self._key = None


@dataclass(frozen=True)
class InputDevice:
    """An input device as the device picker shows it; ``name`` identifies it across restarts."""

    index: int
    name: str
    hostapi: str
    default_rate: float
    channels: int
    is_default: bool = False


class AudioQueue:
    """A bounded, thread-safe FIFO of ``Block``s holding at most ``max_seconds`` of audio.

    ``put`` never blocks: when full it drops the oldest blocks and adds them to ``dropped_seconds`` /
    ``dropped_blocks``. How many depends on why it is full:

    - a reader that stopped (a stall: since the last drop no ``take_all``, or one that emptied the queue, or more
      than ``BEHIND_WINDOW`` x ``max_seconds`` of audio): only the overflow goes, so the newest
      ``max_seconds`` stay whole and the hole is as short as the stall allows;
    - a reader that reads but falls behind (a model slower than real time: full again soon after a drop, with
      reads between that never caught up): the oldest audio goes down to ``KEEP_AFTER_DROP`` of ``max_seconds``
      at once. It then misses a few seconds now and then and transcribes the stretches between whole, where one
      block dropped per put cut a hole into every sentence (0.5 s every 1.5 s at 1.5x real time: QA); the share
      it can transcribe is the same.

    ``take_all`` empties the queue and notes ``dropped_at_take``, the seconds dropped by then: all of that audio
    came before the blocks it returned. Safe to call from any thread.
    """

    def __init__(self, max_seconds: float = 10.0) -> None:
        self.max_seconds = max_seconds
        self._blocks: collections.deque[Block] = collections.deque()
        self._seconds = 0.0
        self._lock = threading.Lock()
        self._put_since_drop = float("inf")  # seconds put since the last drop (none yet: a long time)
        self._read_since_drop = False  # a take_all returned blocks since the last drop
        self._caught_up = False  # a take_all emptied the queue since the last drop: the reader kept up then
        self.dropped_seconds = 0.0
        self.dropped_blocks = 0
        self.dropped_at_take = 0.0

    def put(self, block: Block) -> None:
        """Append ``block``; when more than ``max_seconds`` are queued, drop the oldest blocks (see the class)."""
        with self._lock:
            self._blocks.append(block)
            self._seconds += block.seconds
            self._put_since_drop += block.seconds
            if self._seconds <= self.max_seconds:
                return
            behind = (
                self._read_since_drop
                and not self._caught_up
                and self._put_since_drop < BEHIND_WINDOW * self.max_seconds
            )
            keep = self.max_seconds * (KEEP_AFTER_DROP if behind else 1.0)
            while self._seconds > keep and len(self._blocks) > 1:
                old = self._blocks.popleft()
                self._seconds -= old.seconds
                self.dropped_seconds += old.seconds
                self.dropped_blocks += 1
            self._put_since_drop, self._read_since_drop, self._caught_up = 0.0, False, False

    def take_all(self, max_seconds: float | None = None, before: float | None = None) -> list[Block]:
        """Remove and return the queued blocks in order (at most about ``max_seconds`` of them; with ``before``,
        only those that arrived before that ``time.monotonic()``)."""
        out: list[Block] = []
        taken = 0.0
        with self._lock:
            self.dropped_at_take = self.dropped_seconds  # with the take: a drop after it is audio after its blocks
            while self._blocks and (max_seconds is None or taken < max_seconds):
                if before is not None and self._blocks[0].time >= before:
                    break
                block = self._blocks.popleft()
                self._seconds -= block.seconds
                taken += block.seconds
                out.append(block)
            self._read_since_drop = self._read_since_drop or bool(out)
            if not self._blocks:
                self._seconds = 0.0
                self._caught_up = self._caught_up or bool(out)
        return out

    def any_since(self, since: float) -> bool:
        """Whether a queued block arrived at ``since`` (``time.monotonic()``) or later."""
        with self._lock:
            return bool(self._blocks) and self._blocks[-1].time >= since

    def drop_since(self, since: float) -> float:
        """Remove the blocks that arrived at ``since`` (``time.monotonic()``) or later; returns their seconds."""
        with self._lock:
            keep = [b for b in self._blocks if b.time < since]
            gone = self._seconds - sum(b.seconds for b in keep)
            self._blocks = collections.deque(keep)
            self._seconds -= gone
        return max(gone, 0.0)

    @property
    def queued_seconds(self) -> float:
        """Seconds of audio waiting to be processed."""
        with self._lock:
            return max(self._seconds, 0.0)


def list_input_devices(sd: Any) -> list[InputDevice]:
    """The input devices PortAudio knows (the list is frozen when PortAudio starts; see ``refresh``)."""
    try:
        devices = sd.query_devices()
        hostapis = sd.query_hostapis()
        default_in = _default_input_index(sd)
    except Exception:  # a broken PortAudio must not break the device picker
        return []
    out = []
    for index, dev in enumerate(devices):
        if int(dev.get("max_input_channels", 0)) <= 0:
            continue
        try:
            api = hostapis[int(dev.get("hostapi", 0))]["name"]
        except (IndexError, KeyError, TypeError):
            api = ""
        out.append(
            InputDevice(
                index=index,
                name=str(dev["name"]),
                hostapi=api,
                default_rate=float(dev.get("default_samplerate", SAMPLE_RATE)),
                channels=int(dev["max_input_channels"]),
                is_default=index == default_in,
            )
        )
    return out


def refresh_devices(sd: Any) -> None:
    """Make PortAudio re-scan the devices (closes every open stream; call it only while idle). Nothing while a
    stream is still closing (``streams_left_closing``: the re-scan would wait for it, and end it under it) or the
    sound server does not answer (``server_would_wait``: PortAudio's start asks it about its devices and waits)."""
    if streams_left_closing() or _server_would_wait():
        log.info("no device re-scan: the sound server does not answer, or a stream is still closing")
        return
    terminate = getattr(sd, "_terminate", None)
    initialize = getattr(sd, "_initialize", None)
    if terminate and initialize:
        try:
            terminate()
        finally:
            initialize()


def _default_input_index(sd: Any) -> int:
    try:
        dev = sd.default.device
        index = dev[0] if isinstance(dev, (list, tuple)) or hasattr(dev, "__getitem__") else dev
        return int(index) if index is not None else -1
    except (TypeError, ValueError, IndexError):
        return -1


def resolve_device(sd: Any, name: str | None) -> int | None:
    """The index of the input device called ``name``; ``None`` (the default) when empty or not found."""
    if not name:
        return None
    for dev in list_input_devices(sd):
        if dev.name == name:
            return dev.index
    return None


class QueuedInput:
    """The reading side shared by the live inputs that capture into an ``AudioQueue`` (``queue``): ``read``
    takes what was captured, the input never ends, and its backlog and drops are the queue's."""

    queue: AudioQueue

    def read(self, max_seconds: float | None = None) -> list[Block]:
        """The blocks captured since the last call, oldest first."""
        return self.queue.take_all(max_seconds)

    @property
    def ended(self) -> bool:
        """A live input never runs out of audio."""
        return False

    @property
    def backlog_seconds(self) -> float:
        return self.queue.queued_seconds

    @property
    def dropped_seconds(self) -> float:
        """The seconds dropped as the last ``read`` took its blocks: all of it came before them (the capture thread
        may drop more between a look at the queue's running count and the read, after a stall)."""
        return self.queue.dropped_at_take


class MicSource(QueuedInput):
    """Captures one input device into an ``AudioQueue``.

    ``open()`` starts the stream (raises ``AudioError`` with one sentence when it cannot);
    ``read()`` returns the blocks captured since the last call; ``lost`` turns true when the stream
    ended on its own (device unplugged) or stopped delivering audio. ``close()`` is idempotent.
    """

    kind = "microphone"

    def __init__(
        self,
        sd: Any,
        device: int | None = None,
        max_queue_seconds: float = 10.0,
        channels: int | None = None,
        label: str | None = None,
    ) -> None:
        self._sd = sd
        self.device = device
        self.label = label  # what the description calls the device (default: PortAudio's name)
        self.name = ""  # the device as the user knows it, once open (the description adds the rate)
        self._want_channels = channels  # None: mono when the device allows it
        self.queue = AudioQueue(max_queue_seconds)
        self.rate = SAMPLE_RATE
        self.channels = 1
        self.description = ""
        self._stream: Any = None
        self._closing = False
        self._ended = threading.Event()
        self._last_callback = 0.0
        self._got_block = False

    # -- lifecycle (engine worker thread) -------------------------------------------------------
    def open(self) -> None:
        """Open and start the stream at 16 kHz, or at the device's own rate when 16 kHz is refused."""
        sd = self._sd
        try:
            info = sd.query_devices(self.device, "input")
        except Exception as exc:  # PortAudio raises ValueError or PortAudioError here
            if self.device is None:
                raise AudioError("No microphone was found; connect one and press Refresh.") from exc
            raise AudioError("The selected microphone is not available; choose another one.") from exc
        name = str(info.get("name", "microphone"))
        max_channels = int(info.get("max_input_channels", 1)) or 1
        self.channels = min(self._want_channels or 1, max_channels)
        rate = SAMPLE_RATE
        try:
            sd.check_input_settings(device=self.device, samplerate=SAMPLE_RATE, channels=self.channels, dtype="float32")
        except Exception:  # "Invalid sample rate" and friends
            rate = int(round(float(info.get("default_samplerate", 48000)) or 48000))
            try:
                sd.check_input_settings(device=self.device, samplerate=rate, channels=self.channels, dtype="float32")
            except Exception:  # some devices refuse mono
                self.channels = max(self.channels, min(2, max_channels))
        self.rate = rate
        self._closing = False
        self._ended.clear()
        try:
            self._stream = sd.InputStream(
                device=self.device,
                samplerate=rate,
                channels=self.channels,
                dtype="float32",
                blocksize=int(rate * BLOCK_SECONDS),
                callback=self._callback,
                finished_callback=self._finished,
            )
            self._stream.start()
        except Exception as exc:  # PortAudioError: busy device, permission, ...
            self._stream = None
            raise AudioError(
                f"The microphone \u201c{name}\u201d could not be opened; check that it is connected and that "
                "livecap may use it."
            ) from exc
        self._last_callback = time.monotonic()
        self._got_block = False
        self.name = self.label or name
        self.description = f"{self.name} ({rate / 1000:g} kHz)"

    def close(self) -> None:
        """Stop and close the stream; the queued blocks stay readable. A stream that is lost or not delivering
        (nothing yet, or nothing for ``STALLED_SECONDS``) is aborted, not stopped: stopping waits for PortAudio's
        capture thread, which a vanished device (a PulseAudio sink unloaded mid-session) or a source that has
        not started (Stop pressed within a silent microphone's first seconds) leaves blocked, and the worker hung
        with it (Stop, Pause and quitting waited); aborting cancels that thread.
        Even an abort waits for a sound server that stopped answering (SIGSTOP, a hung PipeWire: the ALSA PulseAudio
        plug-in waits for its reply), so when a backend says it would (``server_would_wait``), the stream is aborted on
        a thread of its own, and one not closed within ``CLOSE_TIMEOUT_S`` is left to close by itself
        (``streams_left_closing``). Only then: a stream of a server that was killed, aborted on such a thread, once
        left PortAudio's capture thread spinning on its error (gigabytes of the same line on stderr)."""
        dead = self.lost or not self._got_block or time.monotonic() - self._last_callback > STALLED_SECONDS
        stream, self._stream = self._stream, None
        if stream is None:
            return
        self._closing = True

        def end() -> None:
            for op in ("abort" if dead else "stop", "close"):
                try:
                    getattr(stream, op)()
                except Exception:  # a vanished device may fail to stop; it is gone anyway
                    pass

        if not _server_would_wait():
            end()
            return
        dead = True  # stopping waits for the capture thread, which waits for the server
        closer = threading.Thread(target=end, name="stream-close", daemon=True)
        closer.start()
        closer.join(CLOSE_TIMEOUT_S)
        if closer.is_alive():
            log.warning("%s did not close within %.1f s; left to close by itself", self.name, CLOSE_TIMEOUT_S)
            _left_closing.append(closer)

    @property
    def lost(self) -> bool:
        """True when the open stream ended by itself or has delivered nothing for a while."""
        if self._stream is None:
            return False
        if self._ended.is_set() and not self._closing:
            return True
        active = getattr(self._stream, "active", True)
        silent_for = time.monotonic() - self._last_callback
        limit = LOST_AFTER_SECONDS if self._got_block else FIRST_BLOCK_GRACE_SECONDS
        return (not active and not self._closing) or silent_for > limit

    @property
    def is_open(self) -> bool:
        return self._stream is not None

    # -- PortAudio thread -----------------------------------------------------------------------
    def _callback(self, indata: np.ndarray, frames: int, time_info: Any, status: Any) -> None:
        now = time.monotonic()
        self._last_callback = now
        self._got_block = True
        self.queue.put(Block(np.array(indata, dtype=np.float32, copy=True), self.rate, now))

    def _finished(self) -> None:
        self._ended.set()
