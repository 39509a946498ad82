"""write_transcript (atomic, ExportError) and LiveSrtWriter (valid SRT after every add)."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest
import srt
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import ExportError, LivecapError, UsageError
from engine.events import Line
from engine.transcript import LiveSrtWriter, format_srt, format_transcript, make_cues, write_transcript

LINES = [
    Line("Yes.", 1.0, 1.2),
    Line("We went to the lake, and then, when it got dark, we all walked back home together.", 1.5, 6.0),
    Line("", 6.0, 6.5),
    Line("今天天气很好，我们去公园散步吧。", 8.0, 10.0),
]


# ---------------------------------------------------------------- write_transcript


@pytest.mark.parametrize("fmt", ["txt", "srt", "vtt", "json"])
def test_write_by_extension(tmp_path, fmt):
    p = tmp_path / f"out.{fmt}"
    write_transcript(LINES, p)
    assert p.read_text(encoding="utf-8") == format_transcript(LINES, fmt)
    assert os.listdir(tmp_path) == [p.name]  # no temporary file left


def test_write_srt_parses(tmp_path):
    p = tmp_path / "out.srt"
    write_transcript(LINES, str(p))
    subs = list(srt.parse(p.read_text(encoding="utf-8")))
    assert [s.content for s in subs] == ["\n".join(c.lines) for c in make_cues(LINES)]


def test_explicit_format_wins(tmp_path):
    p = tmp_path / "out.txt"
    write_transcript(LINES, p, fmt="json")
    assert len(json.loads(p.read_text(encoding="utf-8"))) == len(LINES)


def test_unknown_extension_is_usage_error(tmp_path):
    with pytest.raises(UsageError):
        write_transcript(LINES, tmp_path / "out.docx")
    assert os.listdir(tmp_path) == []


def test_overwrite_keeps_mode(tmp_path):
    p = tmp_path / "out.txt"
    p.write_text("old\n")
    os.chmod(p, 0o640)
    write_transcript(LINES, p)
    assert p.read_text(encoding="utf-8") == format_transcript(LINES, "txt")
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o640


def test_new_file_is_not_private(tmp_path):
    p = tmp_path / "new.txt"
    write_transcript(LINES, p)
    assert stat.S_IMODE(os.stat(p).st_mode) & 0o044  # readable by others under the usual umask 022


def _check_export_error(err: ExportError, path) -> None:
    msg = str(err)
    assert str(path) in msg and "\n" not in msg and msg.endswith(".")


def test_missing_folder(tmp_path):
    p = tmp_path / "no" / "such" / "dir" / "out.srt"
    with pytest.raises(ExportError) as info:
        write_transcript(LINES, p)
    _check_export_error(info.value, p)
    assert isinstance(info.value, LivecapError) and info.value.exit_code == 1


def test_path_is_a_directory(tmp_path):
    d = tmp_path / "taken.srt"
    d.mkdir()
    with pytest.raises(ExportError) as info:
        write_transcript(LINES, d)
    _check_export_error(info.value, d)
    assert sorted(os.listdir(tmp_path)) == ["taken.srt"]  # the temporary file was removed


def test_parent_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ExportError):
        write_transcript(LINES, f / "out.vtt")


def test_failed_replace_keeps_old_file(tmp_path, monkeypatch):
    p = tmp_path / "out.txt"
    p.write_text("old contents\n")

    def refuse(src, dst):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(ExportError, match="permission denied"):
        write_transcript(LINES, p)
    assert p.read_text() == "old contents\n"
    assert os.listdir(tmp_path) == ["out.txt"]


# ---------------------------------------------------------------- LiveSrtWriter


def test_live_file_is_valid_after_every_add(tmp_path):
    p = tmp_path / "live.srt"
    with LiveSrtWriter(p) as w:
        assert p.read_text() == ""
        for k in range(1, len(LINES) + 1):
            w.add(LINES[k - 1])
            text = p.read_text(encoding="utf-8")
            subs = list(srt.parse(text))
            cues = make_cues(LINES[:k])
            assert [s.index for s in subs] == list(range(1, len(cues) + 1))
            assert [s.content for s in subs] == ["\n".join(c.lines) for c in cues]
            assert text == format_srt(LINES[:k])
    assert w.closed


def test_live_rewrites_the_extended_last_cue(tmp_path):
    p = tmp_path / "live.srt"
    w = LiveSrtWriter(p)
    w.add(Line("Yes.", 1.0, 1.2))
    [sub] = srt.parse(p.read_text())
    assert sub.end.total_seconds() == pytest.approx(1.83)  # extended to the minimum duration
    w.add(Line("No.", 1.5, 1.8))
    first, second = srt.parse(p.read_text())
    assert first.end.total_seconds() == 1.5 == second.start.total_seconds()
    w.close()
    w.close()  # idempotent
    with pytest.raises(ValueError):
        w.add(Line("late", 2, 3))


def test_live_close_ends_the_last_cue_by_the_audio_end(tmp_path):
    """The last cue, extended into the silence after its line, is cut back at close to the audio's end."""
    p = tmp_path / "live.srt"
    lines = [LINES[0], LINES[1]]
    w = LiveSrtWriter(p)
    for line in lines:
        w.add(line)
    assert list(srt.parse(p.read_text()))[-1].end.total_seconds() > 6.0
    w.close(audio_end=6.0)
    assert p.read_text(encoding="utf-8") == format_srt(lines, audio_end=6.0)
    subs = list(srt.parse(p.read_text()))
    assert subs[-1].end.total_seconds() == 6.0 and len(subs) == len(make_cues(lines))
    w.close(audio_end=1.0)  # idempotent: already closed, nothing rewritten
    assert p.read_text(encoding="utf-8") == format_srt(lines, audio_end=6.0)


