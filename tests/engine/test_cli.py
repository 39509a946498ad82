"""``livecap-transcribe``: ids equal the reference goldens; every bad input is one sentence and an exit code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import wave
from pathlib import Path

import numpy as np
import pytest

from engine.cli import main
from tests.conftest import FIXTURES, golden
from tests.helpers import run_engine_cli, sigint_default

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
    code, out, err = cli(
        capsys,
        FIXTURES / "audio" / f"{clip}.wav",
        "--model",
        FIXTURES / "models" / name,
        "--backend",
        backend,
        "--dtype",
        "float32",
        "--no-vad",
        "--tokens",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["family"] == "moonshine_streaming"
    assert [s["tokens"] for s in doc["segments"]] == [golden(name, clip)["greedy"].tolist()]


def test_console_script_runs_without_traceback(tmp_path):
    r = run_engine_cli(SPEECH, "--model", MODEL, "--no-vad", capture_output=True)
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


def test_vad_tokens_run_to_the_reference_end(capsys):
    """With --tokens each segment's ids are the greedy decode of its audio up to EOS or the length cap, as the
    reference generate() gives them: the app's repetition guard cut moon_tiny_like's segment after 9 of 21."""
    from engine import load_model
    from engine.audio import read_audio
    from engine.models.moonshine.session import transcribe_segment

    model = FIXTURES / "models" / "moon_tiny_like"
    code, out, err = cli(capsys, SPEECH, "--model", model, "--tokens", "--backend", "numpy")
    assert code == 0, err
    segs = json.loads(out)["segments"]
    audio, m = read_audio(SPEECH), load_model(model, backend="numpy")
    assert segs and all(
        s["tokens"] == transcribe_segment(m, audio[round(s["start"] * 16000) : round(s["end"] * 16000)]) for s in segs
    )


def test_no_vad_below_one_frame_is_an_empty_transcript(capsys, tmp_path):
    """40 samples (2.5 ms) are less than one 5 ms encoder frame: no line, no NaN warning, no garbage token."""
    f = tmp_path / "blip.wav"
    write_wav(f, np.full(40, 0.1))
    code, out, err = cli(capsys, f, "--model", MODEL, "--no-vad", "--tokens")
    assert code == 0, err
    assert json.loads(out)["segments"] == [] and "Warning" not in err


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


@pytest.mark.parametrize("fmt", ["txt", "json", "srt", "vtt"])
def test_the_format_follows_the_output_name(capsys, tmp_path, fmt):
    """``-o out.srt`` without ``--format`` used to write plain text into out.srt."""
    code, expected, err = cli(capsys, SPEECH, "--model", MODEL, "--no-vad", "--format", fmt)
    assert code == 0, err
    code, out, err = cli(capsys, SPEECH, "--model", MODEL, "--no-vad", "-o", tmp_path / f"out.{fmt.upper()}")
    assert code == 0 and out == "" and err == "", err
    assert (tmp_path / f"out.{fmt.upper()}").read_text() == expected


def test_an_unknown_output_extension_keeps_txt_and_a_contradiction_is_refused(capsys, tmp_path):
    code, expected, err = cli(capsys, SPEECH, "--model", MODEL, "--no-vad")
    assert code == 0, err
    assert cli(capsys, SPEECH, "--model", MODEL, "--no-vad", "-o", tmp_path / "out.log")[0] == 0
    assert (tmp_path / "out.log").read_text() == expected
    check_error(
        capsys,
        2,
        *(SPEECH, "--model", MODEL, "--no-vad", "--format", "txt", "-o", tmp_path / "out.srt"),
        match="--format txt does not match the output file name",
    )
    assert not (tmp_path / "out.srt").exists()


def test_delay_ms_is_checked_before_the_model_loads(capsys, tmp_path):
    check_error(capsys, 2, SPEECH, "--model", tmp_path / "missing", "--delay-ms", "500", match="multiple of 80")


def test_stdin_takes_no_compressed_audio(tmp_path):
    """Piped FLAC used to be read as raw float32: an empty transcript, rc 0, and a warning about invalid samples."""
    import soundfile

    flac = tmp_path / "speech.flac"
    soundfile.write(str(flac), soundfile.read(str(SPEECH))[0], 16000, format="FLAC")
    with open(flac, "rb") as piped:
        r = run_engine_cli("-", "--model", MODEL, "--no-vad", stdin=piped, capture_output=True)
    assert r.returncode == 4 and r.stdout == ""
    assert r.stderr == (
        "livecap-transcribe: Cannot read audio from standard input: it holds FLAC, and standard input takes WAV or "
        "raw float32 16 kHz mono only; give the file's name instead of -.\n"
    )


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


def test_a_mistyped_relative_folder_is_not_taken_for_a_hub_model(capsys, tmp_path, monkeypatch):
    """``--model models/voxtal`` beside a folder ``models`` said the hub could not be reached (and online it would
    have looked for a hub model of that name): it is a folder that does not exist."""
    from tests.fakehub import block_network

    block_network(monkeypatch)
    (tmp_path / "models").mkdir()
    monkeypatch.chdir(tmp_path)
    check_error(capsys, 3, SPEECH, "--model", "models/voxtal", match="The model folder models/voxtal does not exist")


def test_audio_problems_exit_4(capsys, tmp_path):
    txt = tmp_path / "notes.txt"
    txt.write_text("this is not audio\n")
    check_error(capsys, 4, txt, "--model", MODEL)
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    check_error(capsys, 4, empty, "--model", MODEL)
    check_error(capsys, 4, tmp_path / "missing.wav", "--model", MODEL)


def test_wav_without_samples_succeeds_with_no_text_and_says_so(capsys, tmp_path):
    """A WAV with a header and 0 samples gave exit 0, an empty output and no word, while one sample warns that the
    transcript is empty (QA)."""
    f = tmp_path / "zero.wav"
    write_wav(f, np.zeros(0))
    said = f"livecap-transcribe: warning: '{f}' holds no audio, only a header; the transcript is empty.\n"
    for extra in ([], ["--no-vad"]):
        code, out, err = cli(capsys, f, "--model", MODEL, *extra)
        assert code == 0 and out.strip() == "" and err == said
        code, out, err = cli(capsys, f, "--model", MODEL, "--tokens", *extra)
        assert code == 0 and json.loads(out)["segments"] == [] and err == said


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
    r = subprocess.run(
        [sys.executable, "-m", "engine.cli", "-", "--model", str(MODEL), "--no-vad", "--tokens"],
        input=g["audio"].astype("<f4").tobytes(),
        capture_output=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["segments"][0]["tokens"] == g["greedy"].tolist()


def test_16_bit_samples_on_stdin_get_a_hint_that_raw_means_float32():
    """Raw 16-bit PCM piped to ``-`` gave a nonsense transcript and only "N samples ... were not valid numbers"
    (CLI QA): nothing said the input is read as 32-bit floats. A few invalid samples in float input keep the
    plain warning."""
    from engine.audio import read_audio

    speech = read_audio(SPEECH)
    pcm16 = (np.clip(speech, -1, 1) * 32767).astype("<i2").tobytes()
    cmd = [sys.executable, "-m", "engine.cli", "-", "--model", str(MODEL), "--no-vad"]
    r = subprocess.run(cmd, input=pcm16, capture_output=True, text=False, timeout=120)
    assert r.returncode == 0
    stderr = r.stderr.decode()
    assert "were not valid numbers" in stderr and "must be 32-bit float 16 kHz mono" in stderr, stderr
    floats = speech.astype("<f4")
    floats[100:110] = np.nan
    r = subprocess.run(cmd, input=floats.tobytes() + b"\x01\x02", capture_output=True, text=False, timeout=120)
    stderr = r.stderr.decode()
    assert r.returncode == 0 and "were not valid numbers" in stderr and "must be 32-bit" not in stderr, stderr
    # two stray bytes at the end: said as such, not as a file "cut short or damaged"
    assert "standard input ended inside a sample: its last 2 bytes (less than one 32-bit float sample) were " in stderr
    assert "ends early" not in stderr


# ---------------------------------------------------------------- issue #12: nothing lost, nothing hangs


def test_output_that_is_the_input_is_refused(capsys, tmp_path):
    """``-o rec.wav`` on ``rec.wav`` used to overwrite the recording with text (rc 0)."""
    rec = tmp_path / "rec.wav"
    shutil.copyfile(SPEECH, rec)
    before = rec.read_bytes()
    (tmp_path / "sym.wav").symlink_to(rec)
    os.link(rec, tmp_path / "hard.wav")
    for out in (rec, tmp_path / "sym.wav", tmp_path / "hard.wav", tmp_path / "." / "rec.wav"):
        check_error(capsys, 2, rec, "--model", MODEL, "--no-vad", "-o", out, match="is the input audio file")
    check_error(capsys, 2, tmp_path / "sym.wav", "--model", MODEL, "-o", rec, match="is the input audio file")
    assert rec.read_bytes() == before


def _limited_file_size(limit: int):
    """preexec_fn: files may not grow past ``limit`` bytes (EFBIG, like a disk that fills up mid-write)."""

    def apply():
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_output_write_is_atomic_when_the_disk_fills(tmp_path):
    """A write that fails part way keeps the old file whole and leaves no partial or temporary file."""
    out = tmp_path / "out.json"
    out.write_text("the old transcript, which must survive\n")
    r = run_engine_cli(
        *(SPEECH, "--model", MODEL, "--no-vad", "--backend", "numpy", "-o", out),
        capture_output=True,
        preexec_fn=_limited_file_size(16),
    )
    assert r.returncode == 1, r.stderr
    assert "Cannot write the transcript to" in r.stderr and "Traceback" not in r.stderr
    assert out.read_text() == "the old transcript, which must survive\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-80", "NaN"])
def test_chunk_ms_must_be_a_positive_number(capsys, value):
    check_error(capsys, 2, SPEECH, "--model", MODEL, f"--chunk-ms={value}", match="--chunk-ms")


def test_stdout_on_a_full_disk_is_a_write_error():
    with open("/dev/full", "w") as full:
        r = run_engine_cli(SPEECH, "--model", MODEL, "--no-vad", stdout=full, stderr=subprocess.PIPE)
    assert r.returncode == 1
    assert r.stderr == "livecap-transcribe: Cannot write to standard output: no space left on device.\n"


def _float_wav(path, x, rate=16000):
    import soundfile

    soundfile.write(str(path), np.asarray(x, np.float32), rate, subtype="FLOAT")
    return path


def test_invalid_samples_are_silenced_counted_and_reported(tmp_path):
    """6 ms of NaN (and a few inf) in a float WAV: one warning with the count, the same text as zeros there,
    and no NumPy RuntimeWarning."""
    from engine.audio import read_audio

    clean = read_audio(SPEECH)
    bad = clean.copy()
    bad[8000:8096] = np.nan
    bad[20000:20004] = [np.inf, -np.inf, np.inf, np.nan]
    zeroed = np.where(np.isfinite(bad), bad, 0).astype(np.float32)
    outs = {}
    for name, x in (("bad", bad), ("zeroed", zeroed)):
        wav = _float_wav(tmp_path / f"{name}.wav", x)
        r = subprocess.run(
            [
                sys.executable,
                "-W",
                "always",
                "-m",
                "engine.cli",
                str(wav),
                "--model",
                str(MODEL),
                "--no-vad",
                "--tokens",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        outs[name] = (json.loads(r.stdout), r.stderr)
    assert outs["bad"][0] == outs["zeroed"][0]
    assert outs["zeroed"][1] == ""
    assert outs["bad"][1] == (
        "livecap-transcribe: warning: 100 samples (6 ms) of the audio were not valid "
        "numbers (NaN, infinite or absurdly large) and were replaced by silence.\n"
    )


def test_a_file_cut_short_is_transcribed_with_a_warning(tmp_path):
    data = SPEECH.read_bytes()
    cut = tmp_path / "cut.wav"
    cut.write_bytes(data[: len(data) // 2])
    r = subprocess.run(
        [sys.executable, "-m", "engine.cli", str(cut), "--model", str(MODEL), "--no-vad"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith(f"livecap-transcribe: warning: '{cut}' ends early: only ") and r.stderr.count("\n") == 1


def test_nonsense_sample_rate_is_an_audio_error(capsys, tmp_path):
    """A header that says 1 Hz used to end in "Out of memory"."""
    f = tmp_path / "one-hertz.wav"
    write_wav(f, np.zeros(16000), rate=16000)
    data = bytearray(f.read_bytes())
    data[24:28] = (1).to_bytes(4, "little")  # the fmt chunk's sample rate
    data[28:32] = (2).to_bytes(4, "little")  # its byte rate
    f.write_bytes(bytes(data))
    check_error(capsys, 4, f, "--model", MODEL, match="sample rate of 1 Hz")


def test_flac_gives_exactly_the_text_of_the_same_wav(capsys, tmp_path):
    """Lossless input decodes to the very samples of the WAV (also through the resampler): same tokens."""
    import soundfile

    x = soundfile.read(str(SPEECH), dtype="float32")[0]
    pcm = np.round(np.clip(x, -1, 1) * 32767).astype(np.int16)
    for rate in (16000, 44100):
        if rate != 16000:
            from engine.audio import resample

            pcm = np.round(np.clip(resample(pcm / 32768.0, 16000, rate), -1, 1) * 32767).astype(np.int16)
        wav, flac = tmp_path / f"a{rate}.wav", tmp_path / f"a{rate}.flac"
        soundfile.write(str(wav), pcm, rate, subtype="PCM_16")
        soundfile.write(str(flac), pcm, rate, format="FLAC", subtype="PCM_16")
        docs = []
        for f in (wav, flac):
            code, out, err = cli(capsys, f, "--model", MODEL, "--no-vad", "--tokens")
            assert code == 0, err
            docs.append(json.loads(out))
        assert docs[0] == docs[1] and docs[0]["segments"][0]["tokens"]


def _stamps(text: str) -> list[float]:
    import re

    found = re.findall(r"(\d\d):(\d\d):(\d\d)[.,](\d\d\d)", text)
    return [int(h) * 3600 + int(m) * 60 + int(s) + int(ms) / 1000 for h, m, s, ms in found]


@pytest.mark.parametrize(
    "model,extra",
    [
        ("vox_tiny_hf", ["--delay-ms", "480"]),
        ("vox_tiny_hf", ["--delay-ms", "2400"]),
        ("moon_small_like", ["--no-vad"]),
    ],
)
def test_no_time_past_the_end_of_the_audio(capsys, tmp_path, model, extra):
    """1.006 s of audio: Voxtral's lines ended at 1.84 s (text from the final padding), and the SRT/VTT cue
    of a line ending at the audio's end was extended past it. Now no time passes the audio's end."""
    from engine.audio import read_audio

    f = tmp_path / "short.wav"
    write_wav(f, read_audio(SPEECH)[:16096])
    end = 16096 / 16000
    for fmt in ("json", "srt", "vtt"):
        code, out, err = cli(capsys, f, "--model", FIXTURES / "models" / model, *extra, "--format", fmt)
        assert code == 0, err
        if fmt == "json":
            lines = json.loads(out)
            assert lines
            times = [t for ln in lines for t in (ln["start"], ln["end"])]
            times += [t for ln in lines for w in ln.get("words", []) for t in (w["start"], w["end"])]
        else:
            times = _stamps(out)
        assert all(0 <= t <= round(end, 3) for t in times), (fmt, times)
        if fmt in ("srt", "vtt"):
            assert max(times) == round(end, 3)


# ---------------------------------------------------------------- standard input and output, interruptions


def test_stdin_redirected_from_the_output_file_is_refused(tmp_path):
    """``- -o rec.wav < rec.wav`` overwrote the recording with a transcript (rc 0)."""
    rec = tmp_path / "rec.wav"
    shutil.copyfile(SPEECH, rec)
    before = rec.read_bytes()
    for out in (rec, "/dev/stdin"):
        with open(rec, "rb") as stdin:
            r = run_engine_cli("-", "--model", MODEL, "-o", out, stdin=stdin, capture_output=True)
        assert r.returncode == 2 and "is the input audio file" in r.stderr, r.stderr
        assert rec.read_bytes() == before


def test_output_dash_is_standard_output(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, SPEECH, "--model", MODEL, "--no-vad", "-o", "-", "--format", "srt")
    assert code == 0 and out.startswith("1\n00:00:") and err == ""
    assert list(tmp_path.iterdir()) == []  # no file named "-"


def test_tokens_with_a_text_format_are_refused(capsys, tmp_path):
    check_error(capsys, 2, SPEECH, "--model", MODEL, "--tokens", "-o", tmp_path / "t.srt", match="--tokens writes JSON")
    check_error(capsys, 2, SPEECH, "--model", MODEL, "--tokens", "--format", "vtt", match="--tokens writes JSON")
    assert not (tmp_path / "t.srt").exists()
    code, out, _ = cli(capsys, SPEECH, "--model", MODEL, "--tokens", "--format", "json")
    assert code == 0 and "segments" in json.loads(out)


def test_empty_standard_input_is_an_audio_error_and_keeps_the_output(tmp_path):
    """``(exit 1) | livecap-transcribe - -o out.srt`` said nothing, exited 0 and emptied out.srt."""
    out = tmp_path / "out.srt"
    out.write_text("the transcript of yesterday\n")
    r = run_engine_cli("-", "--model", MODEL, "-o", out, input="", capture_output=True)
    assert r.returncode == 4 and "held no audio" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert out.read_text() == "the transcript of yesterday\n"


def _pipe_bytes(fd: int) -> int:
    import fcntl
    import termios

    return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), "little")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_an_interrupted_run_writes_what_it_transcribed(tmp_path, sig):
    """Ctrl+C (or SIGTERM) in the middle of the audio wrote nothing (exit 130 / 143): now the transcript of the
    audio fed until then is written, and stderr says it stopped."""
    import signal

    audio = golden("moon_small_like", "speech")["audio"][: 2 * 16000].astype("<f4")
    whole = tmp_path / "two_seconds.wav"
    write_wav(whole, audio)
    expected = run_engine_cli(whole, "--model", MODEL, "--no-vad", capture_output=True)
    assert expected.returncode == 0 and expected.stdout.strip(), expected.stderr
    out = tmp_path / "out.txt"
    cmd = [sys.executable, "-m", "engine.cli", "-", "--model", str(MODEL), "--no-vad", "-o", str(out)]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=False, preexec_fn=sigint_default)
    try:
        p.stdin.write(audio.tobytes())  # two seconds, and the pipe stays open: the feed waits for more
        p.stdin.flush()
        deadline = time.monotonic() + 60
        while _pipe_bytes(p.stdin.fileno()) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # the last chunk fed; the CLI waits in its read
        p.send_signal(getattr(signal, sig))
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
    err = err.decode()
    assert p.returncode == 128 + getattr(signal, sig), err
    assert f"stopped ({sig}) after 2.0 s of audio" in err and "Traceback" not in err
    assert out.read_text() == expected.stdout


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_in_the_first_moments_is_no_traceback():
    """Ctrl+C in the first ~0.15 s printed a traceback (KeyboardInterrupt inside an import: importing the CLI
    loaded NumPy and the engine before ``main`` could catch it; CLI QA). The CLI module now imports the standard
    library only, and what is heavier loads inside ``main``."""
    import signal

    began = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-c", "import sys, engine.cli; print(sorted({'numpy', 'engine.loader'} & set(sys.modules)))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    startup = time.monotonic() - began  # the interpreter's own start (a Ctrl+C there is Python's traceback)
    assert r.stdout.strip() == "[]", r.stdout + r.stderr
    script = str(Path(sys.executable).parent / "livecap-transcribe")
    for delay in (1.5 * startup, 1.5 * startup + 0.05):  # while NumPy and the engine load
        p = subprocess.Popen(
            [script, str(SPEECH), "--model", str(MODEL)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=sigint_default,
        )
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
        assert "Traceback" not in err and p.returncode in (130, -signal.SIGINT), (delay, p.returncode, err)


SWALLOWING = """
import signal, sys, time
import engine.loader as loader
from engine import cli

