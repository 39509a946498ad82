"""``livecap --input FILE --quit-at-end --save-transcript PATH``: the whole GUI path, unattended, in a
subprocess with the fake engine injected through ``--engine-factory``."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import srt

from app.main import build_parser, load_factory
from engine.transcript import format_txt
from tests.app import fake_engine
from tests.helpers import FAKE_ENGINE, REPO, run_livecap


@pytest.fixture
def wav(tmp_path, speech):
    return fake_engine.write_wav(tmp_path / "speech.wav", speech)


def expected_lines(wav_path: Path):
    from engine.audio import read_audio

    return fake_engine.transcribe(read_audio(wav_path))


def replay(tmp_path, audio, save, *extra: str, model="fake", speed="6", **kwargs):
    """``livecap --input AUDIO --model MODEL --speed SPEED --quit-at-end --save-transcript SAVE EXTRA``."""
    args = ["--input", str(audio), "--model", str(model), "--speed", speed, "--quit-at-end"]
    return run_livecap(tmp_path, *args, "--save-transcript", str(save), *extra, **kwargs)


def test_replay_saves_txt_equal_to_committed_text(tmp_path, wav):
    out = tmp_path / "out.txt"
    proc = replay(tmp_path, wav, out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == ""  # a clean run prints nothing; Qt's own warnings go to the log file
    expected = expected_lines(wav)
    assert len(expected) == 3
    assert out.read_text(encoding="utf-8") == format_txt(expected)
    # the session was journaled and closed cleanly
    journals = list((tmp_path / "data" / "livecap" / "sessions").glob("*.jsonl"))
    assert len(journals) == 1 and '"type": "end"' in journals[0].read_text().splitlines()[-1]


def test_a_replay_with_nothing_said_saves_an_empty_transcript_and_says_so(tmp_path):
    """Silence to SRT gave a 0-byte file and a clean exit without a word: it looked broken (ffmpeg refuses it)."""
    silence = fake_engine.write_wav(tmp_path / "silence.wav", np.zeros(16000 * 3, np.float32))
    out = tmp_path / "out.srt"
    proc = replay(tmp_path, silence, out)
    assert proc.returncode == 0 and out.read_text(encoding="utf-8") == ""
    assert proc.stderr == f"livecap: warning: nothing was recognised; {out} holds no captions.\n"


def test_a_file_cut_short_is_transcribed_as_far_as_it_goes_with_one_warning(tmp_path, wav):
    """A recording cut short (an interrupted copy) was replayed to a partial transcript without a word."""
    data = wav.read_bytes()
    cut = tmp_path / "cut.wav"
    cut.write_bytes(data[: len(data) * 2 // 3])
    out = tmp_path / "out.txt"
    proc = replay(tmp_path, cut, out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("ends early") == 1 and proc.stderr.startswith(f"livecap: '{cut}' ends early: only ")
    assert out.read_text(encoding="utf-8") == format_txt(expected_lines(cut))


def test_replay_saves_srt_by_extension(tmp_path, wav):
    out = tmp_path / "out.srt"
    proc = replay(tmp_path, wav, out)
    assert proc.returncode == 0, proc.stderr
    subs = list(srt.parse(out.read_text(encoding="utf-8")))
    assert " ".join(s.content for s in subs) == " ".join(line.text for line in expected_lines(wav))


@pytest.mark.parametrize(
    ("case", "code", "message"),
    [
        ("model", 3, "No model found in broken-model"),
        ("audio", 4, "Cannot read audio from"),
        ("save", 2, "Cannot save the transcript to"),
    ],
)
def test_unattended_failures_exit_with_one_sentence(tmp_path, wav, case, code, message):
    model = "broken-model" if case == "model" else "fake"
    audio = str(tmp_path / "missing.wav") if case == "audio" else str(wav)
    save = str(tmp_path / ("no-such-dir" if case == "save" else "") / "out.txt")
    proc = replay(tmp_path, audio, save, model=model, speed="8")
    assert proc.returncode == code, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_parser_and_factory():
    from app.settings import WEIGHTS

    weights = next(a for a in build_parser()._actions if a.dest == "weights")
    assert set(weights.choices) == set(WEIGHTS)  # the menu's choices, spelled the same
    args = build_parser().parse_args(["--input", "a.wav", "--speed", "2", "--quit-at-end"])
    assert args.input == "a.wav" and args.speed == 2 and args.quit_at_end
    assert load_factory(FAKE_ENGINE) is fake_engine.load_model
    assert load_factory(str(Path(fake_engine.__file__)) + ":speechlike").__name__ == "speechlike"
    with pytest.raises(ValueError):
        load_factory("no-colon")


def test_replay_with_the_real_engine(tmp_path):
    """The real engine (NumPy backend) on the small random-weight Moonshine fixture: the app's saved
    .txt equals the committed text of the same audio fed in one go (the engine is chunking-independent)."""
    model = REPO / "tests" / "fixtures" / "models" / "moon_tiny_like"
    audio = REPO / "tests" / "fixtures" / "audio" / "speech.wav"
    if not (model / "config.json").exists() or not audio.exists():
        pytest.skip("the Moonshine fixture model or audio is missing (make fixtures)")
    import engine
    from engine.audio import read_audio

    session = engine.load_model(str(model), backend="numpy").start_session()
    events = session.feed(read_audio(audio)) + session.finish()
    expected = [line for event in events for line in event.committed]
    out = tmp_path / "real.txt"
    proc = replay(tmp_path, audio, out, "--backend", "numpy", model=model, speed="10", factory=None)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text(encoding="utf-8") == format_txt(expected)


@pytest.mark.parametrize("bits", [8, 4])
def test_replay_with_quantized_weights(tmp_path, bits):
    """``--weights 8-bit|4-bit`` loads the real engine with ``quantize``: the saved .txt equals the committed
    text of the engine's own quantized model over the same audio, and the child process cached its converted
    copy (so the option reached the engine). At 4 bits this random-weight model's text also differs from
    float32's."""
    pytest.importorskip("onnxruntime")
    model = REPO / "tests" / "fixtures" / "models" / "moon_tiny_like"
    audio = REPO / "tests" / "fixtures" / "audio" / "speech.wav"
    import engine
    from engine.audio import read_audio

    def committed(**kw):
        session = engine.load_model(str(model), backend="numpy", **kw).start_session()
        events = session.feed(read_audio(audio)) + session.finish()
        return [line for event in events for line in event.committed]

    expected = committed(quantize=bits)
    if bits == 4:
        assert [line.text for line in expected] != [line.text for line in committed()]
    out = tmp_path / "q.txt"
    weights = ("--backend", "numpy", "--weights", f"{bits}-bit")
    proc = replay(tmp_path, audio, out, *weights, model=model, speed="10", factory=None)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text(encoding="utf-8") == format_txt(expected)
    assert len(list((tmp_path / "cache" / "livecap" / "quantized").glob("*.safetensors"))) == 1


