"""read_audio and the RIFF parser, against WAV files written by the small writer below."""

from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.audio import read_audio
from engine.errors import AudioError

REPO = Path(__file__).resolve().parents[3]
GUID_TAIL = b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"


# ---------------------------------------------------------------- a WAV writer independent of the parser


def chunk(cid: bytes, body: bytes) -> bytes:
    """One RIFF chunk, with its pad byte when the body is odd-sized."""
    return cid + struct.pack("<I", len(body)) + body + (b"\x00" if len(body) % 2 else b"")


def fmt_body(tag: int, channels: int, rate: int, bits: int, *, extensible: bool = False) -> bytes:
    align = channels * ((bits + 7) // 8)
    head = struct.pack("<HHIIHH", 0xFFFE if extensible else tag, channels, rate, rate * align, align, bits)
    if not extensible:
        return head
    return head + struct.pack("<HHI", 22, bits, 0) + struct.pack("<H", tag) + GUID_TAIL


def wav(
    payload: bytes,
    *,
    rate: int = 16000,
    channels: int = 1,
    bits: int = 16,
    tag: int = 1,
    extensible: bool = False,
    before: bytes = b"",
    after: bytes = b"",
    data_size: int | None = None,
) -> bytes:
    """A WAV file; ``before``/``after`` are raw chunks around ``data``; ``data_size`` fakes its size."""
    size = len(payload) if data_size is None else data_size
    pad = b"\x00" if len(payload) % 2 and data_size is None else b""
    data = b"data" + struct.pack("<I", size) + payload + pad
    fmt = chunk(b"fmt ", fmt_body(tag, channels, rate, bits, extensible=extensible))
    body = b"WAVE" + fmt + before + data + after
    return b"RIFF" + struct.pack("<I", len(body)) + body


def pcm16(ints) -> bytes:
    return np.asarray(ints, dtype="<i2").tobytes()


def pcm24(ints) -> bytes:
    raw = np.asarray(ints, dtype="<i4").tobytes()
    return b"".join(raw[i : i + 3] for i in range(0, len(raw), 4))


def pcm32(ints) -> bytes:
    return np.asarray(ints, dtype="<i4").tobytes()


def f32(x) -> bytes:
    return np.asarray(x, dtype="<f4").tobytes()


def sine(freq: float, rate: int, seconds: float, amp: float = 0.5) -> np.ndarray:
    t = np.arange(int(round(rate * seconds))) / rate
    return amp * np.sin(2 * np.pi * freq * t)


def write(tmp_path: Path, data: bytes, name: str = "a.wav") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


# ---------------------------------------------------------------- exact decoding at 16 kHz


RNG = np.random.default_rng(1234)


def test_int16_exact(tmp_path):
    ints = np.concatenate([[-32768, -1, 0, 1, 32767], RNG.integers(-32768, 32768, 500)])
    out = read_audio(write(tmp_path, wav(pcm16(ints))))
    assert out.dtype == np.float32 and out.ndim == 1
    np.testing.assert_array_equal(out, (ints / 32768.0).astype(np.float32))


def test_int24_exact(tmp_path):
    ints = np.concatenate([[-(1 << 23), -1, 0, 1, (1 << 23) - 1], RNG.integers(-(1 << 23), 1 << 23, 501)])
    out = read_audio(write(tmp_path, wav(pcm24(ints), bits=24)))
    np.testing.assert_array_equal(out, (ints / float(1 << 23)).astype(np.float32))


def test_int32_exact(tmp_path):
    ints = np.array([-(1 << 31), -(1 << 8), 0, 1 << 8, (1 << 31) - (1 << 8)])
    out = read_audio(write(tmp_path, wav(pcm32(ints), bits=32)))
    np.testing.assert_array_equal(out, (ints / float(1 << 31)).astype(np.float32))


def test_uint8_exact(tmp_path):
    raw = np.array([0, 1, 127, 128, 129, 255, 7], dtype=np.uint8)  # odd length: padded data chunk
    out = read_audio(write(tmp_path, wav(raw.tobytes(), bits=8)))
    np.testing.assert_array_equal(out, ((raw.astype(np.float64) - 128) / 128).astype(np.float32))


def test_float32_exact(tmp_path):
    x = RNG.uniform(-1, 1, 777).astype(np.float32)
    out = read_audio(write(tmp_path, wav(f32(x), bits=32, tag=3)))
    np.testing.assert_array_equal(out, x)


def test_float64(tmp_path):
    x = RNG.uniform(-1, 1, 100)
    out = read_audio(write(tmp_path, wav(np.asarray(x, "<f8").tobytes(), bits=64, tag=3)))
    np.testing.assert_array_equal(out, x.astype(np.float32))


@pytest.mark.parametrize(
    "tag,bits,payload,expected",
    [
        (1, 16, pcm16([-32768, 16384, 3]), [-1.0, 0.5, 3 / 32768]),
        (1, 24, pcm24([-(1 << 23), 1 << 22, 5]), [-1.0, 0.5, 5 / (1 << 23)]),
        (3, 32, f32([0.25, -0.75, 1e-3]), [0.25, -0.75, 1e-3]),
    ],
)
def test_extensible(tmp_path, tag, bits, payload, expected):
    out = read_audio(write(tmp_path, wav(payload, bits=bits, tag=tag, extensible=True)))
    np.testing.assert_array_equal(out, np.array(expected, dtype=np.float32))


def test_stereo_downmix_by_mean(tmp_path):
    left = RNG.integers(-20000, 20000, 300)
    right = RNG.integers(-20000, 20000, 300)
    inter = np.stack([left, right], axis=1).reshape(-1)
    out = read_audio(write(tmp_path, wav(pcm16(inter), channels=2)))
    np.testing.assert_allclose(out, (left + right) / 2 / 32768.0, rtol=0, atol=1e-7)


def test_stereo_extensible_float(tmp_path):
    x = RNG.uniform(-1, 1, (200, 2)).astype(np.float32)
    out = read_audio(write(tmp_path, wav(f32(x.reshape(-1)), channels=2, bits=32, tag=3, extensible=True)))
    np.testing.assert_allclose(out, x.mean(axis=1), atol=1e-7)


# ---------------------------------------------------------------- resampling


def _peak_freq(x: np.ndarray, rate: int) -> float:
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.argmax(spec) * rate / len(x))