real = loader.load_model


def swallow(sig):  # a library that swallows the KeyboardInterrupt raised inside it
    try:
        signal.raise_signal(sig)  # the handler raises here
        time.sleep(10)
    except KeyboardInterrupt:
        {swallow}

"""

SWALLOWING_LOADER = (
    SWALLOWING
    + """
def load_model(*args, **kwargs):
    swallow(signal.{sig})
    return real(*args, **kwargs)


loader.load_model = load_model
sys.exit(cli.main(sys.argv[1:]))
"""
)


@pytest.mark.parametrize("sig, code", [("SIGINT", 130), ("SIGTERM", 143)])
@pytest.mark.parametrize("swallow", ["pass", "raise ImportError('numpy failed to import')"])
def test_a_stop_signal_that_a_library_swallowed_still_stops_the_run(tmp_path, sig, code, swallow):
    """Ctrl+C while ``import onnxruntime`` or NumPy's import ran became an ImportError there: ONNX Runtime was taken
    for missing and the whole file was transcribed (exit 0), or "Unexpected error (ImportError: ...)" (exit 1);
    under load, 10 of 80 Ctrl+Cs 0.03-0.6 s after the start (and CI once). Before the feed nothing is written."""
    out = tmp_path / "out.txt"
    r = subprocess.run(
        [sys.executable, "-c", SWALLOWING_LOADER.format(sig=sig, swallow=swallow), str(SPEECH), "--model", str(MODEL)]
        + ["-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=sigint_default,
    )
    assert (r.returncode, r.stderr) == (code, "") and not out.exists(), (r.returncode, r.stderr)


SWALLOWING_FEED = (
    SWALLOWING.format(swallow="pass")
    + """