def test_live_close_with_room_left_keeps_the_file(tmp_path):
    p = tmp_path / "live.srt"
    with LiveSrtWriter(p) as w:
        w.add(LINES[0])
        before = p.read_text()
        w.close(audio_end=30.0)
    assert p.read_text() == before == format_srt([LINES[0]], audio_end=30.0)
    q = tmp_path / "empty.srt"
    LiveSrtWriter(q).close(audio_end=0.0)
    assert q.read_text() == ""


def test_live_numbering_continues_across_multi_cue_lines(tmp_path):
    p = tmp_path / "live.srt"
    long = Line(" ".join(["word"] * 40), 0.0, 12.0)
    with LiveSrtWriter(p) as w:
        w.add(long)
        n = len(list(srt.parse(p.read_text())))
        assert n == 3
        w.add(Line("tail", 13.0, 14.0))
        subs = list(srt.parse(p.read_text()))
    assert [s.index for s in subs] == [1, 2, 3, 4]


def test_live_cue_options(tmp_path):
    p = tmp_path / "live.srt"
    with LiveSrtWriter(p, max_chars=4, max_lines=1) as w:
        w.add(Line("aaaa bbbb", 0.0, 9.0))
    assert [s.content for s in srt.parse(p.read_text())] == ["aaaa", "bbbb"]


def test_live_unwritable(tmp_path):
    p = tmp_path / "missing" / "live.srt"
    with pytest.raises(ExportError) as info:
        LiveSrtWriter(p)
    _check_export_error(info.value, p)


words = st.text(alphabet="abcdefghij.,?今天。", min_size=1, max_size=45)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(st.lists(words, max_size=25), st.floats(0, 2), st.floats(0, 9)), max_size=6))
def test_live_equals_offline_property(tmp_path, specs):
    lines, t = [], 0.0
    for ws, gap, dur in specs:
        t += gap
        lines.append(Line(" ".join(ws), t, t + dur))
        t += dur
    p = tmp_path / "prop.srt"
    with LiveSrtWriter(p) as w:
        for k, line in enumerate(lines, 1):
            w.add(line)
            text = p.read_text(encoding="utf-8")
            assert text == format_srt(lines[:k])
            assert len(list(srt.parse(text))) == len(make_cues(lines[:k]))


