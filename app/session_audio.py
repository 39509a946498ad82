"""A session's audio, kept so it can be re-transcribed later: exactly what the engine was fed (16 kHz mono).

While a session runs, ``AudioRecorder`` appends the samples as raw 16-bit PCM (``audio.pcm``): an
append-only file that a crash cannot damage beyond its last write (a FLAC or Ogg stream left unfinished
by a crash is not reliably readable: FLAC loses its length, Ogg its unflushed pages). When the session
ends the raw file is compressed to FLAC through soundfile (libsndfile; about 0.1 s per 10 minutes) and
removed. Samples are rounded to 16 bits as ``round(x * 32768)``, so audio that came from a 16-bit file
reads back bit-exactly (``x = n / 32768``).

No Qt: the engine worker thread records, the re-transcription reads.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from engine.audio import SAMPLE_RATE
from engine.errors import AudioError

log = logging.getLogger(__name__)

RATE = SAMPLE_RATE  # what the engine is fed
RAW_NAME = "audio.pcm"
FLAC_NAME = "audio.flac"
BLOCK = RATE * 60  # samples per block when compressing or reading


def to_int16(pcm: np.ndarray) -> np.ndarray:
    """Float samples in [-1, 1] as 16-bit integers (``round(x * 32768)``, clipped; NaN as 0)."""
    x = np.nan_to_num(np.asarray(pcm, dtype=np.float32).reshape(-1), nan=0.0, posinf=1.0, neginf=-1.0)
    return np.clip(np.rint(x * 32768.0), -32768, 32767).astype("<i2")


class AudioRecorder:
    """Appends 16 kHz mono float32 audio to ``path`` (raw s16le). Never raises: a failed write is
    logged, ``failed`` holds one sentence, and recording stops (captioning goes on)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.failed: str | None = None
        self.samples = 0
        self._file: BinaryIO | None = None
        try:
            self._file = open(self.path, "ab")
        except OSError as exc:
            self._fail(exc)

    def write(self, pcm: np.ndarray) -> None:
        """Append ``pcm`` (float32 mono 16 kHz)."""
        if self._file is None or not len(pcm):
            return
        data = to_int16(pcm)
        try:
            self._file.write(data.tobytes())
            self._file.flush()
        except (OSError, ValueError) as exc:
            self._fail(exc)
            return
        self.samples += len(data)

    def close(self) -> Path | None:
        """Close and compress to FLAC beside the raw file; returns the file that holds the audio."""
        if self._file is None:
            return self.path if self.path.is_file() else None
        with contextlib.suppress(OSError):
            self._file.close()
        self._file = None
        return compress(self.path)

    def _fail(self, exc: Exception) -> None:
        log.error("recording the session audio failed: %s", exc)
        if self.failed is None:
            reason = getattr(exc, "strerror", None) or exc
            self.failed = f"The session audio could not be kept ({reason}); the captions go on."
        if self._file is not None:
            with contextlib.suppress(OSError, ValueError):
                self._file.close()
            self._file = None


def compress(raw: Path) -> Path:
    """Encode the raw file ``raw`` as FLAC beside it (atomically) and remove it; returns the FLAC
    file, or ``raw`` when that failed (the raw file is kept and still readable)."""
    flac = raw.with_name(FLAC_NAME)
    tmp = raw.with_name("." + FLAC_NAME + ".tmp")
    try:
        import soundfile  # libsndfile; an OSError when the library is missing

        with (
            open(raw, "rb") as src,
            soundfile.SoundFile(tmp, "w", samplerate=RATE, channels=1, format="FLAC", subtype="PCM_16") as dst,
        ):
            while chunk := src.read(BLOCK * 2):
                dst.write(np.frombuffer(chunk[: len(chunk) // 2 * 2], dtype="<i2"))
        os.replace(tmp, flac)
        raw.unlink()
        return flac
    except (ImportError, OSError, RuntimeError, ValueError) as exc:  # soundfile raises RuntimeError subclasses
        log.warning("could not compress %s: %s", raw, exc)
        with contextlib.suppress(OSError):
            tmp.unlink()
        return raw


def iter_audio(path: str | os.PathLike[str], block: int = BLOCK) -> Iterator[np.ndarray]:
    """The kept audio at ``path`` (FLAC or raw) as float32 blocks of at most ``block`` samples.
    Raises ``AudioError`` with one sentence when it cannot be read."""
    path = Path(path)
    try:
        if path.suffix == ".pcm":
            with open(path, "rb") as f:
                while chunk := f.read(block * 2):
                    yield np.frombuffer(chunk[: len(chunk) // 2 * 2], dtype="<i2").astype(np.float32) / 32768.0
            return
        import soundfile

        with soundfile.SoundFile(path) as f:
            if f.samplerate != RATE or f.channels != 1:
                raise AudioError(f"The kept audio {path.name} is not 16 kHz mono.")
            while len(data := f.read(block, dtype="int16")):
                yield data.reshape(-1).astype(np.float32) / 32768.0
    except AudioError:
        raise
    except (OSError, RuntimeError, ValueError) as exc:
        raise AudioError(f"The kept audio {path.name} could not be read ({exc}).") from None


def audio_seconds(path: str | os.PathLike[str]) -> float:
    """The length of the kept audio at ``path`` in seconds (0 when unreadable)."""
    path = Path(path)
    try:
        if path.suffix == ".pcm":
            return path.stat().st_size / 2 / RATE
        import soundfile

        return float(soundfile.info(str(path)).duration)
    except (OSError, RuntimeError, ValueError):
        return 0.0