def load_model(*args, **kwargs):
    model = real(*args, **kwargs)
    start = model.start_session

    def start_session(**options):
        session = start(**options)
        feed = session.feed

        def first_feed(chunk):  # ONNX Runtime imported by the first step, the Ctrl+C swallowed there
            session.feed = feed
            swallow(signal.SIGINT)
            return feed(chunk)

        session.feed = first_feed
        return session

    model.start_session = start_session
    return model


loader.load_model = load_model
sys.exit(cli.main(sys.argv[1:]))
"""
)


def run_script(script: str, out) -> subprocess.CompletedProcess:
    """``script`` (a patched CLI) over the speech clip without VAD, written to ``out``, with Ctrl+C's default action."""
    return subprocess.run(
        [sys.executable, "-c", script, str(SPEECH), "--model", str(MODEL), "--no-vad", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=sigint_default,
    )


def test_a_ctrl_c_swallowed_in_the_first_step_stops_the_feed_there(tmp_path):
    """As above, inside the first step: the feed stops after it and what it heard is written, as for any Ctrl+C."""
    out = tmp_path / "out.txt"
    r = run_script(SWALLOWING_FEED, out)
    assert r.returncode == 130 and out.exists(), (r.returncode, r.stderr)
    assert r.stderr == (
        "livecap-transcribe: stopped (SIGINT) after 0.1 s of audio; the transcript holds what was transcribed until "
        "then.\n"
    )


_SWALLOWED_FIRST_FEED = (
    "            session.feed = feed\n            swallow(signal.SIGINT)\n            return feed(chunk)\n"
)
assert _SWALLOWED_FIRST_FEED in SWALLOWING_FEED
STOPPED_AT_ONCE = SWALLOWING_FEED.replace(  # Ctrl+C before the first chunk was heard
    _SWALLOWED_FIRST_FEED, "            signal.raise_signal(signal.SIGINT)\n"
)


def test_a_ctrl_c_before_anything_was_transcribed_keeps_the_file_there(tmp_path):
    """QA: Ctrl+C just after the start replaced an existing transcript with an empty file (0 bytes)."""
    out = tmp_path / "out.srt"
    out.write_text("1\n00:00:00,000 --> 00:00:01,000\nold\n", encoding="utf-8")
    before = out.read_bytes()
    r = run_script(STOPPED_AT_ONCE, out)
    assert r.returncode == 130, r.stderr
    assert out.read_bytes() == before
    assert r.stderr == (
        f"livecap-transcribe: stopped (SIGINT) after 0.0 s of audio; nothing was transcribed, so {out} was not "
        "written.\n"
    )


def test_a_closed_standard_output_is_one_sentence():
    """``livecap-transcribe x.wav >&-`` said "Unexpected error (AttributeError ...)"."""
    r = run_engine_cli(
        SPEECH,
        "--model",
        MODEL,
        "--no-vad",
        capture_output=False,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: os.close(1),
    )
    assert r.returncode == 1 and r.stderr == (
        "livecap-transcribe: Cannot write to standard output: it is closed; give -o FILE.\n"
    )


def test_long_output_names_are_written_or_refused_before_the_work(capsys, tmp_path):
    """A 245-character name (valid) failed after the whole transcription: its temporary name added 14 characters
    past the 255-byte limit; a name past the limit was refused only after the work too (QA)."""
    code, expected, err = cli(capsys, SPEECH, "--model", MODEL, "--no-vad")
    assert code == 0, err
    ok = tmp_path / ("n" * 241 + ".txt")
    code, out, err = cli(capsys, SPEECH, "--model", MODEL, "--no-vad", "-o", ok)
    assert code == 0 and ok.read_text(encoding="utf-8") == expected and os.listdir(tmp_path) == [ok.name], err
    too_long = tmp_path / ("n" * 300 + ".txt")
    started = time.monotonic()
    code, out, err = cli(capsys, SPEECH, "--model", MODEL, "--no-vad", "-o", too_long)
    assert code == 2 and "the file name is longer than the 255 bytes" in err and err.count("\n") == 1
    assert time.monotonic() - started < 5


def test_a_read_only_output_file_is_not_replaced(capsys, tmp_path):
    """-o onto a file with no write permission (0444, "do not overwrite") replaced it without a word: the atomic
    rename only needs the folder to be writable (QA)."""
    kept = tmp_path / "kept.txt"
    kept.write_text("old\n")
    kept.chmod(0o444)
    code, out, err = cli(capsys, SPEECH, "--model", MODEL, "--no-vad", "-o", kept)
    assert code == 2 and "the file is read-only; choose another file or make it writable" in err
    assert kept.read_text() == "old\n"


def test_a_file_of_which_nothing_decodes_is_an_audio_problem(capsys, tmp_path):
    """A FLAC cut after its header gave exit 0, an empty transcript and "ends early: only 0.0 s" (QA)."""
    import soundfile

    path = tmp_path / "cut.flac"
    noise = np.random.default_rng(0).standard_normal(16000 * 3).astype(np.float32) * 0.1  # frames of silence are
    soundfile.write(str(path), noise, 16000)  # so small that FFmpeg decodes some from the first 100 bytes
    path.write_bytes(path.read_bytes()[:100])
    out_file = tmp_path / "out.txt"
    code, out, err = cli(capsys, path, "--model", MODEL, "--no-vad", "-o", out_file)
    assert code == 4 and "none of its audio could be decoded" in err and err.count("\n") == 1
    assert not out_file.exists()


def test_tokens_into_a_text_file_names_the_way_out(capsys, tmp_path):
    code, out, err = cli(capsys, SPEECH, "--model", MODEL, "--tokens", "-o", tmp_path / "t.srt")
    assert code == 2 and "--tokens writes JSON, not srt; give -o a .json name." in err and "--format" not in err


def test_engine_warnings_are_said_with_the_programs_name(capsys, monkeypatch):
    """An engine warning reached stderr bare ("CPU twin 8714 stopped (no answer within 50 ms); ...", QA), unlike
    every other message of the command."""
    import logging

    from engine.cli import say_warnings

    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    monkeypatch.delenv("LIVECAP_DEBUG", raising=False)
    say_warnings()
    logging.getLogger("engine.backends.cpu_twin").warning("CPU twin %d stopped (%s)", 8714, "no answer within 50 ms")
    logging.getLogger("engine.loader").info("not said")
    assert capsys.readouterr().err == "livecap-transcribe: warning: CPU twin 8714 stopped (no answer within 50 ms)\n"


def test_a_file_with_nothing_said_writes_an_empty_transcript_and_says_so(capsys, tmp_path):
    """Three seconds of silence to SRT gave a 0-byte file and nothing on stderr: it looked broken (ffmpeg refuses
    it, "Invalid data found")."""
    silence = tmp_path / "silence.wav"
    write_wav(silence, np.zeros(16000 * 3))
    out_file = tmp_path / "out.srt"
    code, out, err = cli(capsys, silence, "--model", MODEL, "-o", out_file)
    assert code == 0 and out_file.read_text(encoding="utf-8") == ""
    assert err == f"livecap-transcribe: warning: nothing was recognised in '{silence}'; the transcript is empty.\n"
