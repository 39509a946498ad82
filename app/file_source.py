"""Replays an audio file as if it were a microphone: blocks become due at wall-clock pace (times ``speed``).

There is no thread: the engine worker calls ``read()`` on every tick and gets the blocks whose time has
come. When the worker falls behind, the due blocks pile up and are all returned later, so a replay never
loses audio (the backlog shows as "can't keep up" instead).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from app.capture import Block
from engine.audio import SAMPLE_RATE
from engine.errors import AudioError, LivecapError

BLOCK_SECONDS = 0.1


class FileSource:
    """A file replayed at ``speed`` times real time. ``open()`` reads it (``engine.audio.read_audio``)."""

    kind = "file"

    def __init__(self, path: str | Path, speed: float = 1.0) -> None:
        if not speed > 0:
            raise ValueError("speed must be positive")
        self.path = Path(path)
        self.speed = float(speed)
        self.rate = SAMPLE_RATE
        self.description = self.path.name
        self._audio = np.zeros(0, dtype=np.float32)
        self._pos = 0
        self._t0: float | None = None
        self._paused_at: float | None = None

    def open(self) -> None:
        """Read the file and start the clock (raises ``AudioError`` with one sentence when unreadable)."""
        from engine.audio import read_audio

        if self._t0 is not None and self._paused_at is not None:  # resume after pause
            self._t0 += time.monotonic() - self._paused_at
            self._paused_at = None
            return
        try:
            audio = read_audio(self.path)
        except LivecapError:
            raise
        except OSError as exc:
            raise AudioError(f"The audio file {self.path.name} could not be read.") from exc
        self._audio = np.ascontiguousarray(audio, dtype=np.float32).reshape(-1)
        self._pos = 0
        self._t0 = time.monotonic()
        self.description = f"{self.path.name} (replay{'' if self.speed == 1 else f' ×{self.speed:g}'})"

    def close(self) -> None:
        """Pause the clock; ``open()`` resumes where the replay stopped."""
        if self._t0 is not None and self._paused_at is None:
            self._paused_at = time.monotonic()

    def read(self, max_seconds: float | None = None) -> list[Block]:
        """The blocks that are due by now (at most about ``max_seconds``), oldest first."""
        if self._t0 is None or self._paused_at is not None:
            return []
        now = time.monotonic()
        due = min(len(self._audio), int((now - self._t0) * self.speed * self.rate))
        if max_seconds is not None:
            due = min(due, self._pos + int(max_seconds * self.rate))
        step = int(BLOCK_SECONDS * self.rate)
        out = []
        while self._pos < due:
            end = min(due, self._pos + step)
            arrived = self._t0 + end / (self.rate * self.speed)
            out.append(Block(self._audio[self._pos : end].reshape(-1, 1), self.rate, arrived))
            self._pos = end
        return out

    @property
    def ended(self) -> bool:
        """True once every sample has been handed out."""
        return self._t0 is not None and self._pos >= len(self._audio)

    @property
    def lost(self) -> bool:
        return False

    @property
    def is_open(self) -> bool:
        return self._t0 is not None and self._paused_at is None

    @property
    def backlog_seconds(self) -> float:
        """Seconds of audio that are due but not yet handed out."""
        if self._t0 is None or self._paused_at is not None:
            return 0.0
        due = min(len(self._audio), int((time.monotonic() - self._t0) * self.speed * self.rate))
        return max(due - self._pos, 0) / self.rate

    @property
    def dropped_seconds(self) -> float:
        return 0.0
