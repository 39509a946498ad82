"""Re-transcription of a kept session: refused while it is being recorded, possible once its recorder is gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from app import session_audio
from app.retranscribe import retranscribe
from app.session_store import Retention, SessionStore
from engine.errors import ExportError, UsageError
from engine.events import Line
from tests.app import fake_engine
from tests.app.kept_sessions import dead_pid, unfinished_with_audio


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


def test_retention_and_delete_leave_a_session_being_retranscribed_alone(tmp_path):
    """ "Keep the last N sessions" ran when a new session ended and deleted the oldest one while another process
    re-transcribed it: the new version was lost with a 'no such session' error after the whole run."""
    store, sid, journal = unfinished_with_audio(tmp_path)
    journal.close(audio_s=1.0)
    newer = store.create({"source": "microphone"})
    newer.close(audio_s=1.0)
    seen = {}

    def loader(source, **kw):
        other = SessionStore(tmp_path)  # as another process sees the folder
        seen["busy"] = other.busy(sid)
        seen["doomed"] = other.would_delete(Retention("sessions", 1))
        with pytest.raises(ExportError, match="being re-transcribed"):
            other.delete(sid)
        return fake_engine.load_model(source, **kw)

    assert retranscribe(store, sid, "fake-moonshine", loader=loader) == 2
    assert seen == {"busy": True, "doomed": []}
    assert not store.busy(sid) and sid in store.ids()


def test_a_killed_retranscription_leaves_no_lasting_mark(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    store, sid, _ = unfinished_with_audio(tmp_path, pid=gone.pid)
    mark = tmp_path / sid / "retranscribing.json"
    mark.write_text(json.dumps({"pid": gone.pid, "epoch": 1.0}))
    assert not store.busy(sid)
    store.repair()
    assert not mark.exists()
    store.delete(sid)
    assert sid not in store.ids()


def test_kept_audio_shorter_than_the_session_is_said(tmp_path):
    """The disk filled while the audio was kept: 3 s of a 60 s session, and "Re-transcribe" made a 2-line version,
    which became the one exported, without a word (found in QA)."""
    store, sid, journal = unfinished_with_audio(tmp_path)
    kept = len(fake_engine.speechlike([(0.5, 0.5), (0.5, 0.5)])) / 16000
    journal.close(audio_s=60.0)
    said = []
    assert retranscribe(store, sid, "fake-moonshine", loader=fake_engine.load_model, warn=said.append) == 2
    assert said == [
        f"The kept audio holds {kept:.1f} s of the session's 60.0 s (the disk may have filled while it was "
        "recorded); the new version covers only that part."
    ]
    store2, sid2, journal2 = unfinished_with_audio(tmp_path / "whole")
    journal2.close(audio_s=kept)
    assert retranscribe(store2, sid2, "fake-moonshine", loader=fake_engine.load_model, warn=said.append) == 2
    assert len(said) == 1  # a whole recording: nothing to say


def silent_session(folder):
    """A finished session ("before the crash") whose kept audio is silence: the model finds no speech in it."""
    store, sid, journal = unfinished_with_audio(folder)
    journal.close(audio_s=1.0)
    store.recording_path(sid).write_bytes(bytes(2 * 16000))  # 1 s of zeros (s16le)
    return store, sid


def test_a_retranscription_that_finds_no_speech_stores_no_version(tmp_path):
    """Silent kept audio (or a model of another language) stored an empty version 2, which became the latest: the
    list showed 0 lines, the search no longer found the live text, and the default export had "no captions"."""
    store, sid = silent_session(tmp_path)
    with pytest.raises(ExportError) as err:
        retranscribe(store, sid, "fake-moonshine", loader=fake_engine.load_model)
    assert str(err.value) == "The re-transcription found no speech; the session keeps its transcript."
    summary = SessionStore(tmp_path).summary(sid)
    assert [v.number for v in summary.versions] == [1] and summary.lines == 1
    assert store.search("crash") == {sid: 1} and store.lines(sid) == (Line("before the crash", 0.0, 1.0),)
    assert not store.busy(sid) and sorted(p.name for p in (tmp_path / sid).iterdir()) == ["audio.pcm"]


def test_two_retranscriptions_of_one_session_each_keep_it_busy(tmp_path):
    """Two re-transcriptions of one session (the window's and ``livecap --retranscribe``) shared one mark: the first
    to end removed it, and Delete or retention then removed the session under the other (its version lost)."""
    store, sid, journal = unfinished_with_audio(tmp_path)
    journal.close(audio_s=1.0)
    other = SessionStore(tmp_path)  # as another process sees the folder
    with store.working_on(sid):
        with store.working_on(sid):
            assert other.busy(sid)
        assert other.busy(sid)  # the first ended: the second still runs
        assert other.would_delete(Retention("days", 1), now=4e9) == []
        with pytest.raises(ExportError, match="being re-transcribed"):
            other.delete(sid)
        assert store.add_version(sid, [Line("new take", 0.0, 1.0)], {"model": "m"}) == 2
    assert not other.busy(sid) and not list((tmp_path / sid).glob("retranscribing*"))
    other.delete(sid)
    assert sid not in other.ids()


def test_marks_of_retranscriptions_that_were_killed_are_ignored_and_removed(tmp_path):
    store, sid, journal = unfinished_with_audio(tmp_path)
    journal.close(audio_s=1.0)
    dead = {"pid": dead_pid(), "epoch": 1.0, "started": 1.0}
    for name in ("retranscribing-1-ab.json", "retranscribing-2-cd.json"):
        (tmp_path / sid / name).write_text(json.dumps(dead))
    (tmp_path / sid / "retranscribing-3-ef.json").write_text("{torn")
    assert not store.busy(sid)
    with store.working_on(sid):  # a new run removes them
        assert [p.name.split("-")[1] for p in (tmp_path / sid).glob("retranscribing*")] == [str(os.getpid())]
        assert store.busy(sid)
    (tmp_path / sid / "retranscribing-1-ab.json").write_text(json.dumps(dead))
    store.repair()  # and so does the app's start
    assert not list((tmp_path / sid).glob("retranscribing*"))
