"""The session journal: committed lines written to disk as they arrive, so a crash loses nothing.

One JSONL file per session (``<id>.jsonl`` in the sessions folder, see ``app.session_store``). The first
record is ``{"type": "start", ...}``, then one ``{"type": "line", "text", "start", "end"}`` per committed
line (each flushed and fsync'd; with the Line's ``tokens``, ``words`` as ``[[text, start, end], ...]`` and
``span`` when it has them: a cue is timed by its words, so an export made later must see them too),
``{"type": "input", "input": ...}`` when the audio input is known or changes, and ``{"type": "end"}`` when
the session ends cleanly. A journal without the end record is an unfinished session: ``find_unfinished``
offers it for recovery on the next start. A journal whose file was deleted or moved while it was open (a
cleaner, the sessions folder on a drive unmounted and mounted again) writes what it held again at its place
before the next record, from the open file (``restored`` counts it); where that fails, ``failed`` says so.

Reading never trusts the file: a torn last line, binary garbage, JSON that is not an object, fields of
the wrong type, non-finite times, an over-long line, an unreadable file or a folder in its place are
skipped and counted (``JournalData.unreadable``); what can be read is kept and nothing raises.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from engine.events import Line, Word

log = logging.getLogger(__name__)

MAX_RECORD_BYTES = 1 << 20  # a committed line is a few KB at most; longer records are damage
TAIL_BYTES = 4096  # where ``ends_finished`` looks for the end record


@dataclass(frozen=True)
class JournalData:
    """What could be read from a journal: the start record (``info``, with the latest ``input``
    merged in), the lines, whether it ended cleanly, the end record, and how many records were
    unreadable (skipped)."""

    info: dict[str, Any] = field(default_factory=dict)
    lines: tuple[Line, ...] = ()
    finished: bool = False
    end: dict[str, Any] = field(default_factory=dict)
    unreadable: int = 0
    error: str | None = None  # the file itself could not be read (one sentence)


@dataclass(frozen=True)
class RecoveredSession:
    """An unfinished journal: where it is, when it started, the lines it holds, and how many records
    could not be read."""

    path: Path
    started: str  # ISO 8601 local time
    lines: tuple[Line, ...]
    info: dict[str, Any]
    unreadable: int = 0


class Journal:
    """Appends a session's committed lines to ``<folder>/<timestamp>.jsonl``. Not thread-safe: use it
    from the GUI thread only. Never raises: a failure to create or write the file is logged, ``failed``
    holds one sentence for the user, and further writes are skipped."""

    def __init__(self, folder: str | Path, info: dict[str, Any] | None = None) -> None:
        folder = Path(folder)
        self.restored = 0  # times the file was written again after it went
        stamp = time.strftime("%Y%m%d-%H%M%S")
        n = _next_number(folder, stamp)  # ids only grow, so they sort in start order
        named = lambda n: folder / (f"{stamp}-{n}.jsonl" if n > 1 else f"{stamp}.jsonl")  # noqa: E731
        self.path = named(n)
        self.failed: str | None = None
        self._file: TextIO | None = None
        try:
            folder.mkdir(parents=True, exist_ok=True)
            while True:  # another livecap on the same folder may take the same id between the check and the open
                self.path = path = named(n)
                if not (path.exists() or path.with_suffix("").exists()):
                    try:
                        self._file = open(path, "x+", encoding="utf-8")  # open all session (read: ``_restore``)
                        break
                    except FileExistsError:
                        pass
                n += 1
        except OSError as exc:
            self._fail(exc)
            return
        # "time" is local wall-clock time, as the id; "epoch" orders sessions when the clock or time zone changed;
        # "pid" and "started" tell whether an unfinished session is still being recorded (``recorder_alive``)
        # "seq" counts sessions in the order they were recorded, whatever the clock said (``next_seq``)
        start = {"type": "start", "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "epoch": round(time.time(), 3)}
        start |= {"seq": next_seq(folder, skip=self.path)}
        self._write({**start, "pid": os.getpid(), "started": since_boot(os.getpid()), **(info or {})})
        if self.failed is not None:  # not even the start record fits (a full disk): leave no empty session behind
            with contextlib.suppress(OSError):
                self.path.unlink()

    @property
    def session_id(self) -> str:
        """The session's id in the store: the file name without ``.jsonl``."""
        return self.path.stem

    @property
    def is_open(self) -> bool:
        return self._file is not None

    def add(self, line: Line) -> None:
        """Record one committed line (flushed and fsync'd before returning)."""
        self._write(line_record(line))

    def set_input(self, description: str) -> None:
        """Record the audio input's description (when it becomes known, or changes mid-session)."""
        self._write({"type": "input", "input": description})

    def close(self, **extra: Any) -> None:
        """Write the end record (with ``extra`` fields) and close; the session then counts as finished."""
        if self._file is None:
            return
        self._write({"type": "end", "time": time.strftime("%Y-%m-%dT%H:%M:%S"), **extra})
        self._close_file()

    def abandon(self) -> None:
        """Close without an end record and delete the file (a session that never started)."""
        self._close_file()
        try:
            self.path.unlink()
        except OSError:
            pass

    def _write(self, record: dict[str, Any]) -> None:
        if self._file is None:
            return
        text = json.dumps(record, ensure_ascii=False)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: a file name that is not valid UTF-8 (os.fsdecode's escapes)
            try:
                text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")  # one U+FFFD per byte
            except UnicodeEncodeError:
                text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        try:
            if not _still_at(self._file, self.path):
                self._restore()
            self._file.write(text + "\n")
            self._file.flush()
            os.fsync(self._file.fileno())
        except (OSError, ValueError) as exc:
            self._fail(exc)

    def _restore(self) -> None:
        """Write what the open file holds again at ``path`` (its folder made again) and go on in the new file."""
        assert self._file is not None
        log.warning("the journal %s went while open; writing it again", self.path)
        self._file.seek(0)
        held = self._file.read()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new = open(self.path, "x+", encoding="utf-8")
        try:
            new.write(held)
            new.flush()
            os.fsync(new.fileno())
        except OSError:
            new.close()
            raise
        old, self._file = self._file, new
        with contextlib.suppress(OSError):
            old.close()
        self.restored += 1

    def _fail(self, exc: Exception) -> None:
        log.error("journal write failed: %s", exc)
        if self.failed is None:
            reason = getattr(exc, "strerror", None) or exc
            self.failed = f"The session backup could not be written ({reason})."
        self._close_file()

    def _close_file(self) -> None:
        """Close the file (a failing close loses nothing: every record was flushed and fsync'd); idempotent."""
        file, self._file = self._file, None
        if file is not None:
            try:
                file.close()
            except OSError:
                pass


def _still_at(file: TextIO, path: Path) -> bool:
    """Whether the open ``file`` is still the one at ``path``."""
    try:
        return os.path.samestat(os.fstat(file.fileno()), os.stat(path))
    except OSError:
        return False


def next_seq(folder: Path, skip: Path | None = None) -> int:
    """1 + the highest ``seq`` of the start records in ``folder`` (but ``skip``'s): a session recorded later has a
    higher one even when the clock went back in between (a clock running ahead, then corrected)."""
    try:
        paths = [p for p in folder.iterdir() if p.suffix == ".jsonl" and p != skip]
    except OSError:
        return 1
    seqs = [read_start(p).get("seq") for p in paths]
    return max((s for s in seqs if isinstance(s, int) and not isinstance(s, bool)), default=0) + 1


def _next_number(folder: Path, stamp: str) -> int:
    """1 + the highest ``-n`` of the sessions (and their leftovers) that started in the second ``stamp``."""
    try:
        names = os.listdir(folder)
    except OSError:
        return 1
    taken = re.compile(re.escape(stamp) + r"(?:-([0-9]{1,5}))?(?:\.|$)")
    return max((int(m[1] or 1) for name in names if (m := taken.match(name))), default=0) + 1


def finite_seconds(value: Any) -> float | None:
    """A finite number of seconds, or None (bools, strings, NaN and infinities are damage)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def line_record(line: Line) -> dict[str, Any]:
    """The journal record of ``line`` (``read_journal_data`` gives the same Line back)."""
    record: dict[str, Any] = {"type": "line", "text": line.text, "start": line.start, "end": line.end}
    if line.tokens:
        record["tokens"] = [int(t) for t in line.tokens]
    if line.words:
        record["words"] = [[w.text, w.start, w.end] for w in line.words]
    if line.span is not None:
        record["span"] = list(line.span)
    return record


def _line(record: dict[str, Any]) -> Line | None:
    """The Line of a line record, or None when its text or times are damaged; damaged tokens, words or span
    are left out (the text and its times are what matter)."""
    text, start, stop = record.get("text"), finite_seconds(record.get("start")), finite_seconds(record.get("end"))
    if not isinstance(text, str) or start is None or stop is None:
        return None
    tokens, words, span = record.get("tokens", ()), record.get("words", ()), record.get("span")
    if not isinstance(tokens, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        tokens = []
    parsed: list[Word] = []
    for w in words if isinstance(words, list) else ():
        times = [finite_seconds(v) for v in w[1:]] if isinstance(w, list) and len(w) == 3 else [None]
        if None in times or not isinstance(w[0], str):  # (a word that is no 3-item list stops at its times)
            parsed = []
            break
        parsed.append(Word(_clean_text(w[0]), times[0], max(times[1], times[0])))
    ends = [finite_seconds(v) for v in span] if isinstance(span, list) and len(span) == 2 else None
    return Line(
        _clean_text(text),
        start,
        max(stop, start),
        tuple(tokens),
        tuple(parsed),
        (ends[0], ends[1]) if ends is not None and None not in ends else None,
    )


_CONTROLS = {c: None for c in (*range(0x20), *range(0x7F, 0xA0)) if not chr(c).isspace()}


def _clean_text(value: str) -> str:
    """``value`` without lone surrogates (JSON can carry them; UTF-8 files cannot) and control characters other
    than whitespace (a damaged or edited journal: a NUL made ffmpeg drop the exported SRT cue)."""
    return value.encode("utf-8", "replace").decode("utf-8").translate(_CONTROLS)


def _records(f: Any) -> Any:
    """Yield each raw record (bytes) of a binary file, or None for one longer than MAX_RECORD_BYTES."""
    while True:
        raw = f.readline(MAX_RECORD_BYTES + 1)
        if not raw:
            return
        if len(raw) > MAX_RECORD_BYTES and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):  # skip the rest of the over-long record
                raw = f.readline(MAX_RECORD_BYTES)
            yield None
            continue
        yield raw


def _parsed(f: Any) -> Any:
    """Yield the JSON value of each non-blank record of a binary file, or None for one that is over-long or no
    JSON (as for a JSON value that is not a record, the caller counts it unreadable)."""
    for raw in _records(f):
        if raw is None:
            yield None
        elif raw.strip():
            try:
                yield json.loads(raw.decode("utf-8", errors="replace").lstrip("\ufeff"))  # an editor's BOM
            except (ValueError, RecursionError):
                yield None


def read_journal_data(path: str | Path) -> JournalData:
    """Read a journal, keeping what can be read (see the module docstring). Never raises."""
    info: dict[str, Any] = {}
    lines: list[Line] = []
    end: dict[str, Any] = {}
    finished = False
    unreadable = 0
    inputs: list[str] = []
    path = Path(path)
    try:
        if not path.is_file():  # a folder, a pipe or a device where the journal should be
            raise IsADirectoryError(21, "not a regular file")
        with open(path, "rb") as f:
            for record in _parsed(f):
                kind = record.get("type") if isinstance(record, dict) else None
                if not isinstance(kind, str):
                    unreadable += 1
                elif kind == "line":
                    line = _line(record)
                    if line is None:
                        unreadable += 1
                        continue
                    lines.append(line)
                elif kind == "start" and not info:
                    info = record
                elif kind == "input" and isinstance(record.get("input"), str):
                    inputs.append(record["input"])
                elif kind == "end":
                    finished, end = True, record
    except OSError as exc:
        log.warning("journal %s unreadable: %s", path, exc)
        error = f"The session file {path.name} could not be read ({exc.strerror or exc})."
        return JournalData(info, tuple(lines), finished, end, unreadable, error)
    if inputs:
        info = {**info, "input": inputs[-1]}
    return JournalData(info, tuple(lines), finished, end, unreadable)


def read_start(path: str | Path) -> dict[str, Any]:
    """The journal's first start record (``read_journal_data``'s ``info`` before a later input is merged in),
    read only as far as it: retention by age needs each kept session's start time, and parsing every line of
    every session made each start-up with "keep the last year" take ~1 s per 300 hour-long sessions. {} when
    there is none or the file cannot be read; never raises."""
    try:
        if not Path(path).is_file():  # a pipe would block the open
            return {}
        with open(path, "rb") as f:
            for record in _parsed(f):
                if isinstance(record, dict) and record.get("type") == "start":
                    return record
    except OSError:
        pass
    return {}


def since_boot(pid: int) -> float | None:
    """When process ``pid`` started, in seconds since the computer started (unlike its start time on the wall
    clock, this does not move when the clock is set); None when it cannot be told."""
    import psutil

    try:
        boot = psutil.boot_time()
        return round(psutil.Process(pid).create_time() - boot, 2)
    except (psutil.Error, OSError, ValueError):
        return None


def recorder_alive(start: dict[str, Any]) -> bool | None:
    """Whether the process that wrote the start record ``start`` still runs (so its session may still be being
    recorded): its ``pid`` runs, is no zombie, and started when the record says (not another process that got
    the pid since). None when the record cannot tell (written before records had a ``pid``)."""
    import psutil

    pid, epoch, started = start.get("pid"), finite_seconds(start.get("epoch")), finite_seconds(start.get("started"))
    if not isinstance(pid, int) or isinstance(pid, bool) or (epoch is None and started is None):
        return None
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:  # it ended; its parent has not collected it yet
            return False
        if started is not None:  # by the time since boot: a clock set forward since does not make it "gone"
            now = since_boot(pid)
            return now is not None and abs(now - started) < 1.0
        return process.create_time() <= epoch + 1.0  # records written before "started"
    except (psutil.Error, OSError, ValueError):
        return False


def read_journal(path: str | Path) -> tuple[dict[str, Any], list[Line], bool]:
    """(start record, lines, finished): ``read_journal_data`` in short. Raises OSError when the file
    cannot be read at all."""
    data = read_journal_data(path)
    if data.error is not None:
        raise OSError(data.error)
    return data.info, list(data.lines), data.finished


def _newest_first(folder: Path) -> list[Path]:
    def mtime(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:
            return 0.0

    try:
        paths = list(folder.glob("*.jsonl"))
    except OSError:
        return []
    return sorted(paths, key=mtime, reverse=True)


def ends_finished(path: str | Path) -> bool:
    """Whether the journal's last record is its end record, read from the file's last ``TAIL_BYTES`` only
    (True means ``read_journal_data`` would find it finished; False: read it to know). A finished journal,
    the usual case, then costs one small read: parsing every line of every session made each start-up take
    ~1 s per 300 hour-long sessions. Never raises."""
    try:
        if not Path(path).is_file():  # a pipe would block the open
            return False
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - TAIL_BYTES))
            tail = f.read(TAIL_BYTES)
    except OSError:
        return False
    body = tail.rstrip(b"\r\n")
    cut = body.rfind(b"\n")
    if cut < 0 and size > TAIL_BYTES:  # the last record starts before the tail: not an end record's size
        return False
    try:
        record = json.loads(body[cut + 1 :].decode("utf-8"))
    except (ValueError, RecursionError):
        return False
    return isinstance(record, dict) and record.get("type") == "end"


def find_unfinished(folder: str | Path, recording: Iterable[str] = ()) -> RecoveredSession | None:
    """The most recent journal in ``folder`` without an end record that holds at least one line, and whose
    recorder is gone: another livecap may be recording into the same folder, and its journal is no crash
    (``recording``: the ids of this process's own sessions in progress). Unreadable journals are skipped; never
    raises."""
    busy = set(recording)
    folder = Path(folder)
    if not folder.is_dir():
        return None
    for path in _newest_first(folder):
        if ends_finished(path):
            continue
        data = read_journal_data(path)
        if data.finished or data.error is not None or path.stem in busy:
            continue
        if data.info.get("pid") != os.getpid() and recorder_alive(data.info):
            continue
        if data.lines:
            started = data.info.get("time")
            return RecoveredSession(
                path, started if isinstance(started, str) else "", data.lines, data.info, data.unreadable
            )
        mark_finished(path, "empty")
    return None


def mark_finished(path: str | Path, reason: str, audio_s: float | None = None) -> str | None:
    """Append an end record to an unfinished journal (after recovering or discarding it), with the seconds of
    audio the session was fed where they are known (``audio_s``: its kept audio's length). Returns None, or the
    reason in a few words when it cannot be written (a read-only folder): the session is then offered again."""
    record: dict[str, Any] = {"type": "end", "reason": reason}
    if audio_s is not None and math.isfinite(audio_s) and audio_s > 0:
        record["audio_s"] = round(audio_s, 3)
    try:
        torn = False
        with open(path, "rb") as f:
            if f.seek(0, os.SEEK_END) > 0:
                f.seek(-1, os.SEEK_END)
                torn = f.read(1) != b"\n"
        with open(path, "a", encoding="utf-8") as f:
            f.write(("\n" if torn else "") + json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        log.warning("could not mark %s finished: %s", path, exc)
        return str(exc.strerror or exc)
    return None
