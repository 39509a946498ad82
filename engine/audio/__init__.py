"""Audio input for the engine: WAV/stdin reading and resampling to 16 kHz mono float32.

Public API: :func:`read_audio` (whole files), :class:`Resampler` (streaming, block-size independent),
:func:`resample` and :func:`downmix` (offline helpers), :func:`decode_wav` (the RIFF parser) and
``SAMPLE_RATE`` (16000).
"""

from engine.audio.read import read_audio
from engine.audio.resample import SAMPLE_RATE, Resampler, downmix, resample
from engine.audio.wav import decode_wav

__all__ = ["SAMPLE_RATE", "Resampler", "decode_wav", "downmix", "read_audio", "resample"]