# ---------------------------------------------------------------- issue #12: nothing lost, nothing hangs


@pytest.mark.parametrize(
    ("save", "code", "message"),
    [
        ("out.docx", 2, "use a .txt, .srt, .vtt or .json name"),
        ("missing/out.txt", 2, "does not exist"),
        ("folder.txt", 2, "it is a folder"),
        ("file/out.txt", 2, "is not a folder"),
        ("speech.txt", 2, "is the input audio file"),
    ],
)
def test_bad_save_path_is_refused_before_the_replay(tmp_path, wav, save, code, message):
    """``--save-transcript bad.docx`` used to be reported only after the whole replay."""
    (tmp_path / "folder.txt").mkdir()
    (tmp_path / "file").write_text("x")
    os.link(wav, tmp_path / "speech.txt")  # the recording under a transcript's name: must not be overwritten
    proc = replay(tmp_path, wav, tmp_path / save, speed="0.5", timeout=20)
    assert proc.returncode == code, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "data" / "livecap" / "sessions").exists()  # no session was started


@pytest.mark.parametrize("speed", ["nan", "inf", "0"])
def test_speed_must_be_a_positive_number(tmp_path, wav, speed):
    proc = run_livecap(tmp_path, "--input", str(wav), "--model", "fake", f"--speed={speed}", timeout=20)
    assert proc.returncode == 2 and "--speed must be a positive number" in proc.stderr


SPOILER = """
from pathlib import Path

from tests.app import fake_engine

SAVE = Path({save!r})


def load_model(source, *, backend="auto", **_):
    model = fake_engine.load_model(source, backend=backend)
    start = model.start_session

    def start_session(**options):
        session = start(**options)
        finish = session.finish

        def spoil_then_finish():  # a folder takes the transcript's name before the final write
            SAVE.mkdir()
            return finish()

        session.finish = spoil_then_finish
        return session

    model.start_session = start_session
    return model
"""


