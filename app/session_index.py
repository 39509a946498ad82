"""What the sessions list shows about each journal file, kept in ``index.json`` so that listing needs no parsing.

Why: the Sessions window and ``livecap --sessions`` list every kept session, and the list needs only a few
fields of each journal (its start record's model, time, source and input, the line count, the first words, the
duration, whether it ended); parsing every line of every journal for them took 1.2-1.4 s for a year of
hour-long sessions (300 journals of 800 lines, ~3.6 us per line) at each first open.

Contract:
- ``Brief.of(data)`` is computed from a full read (``app.journal.JournalData``); ``SessionStore.summary`` builds
  the same ``SessionSummary`` from briefs as from full reads (tested).
- An entry is used only while its file's size and modification time are the ones it was made from: journals
  are only appended to and versions written once (atomically), so either changes whenever the content does.
- ``index.json`` is a cache, never the truth: missing, damaged, of another format or unwritable, it is ignored
  and (where it can be) rewritten. Only finished journals are stored: an unfinished one is most likely the
  session in progress, which grows line by line (the index would be rewritten at every listing), and a read
  that failed (``JournalData.error``) is tried again next time.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from app.journal import JournalData, finite_seconds

log = logging.getLogger(__name__)

NAME = "index.json"
FORMAT = 1  # entries of an older Brief (without bits and delay_ms) fail _brief and are read again
FIRST_WORDS = 80  # characters of a session's first words in the list


def _text(info: dict[str, Any], key: str) -> str:
    value = info.get(key)
    return value if isinstance(value, str) else ""


def _count(info: dict[str, Any], key: str) -> int:
    value = info.get(key)
    return value if type(value) is int and value > 0 else 0


def source_of(info: dict[str, Any]) -> str:
    """Where a session's audio came from, by its start record ("unknown" without one)."""
    kind = _text(info, "source")
    if kind:
        return kind
    if not info:
        return "unknown"
    return "file" if "(replay" in _text(info, "input") else "microphone"


@dataclass(frozen=True)
class Brief:
    """What the sessions list takes from one journal file (the live journal or a version)."""

    model: str  # the start record's model ("" when unknown)
    bits: int  # the bits of its 8/4-bit weights (0: as stored in float, or unknown)
    delay_ms: int  # Voxtral's delay (0: none, or unknown)
    time: str  # the start record's time ("" when unknown)
    source: str
    input: str  # the latest input description
    lines: int
    first_words: str
    duration: float  # seconds: the end record's audio_s, else the last line's end
    finished: bool
    unreadable: int

    @classmethod
    def of(cls, data: JournalData) -> Brief:
        """The brief of a journal read in full."""
        audio_s = finite_seconds(data.end.get("audio_s"))
        if audio_s is not None and audio_s >= 0:
            duration = audio_s
        else:
            duration = max((line.end for line in data.lines), default=0.0)
        text = " ".join(" ".join(line.text.split()) for line in data.lines[:6]).strip()
        first = text if len(text) <= FIRST_WORDS else text[: FIRST_WORDS - 1].rstrip() + "\u2026"
        info = data.info
        return cls(
            _text(info, "model"),
            _count(info, "bits"),
            _count(info, "delay_ms"),
            _text(info, "time"),
            source_of(info),
            _text(info, "input"),
            len(data.lines),
            first,
            duration,
            data.finished,
            data.unreadable,
        )


_TYPES = {f.name: {"str": str, "int": int, "float": float, "bool": bool}[f.type] for f in fields(Brief)}


def _brief(obj: Any) -> Brief | None:
    """A Brief from its JSON form, or None when it is not exactly one."""
    if not isinstance(obj, dict) or set(obj) != set(_TYPES):
        return None
    for key, kind in _TYPES.items():
        value = obj[key]
        ok = finite_seconds(value) is not None if kind is float else type(value) is kind
        if not ok:
            return None
    return Brief(**{k: float(v) if _TYPES[k] is float else v for k, v in obj.items()})


class SummaryIndex:
    """The briefs of a sessions folder's journal files, by file, checked against each file's size and mtime."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._entries: dict[str, tuple[int, int, Brief]] | None = None  # loaded on first use
        self._seen: set[str] = set()
        self._dirty = False

    def brief(self, path: Path, read: Callable[[Path], JournalData]) -> Brief:
        """The brief of journal file ``path`` (in the folder): from the index while the file is unchanged,
        else from ``read(path)`` (a full read), recorded for ``save``."""
        entries = self._load()
        name = path.relative_to(self.folder).as_posix()
        try:
            st = path.stat()
            key = (st.st_mtime_ns, st.st_size)
        except OSError:
            return Brief.of(read(path))
        self._seen.add(name)
        entry = entries.get(name)
        if entry is not None and entry[:2] == key:
            return entry[2]
        data = read(path)
        brief = Brief.of(data)
        if data.error is None and brief.finished:  # an unfinished journal is likely growing: the session running
            entries[name] = (*key, brief)
            self._dirty = True
        return brief

    def save(self) -> None:
        """Write the index (only the files looked at since the last save, so deleted sessions drop out) when
        something changed. Never raises: the index only saves time."""
        from app.session_store import write_json_atomic

        entries, seen = self._load(), self._seen
        self._seen = set()
        gone = set(entries) - seen
        if not (self._dirty or gone):
            return
        for name in gone:
            del entries[name]
        out = {"format": FORMAT, "files": {n: [m, s, asdict(b)] for n, (m, s, b) in sorted(entries.items())}}
        try:
            write_json_atomic(self.folder / NAME, out)
            self._dirty = False
        except OSError as exc:
            log.info("sessions index not written: %s", exc)

    def _load(self) -> dict[str, tuple[int, int, Brief]]:
        if self._entries is not None:
            return self._entries
        self._entries = {}
        try:
            with open(self.folder / NAME, encoding="utf-8") as f:
                raw = json.load(f)
        except (OSError, ValueError, RecursionError):
            return self._entries
        files = raw.get("files") if isinstance(raw, dict) and raw.get("format") == FORMAT else None
        if not isinstance(files, dict):
            return self._entries
        for name, entry in files.items():
            if isinstance(entry, list) and len(entry) == 3 and all(type(v) is int for v in entry[:2]):
                brief = _brief(entry[2])
                if brief is not None:
                    self._entries[name] = (entry[0], entry[1], brief)
        return self._entries
