"""The session store: every captioning session kept on disk, listed, searched, renamed, exported, deleted.

No Qt here: the GUI (``app.sessions_view``) and the headless commands (``app.sessions_cli``) share it.

Layout of the sessions folder (``app.paths.journal_dir()``)::

    <id>.jsonl          the session's journal (``app.journal``): version 1, the live transcript
    <id>/meta.json      what the user changed: {"title": ...} (written atomically)
    <id>/audio.flac     the audio the engine was fed (16 kHz mono), when "keep audio" was on
    <id>/audio.pcm      the same while recording (raw s16le; compressed to FLAC when the session ends)
    <id>/v<N>.jsonl     version N >= 2: a re-transcription of the audio with another model
    <id>/retranscribing-<pid>-<token>.json  {"pid", "epoch", "started"} of one run re-transcribing it (``working_on``;
                        one per run): while the process of any of them runs, retention and ``delete`` leave the
                        session alone; the marks of processes that ended are ignored, and cleaned
    index.json          what the list shows of each journal, a cache (``app.session_index``)

The id is the journal's file name without ``.jsonl`` (its start time, ``YYYYmmdd-HHMMSS[-n]``). Every
change is atomic: meta and versions are written to a temporary file and moved into place; a delete first
renames the journal out of sight (one ``rename``), then removes the rest. Leftovers of an interrupted
change are cleaned by ``repair()``. Reading tolerates any damage (``app.journal.read_journal_data``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app import session_audio, session_index
from app.journal import (
    Journal,
    JournalData,
    finite_seconds,
    line_record,
    read_journal_data,
    read_start,
    recorder_alive,
    since_boot,
)
from app.session_index import SummaryIndex
from engine.errors import ExportError, UsageError
from engine.events import Line

log = logging.getLogger(__name__)

SESSION_ID = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_-]{0,99}$")  # never a path: no dots, no separators
VERSION_FILE = re.compile(r"^v([0-9]{1,4})\.jsonl$")
DELETED_SUFFIX = ".deleted"
BUSY_MARK = re.compile(r"^retranscribing(-[0-9]+-[0-9a-f]+)?\.json$")  # one per run ("retranscribing.json": older)
BUSY = "That session is being re-transcribed: cancel the re-transcription first."
NO_SPEECH = "The re-transcription found no speech; the session keeps its transcript."


PARSED_KEPT = 8  # parsed journals kept (all their lines): 300 hour-long sessions held 150 MB for good (QA)


class SessionNotFound(UsageError):
    """No session with that id (one sentence)."""


def made_with(bits: int, options: dict[str, Any]) -> dict[str, int]:
    """The start record's fields that say how a version was made (``Version.bits``, ``Version.delay_ms``): the
    model's 8/4-bit weights (none for float) and, from the session ``options``, Voxtral's delay."""
    delay = options.get("delay_ms")
    return ({"bits": bits} if bits else {}) | ({"delay_ms": delay} if isinstance(delay, int) else {})


@dataclass(frozen=True)
class Version:
    """One transcript of a session: 1 is the live one, 2.. re-transcriptions of its audio."""

    number: int
    path: Path
    model: str  # the model source ("" when unknown)
    created: str  # ISO 8601 local time
    lines: int
    unreadable: int = 0
    bits: int = 0  # its 8/4-bit weights (0: as stored in float, or unknown)
    delay_ms: int = 0  # Voxtral's delay (0: none, or unknown)

    @property
    def how(self) -> str:
        """How the model ran, for people: "8-bit weights, 480 ms delay" ("" when as stored, without a delay)."""
        parts = [f"{self.bits}-bit weights"] if self.bits else []
        return ", ".join(parts + ([f"{self.delay_ms} ms delay"] if self.delay_ms else []))


@dataclass(frozen=True)
class SessionSummary:
    """What the sessions list shows about one session. ``model`` and ``lines`` describe the latest
    version (the one exported by default)."""

    id: str
    path: Path
    title: str
    started: str  # ISO 8601 local time ("" when unknown)
    duration: float  # seconds of audio
    source: str  # "microphone" | "file" | "system audio" | "microphone + system audio" | "unknown"
    input: str  # the input's description
    model: str
    lines: int
    first_words: str
    finished: bool
    unreadable: int  # records of the journal that could not be read (skipped)
    versions: tuple[Version, ...]
    audio: Path | None

    @property
    def name(self) -> str:
        """The title, else the start time."""
        return self.title or self.started.replace("T", " ") or self.id

    @property
    def latest(self) -> Version:
        return self.versions[-1]

    def to_json(self) -> dict[str, Any]:
        """The JSON object ``livecap --sessions`` prints for this session."""
        return {
            "id": self.id,
            "start": self.started,
            "duration": round(self.duration, 3),
            "source": self.source,
            "input": self.input,
            "model": self.model,
            "lines": self.lines,
            "title": self.title,
            "first_words": self.first_words,
            "finished": self.finished,
            "unreadable": self.unreadable,
            "audio": self.audio is not None,
            "versions": [
                {"version": v.number, "model": v.model, "bits": v.bits, "delay_ms": v.delay_ms, "lines": v.lines}
                for v in self.versions
            ],
        }


@dataclass(frozen=True)
class Retention:
    """How long sessions are kept: ``mode`` "all", "days" (the last ``n`` days) or "sessions" (the ``n``
    newest). Stored as a string: "all", "days:30", "sessions:50"."""

    mode: str = "all"
    n: int = 0

    @classmethod
    def parse(cls, text: str) -> Retention:
        """The policy ``text`` names; anything unreadable keeps everything (the safe choice)."""
        mode, _, n = str(text).partition(":")
        if mode in ("days", "sessions") and n.isdigit() and int(n) > 0:
            return cls(mode, int(n))
        return cls()

    def __str__(self) -> str:
        return "all" if self.mode == "all" else f"{self.mode}:{self.n}"


def _stamp(path: Path) -> tuple[int, int] | None:
    """What tells whether a journal changed since it was read (it only grows; versions are written once): its
    modification time and size; None when it cannot be looked at."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def _order(session_id: str) -> tuple[str, int]:
    """Sort key: the time stamp, then the number a second session in the same second gets (``-2``...)."""
    base, _, n = session_id.rpartition("-")
    return (base, int(n)) if base.count("-") == 1 and n.isdigit() and len(n) < 6 else (session_id, 1)


