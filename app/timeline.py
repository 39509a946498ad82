"""A session's timeline where audio was lost on the way: caption times as spoken, not as fed to the engine.

The engine times its lines by the samples it was fed. When the capture queue overflows (livecap did not run for
a while: the computer was busy or asleep, or the model fell behind), the oldest audio is dropped, and every line
after it came out that much too early (30 s lost: every later caption, cue and export 30 s off the recording).
``Timeline`` keeps where, in fed time, audio went missing and for how long, and moves the times of lines after
each gap by it. ("Both" keeps its own timeline through stalls: its mixer puts silence where a track had none.)
A line or word is moved by the gaps before its middle, whole: one that spans a gap is not stretched over audio
that is gone (a line across a 20 s gap put its words inside it).

``StallWatch`` tells when livecap as a whole did not run (the process was stopped, the computer froze or
slept): a thread that wakes every 0.1 s and notes any wake-up much later than that. The worker cannot tell by
itself: a tick late because it fed a slow model looks the same as a tick late because nothing ran.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace

from engine.events import CaptionEvent, Line, Word


class Timeline:
    """Gaps in the audio fed to a session, and the mapping of fed times to times as spoken."""

    def __init__(self) -> None:
        self._gaps: list[tuple[float, float]] = []  # (fed seconds where the gap is, its length in seconds)
        self.missing = 0.0  # seconds of audio lost on the way, all gaps together

    def add_gap(self, at: float, seconds: float) -> None:
        """``seconds`` of audio went missing just before fed time ``at``."""
        if seconds > 0:
            self._gaps.append((at, seconds))
            self.missing += seconds

    def shift(self, start: float, end: float) -> float:
        """How far audio fed from ``start`` to ``end`` moves: the gaps before its middle."""
        middle = (start + end) / 2
        return sum(gap for at, gap in self._gaps if at <= middle)

    def line(self, line: Line) -> Line:
        """``line`` with its times, its words' and its span's as spoken (each moved whole)."""
        if not self._gaps:
            return line
        words = tuple(self._word(w) for w in line.words)
        d = self.shift(line.start, line.end)
        span = None if line.span is None else (line.span[0] + d, line.span[1] + d)
        return replace(line, start=line.start + d, end=line.end + d, words=words, span=span)

    def _word(self, word: Word) -> Word:
        d = self.shift(word.start, word.end)
        return Word(word.text, word.start + d, word.end + d)

    def event(self, event: CaptionEvent) -> CaptionEvent:
        """``event`` with its lines' times as spoken."""
        if not self._gaps:
            return event
        partial = None if event.partial is None else self.line(event.partial)
        return replace(event, committed=tuple(self.line(line) for line in event.committed), partial=partial)


class StallWatch:
    """A thread noting when livecap did not run: ``since(t)`` gives the last stall that ended after ``t`` as
    ``(when it ended, how long it was)``, or None."""

    EVERY_S = 0.1

    def __init__(self, stall_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.stall_s = stall_s
        self._clock = clock
        self._last: tuple[float, float] | None = None
        self.beat = clock()  # its last wake-up: long ago, it has not run yet since livecap ran again
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="livecap-stall-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        before = self._clock()
        while not self._stop.wait(self.EVERY_S):
            now = self._clock()
            if now - before > self.stall_s:
                self._last = (now, now - before)
            before = self.beat = now

    def since(self, t: float) -> tuple[float, float] | None:
        """The last stall that ended after monotonic time ``t``: ``(its end, its length)``; None when none did."""
        last = self._last
        return last if last is not None and last[0] > t else None

    def current(self, now: float) -> bool:
        """Whether the watch has woken within the last few wake-ups: after livecap ran again, whichever thread runs
        first, it may not have seen the stall yet (its thread may come second)."""
        return now - self.beat <= 3 * self.EVERY_S

    def close(self) -> None:
        self._stop.set()