@pytest.mark.parametrize("rate", [8000, 22050, 44100, 48000])
@pytest.mark.parametrize("encoding", ["int16", "int24", "float32"])
def test_sine_resampled(tmp_path, rate, encoding):
    x = sine(1000.0, rate, 1.0, amp=0.5)
    if encoding == "int16":
        data = wav(pcm16(np.round(x * 32767)), rate=rate)
    elif encoding == "int24":
        data = wav(pcm24(np.round(x * ((1 << 23) - 1))), rate=rate, bits=24)
    else:
        data = wav(f32(x), rate=rate, bits=32, tag=3)
    out = read_audio(write(tmp_path, data))
    assert out.dtype == np.float32
    assert abs(len(out) - 16000) <= 1
    mid = out[2000:14000]
    assert abs(np.abs(mid).max() - 0.5) < 0.005
    assert abs(np.sqrt(np.mean(mid**2)) - 0.5 / np.sqrt(2)) < 0.003
    assert abs(_peak_freq(out[:16000], 16000) - 1000.0) <= 2.0


def test_stereo_44k_downmix_then_resample(tmp_path):
    a = sine(440.0, 44100, 0.5, amp=0.4)
    inter = np.stack([a, a], axis=1).reshape(-1)
    out = read_audio(write(tmp_path, wav(f32(inter), rate=44100, channels=2, bits=32, tag=3)))
    assert abs(len(out) - 8000) <= 1
    assert abs(np.abs(out[1000:7000]).max() - 0.4) < 0.005


def test_above_nyquist_is_filtered(tmp_path):
    # 7.9 kHz at 48 kHz is above the lower band edge of a 16 kHz output (passband ends ~7.6 kHz).
    x = sine(7950.0, 48000, 0.5, amp=0.5)
    out = read_audio(write(tmp_path, wav(f32(x), rate=48000, bits=32, tag=3)))
    assert np.abs(out[1000:-1000]).max() < 0.3


# ---------------------------------------------------------------- chunk layout and truncation


