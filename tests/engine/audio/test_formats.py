"""Compressed and container formats through ``open_audio``: FLAC, OGG Vorbis/Opus (libsndfile), MP3, AAC in
M4A/MP4/MKV and Opus in WebM (PyAV). Each test file is a few seconds, written at test time."""

from __future__ import annotations

import io
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from engine.audio import SUPPORTED, open_audio, read_audio
from engine.errors import AudioError

RATE = 44100
SECONDS = 2.0


def tone(rate: int = RATE, channels: int = 2, seconds: float = SECONDS) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    x = 0.5 * np.sin(2 * np.pi * 440.0 * t)
    return np.repeat(x[:, None], channels, axis=1).astype(np.float32)


def write_soundfile(path: Path, fmt: str, subtype: str, rate: int = RATE) -> Path:
    import soundfile

    soundfile.write(str(path), tone(rate), rate, format=fmt, subtype=subtype)
    return path


def write_av(path: Path, container: str, codec: str, rate: int = RATE, video: bool = False, audio: bool = True) -> Path:
    import av

    out = av.open(str(path), "w", format=container)
    a = out.add_stream(codec, rate=rate, layout="stereo") if audio else None
    v = None
    if video:
        v = out.add_stream("mpeg4", rate=10)
        v.width, v.height, v.pix_fmt = 64, 48, "yuv420p"
    if a is not None:
        x = tone(rate)
        for i in range(0, len(x), 4096):
            frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(x[i : i + 4096].T), format="fltp", layout="stereo")
            frame.sample_rate, frame.pts, frame.time_base = rate, i, Fraction(1, rate)
            for packet in a.encode(frame):
                out.mux(packet)
        for packet in a.encode(None):
            out.mux(packet)
    if v is not None:
        for k in range(int(SECONDS * 10)):
            img = av.VideoFrame.from_ndarray(np.full((48, 64, 3), k * 10 % 255, np.uint8), format="rgb24")
            img.pts = k
            for packet in v.encode(img):
                out.mux(packet)
        for packet in v.encode(None):
            out.mux(packet)
    out.close()
    return path


MAKERS = {
    "flac": lambda p: write_soundfile(p, "FLAC", "PCM_16"),
    "ogg": lambda p: write_soundfile(p, "OGG", "VORBIS"),
    "opus": lambda p: write_soundfile(p, "OGG", "OPUS", rate=48000),
    "mp3": lambda p: write_soundfile(p, "MP3", "MPEG_LAYER_III"),
    "m4a": lambda p: write_av(p, "ipod", "aac"),
    "mp4": lambda p: write_av(p, "mp4", "aac", video=True),
    "mkv": lambda p: write_av(p, "matroska", "aac", video=True),
    "webm": lambda p: write_av(p, "webm", "libopus", rate=48000),
}


def peak_hz(x: np.ndarray) -> float:
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.argmax(spec) * 16000 / len(x))


@pytest.mark.parametrize("ext", list(MAKERS))
def test_each_format_decodes_to_the_tone(tmp_path, ext):
    path = MAKERS[ext](tmp_path / f"tone.{ext}")
    out = read_audio(path)
    assert out.dtype == np.float32 and out.ndim == 1
    # lossy codecs add their priming/padding samples (AAC ~1024, Opus 312 at 48 kHz): within 0.1 s
    assert abs(len(out) / 16000 - SECONDS) < 0.1, len(out)
    mid = out[4000:-4000]
    assert abs(peak_hz(mid) - 440.0) < 3
    assert abs(np.sqrt(np.mean(mid**2)) - 0.5 / np.sqrt(2)) < 0.03
    with open_audio(path) as stream:
        assert stream.channels == 2 and stream.source_rate in (RATE, 48000)
        assert stream.duration is not None and abs(stream.duration - SECONDS) < 0.1
        got = [stream.read(n) for n in (1, 100, 1279, 5000)]  # any request size, then the rest
        got += list(stream)
        assert stream.ended
    np.testing.assert_array_equal(np.concatenate(got), out)  # reads do not depend on the request sizes


