"""A small RIFF/WAVE parser: PCM integer (8/16/24/32-bit), IEEE float (32/64-bit) and
WAVE_FORMAT_EXTENSIBLE with those subtypes; RF64 too.

The stdlib ``wave`` module refuses float and extensible files, so this module walks the chunks itself.
:class:`WavReader` streams the samples block by block (never the whole file in memory); :func:`decode_wav`
reads them all. libsndfile (``soundfile``, used for the other formats in ``engine.audio.read``) reads WAV
too, but this parser also works on pipes (a WAV file on stdin), reads what a truncated file holds and
names the codec of a WAV it cannot decode. Contract:

- returns ``(samples, rate)``: ``samples`` is float32 of shape ``[frames, channels]`` in [-1, 1) for
  integer data (no clipping or normalisation of float data), ``rate`` the file's sample rate in Hz;
- chunks are walked in order with RIFF's pad byte after odd-sized chunks; unknown chunks (``LIST``,
  ``fact``, ``cue ``, ...) are skipped wherever they are;
- a ``data`` chunk that claims more bytes than the file holds (a truncated file, or a streamed writer
  that never patched the size) yields the whole frames that are there; a trailing partial frame is
  dropped; an empty ``data`` chunk yields zero frames, unless bytes that are no chunk follow it (a recorder
  stopped before writing the sizes): they are its audio, from a file or a pipe;
- anything else (not RIFF/WAVE, no ``fmt `` or ``data`` chunk, an encoding other than PCM/float such as
  A-law, mu-law, ADPCM or MP3, inconsistent format fields) raises :class:`engine.errors.AudioError`
  with one sentence that names the source.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from engine.errors import AudioError

WAVE_FORMAT_PCM = 0x0001
WAVE_FORMAT_IEEE_FLOAT = 0x0003
WAVE_FORMAT_EXTENSIBLE = 0xFFFE

# The 14 bytes that follow the 2-byte format tag in a KSDATAFORMAT_SUBTYPE_* GUID.
_GUID_TAIL = b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"

_CODEC_NAMES = {
    0x0002: "Microsoft ADPCM",
    0x0006: "A-law",
    0x0007: "mu-law",
    0x0011: "IMA ADPCM",
    0x0031: "GSM 6.10",
    0x0050: "MPEG",
    0x0055: "MP3",
    0x00FF: "AAC",
    0x1610: "AAC",
    0x674F: "Ogg Vorbis",
    0xF1AC: "FLAC",
}


@dataclass(frozen=True)
class WavFormat:
    """The fields of a ``fmt `` chunk that decoding needs (``tag`` is the resolved subtype)."""

    tag: int
    channels: int
    rate: int
    block_align: int
    bits: int


class WavReader:
    """Streams the samples of a WAV file: the header is parsed on construction, ``read`` decodes blocks.

    ``stream`` may be a pipe (chunks before ``data`` are then skipped by reading). ``rate``, ``channels``
    and ``frames`` (the whole frames the file holds; ``None`` when the stream cannot tell its size) are
    known once constructed, and ``promised``: the frames its header gives (more than ``frames`` for a file cut
    short), ``None`` when a streaming writer left a placeholder size (or a size of 0 before its audio). Raises
    :class:`engine.errors.AudioError` as :func:`decode_wav` does.
    """

    def __init__(self, stream: BinaryIO, name: str) -> None:
        self._stream = stream
        self.name = name
        self.fmt, self._left = _parse_header(stream, name)
        self.rate = self.fmt.rate
        self.channels = self.fmt.channels
        self.frames: int | None = None
        self._rest = b""  # from a pipe: the start of a frame whose other bytes have not arrived
        # the frames the header promises: None for a streamed writer's placeholder size (0xFFFFFFFF, 0x7FFFF000...)
        self.promised = None if self._left >= PLACEHOLDER else self._left // self.fmt.block_align
        try:
            here = stream.tell()
            end = stream.seek(0, 2)
            stream.seek(here)
        except (OSError, ValueError, AttributeError):  # a pipe: its size is not known
            here, end = 0, None
        if self._left == 0:  # an empty data chunk: is what follows it another chunk, or audio?
            peek = stream.read(8)
            if end is not None:
                stream.seek(here)
            room = 1 << 32 if end is None else end - here - 8
            if len(peek) >= self.fmt.block_align and not _chunk_header(peek, room):
                # a recorder stopped before writing the sizes: the rest is its audio (FFmpeg reads it so too)
                self._left, self.promised = 1 << 62, None
                if end is None:
                    self._rest = peek  # read ahead from a pipe: the audio's first bytes
        if end is not None:
            self._left = min(self._left, max(0, end - here))
            self.frames = self._left // self.fmt.block_align

    def read(self, frames: int) -> np.ndarray:
        """Up to ``frames`` frames as float32 ``[n, channels]``; fewer only at the end, zero after it. From a pipe
        (a stream that cannot tell its size), the whole frames that have arrived (at least one, or none at the end):
        a WAV piped from a live recorder is fed as it comes, not in blocks of many seconds."""
        want = min(max(0, frames) * self.fmt.block_align, self._left)
        if want and self.frames is None and hasattr(self._stream, "read1"):
            return self._read_arrived(want)
        data, self._rest = self._rest[:want], self._rest[want:]  # bytes read ahead from a pipe come first
        data += _read_upto(self._stream, want - len(data)) if want > len(data) else b""
        self._left -= len(data)
        if len(data) < want:
            self._left = 0  # the file ends early: a truncated file or a placeholder size
        usable = len(data) - len(data) % self.fmt.block_align
        return _decode_samples(data[:usable], self.fmt)

    def _read_arrived(self, want: int) -> np.ndarray:
        align = self.fmt.block_align
        data = self._rest
        while len(data) < align and self._left > 0:
            got = self._stream.read1(max(align, want - len(data)))  # type: ignore[attr-defined]
            if not got:  # the stream ended
                self._left = 0
                break
            got = got[: self._left]  # bytes past the data chunk (a trailing chunk) are no audio
            self._left -= len(got)
            data += got
        usable = len(data) - len(data) % align
        self._rest = data[usable:] if self._left > 0 else b""  # a partial frame at the very end is dropped
        return _decode_samples(data[:usable], self.fmt)


def decode_wav(stream: BinaryIO, name: str) -> tuple[np.ndarray, int]:
    """Decode the whole WAV file read from ``stream``; ``name`` is how error messages call the source."""
    reader = WavReader(stream, name)
    blocks = []
    while True:
        block = reader.read(1 << 16)
        if not len(block):
            break
        blocks.append(block)
    if not blocks:
        return np.zeros((0, reader.channels), np.float32), reader.rate
    return np.concatenate(blocks), reader.rate


def _parse_header(stream: BinaryIO, name: str) -> tuple[WavFormat, int]:
    """Walk the chunks up to ``data``: its format and its claimed size in bytes."""
    head = stream.read(12)
    if len(head) == 0:
        raise AudioError(f"Cannot read audio from {name}: it is empty.")
    if len(head) < 12 or head[:4] not in (b"RIFF", b"RF64") or head[8:12] != b"WAVE":
        raise AudioError(f"Cannot read audio from {name}: it is not a WAV file (no RIFF/WAVE header).")
    rf64 = head[:4] == b"RF64"
    rf64_data_size: int | None = None
    fmt: WavFormat | None = None
    while True:
        header = stream.read(8)
        if len(header) < 8:
            break
        chunk_id = header[:4]
        size = struct.unpack("<I", header[4:])[0]
        if chunk_id == b"ds64" and rf64:
            payload = _read_upto(stream, size)
            if len(payload) >= 16:
                rf64_data_size = struct.unpack("<Q", payload[8:16])[0]
        elif chunk_id == b"fmt ":
            fmt = _parse_fmt(_read_upto(stream, size), name)
        elif chunk_id == b"data":
            if fmt is None:
                raise AudioError(f"Cannot read audio from {name}: its data chunk comes before the format chunk.")
            if rf64 and size == 0xFFFFFFFF and rf64_data_size is not None:
                size = rf64_data_size
            return fmt, size
        else:
            _skip(stream, size)
        if size % 2:
            stream.read(1)  # RIFF pads odd-sized chunks to an even length
    if fmt is None:
        raise AudioError(f"Cannot read audio from {name}: the WAV file has no format chunk.")
    raise AudioError(f"Cannot read audio from {name}: the WAV file has no data chunk.")


def _chunk_header(head: bytes, room: int) -> bool:
    """Whether ``head`` (8 bytes) reads as a RIFF chunk's id (four printable ASCII characters) and a size that fits
    in the ``room`` bytes after it."""
    return len(head) == 8 and all(0x20 <= c <= 0x7E for c in head[:4]) and struct.unpack("<I", head[4:])[0] <= room


def _read_upto(stream: BinaryIO, size: int) -> bytes:
    """Read ``size`` bytes or whatever is left, without allocating a claimed size the file lacks."""
    try:
        here = stream.tell()
        end = stream.seek(0, 2)
        stream.seek(here)
        return stream.read(max(0, min(size, end - here)))
    except (OSError, ValueError, AttributeError):
        parts = []
        while size > 0:
            got = stream.read(min(size, 1 << 20))
            if not got:
                break
            parts.append(got)
            size -= len(got)
        return b"".join(parts)


def _skip(stream: BinaryIO, size: int) -> None:
    """Move past ``size`` bytes (seek when the stream can, read otherwise)."""
    try:
        stream.seek(size, 1)
    except (OSError, ValueError, AttributeError):
        while size > 0:
            got = stream.read(min(size, 1 << 20))
            if not got:
                return
            size -= len(got)


PLACEHOLDER = 0x7FFF0000  # data sizes from here up are streaming writers' "unknown" (ffmpeg, arecord, sox)
SPEECH_CODECS = (0x0002, 0x0006, 0x0007, 0x0011, 0x0031)  # ADPCM, A-law, mu-law, GSM: libsndfile decodes them


class WavEncodingError(AudioError):
    """A well-formed WAV file whose samples are not PCM or float; ``tag`` is its format tag (``engine.audio.read``
    hands ``SPEECH_CODECS``, the telephony encodings of call recordings, to libsndfile)."""

    def __init__(self, message: str, tag: int) -> None:
        super().__init__(message)
        self.tag = tag


def _parse_fmt(payload: bytes, name: str) -> WavFormat:
    """Validate a ``fmt `` chunk and resolve WAVE_FORMAT_EXTENSIBLE to its subtype."""
    if len(payload) < 16:
        raise AudioError(f"Cannot read audio from {name}: its WAV format chunk is truncated.")
    tag, channels, rate, _byte_rate, block_align, bits = struct.unpack("<HHIIHH", payload[:16])
    if tag == WAVE_FORMAT_EXTENSIBLE:
        if len(payload) < 40:
            raise AudioError(f"Cannot read audio from {name}: its extensible WAV format chunk is truncated.")
        guid = payload[24:40]
        sub = struct.unpack("<H", guid[:2])[0]
        if guid[2:] != _GUID_TAIL:
            raise AudioError(f"Cannot read audio from {name}: it uses an unknown WAV encoding.")
        tag = sub
    if tag not in (WAVE_FORMAT_PCM, WAVE_FORMAT_IEEE_FLOAT):
        codec = _CODEC_NAMES.get(tag)
        what = f"{codec} audio" if codec else f"audio in an unsupported encoding (format tag 0x{tag:04X})"
        raise WavEncodingError(
            f"Cannot read audio from {name}: it holds {what}; only PCM and float WAV files are supported.", tag
        )
    if channels == 0 or rate == 0 or block_align == 0 or block_align % channels:
        raise AudioError(f"Cannot read audio from {name}: its WAV format chunk is inconsistent.")
    width = block_align // channels
    allowed = (1, 2, 3, 4) if tag == WAVE_FORMAT_PCM else (4, 8)
    if width not in allowed or bits > 8 * width or bits == 0:
        kind = "integer" if tag == WAVE_FORMAT_PCM else "float"
        raise AudioError(f"Cannot read audio from {name}: {bits}-bit {kind} samples are not supported.")
    return WavFormat(tag=tag, channels=channels, rate=rate, block_align=block_align, bits=bits)


def _decode_samples(data: bytes, fmt: WavFormat) -> np.ndarray:
    """Turn the ``data`` payload into float32 ``[frames, channels]`` (whole frames only)."""
    frames = len(data) // fmt.block_align
    data = data[: frames * fmt.block_align]
    width = fmt.block_align // fmt.channels
    if fmt.tag == WAVE_FORMAT_IEEE_FLOAT:
        raw = np.frombuffer(data, dtype="<f4" if width == 4 else "<f8")
        out = raw.astype(np.float32)
    elif width == 1:
        out = (np.frombuffer(data, dtype=np.uint8).astype(np.float32) - np.float32(128.0)) / np.float32(128.0)
    elif width == 2:
        out = np.frombuffer(data, dtype="<i2").astype(np.float32) / np.float32(32768.0)
    elif width == 3:
        # Left-justify each 3-byte sample in an int32 (low byte zero) so the sign comes for free.
        b = np.frombuffer(data, dtype=np.uint8).reshape(-1, 3)
        padded = np.zeros((b.shape[0], 4), dtype=np.uint8)
        padded[:, 1:] = b
        out = padded.view("<i4")[:, 0].astype(np.float32) / np.float32(2147483648.0)
    else:
        out = np.frombuffer(data, dtype="<i4").astype(np.float32) / np.float32(2147483648.0)
    return out.reshape(frames, fmt.channels)