def test_list_and_odd_chunks_before_data(tmp_path):
    ints = np.arange(-50, 51) * 300
    before = chunk(b"LIST", b"INFOISFT\x05\x00\x00\x00abcd\x00") + chunk(b"junk", b"xyz")
    before += chunk(b"fact", b"\x01\x02")
    after = chunk(b"LIST", b"INFOICMT\x03\x00\x00\x00hi\x00")
    out = read_audio(write(tmp_path, wav(pcm16(ints), before=before, after=after)))
    np.testing.assert_array_equal(out, (ints / 32768.0).astype(np.float32))


def test_fmt_after_unknown_odd_chunk(tmp_path):
    ints = np.array([1, 2, 3, -4])
    body = b"WAVE" + chunk(b"bext", b"\x07" * 11) + chunk(b"fmt ", fmt_body(1, 1, 16000, 16))
    body += chunk(b"data", pcm16(ints))
    data = b"RIFF" + struct.pack("<I", len(body)) + body
    np.testing.assert_array_equal(read_audio(write(tmp_path, data)), (ints / 32768.0).astype(np.float32))


def test_truncated_data_reads_what_is_there(tmp_path):
    ints = RNG.integers(-30000, 30000, 1000)
    payload = pcm16(ints) + b"\x12"  # half a frame at the end
    out = read_audio(write(tmp_path, wav(payload, data_size=100_000)))
    np.testing.assert_array_equal(out, (ints / 32768.0).astype(np.float32))


def test_streamed_size_placeholder(tmp_path):
    ints = RNG.integers(-30000, 30000, (64, 2))
    out = read_audio(write(tmp_path, wav(pcm16(ints.reshape(-1)), channels=2, data_size=0xFFFFFFFF)))
    np.testing.assert_allclose(out, ints.mean(axis=1) / 32768.0, atol=1e-7)


def test_truncated_24bit_stereo_partial_frame(tmp_path):
    ints = RNG.integers(-(1 << 23), 1 << 23, (10, 2))
    payload = pcm24(ints.reshape(-1)) + b"\x01\x02\x03\x04"  # 4 of 6 bytes of an 11th frame
    out = read_audio(write(tmp_path, wav(payload, channels=2, bits=24, data_size=6 * 40)))
    assert out.shape == (10,)
    np.testing.assert_allclose(out, ints.mean(axis=1) / float(1 << 23), atol=1e-7)


@pytest.mark.parametrize("rate", [16000, 44100])
def test_zero_samples(tmp_path, rate):
    out = read_audio(write(tmp_path, wav(b"", rate=rate)))
    assert out.dtype == np.float32 and out.shape == (0,)


def test_data_cut_in_the_header(tmp_path):
    full = wav(pcm16([1, 2, 3]))
    cut = full[: full.index(b"data") + 6]  # the size field itself is cut off
    with pytest.raises(AudioError, match="no data chunk"):
        read_audio(write(tmp_path, cut))


@settings(max_examples=40, deadline=None)
@given(
    ints=st.lists(st.integers(-32768, 32767), max_size=64),
    junk=st.lists(st.binary(max_size=9), max_size=3),
    channels=st.sampled_from([1, 2]),
)
def test_int16_layouts_property(ints, junk, channels):
    ints = np.array(ints[: len(ints) - len(ints) % channels], dtype=np.int64)
    before = b"".join(chunk(b"JUNK", j) for j in junk)
    with tempfile.TemporaryDirectory() as d:
        out = read_audio(write(Path(d), wav(pcm16(ints), channels=channels, before=before)))
    expected = (ints.reshape(-1, channels) / 32768.0).mean(axis=1)
    np.testing.assert_allclose(out, expected, atol=1e-7)


# ---------------------------------------------------------------- errors


UNKNOWN = r"not in a format livecap reads \(WAV, FLAC, OGG \(Vorbis, Opus\), MP3, M4A/AAC"  # names what works


def _assert_one_sentence(err: AudioError, name: str) -> None:
    msg = str(err)
    assert name in msg
    assert "\n" not in msg and msg.endswith(".")


