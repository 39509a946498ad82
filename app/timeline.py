"""A session's timeline where audio was lost on the way: caption times as spoken, not as fed to the engine.

The engine times its lines by the samples it was fed. When the capture queue overflows (livecap did not run for
a while: the computer was busy or asleep, or the model fell behind), the oldest audio is dropped, and every line
after it came out that much too early (30 s lost: every later caption, cue and export 30 s off the recording).
``Timeline`` keeps where, in fed time, audio went missing and for how long, and moves the times of lines after
each gap by it. ("Both" keeps its own timeline through stalls: its mixer puts silence where a track had none.)
"""

from __future__ import annotations

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

    def start(self, t: float) -> float:
        """The spoken time of fed time ``t`` as a start: audio from a gap's place on comes after the gap."""
        return t + sum(gap for at, gap in self._gaps if at <= t)

    def end(self, t: float) -> float:
        """The spoken time of fed time ``t`` as an end: audio up to a gap's place came before it."""
        return t + sum(gap for at, gap in self._gaps if at < t)

    def line(self, line: Line) -> Line:
        """``line`` with its times, its words' and its span's as spoken."""
        if not self._gaps:
            return line
        words = tuple(Word(w.text, self.start(w.start), self.end(w.end)) for w in line.words)
        span = None if line.span is None else (self.start(line.span[0]), self.end(line.span[1]))
        return replace(line, start=self.start(line.start), end=self.end(line.end), words=words, span=span)

    def event(self, event: CaptionEvent) -> CaptionEvent:
        """``event`` with its lines' times as spoken."""
        if not self._gaps:
            return event
        partial = None if event.partial is None else self.line(event.partial)
        return replace(event, committed=tuple(self.line(line) for line in event.committed), partial=partial)