def test_failed_final_write_keeps_the_session_for_recovery(tmp_path, wav):
    """When the final write fails, the journal stays unfinished: the next start offers every line."""
    out = tmp_path / "out.txt"
    factory = tmp_path / "spoiler.py"
    factory.write_text(SPOILER.format(save=str(out)))
    proc = replay(tmp_path, wav, out, factory=f"{factory}:load_model")
    assert proc.returncode == 1, proc.stderr
    assert "Cannot write the transcript to" in proc.stderr and "offered for recovery" in proc.stderr
    from tests.reliability.recovery import recovered_lines

    lines = recovered_lines(tmp_path / "data" / "livecap" / "sessions")
    assert [line.text for line in lines] == [line.text for line in expected_lines(wav)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--format", "srt"), "--format, -o and --session-version go with --export-session ID."),
        (("-o", "out.srt"), "--format, -o and --session-version go with --export-session ID."),
        (("--session-version", "2"), "--format, -o and --session-version go with --export-session ID."),
        (("--speed", "2"), "--speed goes with --input FILE."),
    ],
)
def test_an_option_without_the_one_it_goes_with_is_refused(tmp_path, args, message):
    """``livecap --format srt`` alone used to open the window (a script hung)."""
    proc = run_livecap(tmp_path, *args, timeout=20)
    assert proc.returncode == 2 and proc.stderr == f"livecap: {message}\n"


@pytest.mark.parametrize(
    ("delay", "model", "message"),
    [
        ("500", "voxtral-fake", "--delay-ms must be a multiple of 80 from 80 to 1200, or 2400."),
        ("-7", "voxtral-fake", "--delay-ms must be a multiple of 80 from 80 to 1200, or 2400."),
        ("480", "fake", "--delay-ms applies to Voxtral models only."),  # the fake engine's Moonshine
    ],
)
def test_delay_ms_is_checked_as_the_engine_cli_does(tmp_path, wav, delay, model, message):
    """Voxtral used to run at 80 ms silently, Moonshine ignored the delay."""
    proc = replay(tmp_path, wav, tmp_path / "out.txt", "--delay-ms", delay, model=model, timeout=30)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not list((tmp_path / "data").rglob("*.jsonl")) and not (tmp_path / "out.txt").exists()  # nothing began


RECORDER = """
import json
from pathlib import Path

from tests.app import fake_engine


def load_model(source, *, backend="auto", **_):
    model = fake_engine.load_model(source, backend=backend)
    start = model.start_session

    def start_session(**options):
        Path({path!r}).write_text(json.dumps(options))
        return start(**options)

    model.start_session = start_session
    return model
"""


def test_a_valid_delay_reaches_the_voxtral_session(tmp_path, wav):
    import json

    factory = tmp_path / "recorder.py"
    factory.write_text(RECORDER.format(path=str(tmp_path / "options.json")))
    out = tmp_path / "out.txt"
    proc = replay(tmp_path, wav, out, "--delay-ms", "2400", model="voxtral-fake", factory=f"{factory}:load_model")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "options.json").read_text())["delay_ms"] == 2400


@pytest.mark.parametrize("folder", ["XDG_STATE_HOME", "XDG_CONFIG_HOME"])
def test_a_folder_that_cannot_be_made_is_one_sentence(tmp_path, wav, folder):
    """Under a folder that anyone may write to (not sticky) platformdirs refuses to make livecap's folders: the
    log's (XDG_STATE_HOME) used to end in a traceback; now the run goes on without a log file, while the
    settings' is refused in one sentence."""
    import subprocess
    import sys

    from tests.helpers import livecap_env

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    env = {**livecap_env(tmp_path), folder: str(shared / "dirs")}
    out = tmp_path / "out.txt"
    args = ["--input", str(wav), "--model", "fake", "--speed", "6", "--quit-at-end", "--save-transcript", str(out)]
    cmd = [sys.executable, "-m", "app.main", *args, "--engine-factory", FAKE_ENGINE]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    if folder == "XDG_STATE_HOME":
        assert proc.returncode == 0 and out.read_text() == format_txt(expected_lines(wav))
        assert proc.stderr.startswith("livecap: warning: running without a log file (")
        assert "writable by another user" in proc.stderr
    else:
        assert proc.returncode == 1 and proc.stderr.startswith("livecap: cannot make the folders for settings")


