"""Audio input: any supported file, or raw float32 on stdin, streamed as 16 kHz mono float32 blocks.

:func:`open_audio` returns an :class:`AudioStream`; :func:`read_audio` reads a whole (short) file. The
decoder is chosen by the file's first bytes, not by its name:

- WAV / RF64 (PCM, float): ``engine.audio.wav`` (works on pipes, reads what a truncated file holds); WAV files
  in telephony encodings (A-law and mu-law call recordings, ADPCM, GSM 6.10) go to libsndfile as below;
- AIFF, CAF, AU, ...: soundfile (libsndfile, bundled in its wheels);
- FLAC, OGG (Vorbis, Opus), MP3 and anything else FFmpeg opens, for its first audio stream (M4A/AAC, MP4,
  MOV, MKV, WebM, ...): PyAV (imported only for such files; its wheels bundle FFmpeg). libsndfile reads FLAC,
  OGG and MP3 too, but stops at the first damaged frame of a FLAC (3.3 s of a 10 s file with 5 % of its bytes
  overwritten in the middle; FFmpeg reads on after it) and gives no time for what a damaged OGG lost (the
  audio after it came early), while FFmpeg's timestamps say where the audio after the damage belongs. And
  libsndfile 1.2.2 (soundfile 0.14's wheels) inserts ~50 ms of silence at every read boundary in MP3 files
  without a Xing/Info header (tests/engine/audio/test_formats.py writes such a file). A file that starts as
  FLAC, OGG or MP3 goes to FFmpeg without libsndfile's look, whose mpg123 writes notes on damaged MP3 to stderr.
  What FFmpeg does not say, the file's header does: a FLAC's STREAMINFO gives its exact length (FFmpeg would
  estimate a missing one), and an OGG cut short lacks the end-of-stream flag on its last page.

Every decoder hands over blocks of the same number of native frames, which are downmixed (mean) and
resampled by one streaming soxr filter (``engine.audio.Resampler``), so a lossless file gives exactly the
samples of the same audio stored as WAV, and memory stays at a few blocks however long the file.
benchmarks/RESULTS.md ("Audio decoding") has the speed and memory of each path on an hour of audio.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
from collections.abc import Iterator
from typing import Any, BinaryIO, Protocol

import numpy as np

from engine.audio.resample import SAMPLE_RATE, Resampler
from engine.audio.wav import PLACEHOLDER, SPEECH_CODECS, WavEncodingError, WavReader
from engine.errors import AudioError, os_reason

log = logging.getLogger(__name__)

SUPPORTED = "WAV, FLAC, OGG (Vorbis, Opus), MP3, M4A/AAC, and the audio of MP4, MOV, MKV and WebM videos"
MIN_RATE = 1000
MAX_RATE = 768000
BLOCK_SAMPLES = 1 << 18  # native samples (all channels) per decoded block: 1 MiB of float32
OUT_BLOCK = SAMPLE_RATE  # 16 kHz samples per iteration step of an AudioStream


class _Decoder(Protocol):
    rate: int
    channels: int
    frames: int | None  # whole frames in the file, when known
    promised: int | None  # the frames its header promises, when it states them exactly
    broken: bool  # the file is cut short or damaged (known from its header, or decoding stopped at damage)

    def read(self, frames: int) -> np.ndarray: ...  # float32 [n, channels], n < frames only at the end

    def close(self) -> None: ...


class AudioStream:
    """16 kHz mono float32 audio decoded and resampled on demand.

    ``read(n)`` returns up to ``n`` samples (fewer only at the end, an empty array after it); iterating
    yields blocks of about a second. ``format`` names the file type, ``source_rate`` and ``channels``
    describe the stored audio, ``duration`` is its length in seconds when the file tells it (an estimate
    for some compressed formats), else ``None``. Once the audio has ended, ``ended_early`` is a sentence when
    the file broke off before its end (cut short or damaged: what could be read was returned) or a damaged
    stretch inside it was replaced by silence (its times kept), else ``None``.
    Use it as a context manager or call ``close()``.
    """

    def __init__(self, decoder: _Decoder, name: str, fmt: str) -> None:
        self.name = name
        self.format = fmt
        self._dec = decoder
        self.source_rate = int(decoder.rate)
        self.channels = int(decoder.channels)
        if not MIN_RATE <= self.source_rate <= MAX_RATE:
            decoder.close()
            raise AudioError(
                f"Cannot read audio from {name}: its header gives a sample rate of {self.source_rate} Hz, which "
                f"is not a real audio rate (livecap reads {MIN_RATE} Hz to {MAX_RATE} Hz)."
            )
        if self.channels < 1:
            decoder.close()
            raise AudioError(f"Cannot read audio from {name}: its header gives no audio channels.")
        self.duration = None if decoder.frames is None else decoder.frames / self.source_rate
        self._block = max(1, BLOCK_SAMPLES // self.channels)
        self._resampler = Resampler(self.source_rate, SAMPLE_RATE, channels=self.channels)
        self._parts: list[np.ndarray] = []
        self._buffered = 0
        self._eof = False
        self._native = 0  # frames decoded
        self.ended_early: str | None = None

    def read(self, n: int) -> np.ndarray:
        """Up to ``n`` samples at 16 kHz; fewer only at the end of the audio."""
        while self._buffered < n and not self._eof:
            block = self._dec.read(self._block)
            if len(block):
                self._native += len(block)
                out = self._resampler.process(block)
            else:
                out = self._resampler.flush()
                self._eof = True
                self._dec.close()
                self.ended_early = self._short()
            if len(out):
                self._parts.append(out)
                self._buffered += len(out)
        if not self._parts:
            return np.zeros(0, np.float32)
        whole = self._parts[0] if len(self._parts) == 1 else np.concatenate(self._parts)
        head, rest = whole[:n], whole[n:]
        self._parts = [rest] if len(rest) else []
        self._buffered = len(rest)
        return head

    def _short(self) -> str | None:
        """The sentence for audio that ended before the file's end or had a damaged stretch, or None."""
        promised, rate = getattr(self._dec, "promised", None), self.source_rate
        filled = getattr(self._dec, "filled", 0) / rate if rate else 0.0
        about = "about " if getattr(self._dec, "untimed", False) else ""  # timed by its bytes: MP3 has no times
        damaged = (
            f"{self.name} is damaged: {about}{f'{filled:.2f} s' if filled < 1 else _clock(filled)} of it could not "
            f"be decoded and is silence in the transcript, so the times after it stay {about or ''}right."
            if filled
            else None
        )
        missing = 0 if promised is None else promised - max(rate // 4, promised // 200) - self._native
        if missing <= 0 and not getattr(self._dec, "broken", False):
            return damaged  # a quarter of a second or 0.5 % short is an estimate's slack, not a cut
        dropped = getattr(self._dec, "dropped_bytes", 0)
        if dropped and promised is None:  # raw samples: all was read but a stray byte or three at the very end
            return (
                f"{self.name} ended inside a sample: its last {dropped} byte{'s' if dropped > 1 else ''} (less than "
                "one 32-bit float sample) were dropped."
            )
        got = f"only {_clock(self._native / rate)}"
        of = f" of the {_clock(promised / rate)} its header gives" if promised and missing > 0 else ""
        short = (
            f"{self.name} ends early: {got}{of} could be read (the file is cut short or damaged); "
            "the transcript covers that part."
        )
        return f"{damaged} {short}" if damaged else short

    def __iter__(self) -> Iterator[np.ndarray]:
        while True:
            block = self.read(OUT_BLOCK)
            if not len(block):
                return
            yield block

    @property
    def ended(self) -> bool:
        """True once every sample has been returned."""
        return self._eof and not self._buffered

    def close(self) -> None:
        """Release the file (reading after this returns nothing)."""
        self._eof = True
        self._parts, self._buffered = [], 0
        self._dec.close()

    def __enter__(self) -> AudioStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_audio(path_or_dash: str | os.PathLike[str]) -> AudioStream:
    """Open audio for streaming (see the module docstring for the formats).

    ``"-"`` reads stdin: raw float32 little-endian 16 kHz mono samples as they arrive (a trailing partial
    sample is dropped, and ``ended_early`` says so; empty input gives zero samples), or a WAV file when it
    starts with a RIFF header; other formats (FLAC, OGG, MP3, ... recognised by their first bytes) are
    refused with one sentence. A file that cannot be read raises :class:`engine.errors.AudioError` with one
    sentence that names it; an unknown format's sentence names the formats that work.
    """
    if isinstance(path_or_dash, str) and path_or_dash == "-":
        return _open_stdin()
    path = os.fspath(path_or_dash)
    name = f"'{path}'"
    try:
        f = open(path, "rb")  # noqa: SIM115 - owned by the decoder
    except IsADirectoryError:
        raise AudioError(f"Cannot read audio from {name}: it is a directory.") from None
    except FileNotFoundError:
        raise AudioError(f"Cannot read audio from {name}: no such file.") from None
    except OSError as err:
        raise AudioError(f"Cannot read audio from {name}: {os_reason(err)}.") from None
    if not f.seekable():  # a named pipe, <(...), /dev/stdin on a pipe: read as standard input is
        return _open_pipe(f, name, owned=True)
    try:
        head = f.read(12)
        f.seek(0)
    except OSError as err:
        f.close()
        raise AudioError(f"Cannot read audio from {name}: {os_reason(err)}.") from None
    if not head:
        f.close()
        raise AudioError(f"Cannot read audio from {name}: it is empty.")
    if head[:4] in (b"RIFF", b"RF64") and head[8:12] == b"WAVE":
        try:
            return AudioStream(_WavDecoder(WavReader(f, name), f), name, "WAV")
        except WavEncodingError as err:
            f.close()
            if err.tag not in SPEECH_CODECS:
                raise
            try:  # A-law / mu-law (call recordings), ADPCM, GSM: libsndfile
                return _open_other(path, name, head, cut=_riff_cut(path, head))
            except Exception:  # noqa: BLE001 - it cannot read it either: this parser's sentence
                raise err from None
        except BaseException:
            f.close()
            raise
    f.close()
    return _open_other(path, name, head)


def read_audio(path_or_dash: str | os.PathLike[str]) -> np.ndarray:
    """The whole audio of a file (or ``"-"``) as float32 mono 16 kHz: :func:`open_audio`, all blocks.

    For short clips; long inputs should be streamed through :func:`open_audio` instead.
    """
    with open_audio(path_or_dash) as stream:
        blocks = list(stream)
    return np.concatenate(blocks) if blocks else np.zeros(0, np.float32)


def _clock(seconds: float) -> str:
    """``"12.3 s"``, ``"4:05"`` or ``"1:02:03"``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    h, rest = divmod(int(seconds), 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


# ---------------------------------------------------------------- decoders


class _WavDecoder:
    def __init__(self, reader: WavReader, owned: BinaryIO | None) -> None:
        self._reader, self._owned = reader, owned
        self.rate, self.channels, self.frames = reader.rate, reader.channels, reader.frames
        self.promised, self.broken = reader.promised, False

    def read(self, frames: int) -> np.ndarray:
        return self._reader.read(frames)

    def close(self) -> None:
        if self._owned is not None:
            self._owned.close()


class _RawDecoder:
    """Raw float32 little-endian 16 kHz mono samples from a byte stream. A read returns the whole samples that
    have arrived (at least one, or none at the end), without waiting for the rest of a block: audio piped from a
    live source is fed as it comes, and a run stopped while waiting has fed all it got."""

    rate, channels, frames, promised, broken = SAMPLE_RATE, 1, None, None, False
    dropped_bytes = 0  # the bytes of a partial sample at the very end

    def __init__(self, stream: BinaryIO, name: str, owned: BinaryIO | None = None) -> None:
        self._stream, self._name, self._owned = stream, name, owned
        self._rest = b""  # the start of a sample whose other bytes have not arrived

    def read(self, frames: int) -> np.ndarray:
        data = self._rest
        while len(data) < 4:
            try:
                got = self._stream.read1(4 * frames - len(data))
            except (OSError, ValueError) as err:
                raise AudioError(f"Cannot read audio from {self._name}: {err}.") from None
            if not got:
                self.broken = bool(data)  # a partial sample at the very end is dropped, and said (ended_early)
                self.dropped_bytes = len(data)
                self._rest = b""
                return np.zeros((0, 1), np.float32)
            data += got
        usable = len(data) - len(data) % 4
        self._rest = data[usable:]
        return np.frombuffer(data[:usable], dtype="<f4").astype(np.float32).reshape(-1, 1)

    def close(self) -> None:
        if self._owned is not None:
            self._owned.close()


class _SoundFileDecoder:
    """libsndfile through soundfile. A file that breaks off (truncated, corrupt tail) ends where its last
    readable piece ends: reads go in pieces of ``PIECE`` frames; a failing piece is read again from where it
    started in pieces of ``SMALL_PIECE`` (a file cut inside a piece lost up to 16384 frames that decode), and the
    first of those that fails ends the audio."""

    PIECE = 16384
    SMALL_PIECE = 1024

    def __init__(self, sf_file: Any, name: str, cut: bool = False) -> None:
        self._f, self._name = sf_file, name
        self.rate, self.channels = sf_file.samplerate, sf_file.channels
        self.frames = sf_file.frames if 0 < sf_file.frames < 1 << 62 else None
        self.promised, self.broken = self.frames, cut  # cut: its RIFF header gives more than the file holds

    def read(self, frames: int) -> np.ndarray:
        import soundfile

        parts, n, size = [], 0, self.PIECE
        while n < frames and not self._f.closed:
            start = self._position() if size > self.SMALL_PIECE else -1
            try:
                piece = self._f.read(min(size, frames - n), dtype="float32", always_2d=True)
            except (soundfile.SoundFileError, RuntimeError) as err:
                if size > self.SMALL_PIECE and start >= 0:
                    size = self.SMALL_PIECE
                    with contextlib.suppress(soundfile.SoundFileError, RuntimeError):
                        if self._f.seek(start) == start:
                            continue
                log.info("%s ends early: %s", self._name, err)  # said once, by AudioStream.ended_early
                self.broken = True
                self._f.close()
                break
            if not len(piece):
                break
            parts.append(piece)
            n += len(piece)
        if not parts:
            return np.zeros((0, self.channels), np.float32)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _position(self) -> int:
        """The frame the next read starts at, or -1 where the file cannot tell (it cannot seek then either)."""
        import soundfile

        try:
            return self._f.tell()
        except (soundfile.SoundFileError, RuntimeError):
            return -1

    def close(self) -> None:
        self._f.close()


class _AvDecoder:
    """The first audio stream of a container, through PyAV (FFmpeg). The timeline starts where the container
    starts: an audio stream that begins later (a video whose sound starts at 2 s) is preceded by that much
    silence, so subtitles line up with the video. Packets it cannot decode are skipped, and where the frames'
    timestamps then jump ahead (a damaged stretch of a FLAC, OGG, WebM, MKV, MP4, M4A), the gap is filled with
    silence (``filled`` frames in all), so the audio after it keeps its time: a 3 KB defect in a 10 minute WebM
    put every later subtitle 4.8 s early. A jump counts once two frames in a row lie that far ahead (the silence
    goes in before the second): FFmpeg stamps single Vorbis frames ~10 ms off and the next one right again."""

    GAP_S = 0.01  # timestamp jumps up to this are rounding, not lost audio
    MAX_GAP_S = 600.0  # a jump (or a late start) past this is a broken timestamp, not a gap: nothing is filled

    def __init__(self, container: Any, stream: Any, name: str) -> None:
        import av

        self._c, self._s, self._name = container, stream, name
        ctx = stream.codec_context
        self.rate = int(ctx.sample_rate or stream.rate or 0)
        self.channels = len(ctx.layout.channels) if ctx.layout is not None else int(ctx.channels or 0)
        self._lead = 0  # frames from the container's start (the video's too) to this stream's
        if container.start_time is not None and stream.start_time is not None and stream.time_base:
            lead = round((stream.start_time * stream.time_base - container.start_time / 1_000_000) * self.rate)
            self._lead = lead if self.GAP_S * self.rate < lead <= self.MAX_GAP_S * self.rate else 0
        self.frames: int | None = None  # from the container's start, the lead included
        self.stated = True  # ``frames`` is this stream's own length (not the whole container's, nor absent)
        seconds = _tag_seconds(stream.metadata.get("DURATION"))  # Matroska/WebM: each track's end, in its tags
        if stream.duration and stream.time_base:
            self.frames = self._lead + int(stream.duration * stream.time_base * self.rate)
        elif seconds is not None:
            self.frames = int(seconds * self.rate)
        elif container.duration:
            self.frames = int(container.duration / 1_000_000 * self.rate)
            self.stated = len(container.streams) == 1  # a longer video would make the audio look cut short
        layout = ctx.layout.name if ctx.layout is not None else None
        self._conv = av.AudioResampler(format="fltp", layout=layout, rate=self.rate)  # a format change only
        self._packets = container.demux(stream)
        self._parts: list[np.ndarray] = []
        self._n = 0
        self._done = False
        self._origin: float | None = None  # the first frame's start, in frames of ``rate``
        self._pos = 0  # frames given out since then, silence included
        self._ahead = 0  # how far the last frame's timestamp lay past the audio given out before it
        self.filled = 0  # frames of silence put where audio could not be decoded
        self.bad_packets = 0
        self.limit: int | None = None  # the frames to give out at most, where the file states its end exactly
        self._given = 0
        self.promised, self.broken = None, False  # FFmpeg's durations are estimates (bit rate x size for MP3)
        self.untimed = False  # MP3 / ADTS AAC: frames carry no times, so a lost stretch is timed by its bytes
        self._lost_bytes = 0  # of packets that did not decode since the last frame that did (``untimed``)
        self._good_bytes = self._good_frames = 0
        self._bit_rate = stream.bit_rate or ctx.bit_rate or container.bit_rate  # bits per second, or 0

    def _more(self) -> None:
        import av

        for packet in self._packets:
            try:
                frames = packet.decode()
            except av.error.FFmpegError:
                self.bad_packets += 1
                self._lost_bytes += packet.size
                continue
            if self.untimed and frames:
                self._time_lost_bytes(packet.size, sum(f.samples for f in frames))
            for frame in frames:
                self._fill_gap(frame)
                for out in self._conv.resample(frame):
                    self._add(out)
            if packet.size == 0 or self._n:  # the flush packet, or some samples are ready
                if packet.size == 0:
                    for out in self._conv.resample(None):
                        self._add(out)
                return
        self._done = True

    def _fill_gap(self, frame: Any) -> None:
        """Silence before ``frame`` where its timestamp, and the one before it, lie past the audio given out so
        far; before the first frame, the time from the container's start to it."""
        if frame.pts is None or frame.time_base is None or not self.rate:
            return
        start = float(frame.pts * frame.time_base) * self.rate
        if self._origin is None:
            self._origin = start - self._lead
            self._silence(self._lead)
            return
        gap = int(round(start - self._origin - self._pos))
        if self.untimed:  # FFmpeg's times for such frames are its own count: lost bytes are timed above
            return
        seen, self._ahead = self._ahead, gap
        if self.GAP_S * self.rate < min(gap, seen) and gap <= self.MAX_GAP_S * self.rate:
            self._silence(gap)
            self.filled += gap
            self._ahead = 0

    def _time_lost_bytes(self, size: int, frames: int) -> None:
        """Silence for the packets that did not decode before this one (``untimed``): their bytes at the rate
        the packets that decoded so far came at (or the stream's bit rate before any): exact for a constant bit
        rate, an estimate for a variable one."""
        if self._lost_bytes and self.rate:
            if self._good_frames:
                rate = self._good_bytes / self._good_frames * self.rate
            else:
                rate = (self._bit_rate or 0) / 8
            gap = int(round(self._lost_bytes / rate * self.rate)) if rate > 0 else 0
            if 0 < gap <= self.MAX_GAP_S * self.rate:
                self._silence(gap)
                self.filled += gap
        self._lost_bytes = 0
        self._good_bytes += size
        self._good_frames += frames

    def _silence(self, frames: int) -> None:
        if frames > 0:
            self._parts.append(np.zeros((frames, self.channels), np.float32))
            self._n += frames
            self._pos += frames

    def _add(self, frame: Any) -> None:
        a = frame.to_ndarray()  # fltp: [channels, n]; the converter keeps the first layout throughout
        if a.shape[0] != self.channels:
            a = np.repeat(a.mean(axis=0, keepdims=True), self.channels, axis=0)
        self._parts.append(np.ascontiguousarray(a.T, dtype=np.float32))
        self._n += a.shape[1]
        self._pos += a.shape[1]

    def read(self, frames: int) -> np.ndarray:
        while self._n < frames and not self._done:
            try:
                self._more()
            except Exception as err:  # noqa: BLE001 - a corrupt container ends the audio with a sentence
                import av

                if not isinstance(err, (av.error.FFmpegError, OSError)):
                    raise
                self._done = self.broken = True
                if not self._n and not self._parts:
                    log.warning("decoding %s stopped: %s", self._name, err)
        if not self._parts:
            return np.zeros((0, self.channels), np.float32)
        whole = np.concatenate(self._parts) if len(self._parts) > 1 else self._parts[0]
        head, rest = whole[:frames], whole[frames:]
        self._parts = [rest] if len(rest) else []
        self._n = len(rest)
        if self.limit is not None:
            head = head[: max(0, self.limit - self._given)]
            self._given += len(head)
        return head

    def close(self) -> None:
        self._done = True
        self._c.close()


def _riff_cut(path: str, head: bytes) -> bool:
    """Whether a RIFF file is shorter than its header says (libsndfile reads what is there without a word)."""
    size = int.from_bytes(head[4:8], "little")
    try:
        return head[:4] == b"RIFF" and size < PLACEHOLDER and os.path.getsize(path) < size + 8
    except OSError:
        return False


def _open_other(path: str, name: str, head: bytes, cut: bool = False) -> AudioStream:
    import soundfile

    if _mpeg_audio(head) or head[:4] in (b"fLaC", b"OggS"):  # FFmpeg: see the module docstring
        return _open_av(path, name, head)
    try:  # the name as bytes: soundfile encodes a str strictly, and a Linux name need not be UTF-8
        f = soundfile.SoundFile(os.fsencode(path) if os.name == "posix" else path)
    except (soundfile.SoundFileError, RuntimeError, OSError, UnicodeError):
        pass
    else:
        if f.format != "MP3":
            try:
                return AudioStream(_SoundFileDecoder(f, name, cut), name, f.format)
            except BaseException:
                f.close()
                raise
        f.close()  # libsndfile 1.2.2 inserts silence between pieces of some MP3 files: FFmpeg decodes MP3
    return _open_av(path, name, head)


def _states_length(path: str) -> bool:
    """Whether an MP3 file's first frame carries a Xing, Info or VBRI header, which states the file's length
    (without one, FFmpeg estimates it from the bit rate and the file's size, which a cut file shrinks too)."""
    try:
        with open(path, "rb") as f:
            tag = f.read(10)
            if tag[:3] == b"ID3" and len(tag) == 10:  # skip the ID3v2 tag: its size is four 7-bit bytes
                f.seek(10 + sum((tag[6 + i] & 0x7F) << (21 - 7 * i) for i in range(4)))
            else:
                f.seek(0)
            frame = f.read(192)
    except OSError:
        return False
    return any(mark in frame for mark in (b"Xing", b"Info", b"VBRI"))


def _flac_frames(path: str) -> int | None:
    """The frames a FLAC file's STREAMINFO gives (None where its encoder left them unknown): FFmpeg would estimate
    them from the bit rate then."""
    try:
        with open(path, "rb") as f:
            info = f.read(26)  # "fLaC", the block's 4-byte header, STREAMINFO: the count is bits 108..143
    except OSError:
        return None
    frames = int.from_bytes(info[18:26], "big") & ((1 << 36) - 1) if len(info) == 26 and info[4] & 0x7F == 0 else 0
    return frames or None


def _ogg_end(path: str) -> tuple[bool, bool]:
    """Whether an Ogg file's last page is whole and ends its stream (the end-of-stream flag: a file cut short
    lacks it, and Ogg states no length anywhere else), and whether that page is the first page's stream's (the
    file holds one stream: not chained, nor audio beside video)."""
    try:
        with open(path, "rb") as f:
            first = f.read(18)
            f.seek(max(0, f.seek(0, 2) - 65536))  # a page is at most 65307 bytes
            tail = f.read()
    except OSError:
        return True, False
    at = tail.rfind(b"OggS")
    if at < 0 or len(tail) < at + 27 or not tail[at + 5] & 4:
        return False, False
    lacing = tail[at + 27 : at + 27 + tail[at + 26]]
    whole = len(lacing) == tail[at + 26] and at + 27 + len(lacing) + sum(lacing) <= len(tail)
    return whole, whole and tail[at + 14 : at + 18] == first[14:18]


def _tag_seconds(value: str | None) -> float | None:
    """A Matroska DURATION tag (``"00:00:11.971000000"``) in seconds, or None."""
    try:
        h, m, sec = (value or "").split(":")
        return int(h) * 3600 + int(m) * 60 + float(sec)
    except ValueError:
        return None


def _mpeg_audio(head: bytes) -> bool:
    """Whether a file starts as MP3 (an ID3v2 tag or an MPEG audio frame header) or ADTS AAC does."""
    return head[:3] == b"ID3" or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0)


