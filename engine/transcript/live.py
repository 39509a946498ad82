"""``LiveSrtWriter``: an SRT file that grows while a session runs, complete whenever a reader looks at it."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import tempfile
import time
from collections.abc import Iterable, Sequence

from engine.errors import ExportError, os_reason
from engine.events import Line
from engine.transcript.cues import CueOptions, RawCue, end_slots, limit_lines, line_cues, time_cues
from engine.transcript.export import _new_file_mode
from engine.transcript.formats import format_srt, milliseconds, srt_block

log = logging.getLogger(__name__)

# Windows refuses to replace a file that a reader holds open without delete sharing (most do): the reader lets go
# within milliseconds, so the replace is tried again a few times (5 + 10 + 20 ms at most) before writing in place
REPLACE_RETRY_S = (0.005, 0.01, 0.02)


class LiveSrtWriter:
    """Keep ``path`` a valid SRT file of the lines committed so far, as readers that poll it (OBS) see it.

    The file is created (or replaced by an empty one) on construction. ``add(line)`` appends the cues of a newly
    committed Line, numbered on from the previous ones; ``extend(lines)`` adds many with one write (a live file
    turned on mid-session). Because a cue's end depends on the next cue's start, the last cue block may change on
    the next ``add`` (its end may move earlier); everything before it is final. After the adds of lines
    ``L1..Ln`` the file holds exactly ``format_srt([L1, ..., Ln], **cue_options)``. ``close(audio_end)`` ends the
    file by the end of the audio (``audio_end`` seconds, at or after the lines' times): it then holds
    ``format_srt(lines, audio_end=audio_end, **cue_options)``. Usually only the last block changes (cut back to the
    end); where the last Lines start at the end itself (text decoded after the audio, such as Voxtral's last
    words held back by its delay), whose cues had no length before the last one (players never show such a cue),
    the export moves them before the end (``cues.end_slots``), and the whole file is written as the export.
    Where there is no room before the end at all (the audio ends where the last cue starts), that last cue keeps
    its reading time past the end instead of the export's no length.

    Every write is whole and atomic: the text is kept in memory, written to a temporary file in the same folder,
    fsynced and moved over ``path`` with ``os.replace``, so a reader sees the previous file or the next one,
    never a cut, empty or zero-filled one, and never fewer cues than before; a crash (kill -9, power loss) leaves
    one of them too (a temporary ``.<name>.*.tmp`` may stay beside it). The cost grows with the file: one add at
    5,000 cues (a 490 KB file, some hours of speech) took about 1.5 ms on ext4 (SSD), 1.1 ms of it writing and
    fsyncing the whole file, against 0.5 ms for the in-place rewrite of the last block it replaces. A symbolic
    link is written through; a path that is not a regular file (``/dev/null``) is written to directly. Where the
    replace is refused (Windows, while a reader holds the file open without delete sharing, after a few retries
    over 35 ms; a folder the user may not write to, holding a file they may) the file is written in place instead:
    a reader may then see that one write half done.

    The path is checked at each write: when it no longer names the file written last (deleted, moved, replaced),
    the whole text is written at the path again and ``restored`` counts it. A folder that is gone is not made
    again: that write raises. ``close()`` is idempotent; the writer is a context manager. OS failures raise
    :class:`engine.errors.ExportError`.
    """

    def __init__(self, path: str | os.PathLike[str], **cue_options) -> None:
        self.path = os.fspath(path)
        self.restored = 0  # times the file was written again after it went from the path
        self._options = CueOptions(**cue_options)
        self._cue_options = cue_options
        self._lines: list[Line] = []  # every Line added: a close may write the file again as the export
        self._count = 0  # cue blocks in the file
        self._pending: RawCue | None = None  # the last block's cue (start already made monotonic)
        self._final = bytearray()  # the blocks before the last, each with the blank line after it: never change
        self._last = b""  # the last block
        self._written: os.stat_result | None = None  # the file last written at the path
        self._closed = False
        self._in_place = 0  # writes made in place because the replace was refused
        self._write((b"",))

    @property
    def closed(self) -> bool:
        return self._closed

    def add(self, line: Line) -> None:
        """Append the cues of ``line`` (a Line with blank text adds nothing)."""
        self.extend((line,))

    def extend(self, lines: Iterable[Line]) -> None:
        """Append the cues of every Line of ``lines`` with one write (the same file as one ``add`` each)."""
        if self._closed:
            raise ValueError("LiveSrtWriter.add() or extend() after close()")
        pending, count, final, last, added = self._pending, self._count, bytearray(), self._last, []
        for line in lines:
            raws = line_cues(line, self._options)
            if not raws:
                continue
            timed = time_cues(([pending] if pending is not None else []) + raws, self._options)
            number = count if pending is not None else count + 1  # the pending block is numbered again
            blocks = [srt_block(number + k, cue).encode("utf-8", "replace") for k, cue in enumerate(timed)]
            for block in blocks[:-1]:
                final += block + b"\n"
            last, count = blocks[-1], number + len(timed) - 1
            pending = RawCue(timed[-1].start, raws[-1].end, raws[-1].lines, raws[-1].chars)
            added.append(line)
        if not added:
            return
        self._write((self._final, final, last))
        self._final += final
        self._last, self._pending, self._count = last, pending, count
        self._lines += added

    def close(self, audio_end: float | None = None) -> None:
        """Close the writer (further ``add`` calls raise ValueError); with ``audio_end`` (the seconds of audio
        the session was fed) the last cue is first cut back to end by then. The writer is closed even when
        that last write fails (ExportError)."""
        if self._closed:
            return
        self._closed = True
        if audio_end is not None and self._pending is not None:
            limited = limit_lines(self._lines, audio_end)
            if end_slots(limited, audio_end, self._options.min_dur):  # text decoded after the audio
                text = format_srt(self._lines, audio_end=audio_end, **self._cue_options)
                self._write((text.encode("utf-8", "replace"),))
            else:
                self._end_at(audio_end)

    def _end_at(self, audio_end: float) -> None:
        assert self._pending is not None
        last = time_cues([self._pending], self._options)[0]
        cue = time_cues([self._pending], self._options, audio_end)[0]
        if cue == last or milliseconds(cue.end) <= milliseconds(cue.start):  # no length as written: never shown
            return
        self._write((self._final, srt_block(self._count, cue).encode("utf-8", "replace")))

    def __enter__(self) -> LiveSrtWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self, chunks: Sequence[bytes]) -> None:
        """Make the file at the path hold ``chunks`` (joined): replaced atomically, or in place where refused."""
        try:
            try:
                st: os.stat_result | None = os.stat(self.path)  # through links
            except FileNotFoundError:
                st = None
            if self._written is not None and (st is None or not _same_file(st, self._written)):
                log.warning("the live SRT file %s went while it was written; writing it again", self.path)
                self.restored += 1
            if st is not None and not stat.S_ISREG(st.st_mode):
                self._written = _write_in_place(self.path, chunks)
                return
            target = os.path.realpath(self.path) if os.path.islink(self.path) else self.path
            mode = stat.S_IMODE(st.st_mode) if st is not None else _new_file_mode()
            try:
                self._written = _replace(target, chunks, mode)
            except PermissionError as err:
                if not self._in_place:  # said once: a folder the user may not write to refuses every replace
                    log.warning("cannot replace the live SRT file %s (%s); writing it in place", self.path, err)
                self._in_place += 1
                self._written = _write_in_place(target, chunks)
        except OSError as err:
            raise ExportError(f"Cannot write the captions to '{self.path}': {os_reason(err)}.") from None


def _same_file(now: os.stat_result, written: os.stat_result) -> bool:
    """Whether the file at the path now is the one last written: the same inode, or (file systems whose inode
    numbers are not stable: SMB mounted with noserverino, some FUSE ones) the same size and modification time."""
    if os.path.samestat(now, written):
        return True
    return (now.st_size, now.st_mtime_ns) == (written.st_size, written.st_mtime_ns)


def _replace(target: str, chunks: Sequence[bytes], mode: int) -> os.stat_result:
    """Write ``chunks`` to a temporary file beside ``target``, fsync it and move it over ``target``; what is at
    ``target`` then. No temporary file is left behind, whatever is raised."""
    folder = os.path.dirname(os.path.abspath(target))
    # a short temporary name: one made of the whole name could pass a long name's limit (255 bytes)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(target)[:32] + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())  # the data is on disk before the name moves to it: a crash leaves a whole file
            written = os.fstat(f.fileno())
        os.chmod(tmp, mode)
        for pause in REPLACE_RETRY_S:
            try:
                os.replace(tmp, target)
                return _stat_now(target, written)
            except PermissionError:
                time.sleep(pause)
        os.replace(tmp, target)
        return _stat_now(target, written)
    except BaseException:  # an interrupt too
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _write_in_place(target: str, chunks: Sequence[bytes]) -> os.stat_result:
    """Write ``chunks`` over the file at ``target`` (made when missing), then cut it to their length: it is
    never emptied first, but a reader may see the write half done. What is at ``target`` then."""
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | getattr(os, "O_BINARY", 0), _new_file_mode())
    with os.fdopen(fd, "wb") as f:  # no O_TRUNC: the old text stays until the new one covers it
        for chunk in chunks:
            f.write(chunk)
        f.flush()
        written = os.fstat(f.fileno())
        if stat.S_ISREG(written.st_mode):
            f.truncate()
            os.fsync(f.fileno())
    return _stat_now(target, written)


def _stat_now(target: str, written: os.stat_result) -> os.stat_result:
    """What is at ``target`` once written and closed (a network file system may set its time at the close), or
    ``written`` when it cannot be looked at."""
    try:
        return os.stat(target)
    except OSError:
        return written