@pytest.mark.parametrize(("sig", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_ctrl_c_stops_an_unattended_replay_with_code_130_and_what_was_heard(tmp_path, sig, code):
    """Ctrl+C during `--input ... --quit-at-end --save-transcript` exited 0 with a shorter transcript: a script
    could not tell it from a whole one. SIGTERM (a logout, `kill`) killed the app outright: no end record, no
    transcript saved (found in QA); it now closes as Ctrl+C does, with 128 + 15."""
    import signal
    import subprocess
    import sys
    import time

    from tests.helpers import livecap_env

    audio = fake_engine.speechlike([(0.6, 0.4)] * 20)  # 20 s, a line a second
    wav = fake_engine.write_wav(tmp_path / "long.wav", audio)
    out = tmp_path / "out.txt"
    cmd = [sys.executable, "-m", "app.main", "--settings", str(tmp_path / "s.ini"), "--engine-factory", FAKE_ENGINE]
    cmd += ["--input", str(wav), "--model", "fake", "--speed", "2", "--quit-at-end", "--save-transcript", str(out)]
    proc = subprocess.Popen(cmd, cwd=REPO, env=livecap_env(tmp_path), stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        journals = tmp_path / "data" / "livecap" / "sessions"
        while time.monotonic() < deadline and proc.poll() is None:
            found = list(journals.glob("*.jsonl")) if journals.is_dir() else []
            if found and found[0].read_text().count('"type": "line"') >= 2:
                break
            time.sleep(0.1)
        proc.send_signal(getattr(signal, sig))
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code and "interrupted" in err and "Traceback" not in err, err
    assert '"type": "end"' in found[0].read_text().splitlines()[-1]  # closed cleanly: kept whole in Sessions
    saved = out.read_text(encoding="utf-8").split("\n")[:-1]
    whole = [line.text for line in expected_lines(wav)]
    assert 2 <= len(saved) < len(whole) and saved[:-1] == whole[: len(saved) - 1]  # what was heard, nothing made up
    assert whole[len(saved) - 1].startswith(saved[-1])  # the line open at the stop: its words until then


def test_an_engine_failure_mid_session_is_one_sentence_on_stderr(tmp_path, wav):
    """An unattended run whose engine failed printed only the internal "session.feed failed" and exited 1; the
    sentence for the user reached the window's banner only."""
    proc = replay(tmp_path, wav, tmp_path / "out.txt", model="fake-explode", timeout=30)
    assert proc.returncode == 1, proc.stderr
    assert "livecap: Captioning stopped because the engine failed (RuntimeError: fake engine exploded).\n" in (
        proc.stderr
    )
    assert "Traceback" not in proc.stderr


SLOW_LOADER = """
import time
from pathlib import Path

from tests.app import fake_engine


def load_model(source, **kw):
    Path({began!r}).touch()
    time.sleep(60)  # a hub download, quantizing: library code nobody can interrupt
    return fake_engine.load_model(source, **kw)
"""


def _interrupt_once(proc, began: Path, seconds: float = 30) -> float:
    """Wait until ``began`` exists (the load is under way), then Ctrl+C ``proc``; returns when it was sent."""
    import signal
    import time

    deadline = time.monotonic() + seconds
    while not began.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.poll()
        time.sleep(0.05)
    time.sleep(0.3)  # the window is up and the SIGINT handler installed (it is, before the load is asked)
    proc.send_signal(signal.SIGINT)
    return time.monotonic()


@pytest.mark.parametrize("unattended", [False, True])
def test_quitting_while_the_model_loads_exits_at_once(tmp_path, wav, unattended):
    """Closing the window during a load blocked the GUI for 30 s, printed "did not stop within 15000 ms" and
    aborted (SIGABRT, "QThread: Destroyed while thread 'engine-worker' is still running"). Now the app exits at
    once: 0, or an interrupted unattended run's 130; the settings are saved."""
    import subprocess
    import sys
    import time

    from tests.helpers import livecap_env

    factory = tmp_path / "slow.py"
    factory.write_text(SLOW_LOADER.format(began=str(tmp_path / "began")))
    cmd = [sys.executable, "-m", "app.main", "--settings", str(tmp_path / "s.ini"), "--model", "fake"]
    cmd += ["--engine-factory", f"{factory}:load_model"]
    if unattended:
        cmd += ["--input", str(wav), "--quit-at-end", "--save-transcript", str(tmp_path / "out.txt")]
    proc = subprocess.Popen(cmd, cwd=REPO, env=livecap_env(tmp_path), stderr=subprocess.PIPE, text=True)
    try:
        sent = _interrupt_once(proc, tmp_path / "began")
        _, err = proc.communicate(timeout=10)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == (130 if unattended else 0), err
    assert took < 5, took
    assert "QThread" not in err and "did not stop" not in err and "Traceback" not in err, err
    assert "geometry=" in (tmp_path / "s.ini").read_text()  # the window's layout was saved
    assert not (tmp_path / "out.txt").exists()  # nothing was heard: no transcript made up


DOWNLOADER = """
from engine.install import install_model
from tests.app import fake_engine


def load_model(source, **kw):
    install_model(source)  # what engine.load_model does for a hub id first
    return fake_engine.load_model(source, **kw)
"""


def test_quitting_during_a_download_inside_the_load_ends_the_download(tmp_path, monkeypatch):
    """The download child process of a load under way is ended when the app exits (not left downloading), and
    what it fetched is kept for the next download to resume from."""
    import subprocess
    import sys
    import time

    from engine import hub as H
    from tests.fakehub import FakeHub, block_network, hub_env, padded
    from tests.helpers import alive, livecap_env

    tiny = REPO / "tests" / "fixtures" / "models" / "moon_tiny_like"
    files = {p.name: p.read_bytes() for p in tiny.iterdir() if p.is_file()}
    files["model.safetensors"] = padded(files["model.safetensors"], 22_000_000)
    factory = tmp_path / "downloader.py"
    factory.write_text(DOWNLOADER)
    block_network(monkeypatch)
    with FakeHub() as fake:
        hub_env(monkeypatch, fake, tmp_path / "hf")
        fake.add_repo("acme/moon-big", files)
        fake.stall_at["model.safetensors"] = 11_000_000  # the server goes silent there: the child waits on
        cmd = [sys.executable, "-m", "app.main", "--settings", str(tmp_path / "s.ini"), "--model", "acme/moon-big"]
        cmd += ["--engine-factory", f"{factory}:load_model"]
        proc = subprocess.Popen(cmd, cwd=REPO, env=livecap_env(tmp_path), stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 40
            while not H.partial_dir("acme/moon-big").is_dir() or not any(H.partial_dir("acme/moon-big").iterdir()):
                assert proc.poll() is None and time.monotonic() < deadline, proc.poll()
                time.sleep(0.05)
            children = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _parent(p) == proc.pid]
            assert children  # the download child
            sent = _interrupt_once(proc, H.partial_dir("acme/moon-big"))  # the load (asked after the handler) runs
            _, err = proc.communicate(timeout=10)
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0 and took < 5, (took, err)
        assert "QThread" not in err and "Traceback" not in err, err
        assert not any(alive(pid) for pid in children)
    (part,) = H.partial_dir("acme/moon-big").iterdir()
    assert 0 < part.stat().st_size < len(files["model.safetensors"])  # kept: the next download resumes from it


def _parent(proc_dir: Path) -> int | None:
    try:
        return int((proc_dir / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def test_a_sessions_folder_that_cannot_be_made_leaves_captioning_on(tmp_path, wav):
    """The sessions folder's place taken by a file: livecap printed "cannot make the folders ..." on stderr and did
    not start at all (launched from a menu: nothing appeared; found in QA). It captions, and says sessions are off."""
    import subprocess
    import sys

    from tests.helpers import livecap_env

    env = livecap_env(tmp_path)
    data = tmp_path / "data-is-a-file"
    data.write_bytes(b"not a folder")
    env["XDG_DATA_HOME"] = str(data)
    out = tmp_path / "out.txt"
    args = ["--input", str(wav), "--model", "fake", "--speed", "6", "--quit-at-end", "--save-transcript", str(out)]
    cmd = [sys.executable, "-m", "app.main", *args, "--engine-factory", FAKE_ENGINE]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr and proc.returncode == 0, proc.stderr
    assert out.read_text() == format_txt(expected_lines(wav))
    assert proc.stderr.startswith("livecap: warning: Sessions are off: their folder") and proc.stderr.count("\n") == 1


def test_an_unattended_replay_says_what_the_engine_replaced_by_silence(tmp_path):
    """A replay of a file with NaN/inf samples printed nothing on stderr (the count reached only the status bar),
    while livecap-transcribe warns (QA)."""
    import soundfile

    from engine.audio import read_audio

    model = REPO / "tests" / "fixtures" / "models" / "moon_tiny_like"
    x = read_audio(REPO / "tests" / "fixtures" / "audio" / "speech.wav")[: 16000 * 2].copy()
    x[1000:1100] = np.nan
    x[5000:5010] = np.inf
    audio = tmp_path / "nan.wav"
    soundfile.write(str(audio), x, 16000, subtype="FLOAT")
    out = tmp_path / "out.txt"
    proc = replay(tmp_path, audio, out, "--backend", "numpy", model=model, speed="10", factory=None)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == (
        "livecap: warning: 110 samples (7 ms) of the audio were not valid numbers (NaN, infinite or absurdly large) "
        "and were replaced by silence."
    )