def test_flac_equals_the_same_wav_exactly(tmp_path):
    import soundfile

    x = np.round(tone(RATE) * 32767).astype(np.int16)
    soundfile.write(str(tmp_path / "a.wav"), x, RATE, subtype="PCM_16")
    soundfile.write(str(tmp_path / "a.flac"), x, RATE, format="FLAC", subtype="PCM_16")
    np.testing.assert_array_equal(read_audio(tmp_path / "a.flac"), read_audio(tmp_path / "a.wav"))


def test_the_name_does_not_matter(tmp_path):
    """Decoders are chosen by content: a FLAC file called .wav and an M4A called .mp3 still read."""
    flac = MAKERS["flac"](tmp_path / "x.flac").rename(tmp_path / "really-flac.wav")
    m4a = MAKERS["m4a"](tmp_path / "x.m4a").rename(tmp_path / "really-m4a.mp3")
    for p in (flac, m4a):
        assert abs(len(read_audio(p)) / 16000 - SECONDS) < 0.1


def test_unsupported_file_names_the_formats_that_work(tmp_path):
    p = tmp_path / "notes.docx"
    p.write_bytes(b"PK\x03\x04" + bytes(200))
    with pytest.raises(AudioError) as info:
        open_audio(p)
    assert str(info.value) == f"Cannot read audio from '{p}': it is not in a format livecap reads ({SUPPORTED})."
    assert "FLAC" in SUPPORTED and "MP3" in SUPPORTED and "M4A" in SUPPORTED and "MKV" in SUPPORTED


def test_video_without_sound_is_said_so(tmp_path):
    p = write_av(tmp_path / "silent-film.mp4", "mp4", "aac", video=True, audio=False)
    with pytest.raises(AudioError, match="it holds video without sound"):
        open_audio(p)


@pytest.mark.parametrize("ext", ["flac", "mp3", "m4a", "ogg"])
def test_truncated_files_give_what_they_hold(tmp_path, ext):
    path = MAKERS[ext](tmp_path / f"tone.{ext}")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    try:
        out = read_audio(path)
    except AudioError as e:  # a container cut before its index may be unreadable: one sentence then
        assert str(e).startswith("Cannot read audio from") and "\n" not in str(e)
        return
    assert 0 <= len(out) / 16000 <= SECONDS + 0.1 and np.isfinite(out).all()


CUT_MAKERS = {
    "wav": lambda p: write_soundfile(p, "WAV", "PCM_16"),
    "flac": MAKERS["flac"],
    "mp3": MAKERS["mp3"],  # libsndfile writes an Info header, which states the length
    "ulaw.wav": lambda p: write_soundfile(p, "WAV", "ULAW", rate=8000),  # a call recording: libsndfile reads it
    "webm": MAKERS["webm"],  # Matroska states its length: a cut file warned nothing (QA)
}


@pytest.mark.parametrize("ext", list(CUT_MAKERS))
def test_a_file_cut_short_says_so_and_a_whole_one_does_not(tmp_path, ext):
    """A copy cut short (an interrupted download, a full disk) gave a transcript of its first part and no word
    that the rest was missing."""
    path = CUT_MAKERS[ext](tmp_path / f"tone.{ext}")
    with open_audio(path) as stream:
        whole = sum(len(b) for b in stream)
    assert stream.ended_early is None and whole > 1.9 * 16000
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with open_audio(path) as stream:
        assert stream.ended_early is None  # known only once the audio has ended
        got = sum(len(b) for b in stream)
    note = stream.ended_early
    assert note is not None and note.startswith(f"'{path}' ends early: only ") and "\n" not in note
    assert f"{got / 16000:.1f} s" in note or got < 16000 * 0.3
    if ext != "ulaw.wav":  # libsndfile counts a WAV's frames from the file's size: the header's claim is not known
        assert "of the 2.0 s its header gives" in note


