"""Corrupt session journals of every shape: reading keeps what it can, counts what it cannot, and never
stops the app (issue #12, defect 1: valid JSON that is not an object aborted every start with rc 134)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.journal import find_unfinished, read_journal_data
from app.session_store import Retention, SessionStore
from engine.events import Line
from tests.helpers import REPO, livecap_env, run_livecap

GOOD = [
    {"type": "start", "time": "2024-05-01T10:00:00", "model": "m", "input": "Mic"},
    {"type": "line", "text": "first kept line", "start": 0.5, "end": 1.5},
    {"type": "line", "text": "second kept line", "start": 2.0, "end": 3.0},
]
KEPT = (Line("first kept line", 0.5, 1.5), Line("second kept line", 2.0, 3.0))


def jsonl(records) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def good_with(bad: bytes, at_end: bool = False) -> bytes:
    """The good journal with ``bad`` (one record) between its two lines, or as a torn last line."""
    head, tail = jsonl(GOOD[:2]), jsonl(GOOD[2:])
    return head + tail + bad if at_end else head + bad + b"\n" + tail


SHAPES = {
    "truncated last line": (good_with(b'{"type": "line", "text": "tor', at_end=True), 1),
    "binary garbage": (good_with(bytes(b for b in range(256) if b != 10) * 4), 1),
    "NUL bytes": (good_with(b"\x00" * 64), 1),
    "list": (good_with(b"[1]"), 1),
    "number": (good_with(b"42"), 1),
    "null": (good_with(b"null"), 1),
    "string": (good_with(b'"line"'), 1),
    "object without type": (good_with(b'{"text": "x"}'), 1),
    "type not a string": (good_with(b'{"type": ["line"], "text": "x", "start": 0, "end": 1}'), 1),
    "text not a string": (good_with(b'{"type": "line", "text": {"a": 1}, "start": 0, "end": 1}'), 1),
    "start is a string": (good_with(b'{"type": "line", "text": "x", "start": "0", "end": 1}'), 1),
    "start is a bool": (good_with(b'{"type": "line", "text": "x", "start": true, "end": 1}'), 1),
    "end is NaN": (good_with(b'{"type": "line", "text": "x", "start": 0, "end": NaN}'), 1),
    "start is Infinity": (good_with(b'{"type": "line", "text": "x", "start": Infinity, "end": 1}'), 1),
    "missing fields": (good_with(b'{"type": "line"}'), 1),
    "deeply nested": (good_with(b"[" * 100000 + b"]" * 100000), 1),
    "huge line": (good_with(b'{"type": "line", "text": "' + b"x" * (3 << 20) + b'", "start": 0, "end": 1}'), 1),
    "start record not an object": (b"[]\n" + jsonl(GOOD[1:]), 1),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_damaged_journal_keeps_what_it_can(tmp_path, shape):
    content, unreadable = SHAPES[shape]
    path = tmp_path / "20240501-100000.jsonl"
    path.write_bytes(content)
    data = read_journal_data(path)
    assert data.lines == KEPT
    assert data.unreadable == unreadable
    assert not data.finished and data.error is None
    rec = find_unfinished(tmp_path)  # what the app does at start-up
    assert rec is not None and rec.lines == KEPT and rec.unreadable == unreadable
    summary = SessionStore(tmp_path).summary("20240501-100000")
    assert summary.lines == 2 and summary.unreadable == unreadable and summary.first_words.startswith("first kept")


def test_lone_surrogate_text_is_kept_and_exportable(tmp_path):
    path = tmp_path / "20240501-100000.jsonl"
    path.write_bytes(jsonl(GOOD) + b'{"type": "line", "text": "bad \\ud800 char", "start": 4, "end": 5}\n')
    store = SessionStore(tmp_path)
    assert store.lines("20240501-100000")[-1].text == "bad ? char"
    store.export("20240501-100000", tmp_path / "out.srt")
    assert "bad ? char" in (tmp_path / "out.srt").read_text(encoding="utf-8")


def test_empty_file(tmp_path):
    path = tmp_path / "20240501-100000.jsonl"
    path.write_bytes(b"")
    data = read_journal_data(path)
    assert data.lines == () and data.unreadable == 0 and data.error is None
    assert find_unfinished(tmp_path) is None
    assert SessionStore(tmp_path).summary("20240501-100000").lines == 0


def test_folder_where_a_file_should_be(tmp_path):
    (tmp_path / "20240501-100000.jsonl").mkdir()
    (tmp_path / "20240501-110000.jsonl").write_bytes(jsonl(GOOD))
    data = read_journal_data(tmp_path / "20240501-100000.jsonl")
    assert data.error is not None and data.lines == ()
    rec = find_unfinished(tmp_path)
    assert rec is not None and rec.lines == KEPT  # the readable one is still found
    store = SessionStore(tmp_path)
    assert [s.id for s in store.list()] == ["20240501-110000", "20240501-100000"]
    assert store.apply_retention(Retention("sessions", 1)) == []  # unfinished and unreadable: kept


def test_fifo_where_a_file_should_be_does_not_hang(tmp_path):
    os.mkfifo(tmp_path / "20240501-100000.jsonl")
    data = read_journal_data(tmp_path / "20240501-100000.jsonl")
    assert data.error is not None
    assert find_unfinished(tmp_path) is None


def test_unreadable_permissions(tmp_path, monkeypatch):
    path = tmp_path / "20240501-100000.jsonl"
    path.write_bytes(jsonl(GOOD))
    if os.geteuid() != 0:
        path.chmod(0)
    else:  # root reads anything: make the OS refuse this one file instead
        import builtins

        real_open = builtins.open

        def refusing_open(file, *args, **kwargs):
            if Path(file) == path:
                raise PermissionError(13, "Permission denied", str(file))
            return real_open(file, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", refusing_open)
    data = read_journal_data(path)
    assert data.error is not None and "Permission denied" in data.error
    assert find_unfinished(tmp_path) is None
    summary = SessionStore(tmp_path).summary("20240501-100000")
    assert summary.lines == 0 and summary.started == "2024-05-01T10:00:00"


def _journals(folder: Path, bad: bytes, count: int = 55) -> None:
    """``count`` finished journals, the oldest ones damaged with ``bad`` as their only content."""
    for i in range(count):
        name = f"2024{(i // 28) + 1:02d}{(i % 28) + 1:02d}-100000.jsonl"
        content = bad + b"\n" if i < 3 else jsonl(GOOD) + b'{"type": "end"}\n'
        (folder / name).write_bytes(content)
        t = 1_700_000_000 + i * 60
        os.utime(folder / name, (t, t))


@pytest.mark.parametrize("bad", [b"[1]", b"42", b"null"])
def test_replay_run_survives_non_object_journals(tmp_path, bad):
    """The regression test of defect 1 (the start-up clean-up): rc 134 before the fix."""
    from tests.app import fake_engine

    folder = tmp_path / "data" / "livecap" / "sessions"
    folder.mkdir(parents=True)
    _journals(folder, bad)
    audio = fake_engine.speechlike([(0.8, 0.5)])
    wav = fake_engine.write_wav(tmp_path / "speech.wav", audio)
    out = tmp_path / "out.txt"
    proc = run_livecap(
        tmp_path, "--input", str(wav), "--model", "fake", "--speed", "8", "--quit-at-end", "--save-transcript", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    expected = [line.text for line in fake_engine.transcribe(audio)]
    assert expected and out.read_text(encoding="utf-8").split("\n")[:-1] == expected
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("bad", [b"[1]", b"42", b"null"])
def test_gui_start_survives_a_non_object_journal(tmp_path, bad):
    """The regression test of defect 1 (every start): the newest journal is unfinished and holds a
    non-object line; the app starts, offers the readable lines, and quits cleanly on Ctrl+C (rc 0)."""
    folder = tmp_path / "data" / "livecap" / "sessions"
    folder.mkdir(parents=True)
    (folder / "20240501-100000.jsonl").write_bytes(good_with(bad))
    cmd = [sys.executable, "-m", "app.main", "--settings", str(tmp_path / "s.ini")]
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=livecap_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        time.sleep(4)
        assert proc.poll() is None, proc.communicate()[1]
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err


def test_recovery_banner_says_how_many_lines_were_unreadable(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    from app.controller import SessionController
    from app.main_window import MainWindow
    from app.settings import Settings
    from tests.app import fake_engine
    from tests.app.fake_sounddevice import FakeSoundDevice, make_device

    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "20240501-100000.jsonl").write_bytes(good_with(b"[1]") + b"null\n")
    controller = SessionController(loader=fake_engine.load_model, journal_dir=folder)
    try:
        window = MainWindow(
            controller, Settings(tmp_path / "s.ini"), sounddevice=FakeSoundDevice([make_device("Mic", 16000.0)])
        )
        qtbot.addWidget(window)
        rec = window.offer_recovery()
        assert rec is not None and rec.lines == KEPT and rec.unreadable == 2
        text = window.banner.text()
        assert "2 lines" in text and "2 unreadable lines were skipped" in text
    finally:
        controller.shutdown(3000)


@pytest.mark.parametrize("shape", ["list", "binary garbage", "huge line", "folder"])
def test_rename_export_search_delete_a_damaged_session(tmp_path, shape):
    sid = "20240501-100000"
    path = tmp_path / f"{sid}.jsonl"
    if shape == "folder":
        path.mkdir()
    else:
        path.write_bytes(SHAPES[shape][0] + b'{"type": "end"}\n')
    store = SessionStore(tmp_path)
    store.rename(sid, "Damaged")
    assert store.summary(sid).title == "Damaged"
    assert store.search("kept line") == ({} if shape == "folder" else {sid: 2})
    store.export(sid, tmp_path / "out.txt")
    expected = "" if shape == "folder" else "first kept line\nsecond kept line\n"
    assert (tmp_path / "out.txt").read_text() == expected
    store.delete(sid)
    store.repair()
    assert store.ids() == [] and sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