@pytest.mark.parametrize(
    "content,fragment",
    [
        (b"", "empty"),
        (b"hello, this is a text file\nwith two lines\n", UNKNOWN),
        (b"RIFF", UNKNOWN),
        (b"ID3\x03\x00\x00\x00\x00\x00\x00" + bytes(100), UNKNOWN),
        (b"RIFF\x10\x00\x00\x00AVI LIST", UNKNOWN),
    ],
)
def test_unreadable_content(tmp_path, content, fragment):
    p = write(tmp_path, content, "bad name.wav")
    with pytest.raises(AudioError, match=fragment) as info:
        read_audio(p)
    _assert_one_sentence(info.value, "bad name.wav")


@pytest.mark.parametrize(
    "tag,bits,extensible,fragment",
    [
        (0x55, 16, False, "MP3"),
        (0x1234, 16, False, "0x1234"),
        (0xF1AC, 16, True, "FLAC"),
    ],
)
def test_unsupported_codecs(tmp_path, tag, bits, extensible, fragment):
    p = write(tmp_path, wav(bytes(64), tag=tag, bits=bits, extensible=extensible), "codec.wav")
    with pytest.raises(AudioError, match=fragment) as info:
        read_audio(p)
    _assert_one_sentence(info.value, "codec.wav")


@pytest.mark.parametrize("subtype", ["ULAW", "ALAW", "IMA_ADPCM", "MS_ADPCM", "GSM610"])
def test_call_recordings_in_telephony_encodings_are_read(tmp_path, subtype):
    """A-law / mu-law WAV (phone and call recordings), ADPCM and GSM were refused as 'only PCM and float WAV'."""
    import soundfile

    t = np.arange(8000 * 2) / 8000
    tone = (0.4 * np.sin(2 * np.pi * 440 * t) * np.minimum(1, 4 * t)).astype(np.float32)
    p = tmp_path / f"call {subtype}.wav"
    soundfile.write(p, tone, 8000, subtype=subtype, format="WAV")
    assert p.read_bytes()[:4] == b"RIFF"
    got = read_audio(p)
    want = read_audio(write(tmp_path, wav(pcm16(np.round(tone * 32767)), rate=8000), "pcm.wav"))
    n = min(len(got), len(want))
    assert abs(len(got) - len(want)) <= 0.05 * len(want)  # codec framing pads the end of some
    lag = int(np.argmax(np.correlate(got[1000:3000], want[1000:1200], "valid")))  # GSM delays the signal a little
    assert np.corrcoef(got[1000 + lag : n - 400], want[1000 : n - 400 - lag])[0, 1] > 0.9


@pytest.mark.parametrize(
    "fmt,fragment",
    [
        (struct.pack("<HHIIHH", 1, 0, 16000, 0, 0, 16), "inconsistent"),
        (struct.pack("<HHIIHH", 1, 1, 0, 0, 2, 16), "inconsistent"),
        (struct.pack("<HHIIHH", 1, 1, 16000, 0, 6, 48), "48-bit"),
        (struct.pack("<HHIIHH", 3, 1, 16000, 0, 2, 16), "16-bit float"),
        (struct.pack("<HHII", 1, 1, 16000, 0), "truncated"),
    ],
)
def test_bad_format_chunks(tmp_path, fmt, fragment):
    body = b"WAVE" + chunk(b"fmt ", fmt) + chunk(b"data", bytes(12))
    p = write(tmp_path, b"RIFF" + struct.pack("<I", len(body)) + body, "fmt.wav")
    with pytest.raises(AudioError, match=fragment) as info:
        read_audio(p)
    _assert_one_sentence(info.value, "fmt.wav")


def test_missing_chunks(tmp_path):
    no_fmt = b"WAVE" + chunk(b"data", bytes(8))
    with pytest.raises(AudioError, match="before the format chunk"):
        read_audio(write(tmp_path, b"RIFF" + struct.pack("<I", len(no_fmt)) + no_fmt))
    only_list = b"WAVE" + chunk(b"LIST", b"INFO")
    with pytest.raises(AudioError, match="no format chunk"):
        read_audio(write(tmp_path, b"RIFF" + struct.pack("<I", len(only_list)) + only_list))
    no_data = b"WAVE" + chunk(b"fmt ", fmt_body(1, 1, 16000, 16))
    with pytest.raises(AudioError, match="no data chunk"):
        read_audio(write(tmp_path, b"RIFF" + struct.pack("<I", len(no_data)) + no_data))