def test_a_streamed_wav_with_a_placeholder_size_is_not_cut(tmp_path):
    """ffmpeg, arecord and sox writing to a pipe leave the sizes at 'unknown': such a file ends where it ends."""
    import struct

    fmt = struct.pack("<HHIIHH", 1, 1, 16000, 32000, 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", 0xFFFFFFFF) + bytes(32000)
    path = tmp_path / "streamed.wav"
    path.write_bytes(b"RIFF" + struct.pack("<I", 0xFFFFFFFF) + body)
    with open_audio(path) as stream:
        assert sum(len(b) for b in stream) == 16000
    assert stream.ended_early is None


def test_bad_rates_are_audio_errors(tmp_path):
    import struct

    for rate, words in ((1, "1 Hz"), (999, "999 Hz"), (2_000_000, "2000000 Hz")):
        fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
        body = b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", 8) + bytes(8)
        p = tmp_path / f"r{rate}.wav"
        p.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
        with pytest.raises(AudioError, match=f"sample rate of {words}"):
            open_audio(p)


def test_memory_stays_at_a_few_blocks(tmp_path):
    """Ten minutes of 48 kHz stereo float WAV (230 MB as float32) streams with a few MB allocated."""
    import tracemalloc

    import soundfile

    path = tmp_path / "long.wav"
    with soundfile.SoundFile(str(path), "w", 48000, 2, subtype="FLOAT") as f:
        minute = np.full((48000 * 60, 2), 0.01, np.float32)
        for _ in range(10):
            f.write(minute)
    tracemalloc.start()
    n = 0
    with open_audio(path) as stream:
        for block in stream:
            n += len(block)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert n == 16000 * 600
    assert peak < 12 * 2**20, peak


def test_a_damaged_mp3_reads_without_decoder_noise_on_stderr(tmp_path):
    """An MP3 with junk in the middle (a damaged download) reads, and nothing but our own output reaches the
    process's stderr: libsndfile's look at it made mpg123 print "Warning: Xing stream size off ..."."""
    import subprocess
    import sys

    from tests.helpers import REPO

    data = MAKERS["mp3"](tmp_path / "ok.mp3").read_bytes()
    bad = tmp_path / "damaged.mp3"
    bad.write_bytes(data[: len(data) // 2] + b"\x13" * 500 + data[len(data) // 2 :])
    code = f"from engine.audio import read_audio; print(len(read_audio({str(bad)!r})))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert int(proc.stdout) > 0.9 * 16000 * SECONDS


class _Stdin:
    def __init__(self, data: bytes) -> None:
        self.buffer = io.BytesIO(data)


@pytest.mark.parametrize(
    ("ext", "name"),
    [
        ("flac", "FLAC"),
        ("ogg", "OGG"),
        ("opus", "OGG"),
        ("mp3", "MP3"),  # libsndfile's: no ID3 tag, found by two MPEG frame headers in a row
        ("id3.mp3", "MP3"),  # FFmpeg's: an ID3 tag first
        ("aac", "AAC"),  # ADTS frames
        ("aiff", "AIFF"),
        ("m4a", "MP4/M4A"),
        ("mkv", "Matroska/WebM"),
    ],
)
def test_stdin_refuses_compressed_audio_in_one_sentence(tmp_path, monkeypatch, ext, name):
    """Piped FLAC/MP3/... used to be read as raw float32: an empty transcript and a warning about invalid samples."""
    makers = {
        **MAKERS,
        "id3.mp3": lambda p: write_av(p, "mp3", "libmp3lame"),
        "aac": lambda p: write_av(p, "adts", "aac"),
        "aiff": lambda p: write_soundfile(p, "AIFF", "PCM_16"),
    }
    data = makers[ext](tmp_path / f"x.{ext}").read_bytes()
    monkeypatch.setattr(sys, "stdin", _Stdin(data))
    with pytest.raises(AudioError) as info:
        open_audio("-")
    assert str(info.value) == (
        f"Cannot read audio from standard input: it holds {name}, and standard input takes WAV or raw float32 "
        "16 kHz mono only; give the file's name instead of -."
    )


def test_a_cut_flac_gives_every_frame_that_decodes(tmp_path):
    """A FLAC cut inside a 16384-frame read lost the whole piece (0.0 s of a file sox reads 0.7 s from)."""
    import soundfile

    path = tmp_path / "speech.flac"
    x = np.random.default_rng(3).standard_normal(RATE * 5).astype(np.float32) * 0.1
    soundfile.write(path, x, RATE)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    decodable = 0
    with soundfile.SoundFile(path) as f:  # what libsndfile decodes, frame by frame
        try:
            while len(block := f.read(256, dtype="float32")):
                decodable += len(block)
        except (soundfile.SoundFileError, RuntimeError):
            pass
    assert decodable > 16384  # the premise: the cut lies past the first large piece, inside the second
    with open_audio(path) as stream:
        got = sum(len(b) for b in stream)
    assert stream.ended_early is not None
    assert got >= decodable * 16000 // RATE - 1024


def test_a_damaged_stretch_keeps_the_times_after_it(tmp_path):
    """A 3 KB defect in a 10 minute WebM dropped 4.8 s of audio without a word and put every later subtitle 4.8 s
    early (QA). The gap in the frames' timestamps is silence now, and the file is said to be damaged."""
    import av

    rate = 48000
    t = np.arange(rate * 6) / rate
    x = np.where((t >= 4.0) & (t < 4.5), 0.5 * np.sin(2 * np.pi * 1000 * t), 0.0).astype(np.float32)
    path = tmp_path / "burst.webm"
    out = av.open(str(path), "w", format="webm")
    a = out.add_stream("libopus", rate=rate, layout="mono")
    for i in range(0, len(x), 960):
        frame = av.AudioFrame.from_ndarray(x[None, i : i + 960], format="fltp", layout="mono")
        frame.sample_rate, frame.pts, frame.time_base = rate, i, Fraction(1, rate)
        for packet in a.encode(frame):
            out.mux(packet)
    for packet in a.encode(None):
        out.mux(packet)
    out.close()
    data = bytearray(path.read_bytes())
    at = len(data) // 4  # inside the first seconds of silence, before the burst
    data[at : at + 400] = np.random.default_rng(0).integers(0, 256, 400, dtype=np.uint8).tobytes()
    path.write_bytes(bytes(data))
    with open_audio(path) as stream:
        y = np.concatenate(list(stream))
    onset = np.argmax(np.abs(y) > 0.1) / 16000
    assert abs(len(y) / 16000 - 6.0) < 0.03 and abs(onset - 4.0) < 0.03
    assert stream.ended_early is not None and "is damaged" in stream.ended_early and "stay right" in stream.ended_early


@pytest.mark.parametrize("ext", ["m4a", "mp4"])
def test_an_mp4_cut_short_is_called_damaged_not_an_unknown_format(tmp_path, ext):
    """A cut M4A/MP4 (its index is at the end) was "not in a format livecap reads (... M4A/AAC ...)", which lists
    the very format it refused (QA)."""
    path = MAKERS[ext](tmp_path / f"tone.{ext}")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(AudioError) as err:
        read_audio(path)
    assert str(err.value) == (
        f"Cannot read audio from '{path}': it starts as MP4/M4A but is damaged or cut short (such a file cut short "
        "loses the index at its end), so it cannot be read."
    )


def bursts(rate: int, seconds: float, at: float) -> np.ndarray:
    """Quiet noise (so that the bytes of a compressed file spread evenly over its time) with a loud 0.3 s tone
    burst from ``at`` seconds."""
    t = np.arange(int(rate * seconds)) / rate
    x = 0.02 * np.random.default_rng(5).standard_normal(len(t))
    return np.where((t >= at) & (t < at + 0.3), 0.5 * np.sin(2 * np.pi * 1000 * t), x).astype(np.float32)


def onset(y: np.ndarray, after: float) -> float:
    """Where the first loud sample after ``after`` seconds lies, in seconds."""
    start = int(after * 16000)
    return (start + int(np.argmax(np.abs(y[start:]) > 0.3))) / 16000


@pytest.mark.parametrize("ext", ["flac", "ogg", "mp3"])
def test_a_stretch_damaged_in_the_middle_keeps_the_audio_and_the_times_after_it(tmp_path, ext):
    """A FLAC with 5 % of its bytes overwritten in the middle lost everything after the damage (libsndfile stops at
    its first bad frame: 3.3 s of 10 s), a damaged OGG Vorbis put the subtitles after it ~0.9 s early, and a
    damaged MP3 ~0.3 s early, each with an "ends early" warning (QA). FFmpeg decodes past the damage; the stretch
    it lost is silence (MP3 frames carry no times: its length from the bytes that did not decode)."""
    import soundfile

    path = tmp_path / f"burst.{ext}"
    soundfile.write(path, bursts(RATE, 6.0, at=4.5), RATE, format=ext.upper())
    with open_audio(path) as stream:
        whole = np.concatenate(list(stream))
    assert stream.ended_early is None and abs(len(whole) / 16000 - 6.0) < 0.01 and abs(onset(whole, 3.5) - 4.5) < 0.01
    data = bytearray(path.read_bytes())
    a, b = int(len(data) * 0.40), int(len(data) * 0.45)  # ~2.4 s to ~2.7 s
    data[a:b] = np.random.default_rng(1).integers(0, 256, b - a, dtype=np.uint8).tobytes()
    path.write_bytes(bytes(data))
    with open_audio(path) as stream:
        y = np.concatenate(list(stream))
    assert abs(len(y) / 16000 - 6.0) < 0.03 and abs(onset(y, 3.5) - 4.5) < 0.03
    note = stream.ended_early
    assert note is not None and note.startswith(f"'{path}' is damaged: ") and "ends early" not in note


@pytest.mark.parametrize("subtype", ["VORBIS", "OPUS"])
def test_an_ogg_cut_short_says_so(tmp_path, subtype):
    """OGG Vorbis and Opus files cut in half warned nothing (MP3, FLAC, WAV and MKV cut so do; QA). Ogg states no
    length (its last page tells it), but the last page of a whole file ends its stream."""
    import soundfile

    path = tmp_path / "burst.ogg"
    soundfile.write(path, bursts(48000, 6.0, at=1.0), 48000, format="OGG", subtype=subtype)
    with open_audio(path) as stream:
        assert abs(sum(len(b) for b in stream) / 16000 - 6.0) < 0.01
    assert stream.ended_early is None
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with open_audio(path) as stream:
        got = sum(len(b) for b in stream)
    assert 1.0 < got / 16000 < 4.0  # libsndfile writes Opus in pages of ~2 s
    assert stream.ended_early == (
        f"'{path}' ends early: only {got / 16000:.1f} s could be read (the file is cut short or damaged); the "
        "transcript covers that part."
    )


def write_video(path: Path, audio_from: float, audio_s: float, video_s: float, burst_at: float) -> Path:
    """An MKV: black video from 0 s for ``video_s``, Opus audio from ``audio_from`` for ``audio_s`` with a burst
    ``burst_at`` seconds into the audio."""
    import av

    rate = 48000
    x = bursts(rate, audio_s, at=burst_at)
    with av.open(str(path), "w", format="matroska") as out:
        v = out.add_stream("mpeg4", rate=10)
        v.width, v.height, v.pix_fmt = 64, 48, "yuv420p"
        a = out.add_stream("libopus", rate=rate, layout="mono")
        for i in range(0, len(x), 960):
            frame = av.AudioFrame.from_ndarray(x[None, i : i + 960], format="fltp", layout="mono")
            frame.sample_rate, frame.time_base = rate, Fraction(1, rate)
            frame.pts = round(audio_from * rate) + i
            for packet in a.encode(frame):
                out.mux(packet)
        for packet in a.encode(None):
            out.mux(packet)
        for k in range(int(video_s * 10)):
            img = av.VideoFrame.from_ndarray(np.zeros((48, 64, 3), np.uint8), format="rgb24")
            img.pts = k
            for packet in v.encode(img):
                out.mux(packet)
        for packet in v.encode(None):
            out.mux(packet)
    return path


def test_a_video_whose_sound_starts_later_keeps_its_times(tmp_path):
    """A video whose audio starts at 2 s got subtitles 2 s early, and a false "ends early: only 10.0 s of the
    12.0 s" (QA): the time from the video's start to the audio's is silence now."""
    path = write_video(tmp_path / "late.mkv", audio_from=1.0, audio_s=2.0, video_s=3.0, burst_at=1.0)
    with open_audio(path) as stream:
        y = np.concatenate(list(stream))
    assert abs(onset(y, 0.0) - 2.0) < 0.03 and abs(len(y) / 16000 - 3.0) < 0.05
    assert stream.ended_early is None


def test_a_video_longer_than_its_sound_is_not_called_cut(tmp_path):
    """10 s of audio in a 15 s video warned that the file was cut short or damaged (QA): Matroska gives each
    track's length in its tags, and the container's length is the video's."""
    path = write_video(tmp_path / "long.mkv", audio_from=0.0, audio_s=2.0, video_s=4.0, burst_at=1.0)
    with open_audio(path) as stream:
        y = np.concatenate(list(stream))
    assert stream.ended_early is None and abs(len(y) / 16000 - 2.0) < 0.05 and abs(onset(y, 0.0) - 1.0) < 0.03
