"""Audio input for the engine: decoding files (or stdin) and resampling to 16 kHz mono float32.

Public API: :func:`open_audio` (streaming, any supported format) and :class:`AudioStream`,
:func:`read_audio` (a whole short file), :class:`Resampler` (streaming, block-size independent),
:func:`resample` and :func:`downmix` (offline helpers), :func:`decode_wav` (the RIFF parser),
``SUPPORTED`` (the formats, in words) and ``SAMPLE_RATE`` (16000).
"""

from engine.audio.read import SUPPORTED, AudioStream, open_audio, read_audio
from engine.audio.resample import SAMPLE_RATE, Resampler, downmix, resample
from engine.audio.wav import decode_wav

__all__ = [
    "SAMPLE_RATE",
    "SUPPORTED",
    "AudioStream",
    "Resampler",
    "decode_wav",
    "downmix",
    "open_audio",
    "read_audio",
    "resample",
]
