"""Kept sessions for the re-transcription tests: a journal left unfinished with raw kept audio, and a recorder
process that is gone."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from app.session_store import SessionStore
from engine.events import Line
from tests.app import fake_engine


def dead_pid() -> int:
    """The pid of a process that has ended (and been waited for)."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    return gone.pid


def unfinished_with_audio(folder, pid=None, drop_pid=False):
    """A session that never got its end record (recording, or its app died), with raw kept audio."""
    store = SessionStore(folder)
    journal = store.create({"source": "microphone"})
    journal.add(Line("before the crash", 0.0, 1.0))
    sid = journal.session_id
    raw = store.recording_path(sid)
    audio = fake_engine.speechlike([(0.5, 0.5), (0.5, 0.5)])
    raw.write_bytes((np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes())
    path = store.journal_path(sid)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    if drop_pid:
        del records[0]["pid"]
    elif pid is not None:
        records[0]["pid"] = pid
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return store, sid, journal
