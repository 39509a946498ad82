"""Journal: lines written (and fsync'd) as they commit; an unfinished session is offered for recovery."""

from __future__ import annotations

import json
import os

import numpy as np

from app import journal
from app.worker import SessionSpec
from engine.events import Line
from tests.app import fake_engine


def test_journal_records_lines_and_end(tmp_path):
    j = journal.Journal(tmp_path, {"model": "m"})
    j.add(Line("one", 0.0, 1.0))
    # readable (flushed) before the session ends
    info, lines, finished = journal.read_journal(j.path)
    assert info["model"] == "m" and lines == [Line("one", 0.0, 1.0)] and not finished
    j.add(Line("two", 1.0, 2.0))
    j.close()
    info, lines, finished = journal.read_journal(j.path)
    assert [line.text for line in lines] == ["one", "two"] and finished
    assert journal.find_unfinished(tmp_path) is None


def test_crash_leaves_an_unfinished_journal_that_is_recovered(tmp_path):
    j = journal.Journal(tmp_path)
    j.add(Line("kept line", 0.5, 1.5))
    j._file.write('{"type": "line", "text": "torn')  # the process died mid-write
    j._file.flush()
    rec = journal.find_unfinished(tmp_path)
    assert rec is not None and rec.lines == (Line("kept line", 0.5, 1.5),)
    journal.mark_finished(rec.path, "recovered")
    assert journal.find_unfinished(tmp_path) is None
    assert json.loads(rec.path.read_text().splitlines()[-1]) == {"type": "end", "reason": "recovered"}


def test_a_file_name_that_is_not_utf8_does_not_stop_the_journal(tmp_path):
    """An input named with bytes that are not UTF-8 (os.fsdecode's lone surrogates) made the start record unwritable:
    the journal gave up and the whole session was never saved."""
    name = b"talk\xff.wav".decode("utf-8", "surrogateescape")
    j = journal.Journal(tmp_path, {"input": f"{name} (replay)"})
    j.set_input(name)
    j.add(Line("one", 0.0, 1.0))
    j.close()
    assert j.failed is None
    info, lines, finished = journal.read_journal(j.path)
    assert info["input"] == "talk\ufffd.wav" and lines == [Line("one", 0.0, 1.0)] and finished


def test_a_session_another_livecap_is_recording_is_no_crash_to_recover(tmp_path):
    """A second livecap on the same sessions folder offered the first one's running session as a crash, and
    'Recover' cut its kept audio short and wrote an end record into the journal it was still writing."""
    import subprocess
    import sys

    from tests.helpers import REPO

    code = (
        "import sys, time\n"
        "from app.journal import Journal\n"
        "from engine.events import Line\n"
        f"j = Journal({str(tmp_path)!r}, {{'source': 'microphone'}})\n"
        "j.add(Line('still talking', 0.0, 1.0))\n"
        "print(j.session_id, flush=True)\n"
        "time.sleep(60)\n"
    )
    other = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        sid = other.stdout.readline().strip()
        assert sid and journal.find_unfinished(tmp_path) is None  # alive: being recorded, not offered
        path = tmp_path / f"{sid}.jsonl"
        assert '"type": "end"' not in path.read_text()  # and nothing written into it
    finally:
        other.kill()
        other.wait()
    rec = journal.find_unfinished(tmp_path)  # its process died: a crash, offered
    assert rec is not None and rec.path.stem == sid and rec.lines == (Line("still talking", 0.0, 1.0),)
    assert journal.find_unfinished(tmp_path, recording=[sid]) is None  # unless it is this process's own


