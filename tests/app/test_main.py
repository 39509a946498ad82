"""``livecap --input FILE --quit-at-end --save-transcript PATH``: the whole GUI path, unattended, in a
subprocess with the fake engine injected through ``--engine-factory``."""

from __future__ import annotations

import os
from pathlib import Path

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