def test_missing_file(tmp_path):
    p = tmp_path / "nope.wav"
    with pytest.raises(AudioError, match="no such file") as info:
        read_audio(p)
    _assert_one_sentence(info.value, "nope.wav")


def test_directory(tmp_path):
    d = tmp_path / "folder.wav"
    d.mkdir()
    with pytest.raises(AudioError, match="directory") as info:
        read_audio(str(d))
    _assert_one_sentence(info.value, "folder.wav")


# ---------------------------------------------------------------- stdin


class _FakeStdin:
    def __init__(self, data: bytes) -> None:
        self.buffer = io.BytesIO(data)


def test_stdin_raw_float32(monkeypatch):
    x = RNG.uniform(-1, 1, 1000).astype(np.float32)
    monkeypatch.setattr(sys, "stdin", _FakeStdin(f32(x) + b"\x01\x02"))  # plus a partial sample
    np.testing.assert_array_equal(read_audio("-"), x)


def test_stdin_empty(monkeypatch):
    monkeypatch.setattr(sys, "stdin", _FakeStdin(b""))
    out = read_audio("-")
    assert out.dtype == np.float32 and out.shape == (0,)


def test_stdin_wav(monkeypatch):
    ints = np.array([100, -200, 300])
    monkeypatch.setattr(sys, "stdin", _FakeStdin(wav(pcm16(ints))))
    np.testing.assert_array_equal(read_audio("-"), (ints / 32768.0).astype(np.float32))


def test_stdin_bad_wav_names_stdin(monkeypatch):
    monkeypatch.setattr(sys, "stdin", _FakeStdin(wav(bytes(8), tag=0x55)))
    with pytest.raises(AudioError, match="standard input"):
        read_audio("-")


def test_stdin_unavailable(monkeypatch):
    monkeypatch.setattr(sys, "stdin", None)
    with pytest.raises(AudioError, match="standard input"):
        read_audio("-")


def test_stdin_through_a_real_pipe():
    x = RNG.uniform(-1, 1, 48000).astype(np.float32)
    code = (
        "import sys, numpy as np\n"
        "from engine.audio import read_audio\n"
        "a = read_audio('-')\n"
        "sys.stdout.write(f'{a.dtype} {a.shape[0]} {float(a.astype(np.float64).sum())!r}')\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], input=f32(x), capture_output=True, cwd=REPO, timeout=60, check=True
    )
    dtype, n, total = res.stdout.decode().split()
    assert dtype == "float32" and int(n) == len(x)
    assert float(total) == pytest.approx(float(x.astype(np.float64).sum()), abs=1e-9)


def test_stdin_raw_float32_that_starts_like_an_mp3_frame_is_raw(monkeypatch):
    """A first sample whose bytes make a valid MPEG audio frame header is still a sample: only a second header
    where that frame ends makes it MP3."""
    x = RNG.uniform(-1, 1, 4000).astype(np.float32)
    x[0] = np.frombuffer(bytes([0xFF, 0xFB, 0x90, 0x44]), "<f4")[0]  # MPEG-1 layer III, 128 kbit/s, 44.1 kHz
    monkeypatch.setattr(sys, "stdin", _FakeStdin(f32(x)))
    np.testing.assert_array_equal(read_audio("-"), x)


# ---------------------------------------------------------------- names and pipes (found in QA)