def _started(value: Any, session_id: str) -> str:
    """A session's start time: its start record's ``time``, else the one its id was made from ("" if neither)."""
    if isinstance(value, str) and value:
        return value
    m = re.match(r"^(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})(\d{2})", session_id)
    return f"{m[1]}-{m[2]}-{m[3]}T{m[4]}:{m[5]}:{m[6]}" if m else ""


def write_json_atomic(path: Path, obj: Any) -> None:
    """Replace ``path`` with ``obj`` as JSON: temporary file beside it, fsync, rename."""
    write_bytes_atomic(path, (json.dumps(obj, ensure_ascii=False, indent=1) + "\n").encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (raises OSError; no temporary file is left)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class SessionStore:
    """The sessions in ``folder``. Methods never raise on a damaged file (they skip or report it);
    changes raise ``SessionNotFound`` for an unknown id and ``ExportError`` (one sentence) when the disk
    refuses. Not thread-safe: one thread at a time (the GUI thread in the app)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self._cache: dict[Path, tuple[tuple[int, int], JournalData]] = {}  # the last PARSED_KEPT read, oldest first
        self._index = SummaryIndex(self.folder)
        self._folds: dict[Path, tuple[tuple[int, int] | None, tuple[str, ...]]] = {}

    # -- reading -----------------------------------------------------------------------------------
    def ids(self) -> list[str]:
        """Every session id, newest first."""
        try:
            names = [p.name for p in self.folder.iterdir()]
        except OSError:
            return []
        ids = [n[: -len(".jsonl")] for n in names if n.endswith(".jsonl")]
        return sorted((i for i in ids if SESSION_ID.match(i)), key=_order, reverse=True)

    def list(self) -> list[SessionSummary]:
        """A summary of every session, newest first (a damaged one is listed with what could be read). What it
        took from each journal is kept in the folder's index (``app.session_index``) for the next listing."""
        out = []
        for session_id in self.ids():
            try:
                out.append(self.summary(session_id))
            except SessionNotFound:  # deleted meanwhile
                continue
        self._index.save()
        return out

    def summary(self, session_id: str) -> SessionSummary:
        """One session's summary (``SessionNotFound`` when there is none)."""
        path = self.journal_path(session_id)
        live = self._index.brief(path, self._read)
        started = _started(live.time, session_id)
        versions = [Version(1, path, live.model, started, live.lines, live.unreadable, live.bits, live.delay_ms)]
        latest = live
        for number, vpath in self._version_paths(session_id):
            b = latest = self._index.brief(vpath, self._read)
            versions.append(Version(number, vpath, b.model, b.time, b.lines, b.unreadable, b.bits, b.delay_ms))
        return SessionSummary(
            id=session_id,
            path=path,
            title=self._title(session_id),
            started=started,
            duration=live.duration,
            source=live.source,
            input=live.input,
            model=versions[-1].model,
            lines=versions[-1].lines,
            first_words=latest.first_words,
            finished=live.finished,
            unreadable=live.unreadable,
            versions=tuple(versions),
            audio=self.audio_file(session_id),
        )

    def lines(self, session_id: str, version: int | None = None) -> tuple[Line, ...]:
        """The lines of ``version`` (default: the latest) of a session."""
        path = self.journal_path(session_id)
        if version is None:
            return self._read(self._latest_path(session_id)).lines
        if version == 1:
            return self._read(path).lines
        for number, vpath in self._version_paths(session_id):
            if number == version:
                return self._read(vpath).lines
        raise SessionNotFound(f"The session {session_id} has no version {version}.")

    def audio_seconds(self, session_id: str) -> float | None:
        """Seconds of audio the session was fed (its journal's end record's ``audio_s``); ``None`` when it was
        not recorded (an unfinished session, or one from before it was kept). No time of any version passes it."""
        audio_s = finite_seconds(self._read(self.journal_path(session_id)).end.get("audio_s"))
        return audio_s if audio_s is not None and audio_s >= 0 else None

    def search(self, text: str) -> dict[str, int]:
        """For each session whose latest version or title contains ``text`` (case-insensitive, a line or the
        title at a time): the number of matching lines of its latest version, or 1 when only its title matches
        (every count is at least 1). An empty ``text`` matches nothing."""
        needle = text.strip().casefold()
        if not needle:
            return {}
        hits: dict[str, int] = {}
        for session_id in self.ids():
            n = sum(needle in line for line in self._folded(self._latest_path(session_id)))
            if n or needle in self._title(session_id).casefold():
                hits[session_id] = max(n, 1)
        return hits

    def prepare_search(self, session_id: str) -> None:
        """Read and casefold the latest version of ``session_id`` now, so that a later ``search`` need not (a
        search box warms the store a session at a time while it has focus; an unknown id does nothing)."""
        if SESSION_ID.match(session_id or ""):
            self._folded(self._latest_path(session_id))

    def journal_path(self, session_id: str) -> Path:
        """The journal of ``session_id`` (``SessionNotFound`` when the id is malformed or unknown)."""
        if not SESSION_ID.match(session_id or ""):
            raise SessionNotFound(f"There is no session called '{session_id}'.")
        path = self.folder / f"{session_id}.jsonl"
        if not path.exists():
            raise SessionNotFound(f"There is no session called '{session_id}' (livecap --sessions lists them).")
        return path

    def audio_file(self, session_id: str) -> Path | None:
        """The session's kept audio (FLAC, or raw while or after recording), if any."""
        for name in (session_audio.FLAC_NAME, session_audio.RAW_NAME):
            path = self.folder / session_id / name
            if path.is_file():
                return path
        return None

    # -- writing -----------------------------------------------------------------------------------
    def create(self, info: dict[str, Any]) -> Journal:
        """Start a new session: its journal, open for lines (check ``journal.failed``)."""
        return Journal(self.folder, info)

    def discard(self, journal: Journal) -> None:
        """Remove a session that never started (its journal holds no line). Never raises."""
        journal.abandon()
        folder = self.folder / journal.session_id
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)

    def recording_path(self, session_id: str) -> Path:
        """Where the audio of a running session is recorded (the folder is created)."""
        folder = self.folder / session_id
        folder.mkdir(parents=True, exist_ok=True)
        return folder / session_audio.RAW_NAME

    def rename(self, session_id: str, title: str) -> None:
        """Give a session a title ("" restores the default name)."""
        self.journal_path(session_id)
        meta = self._meta(session_id)
        meta["title"] = " ".join(str(title).split())[:200]
        folder = self.folder / session_id
        try:
            folder.mkdir(exist_ok=True)
            write_json_atomic(folder / "meta.json", meta)
        except OSError as exc:
            raise ExportError(f"The session could not be renamed ({exc.strerror or exc}).") from None

    def delete(self, session_id: str) -> None:
        """Remove a session with its versions and audio. Atomic: after a crash it is gone or intact."""
        path = self.journal_path(session_id)
        if self.busy(session_id):
            raise ExportError(BUSY)
        hidden = path.with_name(path.name + DELETED_SUFFIX)
        try:
            os.replace(path, hidden)
        except OSError as exc:
            raise ExportError(f"The session could not be deleted ({exc.strerror or exc}).") from None
        self._cache.pop(path, None)
        self._folds.pop(path, None)
        self._remove_leftovers(session_id, hidden)

    @contextlib.contextmanager
    def working_on(self, session_id: str) -> Iterator[None]:
        """Mark ``session_id`` as being re-transcribed by this run while the block runs: ``busy`` is True for it
        (in every process), so retention and ``delete`` leave it alone. Each run writes a mark of its own and
        removes only that one, so a session stays busy while any run on it goes on (two re-transcriptions of one
        session: the first to end removed the one mark under the other). Marks left by processes that ended
        are removed. Raises ExportError (one sentence) when the mark cannot be written, as the new version could
        not be either."""
        self.journal_path(session_id)
        self._clear_dead_marks(session_id)
        path = self.folder / session_id / f"retranscribing-{os.getpid()}-{secrets.token_hex(4)}.json"
        try:
            path.parent.mkdir(exist_ok=True)
            mark = {"pid": os.getpid(), "epoch": time.time(), "started": since_boot(os.getpid())}
            write_bytes_atomic(path, json.dumps(mark).encode("utf-8"))
        except OSError as exc:
            raise ExportError(f"The session's folder cannot be written ({exc.strerror or exc}).") from None
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                path.unlink()

    def busy(self, session_id: str) -> bool:
        """Whether a running process is re-transcribing ``session_id`` (``working_on``): a mark of a run whose
        process still runs is there."""
        return any(alive for _path, alive in self._marks(session_id))

    def add_version(self, session_id: str, lines: Iterable[Line], info: dict[str, Any]) -> int:
        """Store ``lines`` as the session's next version (a complete journal, written atomically); returns its
        number. Lines without any text are refused (ExportError, ``NO_SPEECH``) and nothing is stored: the new
        version would become the latest one, listed, searched and exported, and hide the session's text."""
        self.journal_path(session_id)
        lines = list(lines)
        if not any(line.text.strip() for line in lines):
            raise ExportError(NO_SPEECH)
        numbers = [n for n, _ in self._version_paths(session_id)]
        number = max(numbers, default=1) + 1
        records = [{"type": "start", "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "version": number, **info}]
        records += [line_record(ln) for ln in lines]
        records.append({"type": "end", "time": time.strftime("%Y-%m-%dT%H:%M:%S")})
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
        folder = self.folder / session_id
        try:
            folder.mkdir(exist_ok=True)
            write_bytes_atomic(folder / f"v{number}.jsonl", data)
        except OSError as exc:
            raise ExportError(f"The new version could not be saved ({exc.strerror or exc}).") from None
        return number

    def export(
        self,
        session_id: str,
        path: str | os.PathLike[str],
        fmt: str | None = None,
        version: int | None = None,
        **options: Any,
    ) -> None:
        """Write a version (default: the latest) to ``path`` (format by extension when ``fmt`` is None); no time
        written passes the session's ``audio_seconds`` (unless ``options`` give another ``audio_end``)."""
        from engine.transcript import write_transcript

        options.setdefault("audio_end", self.audio_seconds(session_id))
        write_transcript(self.lines(session_id, version), path, fmt, **options)

    def apply_retention(self, policy: Retention, protect: Iterable[str] = (), now: float | None = None) -> list[str]:
        """Delete the finished sessions ``policy`` no longer keeps; never one in ``protect`` (the session in
        progress) nor an unfinished one (it may be in progress elsewhere or not yet offered for recovery).
        Returns the deleted ids."""
        deleted = []
        for session_id in self.would_delete(policy, protect, now):
            try:
                self.delete(session_id)
            except (SessionNotFound, ExportError):
                log.warning("retention could not delete %s", session_id, exc_info=True)
                continue
            deleted.append(session_id)
        return deleted

    def would_delete(self, policy: Retention, protect: Iterable[str] = (), now: float | None = None) -> list[str]:
        """The ids ``apply_retention`` with the same arguments would delete now, newest first; deletes nothing."""
        if policy.mode == "all":
            return []
        keep = set(protect)
        ids = self.ids()
        if policy.mode == "sessions":  # newest first in recording order, not by id or clock: either may go back
            doomed = sorted(ids, key=self._recorded_order, reverse=True)[policy.n :]
        else:
            limit = (time.time() if now is None else now) - policy.n * 86400
            doomed = [i for i in ids if self._start_epoch(i) < limit]
        out = []
        for session_id in doomed:
            if session_id in keep or self.busy(session_id):
                continue
            data = self._read(self.folder / f"{session_id}.jsonl")
            if data.finished and data.error is None:
                out.append(session_id)
        return out

    def repair(self, protect: Iterable[str] = ()) -> None:
        """Finish what an interrupted change left: deletions, temporary files, raw audio of finished
        sessions (compressed to FLAC). Never raises."""
        keep = set(protect)
        try:
            entries = list(self.folder.iterdir())
        except OSError:
            return
        ids = set(self.ids())
        for entry in entries:
            name = entry.name
            try:
                if name.endswith(".jsonl" + DELETED_SUFFIX):
                    self._remove_leftovers(name[: -len(".jsonl" + DELETED_SUFFIX)], entry)
                elif name.startswith(f".{session_index.NAME}.") and name.endswith(".tmp") and entry.is_file():
                    entry.unlink()  # an index write cut short
                elif entry.is_dir() and SESSION_ID.match(name) and name not in ids:
                    shutil.rmtree(entry)  # the rest of a session whose journal was deleted
                elif entry.is_dir() and name in ids and name not in keep:
                    self._repair_folder(name, entry)
            except OSError:
                log.warning("could not tidy %s", entry, exc_info=True)

    def finish_audio(self, session_id: str) -> None:
        """Compress the session's raw audio to FLAC, if it is still raw. Never raises."""
        raw = self.folder / session_id / session_audio.RAW_NAME
        if raw.is_file():
            session_audio.compress(raw)

    # -- internals ---------------------------------------------------------------------------------
    def _read(self, path: Path) -> JournalData:
        key = _stamp(path)
        if key is None:
            return read_journal_data(path)
        cached = self._cache.pop(path, None)
        data = cached[1] if cached is not None and cached[0] == key else read_journal_data(path)
        self._cache[path] = (key, data)  # most recent last
        while len(self._cache) > PARSED_KEPT:  # listing reads every journal not in the index: keep only a few
            del self._cache[next(iter(self._cache))]
        return data

    def _latest_path(self, session_id: str) -> Path:
        """The file of a session's latest version (``summary(...).latest.path``): its last re-transcription, else
        its journal (which reads as no lines when it has gone meanwhile)."""
        versions = self._version_paths(session_id)
        return versions[-1][1] if versions else self.folder / f"{session_id}.jsonl"

    def _folded(self, path: Path) -> tuple[str, ...]:
        """The casefolded text of each of a journal's lines, kept while the file is unchanged: a search types a
        letter at a time (folding every line of a year of sessions again took ~0.1 s per keystroke). Only the
        strings are kept, not the parsed lines: a year of hour-long sessions held ~80 MB of line objects for
        search alone, and the garbage collector's full passes over them stalled the window (74-454 ms)."""
        key = _stamp(path)
        cached = self._folds.get(path)
        if cached is not None and key is not None and cached[0] == key:
            return cached[1]
        parsed = self._cache.get(path)
        data = parsed[1] if parsed is not None and key is not None and parsed[0] == key else read_journal_data(path)
        folded = tuple(line.text.casefold() for line in data.lines)
        self._folds[path] = (key, folded)
        return folded

    def _meta(self, session_id: str) -> dict[str, Any]:
        try:
            with open(self.folder / session_id / "meta.json", encoding="utf-8", errors="replace") as f:
                meta = json.load(f)
        except (OSError, ValueError, RecursionError):
            return {}
        return meta if isinstance(meta, dict) else {}

    def _title(self, session_id: str) -> str:
        """The title the user gave the session ("" when none)."""
        title = self._meta(session_id).get("title")
        return title if isinstance(title, str) else ""

    def _version_paths(self, session_id: str) -> list[tuple[int, Path]]:
        try:
            names = [p.name for p in (self.folder / session_id).iterdir()]
        except OSError:
            return []
        found = [(int(m[1]), self.folder / session_id / n) for n in names if (m := VERSION_FILE.match(n))]
        return sorted((n, p) for n, p in found if n >= 2)

    def _recorded_order(self, session_id: str) -> tuple[int, int, float, Any]:
        """A key that sorts sessions in the order they were recorded: by the start record's ``seq`` (journals
        that have one were recorded after those without), then by when they started, then by id."""
        start = read_start(self.folder / f"{session_id}.jsonl")
        seq = start.get("seq")
        counted = isinstance(seq, int) and not isinstance(seq, bool)
        return (1 if counted else 0, seq if counted else 0, self._start_epoch(session_id, start), _order(session_id))

    def _start_epoch(self, session_id: str, start: dict[str, Any] | None = None) -> float:
        """When a session started (seconds since the epoch): its start record's ``epoch``, else its local ``time``
        (or id) read in the current time zone; inf when unknown. ``start``: its start record, when read already."""
        start = read_start(self.folder / f"{session_id}.jsonl") if start is None else start
        epoch = finite_seconds(start.get("epoch"))
        if epoch is not None:
            return epoch
        started = _started(start.get("time"), session_id)
        try:
            return time.mktime(time.strptime(started[:19], "%Y-%m-%dT%H:%M:%S"))
        except (ValueError, OverflowError):
            return float("inf")  # unknown age: never too old

    def _marks(self, session_id: str) -> list[tuple[Path, bool]]:
        """The re-transcription marks in a session's folder (``working_on``), each with whether the process that
        wrote it still runs (an unreadable mark: no)."""
        try:
            paths = [p for p in (self.folder / session_id).iterdir() if BUSY_MARK.match(p.name)]
        except OSError:
            return []
        out = []
        for path in paths:
            try:
                mark = json.loads(path.read_bytes())
            except OSError:  # removed meanwhile: its run has ended
                continue
            except (ValueError, RecursionError):
                mark = None
            out.append((path, isinstance(mark, dict) and recorder_alive(mark) is True))
        return out

    def _clear_dead_marks(self, session_id: str) -> None:
        """Remove the marks of re-transcriptions whose process has ended (killed before it could). Never raises."""
        for path, alive in self._marks(session_id):
            if not alive:
                with contextlib.suppress(OSError):
                    path.unlink()

    def _remove_leftovers(self, session_id: str, hidden: Path) -> None:
        folder = self.folder / session_id
        try:
            if folder.is_dir() and not folder.is_symlink():
                shutil.rmtree(folder)
            if hidden.is_dir() and not hidden.is_symlink():  # a folder stood where the journal should be
                shutil.rmtree(hidden)
            else:
                hidden.unlink()
        except OSError:
            log.warning("could not remove the rest of session %s", session_id, exc_info=True)

    def _repair_folder(self, session_id: str, folder: Path) -> None:
        for entry in folder.iterdir():
            if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                entry.unlink()
        self._clear_dead_marks(session_id)  # left by re-transcriptions that were killed
        if (folder / session_audio.RAW_NAME).is_file() and self._read(self.folder / f"{session_id}.jsonl").finished:
            self.finish_audio(session_id)
