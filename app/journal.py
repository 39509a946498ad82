"""The session journal: committed lines written to disk as they arrive, so a crash loses nothing.

One JSONL file per session in the platformdirs user data folder (``sessions/``). The first record is
``{"type": "start", ...}``, then one ``{"type": "line", "text", "start", "end"}`` per committed line (each
flushed and fsync'd), and ``{"type": "end"}`` when the session ends cleanly. A journal without the end
record is an unfinished session: ``find_unfinished`` offers it for recovery on the next start.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from engine.events import Line

log = logging.getLogger(__name__)

KEEP_JOURNALS = 50


@dataclass(frozen=True)
class RecoveredSession:
    """An unfinished journal: where it is, when it started, and the lines it holds."""

    path: Path
    started: str  # ISO 8601 local time
    lines: tuple[Line, ...]
    info: dict[str, Any]


class Journal:
    """Appends a session's committed lines to ``<folder>/<timestamp>.jsonl``. Not thread-safe: use it
    from the GUI thread only. Never raises: a failure to create or write the file is logged, ``failed``
    holds one sentence for the user, and further writes are skipped."""

    def __init__(self, folder: str | Path, info: dict[str, Any] | None = None) -> None:
        folder = Path(folder)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = folder / f"{stamp}.jsonl"
        n = 1
        while path.exists():
            n += 1
            path = folder / f"{stamp}-{n}.jsonl"
        self.path = path
        self.failed: str | None = None
        self._file: TextIO | None = None
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "x", encoding="utf-8")  # kept open for the whole session
        except OSError as exc:
            self._fail(exc)
            return
        self._write({"type": "start", "time": time.strftime("%Y-%m-%dT%H:%M:%S"), **(info or {})})

    def add(self, line: Line) -> None:
        """Record one committed line (flushed and fsync'd before returning)."""
        self._write({"type": "line", "text": line.text, "start": line.start, "end": line.end})

    def close(self) -> None:
        """Write the end record and close; the session then counts as finished."""
        if self._file is None:
            return
        self._write({"type": "end", "time": time.strftime("%Y-%m-%dT%H:%M:%S")})
        try:
            self._file.close()
        except OSError:
            pass
        self._file = None

    def _write(self, record: dict[str, Any]) -> None:
        if self._file is None:
            return
        try:
            self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            self._fail(exc)

    def _fail(self, exc: OSError) -> None:
        log.error("journal write failed: %s", exc)
        if self.failed is None:
            self.failed = f"The session backup could not be written ({exc.strerror or exc})."
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None


def read_journal(path: str | Path) -> tuple[dict[str, Any], list[Line], bool]:
    """Parse a journal: (start record, lines, finished). A torn last line (crash mid-write) is ignored."""
    info: dict[str, Any] = {}
    lines: list[Line] = []
    finished = False
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            try:
                record = json.loads(raw)
            except json.JSONDecodeError:
                continue
            kind = record.get("type")
            if kind == "start":
                info = record
            elif kind == "line":
                try:
                    lines.append(Line(str(record["text"]), float(record["start"]), float(record["end"])))
                except (KeyError, TypeError, ValueError):
                    continue
            elif kind == "end":
                finished = True
    return info, lines, finished


def find_unfinished(folder: str | Path) -> RecoveredSession | None:
    """The most recent journal in ``folder`` without an end record that holds at least one line."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    for path in sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            info, lines, finished = read_journal(path)
        except OSError:
            continue
        if finished:
            continue
        if lines:
            return RecoveredSession(path, str(info.get("time", "")), tuple(lines), info)
        mark_finished(path, "empty")
    return None


def mark_finished(path: str | Path, reason: str) -> None:
    """Append an end record to an unfinished journal (after recovering or discarding it)."""
    try:
        torn = False
        with open(path, "rb") as f:
            if f.seek(0, os.SEEK_END) > 0:
                f.seek(-1, os.SEEK_END)
                torn = f.read(1) != b"\n"
        with open(path, "a", encoding="utf-8") as f:
            f.write(("\n" if torn else "") + json.dumps({"type": "end", "reason": reason}) + "\n")
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        log.warning("could not mark %s finished", path, exc_info=True)


def prune(folder: str | Path, keep: int = KEEP_JOURNALS) -> None:
    """Delete all but the ``keep`` newest finished journals."""
    folder = Path(folder)
    paths = sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True)
    for path in paths[keep:]:
        try:
            if read_journal(path)[2]:
                path.unlink()
        except OSError:
            continue