def test_devices_are_written_not_replaced_and_links_are_followed(tmp_path):
    """``-o /dev/null`` must not replace the device node (as root, a rename would); a link keeps linking."""
    import os
    import stat

    from engine.transcript.export import check_target, write_text_atomic

    check_target("/dev/null", need_format=False)
    write_text_atomic("/dev/null", "some text\n")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    real = tmp_path / "real.txt"
    real.write_text("old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    write_text_atomic(link, "new\n")
    assert link.is_symlink() and real.read_text() == "new\n"


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="a link to a pipe as /dev/stdout is: Linux")
def test_a_link_to_a_pipe_is_written_through(tmp_path):
    """QA: ``-o /dev/stdout | cat`` (and ``-o >(...)``) failed after the whole transcription: the link was resolved
    to '/proc/<pid>/fd/pipe:[N]', which is no file, and a temporary file was made beside that."""
    from engine.transcript.export import check_target, write_text_atomic

    r, w = os.pipe()
    try:
        link = tmp_path / "stdout"
        link.symlink_to(f"/proc/self/fd/{w}")
        check_target(link, need_format=False)
        write_text_atomic(link, "through the pipe\n")
        assert os.read(r, 100) == b"through the pipe\n"
    finally:
        os.close(r)
        os.close(w)


def test_a_folder_name_that_does_not_exist_is_refused_before_the_work(tmp_path):
    """QA: ``-o nodir/`` passed the check (its parent exists) and failed only after the transcription."""
    from engine.transcript.export import check_target

    with pytest.raises(UsageError, match="names a folder that does not exist"):
        check_target(f"{tmp_path / 'nodir'}/", need_format=False)


def test_live_close_keeps_a_last_cue_that_starts_at_the_audio_end_visible(tmp_path):
    """Cut to the end of the audio, a last line decoded after it would have no length (players skip it). It kept
    its reading time past the end; now, as the export, it is shown just before the end."""
    p = tmp_path / "live.srt"
    with LiveSrtWriter(p) as w:
        w.add(Line("It is all", 1.0, 2.0))
        w.add(Line("over", 6.0, 6.0))
        w.close(audio_end=6.0)
    cues = list(srt.parse(p.read_text(encoding="utf-8")))
    assert [c.content for c in cues] == ["It is all", "over"]
    assert cues[-1].end.total_seconds() == 6.0 and cues[-1].end > cues[-1].start


def test_live_lines_decoded_at_the_end_are_all_shown_as_in_the_export(tmp_path):
    """Two short Voxtral sentences held back by the delay both land on the audio's end when the session finishes:
    the live file gave the first "00:00:10,000 --> 00:00:10,000" (export QA), a cue players never show, while the
    export of the same lines shows both before the end."""
    p = tmp_path / "live.srt"
    lines = [Line("It is all over now", 7.0, 9.2), Line("Yes.", 10.0, 10.0), Line("Thank you.", 10.0, 10.0)]
    with LiveSrtWriter(p) as w:
        for line in lines:
            w.add(line)
        w.close(audio_end=10.0)
    text = p.read_text(encoding="utf-8")
    assert text == format_srt(lines, audio_end=10.0)
    cues = list(srt.parse(text))
    assert [c.content for c in cues] == ["It is all over now", "Yes.", "Thank you."]
    assert all(a.end <= b.start for a, b in zip(cues, cues[1:])) and all(c.end > c.start for c in cues)
    assert [f.name for f in tmp_path.iterdir()] == ["live.srt"]  # written again atomically: no temporary file left


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.tuples(st.lists(words, max_size=12), st.floats(0, 2), st.floats(0, 9)), min_size=1, max_size=5),
    st.integers(0, 3),
    st.floats(0, 1),
)
def test_live_close_equals_the_export_with_the_audio_end(tmp_path, specs, at_end, slack):
    lines, t = [], 0.0
    for ws, gap, dur in specs:
        t += gap
        lines.append(Line(" ".join(ws), t, t + dur))
        t += dur
    end = t + slack
    lines += [Line(f"late {k}", end, end) for k in range(at_end)]  # decoded after the audio, timed at its end
    p = tmp_path / "close.srt"
    with LiveSrtWriter(p) as w:
        for line in lines:
            w.add(line)
        w.close(audio_end=end)
    text, export = p.read_text(encoding="utf-8"), format_srt(lines, audio_end=end)
    if text != export:  # no room before the end at all: the last cue keeps its reading time past it
        last = list(srt.parse(export))[-1]
        assert last.end == last.start and list(srt.parse(text))[-1].end > last.start
        assert text.rsplit("\n\n", 1)[:-1] == export.rsplit("\n\n", 1)[:-1]