def test_unwritable_journal_folder_is_reported_not_raised(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    j = journal.Journal(blocker / "sessions")  # a file where the folder should be
    assert j.failed is not None and j.failed.startswith("The session backup could not be written")
    j.add(Line("x", 0, 1))  # skipped, no exception
    j.close()


def test_controller_journals_as_lines_commit_and_recovers_after_crash(qtbot, loaded, journal_dir, speech):
    controller = loaded
    controller.start(SessionSpec())
    qtbot.waitUntil(lambda: len(controller.lines) >= 2, timeout=8000)
    files = list(journal_dir.glob("*.jsonl"))
    assert len(files) == 1
    _, lines, finished = journal.read_journal(files[0])
    assert [line.text for line in lines] == [line.text for line in controller.lines[: len(lines)]]
    assert len(lines) >= 2 and not finished  # written while the session runs

    # simulate a crash: a new app instance starts while the journal has no end record
    from app.controller import SessionController

    second = SessionController(loader=fake_engine.load_model, journal_dir=journal_dir)
    try:
        rec = second.pending_recovery()
        assert rec is not None and len(rec.lines) >= 2
        resets = []
        second.lines_reset.connect(lambda: resets.append(list(second.lines)))
        second.recover(rec)
        assert second.lines == list(rec.lines) and resets == [list(rec.lines)]
        assert second.pending_recovery() is None
    finally:
        second.shutdown(3000)
    with qtbot.waitSignal(controller.session_finished, timeout=5000):
        controller.stop()


def test_an_end_record_that_cannot_be_written_is_reported_not_raised(tmp_path, monkeypatch):
    """A disk that fills up just as the session ends: close() reports it in one sentence and closes the file
    (it raised AttributeError before)."""
    import errno

    j = journal.Journal(tmp_path)
    j.add(Line("kept line", 0.5, 1.5))

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(journal.os, "fsync", full)
    j.close(audio_s=1.5)
    assert j.failed == "The session backup could not be written (No space left on device)."
    assert not j.is_open
    j.close()  # again: nothing left to do


def test_start_up_reads_only_the_tails_of_finished_journals(tmp_path, monkeypatch):
    """Looking for a session to recover parsed every line of every kept session at each start (~1 s per 300
    hour-long sessions): a journal that ends with its end record is known finished from its last bytes."""
    import os

    for day in range(1, 21):
        j = journal.Journal(tmp_path, {"model": "m"})
        for i in range(50):
            j.add(Line(f"line {i} " + "words " * 20, float(i), i + 0.5))
        j.close()
        os.utime(j.path, (day * 1000.0, day * 1000.0))  # older than the unfinished one below
        j.path.rename(tmp_path / f"2026010{day:02d}-000000.jsonl")
    crashed = journal.Journal(tmp_path)
    crashed.add(Line("kept line", 0.5, 1.5))
    crashed._file.write('{"type": "end"')  # died while writing its end record: not finished
    crashed._file.flush()
    big_end = tmp_path / "20250101-000000.jsonl"  # an end record longer than the tail read: read in full
    big_end.write_text(
        json.dumps({"type": "line", "text": "old", "start": 0, "end": 1})
        + "\n"
        + json.dumps({"type": "end", "note": "x" * 20000})
        + "\n"
    )
    os.utime(big_end, (1.0, 1.0))
    read = []
    original = journal.read_journal_data
    monkeypatch.setattr(journal, "read_journal_data", lambda p: read.append(p) or original(p))
    rec = journal.find_unfinished(tmp_path)
    assert rec is not None and rec.lines == (Line("kept line", 0.5, 1.5),) and read == [crashed.path]
    journal.mark_finished(rec.path, "recovered")
    read.clear()
    assert journal.find_unfinished(tmp_path) is None and read == [big_end]  # every other one by its tail
    assert journal.ends_finished(crashed.path) and not journal.ends_finished(big_end)
    assert not journal.ends_finished(tmp_path) and not journal.ends_finished(tmp_path / "missing.jsonl")


def test_read_start_gives_the_first_start_record_as_a_full_read_does(tmp_path):
    good = journal.Journal(tmp_path, {"source": "microphone"})
    good.add(Line("hello", 0.0, 1.0))
    good.close()
    assert journal.read_start(good.path) == journal.read_journal_data(good.path).info
    damaged = tmp_path / "20260101-000000.jsonl"  # garbage and a line before the start record
    damaged.write_bytes(
        b"\x00\xff garbage\n"
        + json.dumps({"type": "line", "text": "x", "start": 0, "end": 1}).encode()
        + b"\n"
        + json.dumps({"type": "start", "time": "2026-01-01T00:00:00"}).encode()
        + b"\n"
        + json.dumps({"type": "start", "time": "later"}).encode()
        + b"\n"
    )
    assert (
        journal.read_start(damaged)
        == journal.read_journal_data(damaged).info
        == {
            "type": "start",
            "time": "2026-01-01T00:00:00",
        }
    )
    none = tmp_path / "20260102-000000.jsonl"
    none.write_text(json.dumps({"type": "line", "text": "x", "start": 0, "end": 1}) + "\n")
    assert journal.read_start(none) == {} and journal.read_start(tmp_path) == {}
    assert journal.read_start(tmp_path / "missing.jsonl") == {}


def test_a_lines_words_tokens_and_span_come_back_as_written_and_damaged_ones_are_dropped(tmp_path):
    from engine.events import Word

    line = Line("hello there", 1.0, 2.5, (17, 4, 99), (Word("hello", 1.0, 1.4), Word("there", 1.6, 2.5)), (0.8, 2.9))
    j = journal.Journal(tmp_path, {"source": "microphone"})
    j.add(line)
    j.close()
    path = tmp_path / f"{j.session_id}.jsonl"
    assert journal.read_journal_data(path).lines == (line,)
    records = [json.loads(r) for r in path.read_text().splitlines()]
    records[1]["words"] = [["hello", 1.0, "soon"], ["there", 1.6, 2.5]]  # damaged: the words go, the line stays
    records[1]["tokens"] = [1, "x"]
    records[1]["span"] = [float("inf")]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    data = journal.read_journal_data(path)
    assert data.lines == (Line("hello there", 1.0, 2.5),) and data.unreadable == 0
    for words in ([5], [None, ["there", 1.6, 2.5]], "hello"):  # not lists of lists: read, never raised
        records[1]["words"] = words
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        assert journal.read_journal_data(path).lines == (Line("hello there", 1.0, 2.5),)


def test_another_livecap_taking_the_same_id_at_the_same_moment_moves_this_one_to_the_next(tmp_path, monkeypatch):
    """Two livecaps on one sessions folder starting in the same second: both found the id free, the second open
    failed with 'File exists' and that session was not kept at all (19 of 120 tries in QA)."""
    import builtins

    real_open = builtins.open
    taken = []

    def other_livecap_first(path, mode="r", *args, **kwargs):
        if mode.startswith("x") and not taken:  # the other process creates the file between the check and this open
            taken.append(path)
            real_open(path, "w").close()
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(journal, "open", other_livecap_first, raising=False)
    j = journal.Journal(tmp_path, {"source": "microphone"})
    j.add(Line("kept", 0.0, 1.0))
    j.close()
    assert j.failed is None and j.path != taken[0] and j.session_id.startswith(taken[0].stem)
    assert journal.read_journal_data(j.path).lines == (Line("kept", 0.0, 1.0),)


def test_a_recorder_that_ended_as_a_zombie_is_gone_and_a_clock_set_forward_does_not_end_one(tmp_path):
    """A livecap killed by a parent that had not collected it yet (a zombie) counted as still recording: its lines
    were not offered and re-transcribing said "still being recorded"; and a clock set forward after the start made a
    running recorder look gone, so a second livecap offered its session for recovery (found in QA)."""
    import subprocess
    import sys
    import time

    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    record = {"pid": child.pid, "epoch": time.time(), "started": journal.since_boot(child.pid)}
    assert journal.recorder_alive(record) is True
    child.stdin.close()
    deadline = time.monotonic() + 10
    import psutil

    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.02)  # ended, not yet waited for
    assert journal.recorder_alive(record) is False
    child.wait()

    me = {"pid": os.getpid(), "started": journal.since_boot(os.getpid())}
    assert journal.recorder_alive({**me, "epoch": time.time() - 3600}) is True  # the clock went an hour forward
    assert journal.recorder_alive({**me, "started": me["started"] - 60, "epoch": time.time()}) is False  # pid reused


