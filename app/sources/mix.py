"""Both: the microphone and the system audio mixed into one 16 kHz stream, with an echo gate.

Each track's blocks are resampled to 16 kHz mono (here, on the engine worker thread that calls ``read``)
and laid on one timeline by arrival time: a track's first block is placed where its arrival says, later
blocks follow on contiguously, and a track that fell behind the clock by more than ``DRIFT_S`` (a stall,
a device that delivers nothing while silent) gets silence inserted; one that got ahead of it by more (a
device clock that runs fast, a backlog after a stall) loses its extra samples in its next quiet blocks (below
``QUIET_DB``: a pause, so nothing heard goes), else it would lag the other track more and more. The mix is
emitted up to where both tracks have audio, or, when one track lags more than ``WAIT_S``, up to the clock with
that track silent.

With speakers instead of headphones the microphone also hears what the computer plays, and the remote
speech would be captioned twice. ``EchoGate`` drops microphone frames whose normalized cross-correlation
with the system track (over the acoustic delays a room and two capture paths give) is high. No
well-kept Python library offers such a gate (acoustic echo cancellers need C builds and tuning), and a
gate that drops whole 64 ms frames is enough here: the words are already in the system track.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from app.capture import Block, BlockResampler
from app.sources.base import LevelSum, level_db
from engine.audio import SAMPLE_RATE

RATE = SAMPLE_RATE
DRIFT_S = 0.2
QUIET_DB = -45.0  # a block this quiet (RMS, dBFS) may lose samples to bring its track back in step
WAIT_S = 0.3
HEADPHONES_HINT_AFTER_S = 1.0  # of gated microphone audio
HEADPHONES_HINT = (
    "The microphone hears the speakers, so livecap leaves out what it hears twice; use headphones for the "
    "cleanest captions."
)


def best_correlation(frame: np.ndarray, ref: np.ndarray) -> tuple[float, int]:
    """``(c, k)``: the largest |normalized cross-correlation| ``c`` of ``frame`` against the same-length
    windows of ``ref``, and the offset ``k`` of that window. Near-silent windows are skipped."""
    frame = np.asarray(frame, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    n_frame, n_ref = len(frame), len(ref)
    if n_frame == 0 or n_ref < n_frame:
        return 0.0, 0
    e_frame = float(np.dot(frame, frame))
    if e_frame <= 0:
        return 0.0, 0
    size = 1 << (n_ref + n_frame - 1).bit_length()
    num = np.fft.irfft(np.fft.rfft(ref, size) * np.conj(np.fft.rfft(frame, size)), size)[: n_ref - n_frame + 1]
    sq = np.concatenate([[0.0], np.cumsum(ref * ref)])
    e_ref = sq[n_frame:] - sq[:-n_frame]
    ok = e_ref > max(1e-4 * float(e_ref.max()), 1e-10 * n_frame)  # windows of (near) silence say nothing
    if not np.any(ok):
        return 0.0, 0
    c = np.zeros(len(e_ref))
    c[ok] = np.abs(num[ok]) / np.sqrt(e_ref[ok] * e_frame)
    k = int(np.argmax(c))
    return float(c[k]), k


def max_normalized_correlation(frame: np.ndarray, ref: np.ndarray) -> float:
    """The largest |normalized cross-correlation| of ``frame`` against every same-length window of ``ref``."""
    return best_correlation(frame, ref)[0]


class EchoGate:
    """Drops microphone frames that are mostly the system track heard through speakers.

    ``threshold``: the normalized correlation above which a frame may be echo; ``max_lag_s``: how much
    later than the system track the echo may arrive (room, speaker and capture latencies); ``lead_s``: how
    much earlier (the two capture paths differ); frames quieter than ``floor_db`` or system audio quieter
    than that are never gated. A real echo arrives with one steady delay, while two different voiced
    sounds (both periodic) can correlate well at some chance lag: so a frame is echo only when its best lag
    agrees, within ``lag_tolerance_s``, with the lag of a correlated frame in the last ``lag_memory_s``."""

    def __init__(
        self,
        threshold: float = 0.5,
        max_lag_s: float = 0.35,
        lead_s: float = 0.05,
        frame_s: float = 0.064,
        floor_db: float = -55.0,
        lag_tolerance_s: float = 0.002,
        lag_memory_s: float = 1.0,
    ) -> None:
        self.threshold = threshold
        self.max_lag = int(max_lag_s * RATE)
        self.lead = int(lead_s * RATE)
        self.frame = int(frame_s * RATE)
        self.floor_db = floor_db
        self.tolerance = int(lag_tolerance_s * RATE)
        self.memory = int(lag_memory_s * RATE)
        self.gated_samples = 0
        self._lag: int | None = None  # the delay of the last correlated frame, samples
        self._lag_age = 0  # samples since then

    def is_echo(self, frame: np.ndarray, reference: np.ndarray, offset: int = 0) -> bool:
        """Whether ``frame`` (mic) is echo of ``reference`` (system audio around the same time;
        ``reference[offset]`` is the system sample at the frame's first sample)."""
        self._lag_age += len(frame)
        if level_db(frame) < self.floor_db or level_db(reference) < self.floor_db:
            return False
        c, k = best_correlation(frame, reference)
        if c < self.threshold:
            return False
        lag = offset - k  # how much later than the system track the mic hears it
        steady = self._lag is not None and self._lag_age <= self.memory and abs(lag - self._lag) <= self.tolerance
        self._lag, self._lag_age = lag, 0
        return steady

    def apply(self, mic: np.ndarray, system: np.ndarray, history: np.ndarray, tail: np.ndarray) -> np.ndarray:
        """``mic`` with echo frames zeroed. ``system`` is the system track for the same samples, ``history``
        the system samples just before them, ``tail`` any system samples just after them."""
        out = mic.copy()
        ref_all = np.concatenate([history, system, tail])
        base = len(history)
        for a in range(0, len(mic), self.frame):
            b = min(a + self.frame, len(mic))
            if b - a < self.frame // 4:
                break  # too short to judge (only at the very end of a session)
            lo = max(base + a - self.max_lag, 0)
            hi = min(base + b + self.lead, len(ref_all))
            if self.is_echo(mic[a:b], ref_all[lo:hi], base + a - lo):
                out[a:b] = 0.0
                self.gated_samples += b - a
        return out


class _Track:
    """One input's 16 kHz samples on the mix timeline (sample positions from the mix start)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.buf = np.zeros(0, dtype=np.float32)
        self.start: int | None = None
        self.resampler = BlockResampler()
        self.level = LevelSum()
        self.last_time = 0.0

    @property
    def end(self) -> int:
        return (self.start or 0) + len(self.buf)

    def add(self, pcm: np.ndarray, clock_pos: int, floor: int) -> None:
        """Append ``pcm`` whose last sample arrived at timeline position ``clock_pos``; ``floor`` is where
        the mix has been emitted up to (nothing is placed before it)."""
        if len(pcm) == 0:
            return
        self.level.add(pcm)
        if self.start is None:
            self.start = max(clock_pos - len(pcm), floor)
            self.buf = pcm
            return
        behind = clock_pos - (self.end + len(pcm))
        if -behind > DRIFT_S * RATE and level_db(pcm) < QUIET_DB:  # ahead of the clock: drop in a pause
            pcm = pcm[min(-behind, len(pcm)) :]
        if behind > DRIFT_S * RATE:  # a stall: keep the timeline honest with silence
            gap = np.zeros(behind, dtype=np.float32)
            self.buf = np.concatenate([self.buf, gap, pcm])
        else:
            self.buf = np.concatenate([self.buf, pcm])
        if self.end < floor:  # everything here is older than what was already emitted
            self.start, self.buf = floor, np.zeros(0, dtype=np.float32)

    def take(self, a: int, b: int) -> np.ndarray:
        """Samples for timeline positions [a, b) (zeros where this track has none); drops them."""
        out = np.zeros(b - a, dtype=np.float32)
        if self.start is None:
            return out
        lo, hi = max(a, self.start), min(b, self.end)
        if hi > lo:
            out[lo - a : hi - a] = self.buf[lo - self.start : hi - self.start]
        keep_from = max(b - self.start, 0)
        self.buf = self.buf[keep_from:]
        self.start = max(self.start, b) if keep_from else self.start
        return out


class MixSource:
    """Microphone + system audio as one 16 kHz mono source (see the module docstring). ``mic`` and
    ``system`` are unopened sources; both open and close together."""

    kind = "both"
    silence_hint = None

    def __init__(
        self, mic: Any, system: Any, gate: EchoGate | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.mic = mic
        self.system = system
        self.gate = gate if gate is not None else EchoGate()
        self._clock = clock
        self.rate = RATE
        self.description = ""
        self._t0 = 0.0
        self._out = 0
        self._hist = np.zeros(0, dtype=np.float32)
        self._tracks = {"mic": _Track("mic"), "system": _Track("system")}
        self._open = False
        self._hinted = False
        self._notices: list[str] = []

    def open(self) -> None:
        """Open both inputs (``AudioError`` from either; nothing stays open then)."""
        self.system.open()
        try:
            self.mic.open()
        except Exception:
            self.system.close()
            raise
        self._t0 = self._clock()
        self._out = 0
        self._hist = np.zeros(0, dtype=np.float32)
        self._tracks = {"mic": _Track("mic"), "system": _Track("system")}
        self._open = True
        self.description = f"{self.mic.description} + {self.system.description}"

    def close(self) -> None:
        self._open = False
        for source in (self.mic, self.system):
            source.close()

    def read(self, max_seconds: float | None = None) -> list[Block]:
        """The mixed blocks that are ready (one block per call, or none); after ``close`` all that is left."""
        floor = self._out
        for name, source in (("mic", self.mic), ("system", self.system)):
            track = self._tracks[name]
            for block in source.read(max_seconds):
                pcm = track.resampler.process(block)
                track.last_time = max(track.last_time, block.time)
                track.add(pcm, round((block.time - self._t0) * RATE), floor)
        return self._mix()

    def _mix(self) -> list[Block]:
        mic, system = self._tracks["mic"], self._tracks["system"]
        started = [t for t in (mic, system) if t.start is not None]
        if not started:
            return []
        now_pos = round((self._clock() - self._t0) * RATE)
        ready = min(t.end if t.start is not None else self._out for t in (mic, system))
        ready = max(ready, min(max(t.end for t in started), now_pos - int(WAIT_S * RATE)))
        if not self._open:  # closing: emit everything that arrived
            ready = max(t.end for t in started)
        else:  # whole gate frames, so the echo gate judges 64 ms at a time
            ready = self._out + (ready - self._out) // self.gate.frame * self.gate.frame
        if ready <= self._out:
            return []
        a, b = self._out, ready
        sys_pcm = system.take(a, b)
        mic_pcm = mic.take(a, b)
        tail = system.buf[: self.gate.lead] if system.start == b else np.zeros(0, dtype=np.float32)
        mic_pcm = self.gate.apply(mic_pcm, sys_pcm, self._hist, tail)
        self._hist = np.concatenate([self._hist, sys_pcm])[-self.gate.max_lag :]
        self._out = b
        if not self._hinted and self.gate.gated_samples >= HEADPHONES_HINT_AFTER_S * RATE:
            self._hinted = True
            self._notices.append(HEADPHONES_HINT)
        mixed = np.clip(mic_pcm + sys_pcm, -1.0, 1.0).astype(np.float32)
        arrived = max(mic.last_time, system.last_time)
        return [Block(mixed.reshape(-1, 1), RATE, arrived)]

    def track_levels(self) -> dict[str, float]:
        """Each input's level (dBFS) over what arrived since the last call: ``{"mic": .., "system": ..}``."""
        return {name: track.level.take() for name, track in self._tracks.items()}

    def notices(self) -> list[str]:
        """Sentences for the user since the last call (output changes, the headphones hint)."""
        out = list(getattr(self.system, "notices", list)()) + self._notices
        self._notices = []
        return out

    @property
    def gated_seconds(self) -> float:
        return self.gate.gated_samples / RATE

    @property
    def lost(self) -> bool:
        return bool(self.mic.lost or self.system.lost)

    @property
    def ended(self) -> bool:
        return False

    @property
    def is_open(self) -> bool:
        return self._open

    @property
    def backlog_seconds(self) -> float:
        pending = max(t.end - self._out for t in self._tracks.values()) / RATE
        return self.mic.backlog_seconds + self.system.backlog_seconds + max(pending, 0.0)

    @property
    def dropped_seconds(self) -> float:
        return self.mic.dropped_seconds + self.system.dropped_seconds
