"""``livecap-transcribe``: ids equal the reference goldens; every bad input is one sentence and an exit code."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import wave

import numpy as np
import pytest

from engine.cli import main
from tests.conftest import FIXTURES, golden

MODEL = FIXTURES / "models" / "moon_small_like"
SPEECH = FIXTURES / "audio" / "speech.wav"


def cli(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("backend", ["numpy", "mlx"])
@pytest.mark.parametrize("name", ["moon_small_like", "moon_tiny_like"])
@pytest.mark.parametrize("clip", ["speech", "noise"])
def test_tokens_equal_reference_generate(capsys, backend, name, clip):
    code, out, err = cli(capsys, FIXTURES / "audio" / f"{clip}.wav", "--model", FIXTURES / "models" / name,
                         "--backend", backend, "--dtype", "float32", "--no-vad", "--tokens")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["family"] == "moonshine_streaming"
    assert [s["tokens"] for s in doc["segments"]] == [golden(name, clip)["greedy"].tolist()]


def test_console_script_runs_without_traceback(tmp_path):
    r = subprocess.run([sys.executable, "-m", "engine.cli", str(SPEECH), "--model", str(MODEL), "--no-vad"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() and "Traceback" not in r.stderr


@pytest.mark.parametrize("fmt", ["txt", "json", "srt", "vtt"])
def test_formats(capsys, tmp_path, fmt):
    out_file = tmp_path / f"out.{fmt}"
    code, out, err = cli(capsys, SPEECH, "--model", MODEL, "--no-vad", "--format", fmt, "-o", out_file)
    assert code == 0, err
    text = out_file.read_text()
    g = golden("moon_small_like", "speech")
    from engine.models.moonshine.tokenizer import MoonshineTokenizer

    words = MoonshineTokenizer(MODEL / "tokenizer.json").decode([t for t in g["greedy"] if t != 2]).split()
    assert words and words[0] in text
    if fmt == "srt":
        assert "00:00:00,000 --> " in text
    if fmt == "vtt":
        assert text.startswith("WEBVTT")
    if fmt == "json":
        assert json.loads(text)[0]["end"] == pytest.approx(len(g["audio"]) / 16000)


def test_vad_mode_is_the_default(capsys):
    code, out, err = cli(capsys, SPEECH, "--model", MODEL, "--tokens")
    assert code == 0, err
    segs = json.loads(out)["segments"]
    assert len(segs) == 1 and segs[0]["tokens"]


def write_wav(path, samples, rate=16000):
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((np.asarray(samples) * 32767).astype("<i2").tobytes())


def copy_model(tmp_path):
    d = tmp_path / "model"
    shutil.copytree(MODEL, d, ignore=shutil.ignore_patterns("golden"))
    return d


def check_error(capsys, code_want, *args, match=None):
    code, out, err = cli(capsys, *args)
    assert code == code_want, (code, err)
    assert out == ""
    assert "Traceback" not in err and err.count("\n") == 1 and err.startswith("livecap-transcribe: ")
    if match:
        assert match in err, err


def test_model_problems_exit_3(capsys, tmp_path):
    d = copy_model(tmp_path)
    st = d / "model.safetensors"
    data = st.read_bytes()
    st.write_bytes(data[: len(data) - 1000])
    check_error(capsys, 3, SPEECH, "--model", d, match="truncated")
    st.write_bytes(data)
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "model_type": "whisper"}))
    check_error(capsys, 3, SPEECH, "--model", d, match="Unsupported model type 'whisper'")
    (d / "config.json").write_text(json.dumps(cfg))
    (d / "tokenizer.json").unlink()
    check_error(capsys, 3, SPEECH, "--model", d, match="tokenizer.json")
    empty = tmp_path / "empty"
    empty.mkdir()
    check_error(capsys, 3, SPEECH, "--model", empty, match="No model found")
    check_error(capsys, 3, SPEECH, "--model", tmp_path / "nope", match="does not exist")


def test_audio_problems_exit_4(capsys, tmp_path):
    txt = tmp_path / "notes.txt"
    txt.write_text("this is not audio\n")
    check_error(capsys, 4, txt, "--model", MODEL)
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    check_error(capsys, 4, empty, "--model", MODEL)
    check_error(capsys, 4, tmp_path / "missing.wav", "--model", MODEL)


def test_wav_without_samples_succeeds_with_no_text(capsys, tmp_path):
    f = tmp_path / "zero.wav"
    write_wav(f, np.zeros(0))
    for extra in ([], ["--no-vad"]):
        code, out, err = cli(capsys, f, "--model", MODEL, *extra)
        assert code == 0 and out.strip() == "" and err == ""
        code, out, err = cli(capsys, f, "--model", MODEL, "--tokens", *extra)
        assert code == 0 and json.loads(out)["segments"] == []


def test_usage_errors_exit_2(capsys, tmp_path):
    check_error(capsys, 2, SPEECH, "--model", MODEL, "--backend", "numpy", "--dtype", "float16", match="float32 only")
    check_error(capsys, 2, SPEECH, "--model", MODEL, "--delay-ms", "480", match="Voxtral")
    check_error(capsys, 2, SPEECH, "--model", MODEL, "--backend", "tpu")
    check_error(capsys, 2, SPEECH)  # no --model
    long = tmp_path / "long.wav"
    write_wav(long, np.zeros(16000 * 83))
    check_error(capsys, 2, long, "--model", MODEL, "--no-vad", match="81.9 s")


def test_stdin_raw_float32():
    g = golden("moon_small_like", "speech")
    r = subprocess.run([sys.executable, "-m", "engine.cli", "-", "--model", str(MODEL), "--no-vad", "--tokens"],
                       input=g["audio"].astype("<f4").tobytes(), capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["segments"][0]["tokens"] == g["greedy"].tolist()
