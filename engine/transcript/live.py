"""``LiveSrtWriter``: an SRT file that grows while a session runs."""

from __future__ import annotations

import os

from engine.errors import ExportError, os_reason
from engine.events import Line
from engine.transcript.cues import CueOptions, RawCue, end_slots, limit_lines, line_cues, time_cues
from engine.transcript.export import write_text_atomic
from engine.transcript.formats import format_srt, milliseconds, srt_block


class LiveSrtWriter:
    """Keep ``path`` a valid SRT file of the lines committed so far.

    The file is created (or emptied) on construction. ``add(line)`` appends the cues of a newly
    committed Line, numbered on from the previous ones, then flushes and fsyncs. Because a cue's end
    depends on the next cue's start, the last cue block already written is rewritten in place on the
    next ``add`` (its end may move earlier); everything before it is final. After the adds of lines
    ``L1..Ln`` the file holds exactly ``format_srt([L1, ..., Ln], **cue_options)``. ``close(audio_end)`` ends the
    file by the end of the audio (``audio_end`` seconds, at or after the lines' times): it then holds
    ``format_srt(lines, audio_end=audio_end, **cue_options)``. Usually only the last block changes (cut back to the
    end); where the last Lines start at the end itself (text decoded after the audio, such as Voxtral's last
    words held back by its delay), whose cues had no length before the last one (players never show such a cue),
    the export moves them before the end (``cues.end_slots``), and the whole file is written again (atomically).
    Where there is no room before the end at all (the audio ends where the last cue starts), that last cue keeps
    its reading time past the end instead of the export's no length.
    ``close()`` is idempotent; the writer is a context manager. OS failures raise
    :class:`engine.errors.ExportError`.
    """

    def __init__(self, path: str | os.PathLike[str], **cue_options) -> None:
        self.path = os.fspath(path)
        self._options = CueOptions(**cue_options)
        self._cue_options = cue_options
        self._lines: list[Line] = []  # every Line added: a close may write the file again as the export
        self._count = 0  # cue blocks in the file
        self._pending: RawCue | None = None  # the last block's cue (start already made monotonic)
        self._pending_offset = 0  # byte offset of the last block
        try:
            self._file = open(self.path, "wb")
        except OSError as err:
            raise ExportError(f"Cannot write the captions to '{self.path}': {os_reason(err)}.") from None

    @property
    def closed(self) -> bool:
        return self._file.closed

    def add(self, line: Line) -> None:
        """Append the cues of ``line`` (a Line with blank text adds nothing)."""
        if self._file.closed:
            raise ValueError("LiveSrtWriter.add() after close()")
        raws = line_cues(line, self._options)
        if not raws:
            return
        self._lines.append(line)
        seq = ([self._pending] if self._pending is not None else []) + raws
        timed = time_cues(seq, self._options)
        number = self._count if self._pending is not None else self._count + 1
        offset = self._pending_offset if self._pending is not None else self._file.tell()
        try:
            self._file.seek(offset)
            self._file.truncate()
            for k, cue in enumerate(timed):
                if number + k > 1 and (k > 0 or self._pending is None):
                    self._file.write(b"\n")
                self._pending_offset = self._file.tell()
                self._file.write(srt_block(number + k, cue).encode("utf-8", "replace"))
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as err:
            raise ExportError(f"Cannot write the captions to '{self.path}': {os_reason(err)}.") from None
        last = raws[-1]
        self._pending = RawCue(timed[-1].start, last.end, last.lines, last.chars)
        self._count = number + len(timed) - 1

    def close(self, audio_end: float | None = None) -> None:
        """Close the file (further ``add`` calls raise ValueError); with ``audio_end`` (the seconds of audio
        the session was fed) the last cue is first cut back to end by then. The file is closed even when
        that last write fails (ExportError)."""
        if self._file.closed:
            return
        try:
            if audio_end is not None and self._pending is not None:
                limited = limit_lines(self._lines, audio_end)
                if end_slots(limited, audio_end, self._options.min_dur):  # text decoded after the audio
                    self._file.close()
                    write_text_atomic(self.path, format_srt(self._lines, audio_end=audio_end, **self._cue_options))
                else:
                    self._end_at(audio_end)
        finally:
            self._file.close()

    def _end_at(self, audio_end: float) -> None:
        assert self._pending is not None
        last = time_cues([self._pending], self._options)[0]
        cue = time_cues([self._pending], self._options, audio_end)[0]
        if cue == last or milliseconds(cue.end) <= milliseconds(cue.start):  # no length as written: never shown
            return
        try:
            self._file.seek(self._pending_offset)
            self._file.truncate()
            self._file.write(srt_block(self._count, cue).encode("utf-8", "replace"))
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as err:
            raise ExportError(f"Cannot write the captions to '{self.path}': {os_reason(err)}.") from None

    def __enter__(self) -> LiveSrtWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