def test_a_journal_that_cannot_hold_even_its_start_leaves_no_empty_session(tmp_path, monkeypatch):
    """A full disk: the journal file was created but its start record could not be written, and the 0-byte file
    stayed listed in Sessions forever as an "unknown" session with no lines (found in QA)."""
    import errno

    real_fsync = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(journal.os, "fsync", full)
    j = journal.Journal(tmp_path / "sessions", {"source": "microphone"})
    monkeypatch.setattr(journal.os, "fsync", real_fsync)
    assert j.failed == "The session backup could not be written (No space left on device)."
    assert list((tmp_path / "sessions").iterdir()) == []


def test_a_journal_whose_folder_went_writes_itself_again(tmp_path):
    """The sessions folder removed mid-session (a cleaner; a drive unmounted and mounted again): every later line
    was written into the deleted file and the whole transcript was gone from disk, while the app said "Kept in
    Sessions" (found in QA). The journal writes what it held again at its place, then goes on."""
    import shutil

    folder = tmp_path / "sessions"
    j = journal.Journal(folder, {"source": "microphone"})
    j.add(Line("before", 0.0, 1.0))
    shutil.rmtree(folder)
    j.add(Line("after", 1.0, 2.0))
    j.close(audio_s=2.0)
    assert j.restored == 1 and j.failed is None
    data = journal.read_journal_data(j.path)
    assert (
        [ln.text for ln in data.lines] == ["before", "after"] and data.finished and data.info["source"] == "microphone"
    )
    moved = journal.Journal(folder)
    moved.add(Line("one", 0.0, 1.0))
    os.replace(moved.path, tmp_path / "elsewhere.jsonl")  # moved away: written again where it belongs
    moved.add(Line("two", 1.0, 2.0))
    moved.close()
    assert [ln.text for ln in journal.read_journal_data(moved.path).lines] == ["one", "two"]


