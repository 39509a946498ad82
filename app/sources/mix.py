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
gate that drops whole 64 ms frames is enough here: the words are already in the system track. The gate looks
only ``lead_s`` ahead of a mic frame (the system samples after it have often not arrived yet); where the two
capture paths placed the system track later than that (their first blocks' arrival differs by 0.1-0.2 s run to
run), ``EchoAligner`` finds the echo ``reach_s`` behind the mix's end and delays the microphone track once by
what it needs (silence in front of what was not emitted yet: nothing heard goes).
"""

from __future__ import annotations

import time
from collections import deque
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
    agrees, within ``lag_tolerance_s``, with the lag of a correlated frame in the last ``lag_memory_s``.

    When the person at the microphone talks over the speakers (double talk), the frame holds the echo and their
    voice, and still correlates: zeroing it cut their words (with the echo as loud as the voice, 22 % of their
    speech went). So a frame is also kept when it is more than ``double_talk_db`` louder, against the system
    samples at its lag, than the echo path usually makes it: the 30th percentile of that ratio over the last
    ``ratio_frames`` correlated frames (robust to double talk among them, and following a volume change within
    a second of echo)."""

    def __init__(
        self,
        threshold: float = 0.5,
        max_lag_s: float = 0.35,
        lead_s: float = 0.05,
        frame_s: float = 0.064,
        floor_db: float = -55.0,
        lag_tolerance_s: float = 0.002,
        lag_memory_s: float = 1.0,
        double_talk_db: float = 2.0,
        ratio_frames: int = 16,
    ) -> None:
        self.threshold = threshold
        self.max_lag = int(max_lag_s * RATE)
        self.lead = int(lead_s * RATE)
        self.frame = int(frame_s * RATE)
        self.floor_db = floor_db
        self.tolerance = int(lag_tolerance_s * RATE)
        self.memory = int(lag_memory_s * RATE)
        self.double_talk_db = double_talk_db
        self.double_talk = 10 ** (double_talk_db / 10)
        self._ratios: deque[float] = deque(maxlen=ratio_frames)  # frame energy / system energy at the lag
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
        return steady and not self._double_talk(frame, reference[k : k + len(frame)])

    def _double_talk(self, frame: np.ndarray, played: np.ndarray) -> bool:
        """Whether an echo frame is louder, against what was played at its lag, than the echo path makes it."""
        heard, played = np.asarray(frame, np.float64), np.asarray(played, np.float64)
        ratio = float(np.dot(heard, heard)) / max(float(np.dot(played, played)), 1e-20)
        self._ratios.append(ratio)
        return len(self._ratios) >= 4 and ratio > self.double_talk * float(np.percentile(self._ratios, 30))

    def forget_lag(self) -> None:
        """Drop the remembered echo delay (the tracks were moved against each other)."""
        self._lag = None

    def reset(self) -> None:
        """Forget the echo path (its delay and level) for a new start of the capture; the gated total stays. The
        speakers may have been turned up meanwhile: the old level let 0.75 s of echo through as double talk."""
        self.forget_lag()
        self._ratios.clear()

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


class EchoAligner:
    """Finds a microphone that hears the speakers *earlier* on the mix timeline than the system track has the
    sound, by more than the gate looks ahead; says how far to delay the microphone track.

    It judges each emitted mic frame (as heard, before the gate) once it is ``reach_s`` behind the mix's end,
    against the system samples from the gate's ``max_lag_s`` before it to ``reach_s`` after it. ``feed`` returns
    the samples of silence that put the echo ``TARGET_S`` after the system track once ``confirm`` correlated
    frames that the gate let through (its threshold and floor) agree on one delay within its tolerance, each
    within its memory of the one before; that delay has the mic more than half the gate's ``lead_s`` early; and
    the last ``span_s`` of the mic correlates with the system track at that delay by ``HOLD`` or more (two
    different voices agree on a chance delay within one vowel; over half a second of real speech the best of
    100 such pairs reached 0.51, an echo 0.6-0.95). Else 0. A frame the gate took means the gate has the echo
    in its window already: nothing is moved then."""

    TARGET_S = 0.02
    HOLD = 0.6

    def __init__(self, gate: EchoGate, reach_s: float = 0.3, confirm: int = 2, span_s: float = 0.5) -> None:
        self.gate, self.reach, self.confirm, self.span = gate, int(reach_s * RATE), confirm, int(span_s * RATE)
        self.keep = gate.max_lag + self.span + self.reach
        # the last ``keep`` samples emitted: as the mic heard them, as the gate let them through, as played
        self._mic = self._kept = self._sys = np.zeros(0, dtype=np.float32)
        self._end = 0  # timeline position after the last emitted sample
        self._next = 0  # where the next frame to judge starts
        self._lags: list[int] = []  # agreeing delays of the last correlated frames
        self._age = 0  # samples judged since the last correlated frame

    def played(self, n: int) -> np.ndarray:
        """The last ``n`` system samples emitted (fewer at the start; ``n`` is at most ``keep``)."""
        return self._sys[-n:] if n else self._sys[:0]

    def feed(self, mic: np.ndarray, kept: np.ndarray, system: np.ndarray) -> int:
        """Take the next emitted samples (the mic before and after the gate, the system track); returns the delay
        the mic track needs, or 0."""
        self._mic, self._kept = np.concatenate([self._mic, mic]), np.concatenate([self._kept, kept])
        self._sys = np.concatenate([self._sys, system])
        self._end += len(mic)
        base = self._end - len(self._mic)  # timeline position of the histories' first sample
        try:
            return self._judge(base)
        finally:
            self._mic, self._kept, self._sys = (a[-self.keep :] for a in (self._mic, self._kept, self._sys))

    def _judge(self, base: int) -> int:
        g, f = self.gate, self.gate.frame
        while self._next + f + self.reach <= self._end:
            i, self._next = self._next - base, self._next + f
            self._age += f
            if i < g.max_lag:
                continue
            frame, ref = self._mic[i : i + f], self._sys[i - g.max_lag : i + f + self.reach]
            if level_db(frame) < g.floor_db or level_db(ref) < g.floor_db:
                continue
            if not self._kept[i : i + f].any():  # the gate took it: it has the echo in its window
                self._lags = []
                continue
            c, k = best_correlation(frame, ref)
            if c < g.threshold:
                continue
            lag = g.max_lag - k  # how much later than the system track the mic hears it
            agrees = self._lags and self._age <= g.memory and abs(lag - self._lags[-1]) <= g.tolerance
            self._lags, self._age = ((self._lags + [lag]) if agrees else [lag])[-self.confirm :], 0
            early = -int(np.median(self._lags))
            if len(self._lags) >= self.confirm and early > g.lead // 2 and self._holds(i + f, -early):
                self._lags, self._next = [], self._end  # what was emitted before the move says nothing now
                return early + int(self.TARGET_S * RATE)
        return 0

    def _holds(self, end: int, lag: int) -> bool:
        """Whether the mic's last ``span`` samples before history index ``end`` correlate with the system track
        ``lag`` samples earlier by ``HOLD`` or more."""
        a, b = end - self.span - lag, end - lag
        if end < self.span or a < 0 or b > len(self._sys):
            return False
        m, s = self._mic[end - self.span : end].astype(np.float64), self._sys[a:b].astype(np.float64)
        energy = float(np.dot(m, m) * np.dot(s, s))
        return energy > 0 and abs(float(np.dot(m, s))) >= self.HOLD * np.sqrt(energy)