def _open_av(path: str, name: str, head: bytes) -> AudioStream:
    try:
        import av
    except ImportError:
        raise AudioError(
            f"Cannot read audio from {name}: it is not in a format livecap reads without PyAV "
            "(the 'av' package), which is not installed."
        ) from None
    try:
        container = av.open(path, metadata_errors="ignore")
    except (av.error.FFmpegError, OSError, ValueError, UnicodeDecodeError):
        known = _stdin_container(head)  # its first bytes name a container livecap reads: the file is damaged
        if known in ("MP4/M4A", "Matroska/WebM", "OGG", "FLAC"):  # (an ID3 tag may stand before anything)
            index = " (such a file cut short loses the index at its end)" if known == "MP4/M4A" else ""
            raise AudioError(
                f"Cannot read audio from {name}: it starts as {known} but is damaged or cut short{index}, so it "
                "cannot be read."
            ) from None
        raise AudioError(f"Cannot read audio from {name}: it is not in a format livecap reads ({SUPPORTED}).") from None
    try:
        stream = next((s for s in container.streams if s.type == "audio"), None)
        if stream is None:
            kind = "video without sound" if container.streams.video else "no audio"
            raise AudioError(f"Cannot read audio from {name}: it holds {kind}.")
        dec = _AvDecoder(container, stream, name)
        dec.untimed = _mpeg_audio(head)
        if _mpeg_audio(head) and _states_length(path):
            dec.promised = dec.frames  # from the Xing/Info/VBRI header: the file's length, not an estimate
        elif _stdin_container(head) in ("Matroska/WebM", "MP4/M4A") and dec.stated:
            dec.promised = dec.frames  # Matroska/WebM and MP4 state their length: a file cut short is said so
        elif head[:4] == b"fLaC":
            dec.promised = _flac_frames(path)
        elif head[:4] == b"OggS":
            ends, alone = _ogg_end(path)
            dec.broken = not ends
            if alone:  # its last granule position is where the audio ends (FFmpeg gives a Vorbis tail past it)
                dec.limit = dec.frames
        codec, box = stream.codec_context.name.upper(), container.format.name.split(",")[0].upper()
        return AudioStream(dec, name, codec if codec == box else f"{codec} in {box}")
    except BaseException:
        container.close()
        raise


