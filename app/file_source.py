"""Replays an audio file as if it were a microphone: blocks become due at wall-clock pace (times ``speed``).

There is no thread: the engine worker calls ``read()`` on every tick and gets the blocks whose time has
come. When the worker falls behind, the due blocks pile up and are returned later, so a replay never loses
audio (the backlog shows as "can't keep up" instead); beyond ``MAX_BEHIND_S`` the replay's clock waits for the
engine, as a microphone's queue holds that much: with a model slower than real time the backlog grew without
end, and Pause and Stop, which transcribe it, took minutes. The file is decoded as its audio becomes due
(``engine.audio.open_audio``), so an hour-long recording takes no more memory than a short one.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from app.capture import Block
from engine.audio import SAMPLE_RATE
from engine.errors import AudioError, LivecapError

log = logging.getLogger(__name__)

BLOCK_SECONDS = 0.1
MAX_BEHIND_S = 10.0  # due and not yet read: the replay's clock waits for the engine beyond this


class FileSource:
    """A file replayed at ``speed`` times real time. ``open()`` opens it (``engine.audio.open_audio``): the
    audio is decoded as it becomes due, a few seconds at a time, never the whole file at once."""

    kind = "file"

    def __init__(self, path: str | Path, speed: float = 1.0) -> None:
        if not 0 < speed < float("inf"):
            raise ValueError("speed must be a positive number")
        self.path = Path(path)
        self.speed = float(speed)
        self.rate = SAMPLE_RATE
        self.description = self.path.name
        self._stream: Any = None
        self._pos = 0  # samples handed out
        self._total: int | None = None  # known once the stream ended
        self._t0: float | None = None
        self._paused_at: float | None = None
        self._notes: list[str] = []

    def open(self) -> None:
        """Open the file and start the clock (raises ``AudioError`` with one sentence when unreadable)."""
        from engine.audio import open_audio

        if self._t0 is not None and self._paused_at is not None:  # resume after pause
            self._t0 += time.monotonic() - self._paused_at
            self._paused_at = None
            return
        try:
            stream = open_audio(self.path)
        except LivecapError:
            raise
        except OSError as exc:
            raise AudioError(f"The audio file {self.path.name} could not be read.") from exc
        self._release()
        self._stream = stream
        self._pos = 0
        self._total = None
        self._t0 = time.monotonic()
        self.description = f"{self.path.name} (replay{'' if self.speed == 1 else f' ×{self.speed:g}'})"

    def close(self) -> None:
        """Pause the clock; ``open()`` resumes where the replay stopped. What was due by then is still read (as a
        microphone's queued blocks are after it closes): a Stop while the engine is behind loses nothing."""
        if self._t0 is not None and self._paused_at is None:
            self._paused_at = time.monotonic()

    @property
    def max_read_s(self) -> float:
        """The most audio a reader should take at a time to keep up with this replay's pace (a tick's worth at
        high speeds: at one second a tick, ``--speed 200`` played at ~50x and said "can't keep up")."""
        return max(1.0, self.speed * 0.05)

    def read(self, max_seconds: float | None = None) -> list[Block]:
        """The blocks that are due by now (at most about ``max_seconds``), oldest first."""
        if self._t0 is None:
            return []
        now = time.monotonic() if self._paused_at is None else self._paused_at
        self._wait_for_reader(now)
        due = self._due(now)
        if max_seconds is not None:
            due = min(due, self._pos + int(max_seconds * self.rate))
        audio = self._take(due - self._pos)
        step = int(BLOCK_SECONDS * self.rate)
        out = []
        for start in range(0, len(audio), step):
            end = min(len(audio), start + step)
            arrived = self._t0 + (self._pos + end) / (self.rate * self.speed)
            out.append(Block(audio[start:end].reshape(-1, 1), self.rate, arrived))
        self._pos += len(audio)
        return out

    def _wait_for_reader(self, now: float) -> None:
        """Hold the clock back so that at most ``MAX_BEHIND_S`` of audio are due and not read."""
        excess = self._due(now) - self._pos - int(MAX_BEHIND_S * self.rate)
        if excess > 0:
            self._t0 += excess / (self.rate * self.speed)

    def _due(self, now: float) -> int:
        due = int((now - self._t0) * self.speed * self.rate)
        return min(due, self._total) if self._total is not None else due

    def _take(self, n: int) -> np.ndarray:
        """Up to ``n`` samples from the stream (fewer only at its end, which is then recorded). The stream
        itself hands out exactly ``n`` samples but at the end, so nothing needs keeping here."""
        if n <= 0 or self._stream is None:
            return np.zeros(0, dtype=np.float32)
        try:
            out = self._stream.read(n)
        except (LivecapError, OSError):  # the file broke off (a removed drive, ...): end at what was read
            log.warning("reading %s failed; the replay ends here", self.path, exc_info=True)
            out = np.zeros(0, dtype=np.float32)
        if len(out) < n:  # the audio ended
            self._total = self._pos + len(out)
            if getattr(self._stream, "ended_early", None):  # a file cut short: say so, once
                self._notes.append(self._stream.ended_early)
            self._release()
        return np.ascontiguousarray(out, dtype=np.float32)

    def _release(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def notices(self) -> list[str]:
        """Sentences for the user since the last call (a file that ends before its header says)."""
        notes, self._notes = self._notes, []
        return notes

    @property
    def ended(self) -> bool:
        """True once every sample has been handed out."""
        return self._t0 is not None and self._total is not None and self._pos >= self._total

    @property
    def lost(self) -> bool:
        return False

    @property
    def is_open(self) -> bool:
        return self._t0 is not None and self._paused_at is None

    @property
    def backlog_seconds(self) -> float:
        """Seconds of audio that are due but not yet handed out (bounded by the file's length when known, and by
        ``MAX_BEHIND_S``); while paused, those due when it paused (read after Resume)."""
        if self._t0 is None:
            return 0.0
        now = time.monotonic() if self._paused_at is None else self._paused_at
        self._wait_for_reader(now)
        due = self._due(now)
        duration = getattr(self._stream, "duration", None)
        if duration is not None:
            due = min(due, int(duration * self.rate))
        return max(due - self._pos, 0) / self.rate

    @property
    def dropped_seconds(self) -> float:
        return 0.0