class _Track:
    """One input's 16 kHz samples on the mix timeline (sample positions from the mix start)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.buf = np.zeros(0, dtype=np.float32)
        self.start: int | None = None
        self.resampler = BlockResampler()
        self.level = LevelSum()
        self.last_time = 0.0
        self.delayed = 0  # samples of silence put in front of this track's sound since it started (``delay``)

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
        behind = clock_pos + self.delayed - (self.end + len(pcm))
        if -behind > DRIFT_S * RATE and level_db(pcm) < QUIET_DB:  # ahead of the clock: drop in a pause
            pcm = pcm[min(-behind, len(pcm)) :]
        if behind > DRIFT_S * RATE:  # a stall: keep the timeline honest with silence
            gap = np.zeros(behind, dtype=np.float32)
            self.buf = np.concatenate([self.buf, gap, pcm])
        else:
            self.buf = np.concatenate([self.buf, pcm])
        if self.end < floor:  # everything here is older than what was already emitted
            self.start, self.buf = floor, np.zeros(0, dtype=np.float32)

    def delay(self, n: int) -> None:
        """Move what was not taken yet ``n`` samples later (silence in front of it; nothing is dropped)."""
        if self.start is not None and n > 0:
            self.buf = np.concatenate([np.zeros(n, dtype=np.float32), self.buf])
            self.delayed += n

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
    fills_gaps = True  # a track behind the clock gets silence: audio its queue dropped keeps its place in time

    def __init__(
        self, mic: Any, system: Any, gate: EchoGate | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.mic = mic
        self.system = system
        self.gate = gate if gate is not None else EchoGate()
        self.aligner = EchoAligner(self.gate)
        self._clock = clock
        self.rate = RATE
        self._t0 = 0.0
        self._out = 0
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
        self._tracks = {"mic": _Track("mic"), "system": _Track("system")}
        self.gate.reset()
        self.aligner = EchoAligner(self.gate)
        self._open = True

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
        heard = mic_pcm = mic.take(a, b)
        tail = system.buf[: self.gate.lead] if system.start == b else np.zeros(0, dtype=np.float32)
        mic_pcm = self.gate.apply(mic_pcm, sys_pcm, self.aligner.played(self.gate.max_lag), tail)
        self._out = b
        delay = self.aligner.feed(heard, mic_pcm, sys_pcm)
        if delay and mic.delayed + delay <= self.aligner.reach + self.gate.max_lag:  # bounded, whatever happens
            mic.delay(delay)  # the mic hears the speakers before the system track has the sound: line the echo up
            self.gate.forget_lag()
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
        """Sentences for the user since the last call (a new default microphone or output, the headphones hint)."""
        out = [*getattr(self.mic, "notices", list)(), *getattr(self.system, "notices", list)(), *self._notices]
        self._notices = []
        return out

    @property
    def description(self) -> str:
        """Both inputs as they are now, with their rates ("" until opened): a part that follows the default output or
        microphone is named after the one it captures."""
        if not (self.mic.description and self.system.description):
            return ""
        return f"{self.mic.description} + {self.system.description}"

    @property
    def name(self) -> str:
        """Both inputs, as the user knows them."""
        return f"{_name(self.mic)} + {_name(self.system)}"

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
        """The longer of the two inputs' dropped audio: both lose the same time in a stall (the sum said 39 s of
        a 30 s stall)."""
        return max(self.mic.dropped_seconds, self.system.dropped_seconds)


def _name(source: Any) -> str:
    return getattr(source, "name", "") or source.description