@pytest.mark.skipif(sys.platform != "linux", reason="a file name that is not UTF-8 is a Linux (bytes) name")
@pytest.mark.parametrize("ext", [".flac", ".ogg"])
def test_a_file_name_that_is_not_utf8_is_read(tmp_path, ext):
    """FLAC/OGG/M4A/WebM under a name with a byte that is not UTF-8 failed with "Unexpected error
    (UnicodeEncodeError)" (soundfile encodes names strictly); an A-law WAV so named was called unsupported."""
    import soundfile

    x = sine(440, 16000, 0.5)
    path = os.fsdecode(os.fsencode(str(tmp_path)) + b"/bad\xff" + ext.encode())
    soundfile.write(os.fsencode(path), x, 16000)
    got = read_audio(path)
    assert len(got) == len(x) and np.allclose(got, x, atol=2e-3 if ext == ".flac" else 0.2)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_a_wav_from_a_named_pipe_is_read_as_it_comes(tmp_path):
    """A named pipe (or <(...), /dev/stdin on a pipe) was "file or stream is not seekable"; standard input read the
    same bytes. A compressed file in a pipe says what to do."""
    import threading

    x = sine(440, 16000, 1.0)
    data = wav(pcm16(np.round(x * 32767).astype(int)))
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def feed(payload):
        with open(fifo, "wb") as f:
            f.write(payload)

    for payload in (data, b"fLaC" + bytes(60)):
        writer = threading.Thread(target=feed, args=(payload,), daemon=True)
        writer.start()
        if payload is data:
            got = read_audio(fifo)
            assert len(got) == len(x) and np.max(np.abs(got - x)) < 1e-3
        else:
            with pytest.raises(AudioError) as err:
                read_audio(fifo)
            assert "it holds FLAC" in str(err.value) and "give the file's name instead of the pipe" in str(err.value)
        writer.join(5)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_a_wav_from_a_pipe_is_fed_as_it_arrives(tmp_path):
    """A WAV piped from a live recorder (``arecord ... | livecap-transcribe -``) was read in blocks of 16 s: Ctrl+C
    after 10 s of audio had arrived gave an empty transcript (QA). The audio that has arrived comes out while the
    writer still holds the pipe open."""
    import threading

    from engine.audio import open_audio

    x = sine(440, 16000, 1.0)
    body = pcm16(np.round(x * 32767).astype(int))
    data = wav(body, data_size=0xFFFFFFFF)  # a streaming writer's placeholder size
    fifo = tmp_path / "live"
    os.mkfifo(fifo)
    got_audio, closed = threading.Event(), threading.Event()

    def recorder():
        with open(fifo, "wb") as f:
            f.write(data[: len(data) - len(body) + len(body) // 2])  # the header and half a second
            f.flush()
            got_audio.wait(10)  # still recording
            closed.set()

    writer = threading.Thread(target=recorder, daemon=True)
    writer.start()
    with open_audio(fifo) as stream:
        first = stream.read(4000)
        early = not closed.is_set()
        got_audio.set()
        rest = np.concatenate([first, *list(stream)])
    writer.join(5)
    assert early and len(first) == 4000 and np.max(np.abs(first - x[:4000])) < 1e-3
    assert len(rest) == 8000  # the half second that was sent, nothing more


def test_a_data_size_left_at_zero_by_a_stopped_recorder_reads_the_audio(tmp_path):
    """A recorder that died before patching the header leaves the data size at 0: 10 s of audio gave an empty
    transcript, exit 0 and no word (FFmpeg reads them; QA). An empty data chunk before another chunk stays empty."""
    x = sine(440, 16000, 1.0)
    body = pcm16(np.round(x * 32767).astype(int))
    got = read_audio(write(tmp_path, wav(body, data_size=0)))
    assert len(got) == len(x) and np.max(np.abs(got - x)) < 1e-3
    empty = wav(b"", after=chunk(b"LIST", b"INFOISFT\x06\x00\x00\x00Lavf\x00\x00"))
    assert len(read_audio(write(tmp_path, empty, "empty.wav"))) == 0


def test_a_data_size_left_at_zero_reads_the_audio_from_standard_input_too(monkeypatch):
    """The same file on standard input (``livecap-transcribe - < rec.wav``) gave an empty transcript, exit 0 and no
    word: the look past the empty data chunk needed a file that can seek (QA). A LIST chunk after it is no audio."""
    x = sine(440, 16000, 1.0)
    body = pcm16(np.round(x * 32767).astype(int))
    data = wav(body, data_size=0)
    monkeypatch.setattr(sys, "stdin", _FakeStdin(data[:4] + bytes(4) + data[8:]))  # the RIFF size is 0 too
    got = read_audio("-")
    assert len(got) == len(x) and np.max(np.abs(got - x)) < 1e-3
    monkeypatch.setattr(
        sys, "stdin", _FakeStdin(wav(b"", after=chunk(b"LIST", b"INFOISFT\x06\x00\x00\x00Lavf\x00\x00")))
    )
    assert len(read_audio("-")) == 0
