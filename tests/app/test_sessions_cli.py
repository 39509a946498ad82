"""Headless session commands: ``livecap --sessions``, ``--export-session``, ``--retranscribe`` after real
replays through the whole GUI path (subprocesses with private folders)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest
import srt

from app.session_audio import iter_audio
from engine.transcript import format_json, format_srt, format_txt
from tests.app import fake_engine
from tests.app.conftest import REPO
from tests.helpers import run_livecap

MODELS = REPO / "tests" / "fixtures" / "models"
SPEECH = REPO / "tests" / "fixtures" / "audio" / "speech.wav"


def replay(tmp_path, wav, *extra: str, factory: str | None = "tests.app.fake_engine:load_model", model="fake"):
    out = tmp_path / "replay.txt"
    proc = run_livecap(
        tmp_path,
        "--input",
        str(wav),
        "--model",
        str(model),
        "--speed",
        "8",
        "--quit-at-end",
        "--save-transcript",
        str(out),
        *extra,
        factory=factory,
    )
    assert proc.returncode == 0, proc.stderr
    return out.read_text(encoding="utf-8")


def sessions(tmp_path) -> list[dict]:
    proc = run_livecap(tmp_path, "--sessions", factory=None)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(row) for row in proc.stdout.splitlines()]


def keep_audio(tmp_path) -> None:
    (tmp_path / "s.ini").write_text("[sessions]\nkeep-audio=true\n")


def test_two_replays_leave_two_sessions_listed_and_exportable(tmp_path):
    a = fake_engine.speechlike([(0.8, 0.5), (1.0, 0.5)])
    b = fake_engine.speechlike([(0.5, 0.5)])
    first = replay(tmp_path, fake_engine.write_wav(tmp_path / "first.wav", a))
    second = replay(tmp_path, fake_engine.write_wav(tmp_path / "second.wav", b))
    listed = sessions(tmp_path)
    assert len(listed) == 2
    newest, oldest = listed
    assert newest["input"].startswith("second.wav") and oldest["input"].startswith("first.wav")
    for row in listed:
        assert row["source"] == "file" and row["model"] == "fake" and row["finished"]
        assert set(row) >= {"id", "start", "duration", "source", "model", "lines"}
    assert oldest["lines"] == len(first.splitlines()) == 2 and newest["lines"] == len(second.splitlines()) == 1
    assert oldest["duration"] == pytest.approx(len(a) / 16000, abs=0.01)

    for row, text in ((oldest, first), (newest, second)):
        out = tmp_path / f"{row['id']}.srt"
        proc = run_livecap(tmp_path, "--export-session", row["id"], "--format", "srt", "-o", str(out), factory=None)
        assert proc.returncode == 0, proc.stderr
        subs = list(srt.parse(out.read_text(encoding="utf-8")))
        assert [s.content for s in subs] == text.splitlines()
    for fmt in ("txt", "vtt", "json"):
        proc = run_livecap(tmp_path, "--export-session", oldest["id"], "--format", fmt, factory=None)
        assert proc.returncode == 0 and proc.stdout, proc.stderr
    assert run_livecap(tmp_path, "--export-session", oldest["id"], "--format", "txt", factory=None).stdout == first


def test_session_commands_fail_with_one_sentence(tmp_path):
    replay(tmp_path, fake_engine.write_wav(tmp_path / "a.wav", fake_engine.speechlike([(0.5, 0.5)])))
    sid = sessions(tmp_path)[0]["id"]
    cases = [
        (("--export-session", "nope", "--format", "txt"), 2, "There is no session called 'nope'"),
        (("--export-session", sid), 2, "Say the format with --format"),
        (("--export-session", sid, "-o", str(tmp_path / "x.docx")), 2, "Cannot tell the transcript format"),
        (("--export-session", sid, "-o", str(tmp_path / "no" / "x.srt")), 1, "Cannot write the transcript"),
        (("--export-session", sid, "--format", "txt", "--session-version", "3"), 2, "has no version 3"),
        (("--retranscribe", sid, "--model", "fake"), 2, "has no kept audio"),
        (("--retranscribe", sid), 2, "Say which model"),
    ]
    for args, code, sentence in cases:
        proc = run_livecap(tmp_path, *args, factory=None)
        assert proc.returncode == code, (args, proc.stderr)
        assert sentence in proc.stderr and "Traceback" not in proc.stderr, (args, proc.stderr)


def test_sessions_need_no_qapplication(tmp_path):
    code = (
        "import sys\n"
        "from app.main import main\n"
        f"rc = main(['--sessions', '--sessions-dir', {str(tmp_path)!r}])\n"
        "assert rc == 0 and 'PySide6.QtWidgets' not in sys.modules and 'PySide6.QtGui' not in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def _transcribe(model: str, audio: np.ndarray):
    import engine

    session = engine.load_model(str(MODELS / model), backend="numpy").start_session()
    events = session.feed(audio) + session.finish()
    return [line for event in events for line in event.committed]


def test_session_with_audio_retranscribes_with_a_second_fixture_model(tmp_path):
    """Live with moon_tiny_like (the real engine), kept audio, then re-transcribed with moon_small_like:
    the new version equals moon_small_like on the kept audio fed in one go, and version 1 stays."""
    if not (MODELS / "moon_small_like" / "config.json").exists():
        pytest.skip("the Moonshine fixture models are missing (make fixtures)")
    keep_audio(tmp_path)
    live = replay(tmp_path, SPEECH, "--backend", "numpy", factory=None, model=MODELS / "moon_tiny_like")
    (row,) = sessions(tmp_path)
    sid = row["id"]
    assert row["audio"] and row["model"].endswith("moon_tiny_like")
    kept = tmp_path / "data" / "livecap" / "sessions" / sid / "audio.flac"
    audio = np.concatenate(list(iter_audio(kept)))
    from engine.audio import read_audio

    fed = read_audio(SPEECH)
    assert len(audio) == len(fed) and np.max(np.abs(audio - fed)) <= 0.5 / 32768 + 1e-7  # what the engine was fed

    proc = run_livecap(
        tmp_path, "--retranscribe", sid, "--model", str(MODELS / "moon_small_like"), "--backend", "numpy", factory=None
    )
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(r) for r in proc.stdout.splitlines()]
    assert rows[-1]["version"] == 2 and rows[-2]["progress"] == pytest.approx(len(fed) / 16000, abs=1e-3)

    expected = list(_transcribe("moon_small_like", audio))  # with their tokens (and words, span): all kept
    assert expected and format_txt(expected) != live
    out = run_livecap(tmp_path, "--export-session", sid, "--format", "json", factory=None)
    assert out.stdout == format_json(expected)
    v1 = run_livecap(tmp_path, "--export-session", sid, "--format", "txt", "--session-version", "1", factory=None)
    assert v1.stdout == live
    (row,) = sessions(tmp_path)
    assert [v["version"] for v in row["versions"]] == [1, 2] and row["model"].endswith("moon_small_like")
    srt_out = run_livecap(tmp_path, "--export-session", sid, "--format", "srt", factory=None)
    assert srt_out.stdout == format_srt(expected)


@pytest.mark.parametrize(
    ("error", "sentence"),
    [
        (
            RuntimeError("the disk went away\nmore detail"),
            "the session command failed (RuntimeError: the disk went away).",
        ),
        (KeyError(), "the session command failed (KeyError)."),
    ],
)
def test_an_unexpected_failure_is_one_sentence(tmp_path, monkeypatch, capsys, error, sentence):
    from app import sessions_cli
    from app.main import build_parser
    from app.session_store import SessionStore

    def fail(self):
        raise error

    monkeypatch.setattr(SessionStore, "list", fail)
    args = build_parser().parse_args(["--sessions", "--sessions-dir", str(tmp_path)])
    assert sessions_cli.run(args) == 1
    assert capsys.readouterr().err == f"livecap: {sentence}\n"


@pytest.mark.parametrize("where", ["missing", "a-file"])
def test_a_sessions_folder_that_is_not_there_is_said_not_listed_as_empty(tmp_path, capsys, where):
    """``--sessions-dir`` with a typo listed nothing and exited 0: it looked like "no sessions" (found in QA)."""
    from app import sessions_cli
    from app.main import build_parser

    (tmp_path / "a-file").write_text("x")
    args = build_parser().parse_args(["--sessions", "--sessions-dir", str(tmp_path / where)])
    assert sessions_cli.run(args) == 2
    what = "does not exist" if where == "missing" else "is not a folder"
    assert capsys.readouterr().err == f"livecap: The sessions folder {tmp_path / where} {what}.\n"


def test_an_empty_session_id_is_a_usage_error(tmp_path):
    """``--export-session "$UNSET" --format srt`` used to open the window (a script hung)."""
    for option in ("--export-session", "--retranscribe"):
        proc = run_livecap(tmp_path, option, "", "--format", "srt", factory=None, timeout=20)
        assert (
            proc.returncode == 2
            and proc.stderr == f"livecap: {option} needs a session id (livecap --sessions lists them).\n"
        )


def test_the_export_format_follows_the_file_name_and_a_contradiction_is_refused(tmp_path):
    """``--format srt -o x.vtt`` used to write SRT into x.vtt."""
    replay(tmp_path, fake_engine.write_wav(tmp_path / "a.wav", fake_engine.speechlike([(0.5, 0.5)])))
    sid = sessions(tmp_path)[0]["id"]
    vtt = run_livecap(tmp_path, "--export-session", sid, "--format", "vtt", factory=None).stdout
    assert run_livecap(tmp_path, "--export-session", sid, "-o", str(tmp_path / "x.vtt"), factory=None).returncode == 0
    assert (tmp_path / "x.vtt").read_text(encoding="utf-8") == vtt
    proc = run_livecap(
        tmp_path, "--export-session", sid, "--format", "srt", "-o", str(tmp_path / "y.vtt"), factory=None
    )
    assert proc.returncode == 2 and not (tmp_path / "y.vtt").exists()
    assert proc.stderr == (
        f"livecap: --format srt does not match the output file name '{tmp_path / 'y.vtt'}'; "
        "drop --format or give the file a .srt name.\n"
    )


def _many_sessions(folder, count: int) -> None:
    folder.mkdir()
    for i in range(count):
        sid = f"2025{1 + i // 28 % 12:02d}{1 + i % 28:02d}-{i // 336:02d}0000"
        start = {"type": "start", "time": "2025-01-01T00:00:00", "source": "file", "model": "fake", "input": "a.wav"}
        (folder / f"{sid}.jsonl").write_text(json.dumps(start) + "\n", encoding="utf-8")


def test_a_reader_that_goes_away_ends_the_list_quietly_and_a_full_disk_is_one_sentence(tmp_path):
    """``livecap --sessions | head -1`` used to say "the session command failed (BrokenPipeError ...)", rc 1;
    ``> /dev/full`` "(OSError: [Errno 28] ...)"."""
    _many_sessions(tmp_path / "many", 2000)  # more than a pipe holds
    cmd = [sys.executable, "-m", "app.main", "--sessions", "--sessions-dir", str(tmp_path / "many")]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert json.loads(proc.stdout.readline())["model"] == "fake"
    proc.stdout.close()  # as head does
    assert proc.wait(timeout=60) == 0
    assert proc.stderr.read() == b""
    proc.stderr.close()
    with open("/dev/full", "w") as full:
        done = subprocess.run(cmd, cwd=REPO, stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr == "livecap: Cannot write to standard output: no space left on device.\n"


@pytest.mark.parametrize(
    ("argv", "sentence"),
    [
        (["--sessions", "-o", "x.srt"], "-o does not go with --sessions."),
        (["--sessions", "--format", "srt", "--session-version", "3"], "--format and --session-version do not go"),
        (["--export-session", "ID", "--sessions"], "Give one of --sessions and --export-session at a time."),
        (["--retranscribe", "ID", "--model", "m", "-o", "x.srt"], "-o does not go with --retranscribe."),
        (["--export-session", "ID", "--model", "m", "--format", "srt"], "--model does not go with --export-session."),
        (["--sessions", "--source", "mic"], "--source does not go with --sessions."),
    ],
)
def test_options_a_session_command_would_ignore_are_refused(tmp_path, capsys, argv, sentence):
    """``--sessions -o x.srt`` listed the sessions (exit 0); ``--retranscribe ID -o x.srt`` wrote no file."""
    from app import sessions_cli
    from app.main import build_parser

    args = build_parser().parse_args([*argv, "--sessions-dir", str(tmp_path)])
    assert sessions_cli.run(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("livecap: ") and sentence in err and err.count("\n") == 1


def test_retranscribe_takes_the_weights(tmp_path, capsys):
    """``--retranscribe ID --weights 8-bit`` ran with float weights (the new version equalled float32's)."""
    from app import sessions_cli
    from app.main import build_parser
    from tests.app.kept_sessions import dead_pid, unfinished_with_audio

    store, sid, _ = unfinished_with_audio(tmp_path, pid=dead_pid())
    argv = ["--retranscribe", sid, "--model", "fake-moonshine", "--weights", "8-bit", "--sessions-dir", str(tmp_path)]
    assert sessions_cli.run(build_parser().parse_args(argv), fake_engine.load_model) == 0, capsys.readouterr().err
    assert fake_engine.LAST_MODEL.quantize == 8


def test_each_version_says_its_weights_and_delay(tmp_path, capsys):
    """Versions made with 8-bit weights, with float weights and with a Voxtral delay were listed alike (the same
    model, no word of how it ran), so nothing showed which was the exact float32 one (found in QA)."""
    from app.retranscribe import retranscribe
    from tests.app.kept_sessions import dead_pid, unfinished_with_audio

    store, sid, _ = unfinished_with_audio(tmp_path, pid=dead_pid())
    load = fake_engine.load_model
    assert retranscribe(store, sid, "fake-voxtral", quantize=8, options={"delay_ms": 480}, loader=load) == 2
    assert retranscribe(store, sid, "fake-voxtral", loader=load) == 3
    v2, v3 = store.summary(sid).versions[1:]
    assert (v2.bits, v2.delay_ms, v2.how) == (8, 480, "8-bit weights, 480 ms delay")
    assert (v3.bits, v3.delay_ms, v3.how) == (0, 0, "")
    listed = json.loads(json.dumps(store.summary(sid).to_json()))["versions"]
    assert [(v["version"], v["bits"], v["delay_ms"]) for v in listed] == [(1, 0, 0), (2, 8, 480), (3, 0, 0)]


def test_ctrl_c_during_a_retranscription_is_one_sentence_and_stores_nothing(tmp_path, capsys):
    """Ctrl+C during ``--retranscribe`` printed a traceback (from the VAD or an attention op)."""
    from app import sessions_cli
    from app.main import build_parser
    from tests.app.kept_sessions import dead_pid, unfinished_with_audio

    store, sid, _ = unfinished_with_audio(tmp_path, pid=dead_pid())

    def interrupted(source, **kwargs):
        model = fake_engine.load_model(source, **kwargs)
        start = model.start_session

        def start_session(**options):
            session = start(**options)

            def feed(block):
                raise KeyboardInterrupt  # as Ctrl+C arrives in the middle of a step

            session.feed = feed
            return session

        model.start_session = start_session
        return model

    argv = ["--retranscribe", sid, "--model", "fake-moonshine", "--sessions-dir", str(tmp_path)]
    assert sessions_cli.run(build_parser().parse_args(argv), interrupted) == 130
    assert capsys.readouterr().err == "livecap: stopped; no new version was stored.\n"
    assert [v.number for v in store.summary(sid).versions] == [1]


def test_a_ctrl_c_that_the_model_load_swallowed_stores_no_version(tmp_path, capsys):
    """Ctrl+C inside ``import onnxruntime`` became an ImportError there (the runtime taken for missing) and the
    re-transcription went on to store a new version."""
    import signal

    from app import sessions_cli
    from app.main import build_parser
    from tests.app.kept_sessions import dead_pid, unfinished_with_audio

    store, sid, _ = unfinished_with_audio(tmp_path, pid=dead_pid())

    def swallowing(source, **kwargs):
        try:
            signal.raise_signal(signal.SIGINT)
            time.sleep(10)
        except KeyboardInterrupt:
            pass
        return fake_engine.load_model(source, **kwargs)

    argv = ["--retranscribe", sid, "--model", "fake-moonshine", "--sessions-dir", str(tmp_path)]
    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal's (not a background job's)
    try:
        assert sessions_cli.run(build_parser().parse_args(argv), swallowing) == 130
    finally:
        signal.signal(signal.SIGINT, before)
    assert capsys.readouterr().err == "livecap: stopped; no new version was stored.\n"
    assert [v.number for v in store.summary(sid).versions] == [1]