def test_a_lone_surrogate_is_written_as_a_question_mark_and_leaves_no_temporary_file(tmp_path):
    """It raised UnicodeEncodeError out of the export and left '.s.srt.XXXX.tmp' in the folder (export QA)."""
    p = tmp_path / "s.srt"
    write_transcript([Line("bad \udc80 text", 1.0, 2.0)], p)
    assert "bad ? text" in p.read_text(encoding="utf-8")
    assert [f.name for f in tmp_path.iterdir()] == ["s.srt"]
    live = tmp_path / "live.srt"
    with LiveSrtWriter(live) as w:
        w.add(Line("bad \udc80 text", 1.0, 2.0))
    assert "bad ? text" in live.read_text(encoding="utf-8")


def test_an_interrupted_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_transcript([Line("text", 1.0, 2.0)], tmp_path / "s.srt")
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- LiveSrtWriter: readers, a path that goes

READER = r"""
import os, sys
path, stop = sys.argv[1], sys.argv[2]
reads = bad = 0
most = 0
while not os.path.exists(stop):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        bad += 1
        continue
    reads += 1
    cues = data.count(b" --> ")
    whole = not data or (data.endswith(b"\n") and data.count(b"\n\n") == cues - 1 and b"\0" not in data)
    bad += not whole or cues < most or (most and not data)
    most = max(most, cues)
print(reads, bad, most)
"""


def _states(lines, audio_end=None):
    """Every text the live file may hold while ``lines`` are added one by one (and it is closed at ``audio_end``)."""
    states = [format_srt(lines[:k]) for k in range(len(lines) + 1)]
    return states + ([format_srt(lines, audio_end=audio_end)] if audio_end is not None else [])


def test_live_file_is_whole_at_every_step_a_reader_could_see(tmp_path):
    """QA: a reader polling the file saw fewer cues than before, an empty file and NUL bytes: the last block was
    rewritten in place (seek, truncate, write). The file is read between every two calls the writer makes, so every
    state it leaves the path in is seen: each must be one of the whole files, never going back."""
    p = tmp_path / "live.srt"
    lines = [Line(" ".join([f"w{i}"] * (2 + i % 9)), 1.0 * i, 1.0 * i + 1.6) for i in range(12)]
    lines += [Line("late", 12.0, 12.0), Line("words", 12.0, 12.0)]  # decoded after the audio: written again at close
    states = _states(lines, audio_end=12.0)
    seen: list[int] = []

    def look(frame, event, arg):
        if event in ("c_call", "c_return"):
            try:
                text = p.read_bytes().decode("utf-8")
            except FileNotFoundError:
                text = None
            assert text in states, f"a reader saw {text!r:.300}"
            assert not seen or states.index(text) >= seen[-1], "a reader saw fewer lines than before"
            seen.append(states.index(text))

    w = LiveSrtWriter(p)
    sys.setprofile(look)
    try:
        for line in lines:
            w.add(line)
        w.close(audio_end=12.0)
    finally:
        sys.setprofile(None)
    assert p.read_text(encoding="utf-8") == states[-1] and len(set(seen)) == len(states)
    assert [f.name for f in tmp_path.iterdir()] == ["live.srt"]


