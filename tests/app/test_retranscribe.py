"""Re-transcription of a kept session: refused while it is being recorded, possible once its recorder is gone."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from app import session_audio
from app.retranscribe import retranscribe
from app.session_store import SessionStore
from engine.errors import UsageError
from engine.events import Line
from tests.app import fake_engine


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


def test_a_session_this_process_is_recording_is_refused(tmp_path):
    store, sid, journal = unfinished_with_audio(tmp_path)
    with pytest.raises(UsageError, match="still being recorded"):
        retranscribe(store, sid, "fake-moonshine", loader=fake_engine.load_model)
    assert store.summary(sid).versions[-1].number == 1
    journal.close()


def test_a_session_whose_app_died_is_retranscribed_from_its_kept_audio(tmp_path):
    """kill -9 of a replay with "Keep audio": its raw audio stayed, and re-transcribing it said it was still
    being recorded, with no way to end it headless."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    store, sid, _ = unfinished_with_audio(tmp_path, pid=gone.pid)
    assert session_audio.RAW_NAME == store.audio_file(sid).name
    version = retranscribe(store, sid, "fake-moonshine", loader=fake_engine.load_model)
    assert version == 2 and store.lines(sid, 2)  # the fake engine's lines for the kept audio
    assert store.lines(sid, 1) == (Line("before the crash", 0.0, 1.0),)


def test_an_older_journal_that_cannot_tell_is_refused(tmp_path):
    store, sid, _ = unfinished_with_audio(tmp_path, drop_pid=True)
    with pytest.raises(UsageError, match="still being recorded"):
        retranscribe(store, sid, "fake-moonshine", loader=fake_engine.load_model)