def test_a_delay_for_a_model_without_one_is_said_in_the_options_words(tmp_path, capsys):
    """``--retranscribe ID --model <Moonshine> --delay-ms 480`` said "Unknown Moonshine session option(s)"."""
    from app import sessions_cli
    from app.main import build_parser
    from tests.app.kept_sessions import dead_pid, unfinished_with_audio

    _, sid, _ = unfinished_with_audio(tmp_path, pid=dead_pid())
    argv = ["--retranscribe", sid, "--model", "fake-moonshine", "--delay-ms", "480", "--sessions-dir", str(tmp_path)]
    assert sessions_cli.run(build_parser().parse_args(argv), fake_engine.load_model) == 2
    assert capsys.readouterr().err == "livecap: --delay-ms applies to Voxtral models only.\n"


def test_input_dash_is_refused_in_one_sentence(tmp_path):
    proc = run_livecap(tmp_path, "--input", "-", "--model", "fake", factory=None, timeout=20)
    assert proc.returncode == 2 and proc.stderr == (
        "livecap: --input takes an audio file; for standard input use livecap-transcribe -.\n"
    )


def test_an_export_with_nothing_to_show_or_onto_a_read_only_file_is_refused(tmp_path):
    """Export QA: a session whose lines are all blank gave a 0-byte SRT (ffmpeg: "Invalid data found") and exit 0;
    -o replaced a read-only file, which --save-transcript and livecap-transcribe -o refuse."""
    from app.journal import Journal
    from engine.events import Line

    folder = tmp_path / "sessions"
    folder.mkdir()
    blank = Journal(folder, {"source": "microphone"})
    blank.add(Line("  ", 0.0, 1.0, (5,)))
    blank.close(audio_s=2.0)
    said = Journal(folder, {"source": "microphone"})
    said.add(Line("Hello there.", 0.0, 1.0))
    said.close(audio_s=2.0)
    out = tmp_path / "blank.srt"
    where = ("--sessions-dir", str(folder))
    proc = run_livecap(tmp_path, *where, "--export-session", blank.session_id, "-o", str(out), factory=None)
    assert proc.returncode == 1 and "has no captions to export" in proc.stderr and not out.exists(), proc.stderr
    kept = tmp_path / "kept.srt"
    kept.write_text("KEEP")
    kept.chmod(0o444)
    proc = run_livecap(tmp_path, *where, "--export-session", said.session_id, "-o", str(kept), factory=None)
    assert proc.returncode == 2 and "read-only" in proc.stderr and kept.read_text() == "KEEP", proc.stderr
    proc = run_livecap(tmp_path, *where, "--export-session", said.session_id, "--format", "srt", factory=None)
    assert proc.returncode == 0 and "Hello there." in proc.stdout


def test_a_retranscription_that_finds_no_speech_is_said_and_stores_nothing(tmp_path, capsys):
    """``--retranscribe`` of silent kept audio exited 0 and stored an empty version 2, which then hid version 1:
    ``--export-session ID`` failed with "has no captions to export" (found in QA)."""
    from app import sessions_cli
    from app.main import build_parser
    from tests.app.kept_sessions import dead_pid, unfinished_with_audio

    store, sid, _ = unfinished_with_audio(tmp_path, pid=dead_pid())
    store.recording_path(sid).write_bytes(bytes(2 * 16000))  # 1 s of silence: no speech to find
    argv = ["--retranscribe", sid, "--model", "fake-moonshine", "--sessions-dir", str(tmp_path)]
    assert sessions_cli.run(build_parser().parse_args(argv), fake_engine.load_model) == 1
    err = capsys.readouterr().err
    assert err == "livecap: The re-transcription found no speech; the session keeps its transcript.\n"
    assert [v.number for v in store.summary(sid).versions] == [1]
    argv = ["--export-session", sid, "--format", "txt", "--sessions-dir", str(tmp_path)]
    assert sessions_cli.run(build_parser().parse_args(argv)) == 0
    assert capsys.readouterr().out == "before the crash\n"