@pytest.mark.skipif(sys.platform == "win32", reason="Windows may refuse the replace while the reader reads")
def test_live_file_read_by_another_process_while_lines_are_added(tmp_path):
    """The QA's check as OBS does it: another process reads the file as fast as it can while lines are added."""
    import subprocess
    import time

    p, stop = tmp_path / "live.srt", tmp_path / "stop"
    w = LiveSrtWriter(p)
    reader = subprocess.Popen([sys.executable, "-c", READER, str(p), str(stop)], stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.2)
        for i in range(400):
            w.add(Line(" ".join([f"w{i}"] * (3 + i % 25)), 1.0 * i, 1.0 * i + 1.5))  # some make two cues
        w.close(400.5)
    finally:
        stop.touch()
        out, _ = reader.communicate(timeout=10)
    reads, bad, most = map(int, out.split())
    assert reads > 100 and most == len(list(srt.parse(p.read_text(encoding="utf-8"))))
    assert bad == 0, f"{bad} of {reads} reads saw a file that was not whole, or had fewer cues than before"


def test_live_file_deleted_mid_session_is_written_again(tmp_path):
    """QA: after ``rm`` of the file, later cues went into the deleted file and the path stayed empty."""
    p = tmp_path / "live.srt"
    with LiveSrtWriter(p) as w:
        w.add(LINES[0])
        p.unlink()
        w.add(LINES[1])
        assert p.read_text(encoding="utf-8") == format_srt(LINES[:2]) and w.restored == 1
        w.add(LINES[3])
        assert w.restored == 1
        w.close(audio_end=10.0)
    assert p.read_text(encoding="utf-8") == format_srt(LINES, audio_end=10.0)


def test_live_file_moved_mid_session_is_written_again_and_the_moved_one_kept(tmp_path):
    p, moved = tmp_path / "live.srt", tmp_path / "moved.srt"
    with LiveSrtWriter(p) as w:
        w.add(LINES[0])
        p.rename(moved)
        p.write_text("someone else's\n")  # or replaced by another file: the live file takes the path back
        w.add(LINES[1])
        assert w.restored == 1
    assert p.read_text(encoding="utf-8") == format_srt(LINES[:2])
    assert moved.read_text(encoding="utf-8") == format_srt(LINES[:1])


def renumbering_stat(looks: list[int]):
    """``os.stat`` as on a file system that numbers inodes anew at each look (SMB noserverino, some FUSE);
    ``looks[0]`` counts the looks."""
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        st = real_stat(path, *args, **kwargs)
        looks[0] += 1
        fields = list(st)
        fields[1] += looks[0]  # st_ino: another number at every look
        return os.stat_result(fields, {"st_mtime_ns": st.st_mtime_ns})

    return stat


def test_live_file_on_a_file_system_without_stable_inodes_is_not_taken_for_gone(tmp_path, monkeypatch):
    """Review: the file's identity was its inode alone; where a file system numbers inodes anew at each look (SMB
    with noserverino, some FUSE mounts) every line said "the live SRT file went" and counted a restore."""
    p = tmp_path / "live.srt"
    looks = [0]
    stat = renumbering_stat(looks)

    with LiveSrtWriter(p) as w:
        w.add(LINES[0])
        monkeypatch.setattr(os, "stat", stat)
        w.add(LINES[1])
        w.add(LINES[3])
        assert looks[0] >= 2 and w.restored == 0
        p.unlink()
        w.add(Line("And after.", 11.0, 12.0))
        assert w.restored == 1  # gone is still gone


