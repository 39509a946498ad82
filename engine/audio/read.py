"""``read_audio``: any supported WAV file, or raw float32 on stdin, as float32 mono 16 kHz."""

from __future__ import annotations

import io
import os
import sys

import numpy as np

from engine.audio.resample import SAMPLE_RATE, downmix, resample
from engine.audio.wav import decode_wav
from engine.errors import AudioError, os_reason


def read_audio(path_or_dash: str | os.PathLike[str]) -> np.ndarray:
    """Read audio as float32 mono at 16 kHz.

    ``path_or_dash`` is a WAV file (any rate; mono or multi-channel, downmixed by the mean; 8/16/24/32-bit
    integer PCM, 32/64-bit float, WAVE_FORMAT_EXTENSIBLE with those subtypes), resampled with soxr when
    its rate is not 16 kHz. ``"-"`` reads stdin: raw float32 little-endian 16 kHz mono samples (a
    trailing partial sample is dropped; empty input gives zero samples); stdin that starts with a RIFF
    header is decoded as a WAV file instead. A truncated WAV file gives the samples it holds; an empty
    data chunk gives an empty array. Anything unreadable raises :class:`engine.errors.AudioError` with
    one sentence naming the file.
    """
    if isinstance(path_or_dash, str) and path_or_dash == "-":
        return _read_stdin()
    name = f"'{os.fspath(path_or_dash)}'"
    try:
        with open(path_or_dash, "rb") as f:
            samples, rate = decode_wav(f, name)
    except IsADirectoryError:
        raise AudioError(f"Cannot read audio from {name}: it is a directory.") from None
    except FileNotFoundError:
        raise AudioError(f"Cannot read audio from {name}: no such file.") from None
    except OSError as err:
        raise AudioError(f"Cannot read audio from {name}: {os_reason(err)}.") from None
    return resample(downmix(samples), rate, SAMPLE_RATE)


def _read_stdin() -> np.ndarray:
    stdin = getattr(sys.stdin, "buffer", None)
    if stdin is None:
        raise AudioError("Cannot read audio from standard input: it is not available.")
    try:
        data = stdin.read()
    except (OSError, ValueError) as err:
        raise AudioError(f"Cannot read audio from standard input: {err}.") from None
    if data[:4] in (b"RIFF", b"RF64"):
        samples, rate = decode_wav(io.BytesIO(data), "standard input")
        return resample(downmix(samples), rate, SAMPLE_RATE)
    usable = len(data) - len(data) % 4
    return np.frombuffer(data[:usable], dtype="<f4").astype(np.float32)