def _open_stdin() -> AudioStream:
    stdin = getattr(sys.stdin, "buffer", None)
    if stdin is None:
        raise AudioError("Cannot read audio from standard input: it is not available.")
    return _open_pipe(stdin, "standard input", owned=False)


def _open_pipe(f: BinaryIO, name: str, owned: bool) -> AudioStream:
    """WAV or raw float32 16 kHz mono from a stream that cannot seek (standard input, a named pipe), fed as it
    arrives; a compressed format is refused (its decoders need to seek). ``owned``: close ``f`` at the end."""
    try:
        head = f.read(12)
        frame = _mpeg_frame_bytes(head)  # an MP3 or AAC frame header? the next one's start tells for sure
        if frame + 7 > len(head):
            head += f.read(frame + 7 - len(head))
    except (OSError, ValueError) as err:
        if owned:
            f.close()
        raise AudioError(f"Cannot read audio from {name}: {err}.") from None
    stream = _Prefixed(head, f)
    try:
        if head[:4] in (b"RIFF", b"RF64"):
            return AudioStream(_WavDecoder(WavReader(stream, name), f if owned else None), name, "WAV")
        container = _stdin_container(head)
        if container:
            what = "standard input takes" if not owned else "a pipe gives"
            advice = "give the file's name instead of -" if not owned else "give the file's name instead of the pipe"
            raise AudioError(
                f"Cannot read audio from {name}: it holds {container}, and {what} WAV or raw float32 16 kHz mono "
                f"only; {advice}."
            )
        return AudioStream(_RawDecoder(stream, name, f if owned else None), name, "raw float32")
    except BaseException:
        if owned:
            f.close()
        raise