def test_control_characters_in_a_journal_line_are_not_read_back(tmp_path):
    """A damaged or edited journal's NUL, ESC or BEL went on into every export (export QA: ffmpeg then dropped
    the SRT cue, a NUL cut the WebVTT text); they are not read back. Whitespace stays (the exports collapse it)."""
    from engine.events import Word

    j = journal.Journal(tmp_path, {"source": "microphone"})
    j.add(Line("ctl\x00nul\x1besc\x07bel\x7fdel\tand\nmore", 1.0, 2.0, words=(Word("ctl\x00nul", 1.0, 1.5),)))
    j.close()
    [line] = journal.read_journal_data(tmp_path / f"{j.session_id}.jsonl").lines
    assert line.text == "ctlnulescbeldel\tand\nmore" and line.words[0].text == "ctlnul"


def test_a_recovered_sessions_length_is_its_kept_audio_not_the_last_session_s(qtbot, loaded, journal_dir, speech):
    """Recovering a crashed session after another one had run this time: exports took the other session's length
    for the recovered transcript's and brought every later line back to it (a 3.6 s session left an hour's cues
    at 3.6 s), and the Sessions list gave the recovered one its last line's end (found in QA). Its length is now
    the audio it kept."""
    from app import session_audio
    from engine.transcript import format_srt

    controller = loaded
    with qtbot.waitSignal(controller.session_finished, timeout=8000):
        controller.start(SessionSpec())
        qtbot.waitUntil(lambda: len(controller.lines) >= 1, timeout=8000)
        controller.stop()
    assert controller.audio_seconds is not None and controller.audio_seconds < 10
    crashed = controller.store.create({"source": "microphone"})  # another livecap that died mid-session
    for i in range(4):
        crashed.add(Line(f"line {i}", 10.0 * i, 10.0 * i + 2.0))
    recorder = session_audio.AudioRecorder(controller.store.recording_path(crashed.session_id))
    recorder.write(np.zeros(session_audio.RATE * 45, np.float32))
    recorder._file.close()  # killed: no end record, the raw audio left as it was
    crashed._file.close()
    info = json.loads((journal_dir / f"{crashed.session_id}.jsonl").read_text().splitlines()[0])
    assert info["pid"] == os.getpid()  # this process counts as gone for its own journals
    recovered = controller.pending_recovery()
    assert recovered is not None and recovered.path.stem == crashed.session_id
    controller.recover(recovered)
    assert controller.audio_seconds == 45.0
    srt_text = format_srt(controller.lines, audio_end=controller.audio_seconds)
    assert "00:00:30,000 --> " in srt_text  # the last line where it was said
    assert controller.store.summary(crashed.session_id).duration == 45.0
    assert controller.store.audio_seconds(crashed.session_id) == 45.0


def test_a_journal_saved_with_a_byte_order_mark_keeps_its_start_record(tmp_path):
    """A journal opened and saved in an editor that writes a UTF-8 BOM lost its start record (model and source
    shown as unknown, QA): the mark is not part of the JSON."""
    j = journal.Journal(tmp_path, {"model": "moonshine-small", "source": "microphone"})
    j.add(Line("hello", 0.0, 1.0))
    j.close()
    path = next(tmp_path.glob("*.jsonl"))
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    data = journal.read_journal_data(path)
    assert data.info.get("model") == "moonshine-small" and data.unreadable == 0 and data.finished
    assert journal.read_start(path).get("source") == "microphone"