def test_live_file_written_in_place_over_a_longer_one_is_not_taken_for_gone(tmp_path, monkeypatch):
    """Second review: written in place (the replace refused) over a longer old file, the file's identity was
    looked at before it was cut to length; where inodes are renumbered the next line then said it went."""
    p = tmp_path / "live.srt"
    p.write_text("an older and much longer file than the first cue\n" * 20)
    looks = [0]
    stat = renumbering_stat(looks)

    def refuse(src, dst):
        raise PermissionError(13, "Access is denied")

    monkeypatch.setattr(os, "stat", stat)
    monkeypatch.setattr(os, "replace", refuse)
    monkeypatch.setattr("time.sleep", lambda _s: None)
    with LiveSrtWriter(p) as w:
        w.add(LINES[0])
        w.add(LINES[1])
        assert w.restored == 0
    assert p.read_text(encoding="utf-8") == format_srt(LINES[:2])


def test_live_folder_removed_mid_session_raises_and_is_not_made_again(tmp_path):
    """QA: ``rm -rf`` of the folder went unnoticed; the controller turns the live file off on this ExportError."""
    import shutil

    p = tmp_path / "obs" / "live.srt"
    p.parent.mkdir()
    w = LiveSrtWriter(p)
    w.add(LINES[0])
    shutil.rmtree(p.parent)
    with pytest.raises(ExportError) as info:
        w.add(LINES[1])
    _check_export_error(info.value, p)
    assert not p.parent.exists()


def test_live_replace_refused_is_tried_again_then_written_in_place(tmp_path, monkeypatch):
    """Windows refuses to replace a file a reader holds open: tried again briefly, then written in place."""
    import time

    p = tmp_path / "live.srt"
    real_replace, refusals, pauses = os.replace, [2], []

    def replace(src, dst):
        if refusals[0]:
            refusals[0] -= 1
            raise PermissionError(13, "Access is denied")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(time, "sleep", pauses.append)
    with LiveSrtWriter(p) as w:
        w.add(LINES[0])  # refused twice, then replaced
        assert p.read_text(encoding="utf-8") == format_srt(LINES[:1]) and len(pauses) == 2
        refusals[0], pauses[:] = 10**6, []  # never let go
        w.add(LINES[1])
        assert 0 < sum(pauses) < 0.05  # a short wait on the GUI thread, then in place
        w.add(LINES[3])
        assert p.read_text(encoding="utf-8") == format_srt(LINES) and w.restored == 0
        w.close(audio_end=9.0)
    assert p.read_text(encoding="utf-8") == format_srt(LINES, audio_end=9.0)
    assert [f.name for f in tmp_path.iterdir()] == ["live.srt"]


def test_live_file_in_a_folder_that_refuses_new_files_is_written_in_place(tmp_path, monkeypatch):
    """A file the user may write in a folder they may not (no temporary file there): written in place, as before."""
    import tempfile

    p = tmp_path / "live.srt"
    p.write_text("old and longer than what comes first " * 20)

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    with LiveSrtWriter(p) as w:
        assert p.read_text() == ""
        w.add(LINES[1])
        w.add(LINES[0])
    assert p.read_text(encoding="utf-8") == format_srt([LINES[1], LINES[0]])


def test_live_extend_writes_once_what_the_adds_would(tmp_path, monkeypatch):
    p = tmp_path / "live.srt"
    replaces = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (replaces.append(dst), real_replace(src, dst)))
    with LiveSrtWriter(p) as w:
        replaces.clear()
        w.extend(LINES)
        assert len(replaces) == 1 and p.read_text(encoding="utf-8") == format_srt(LINES)
        w.extend([Line("", 11.0, 12.0)])  # nothing to add: nothing written
        w.add(Line("and on", 11.0, 12.0))
        assert len(replaces) == 2
    assert p.read_text(encoding="utf-8") == format_srt([*LINES, Line("and on", 11.0, 12.0)])


def test_live_file_through_a_link_keeps_the_link(tmp_path):
    real, link = tmp_path / "real.srt", tmp_path / "link.srt"
    real.write_text("old\n")
    link.symlink_to(real)
    with LiveSrtWriter(link) as w:
        w.add(LINES[0])
        w.add(LINES[1])
    assert link.is_symlink() and real.read_text(encoding="utf-8") == format_srt(LINES[:2])