def _stdin_container(head: bytes) -> str | None:
    """The compressed or container format that the first bytes of standard input start as, if any (a raw
    float32 stream does not start so, but for a chance of about 1 in 2**32 per magic: these are checked whole)."""
    if head[:4] in _MAGIC:
        return _MAGIC[head[:4]]
    if head[:4] == b"FORM" and head[8:12] in (b"AIFF", b"AIFC"):
        return "AIFF"
    if head[4:8] == b"ftyp":
        return "MP4/M4A"
    if head[:3] == b"ID3" and 2 <= head[3] <= 4:
        return "MP3"
    n = _mpeg_frame_bytes(head)
    if n and (len(head) == n or _mpeg_frame_bytes(head[n:])):  # two frames in a row (or exactly one)
        return {0: "AAC", 1: "MP3"}.get((head[1] >> 1) & 3, "MPEG audio")
    return None


_MAGIC = {
    b"fLaC": "FLAC",
    b"OggS": "OGG",
    b"caff": "CAF",
    b".snd": "AU",
    b"wvpk": "WavPack",
    b"MAC ": "Monkey's Audio",
    b"\x1aE\xdf\xa3": "Matroska/WebM",
}
_MPEG_KBPS = {  # (MPEG-1?, layer): bitrates in kbit/s for the header's indexes 1..14
    (True, 1): (32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448),
    (True, 2): (32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384),
    (True, 3): (32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),
    (False, 1): (32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256),
    (False, 2): (8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
}


def _mpeg_frame_bytes(head: bytes) -> int:
    """The length in bytes of the MPEG audio (MP1/2/3) or ADTS AAC frame whose header ``head`` starts with;
    0 when it does not start with a valid one (reserved fields, free format)."""
    if len(head) < 7 or head[0] != 0xFF or head[1] & 0xE0 != 0xE0:
        return 0
    version, layer = (head[1] >> 3) & 3, 4 - ((head[1] >> 1) & 3)
    if layer == 4:  # ADTS AAC: the frame length is in the header
        n = ((head[3] & 3) << 11) | (head[4] << 3) | (head[5] >> 5)
        return n if head[1] & 0xF6 == 0xF0 and (head[2] >> 2) & 15 < 13 and n >= 7 else 0
    rate_index, bitrate_index = (head[2] >> 2) & 3, head[2] >> 4
    if version == 1 or rate_index == 3 or bitrate_index in (0, 15):
        return 0
    rate = (44100, 48000, 32000)[rate_index] >> {3: 0, 2: 1, 0: 2}[version]  # MPEG-1, MPEG-2: /2, MPEG-2.5: /4
    kbps = _MPEG_KBPS[(version == 3, min(layer, 2) if version != 3 else layer)][bitrate_index - 1]
    pad = (head[2] >> 1) & 1
    if layer == 1:
        return (12000 * kbps // rate + pad) * 4
    return (144000 if layer == 2 or version == 3 else 72000) * kbps // rate + pad


class _Prefixed(io.RawIOBase):
    """A byte stream that returns ``head`` first, then the rest of ``tail`` (not seekable)."""

    def __init__(self, head: bytes, tail: BinaryIO) -> None:
        super().__init__()
        self._head, self._tail = head, tail

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if self._head:
            if n is None or n < 0:
                out, self._head = self._head + self._tail.read(), b""
                return out
            out, self._head = self._head[:n], self._head[n:]
            if len(out) < n:
                out += self._tail.read(n - len(out)) or b""
            return out
        return self._tail.read(n) or b""

    def read1(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes, from at most one read of the stream: what has arrived, or b"" at its end."""
        if self._head:
            out, self._head = (self._head, b"") if n is None or n < 0 else (self._head[:n], self._head[n:])
            return out
        read1 = getattr(self._tail, "read1", self._tail.read)
        return read1(n) or b""
