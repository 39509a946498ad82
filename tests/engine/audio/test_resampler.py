"""The streaming Resampler: block-size independence and agreement with the offline path."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from engine.audio import Resampler, read_audio, resample

RNG = np.random.default_rng(99)


def run(r: Resampler, blocks) -> np.ndarray:
    out = [r.process(b) for b in blocks]
    out.append(r.flush())
    for o in out:
        assert o.dtype == np.float32 and o.ndim == 1
    return np.concatenate(out)


def split_random(x: np.ndarray, rng: np.random.Generator, top: int) -> list[np.ndarray]:
    cuts = np.cumsum(rng.integers(0, top, size=len(x)))  # zero-length blocks included
    cuts = cuts[cuts < len(x)]
    return np.split(x, cuts)


def float_wav(x: np.ndarray, rate: int, channels: int) -> bytes:
    """A 32-bit float WAV (format 3) of interleaved ``x``."""
    payload = np.asarray(x, dtype="<f4").tobytes()
    fmt = struct.pack("<HHIIHH", 3, channels, rate, rate * 4 * channels, 4 * channels, 32)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(payload))
    body += payload
    return b"RIFF" + struct.pack("<I", len(body)) + body


@pytest.mark.parametrize("rate", [8000, 44100, 48000])
def test_block_size_independent(rate):
    x = (0.3 * RNG.standard_normal(rate // 2)).astype(np.float32)
    whole = run(Resampler(rate), [x])
    ms10 = run(Resampler(rate), [x[i : i + rate // 100] for i in range(0, len(x), rate // 100)])
    rnd = run(Resampler(rate), split_random(x, np.random.default_rng(rate), 3000))
    singles = run(Resampler(rate), [x[i : i + 1] for i in range(len(x))])
    assert abs(len(whole) - len(x) * 16000 / rate) <= 1
    for other in (ms10, rnd, singles):
        assert len(other) == len(whole)
        np.testing.assert_allclose(other, whole, rtol=0, atol=1e-6)


@pytest.mark.parametrize("rate", [8000, 22050, 44100, 48000])
def test_matches_read_audio(tmp_path: Path, rate):
    t = np.arange(rate) / rate
    x = (0.4 * np.sin(2 * np.pi * 523.0 * t) + 0.05 * RNG.standard_normal(rate)).astype(np.float32)
    p = tmp_path / "x.wav"
    p.write_bytes(float_wav(x, rate, 1))
    offline = read_audio(p)
    streamed = run(Resampler(rate), split_random(x, np.random.default_rng(1), 1000))
    assert abs(len(streamed) - len(offline)) <= 1
    n = min(len(streamed), len(offline))
    np.testing.assert_allclose(streamed[:n], offline[:n], rtol=0, atol=1e-5)


def test_stereo_blocks_downmix(tmp_path: Path):
    x = (0.3 * RNG.standard_normal((44100, 2))).astype(np.float32)
    p = tmp_path / "s.wav"
    p.write_bytes(float_wav(x.reshape(-1), 44100, 2))
    offline = read_audio(p)
    r = Resampler(44100, channels=2)
    streamed = run(r, [x[i : i + 441] for i in range(0, len(x), 441)])
    n = min(len(streamed), len(offline))
    assert abs(len(streamed) - len(offline)) <= 1
    np.testing.assert_allclose(streamed[:n], offline[:n], rtol=0, atol=1e-5)
    np.testing.assert_allclose(streamed, run(Resampler(44100), [x.mean(axis=1)]), atol=1e-6)


def test_a_channel_in_opposite_phase_is_turned_over_not_cancelled(tmp_path: Path):
    """A stereo recording whose right channel is the left one inverted (a wiring or capsule fault) read as
    silence: the plain mean cancels it, and the transcript was empty without a word."""
    voice = (0.3 * np.sin(2 * np.pi * 180.0 * np.arange(32000) / 16000) * RNG.uniform(0.5, 1, 32000)).astype(np.float32)
    x = np.zeros((40000, 2), np.float32)
    x[8000:, 0], x[8000:, 1] = voice, -voice  # half a second of silence first: nothing to tell polarity by
    p = tmp_path / "inverted.wav"
    p.write_bytes(float_wav(x.reshape(-1), 16000, 2))
    np.testing.assert_array_equal(read_audio(p)[8000:], voice)
    at44 = resample(x[:, 0], 16000, 44100)
    stereo = np.stack([at44, -at44], axis=1)
    ms10 = run(Resampler(44100, channels=2), [stereo[i : i + 441] for i in range(0, len(stereo), 441)])
    rnd = run(Resampler(44100, channels=2), split_random(stereo, np.random.default_rng(3), 5000))
    onset = 8000 + 160  # the first 10 ms of the sound may cancel, until a block tells the polarity
    np.testing.assert_allclose(ms10[onset:], run(Resampler(44100), [at44])[onset:], atol=1e-6)
    np.testing.assert_array_equal(rnd[onset:], ms10[onset:])  # the same whatever the cuts


def test_two_voices_one_per_channel_are_mixed_by_the_plain_mean():
    """A call recording (me left, them right) and ordinary stereo keep the mean: only a channel running against
    channel 0 is turned over."""
    left = (0.3 * RNG.standard_normal(16000)).astype(np.float32)
    right = (0.3 * RNG.standard_normal(16000)).astype(np.float32)
    x = np.stack([left, right], axis=1)
    np.testing.assert_array_equal(run(Resampler(16000, channels=2), [x]), x.mean(axis=1, dtype=np.float32))
    x = np.stack([left, 0.5 * left + 0.1 * right], axis=1)  # the same voice in both, louder left
    np.testing.assert_array_equal(run(Resampler(16000, channels=2), [x]), x.mean(axis=1, dtype=np.float32))


def test_sine_amplitude_and_frequency():
    rate = 48000
    t = np.arange(rate) / rate
    x = (0.5 * np.sin(2 * np.pi * 1000.0 * t)).astype(np.float32)
    y = run(Resampler(rate), [x[i : i + 480] for i in range(0, rate, 480)])
    mid = y[2000:14000]
    assert abs(np.abs(mid).max() - 0.5) < 0.005
    spec = np.abs(np.fft.rfft(y[:16000] * np.hanning(16000)))
    assert abs(np.argmax(spec) - 1000) <= 2


def test_same_rate_is_passthrough():
    x = RNG.uniform(-1, 1, (100, 2)).astype(np.float32)
    r = Resampler(16000, channels=2)
    y = r.process(x)
    np.testing.assert_allclose(y, x.mean(axis=1), atol=1e-7)
    assert r.flush().shape == (0,)
    mono = Resampler(16000)
    z = mono.process(x[:, 0])
    np.testing.assert_array_equal(z, x[:, 0])
    assert z is not x[:, 0]


def test_flush_starts_a_fresh_stream():
    x = (0.3 * RNG.standard_normal(4410)).astype(np.float32)
    r = Resampler(44100)
    first = run(r, [x[:1000], x[1000:]])
    second = run(r, [x])
    np.testing.assert_array_equal(first, second)


def test_reset_drops_buffered_input():
    x = (0.3 * RNG.standard_normal(4410)).astype(np.float32)
    r = Resampler(44100)
    r.process(RNG.standard_normal(5000).astype(np.float32))
    r.reset()
    np.testing.assert_array_equal(run(r, [x]), run(Resampler(44100), [x]))


def test_empty_blocks():
    r = Resampler(48000)
    assert r.process(np.zeros(0, np.float32)).shape == (0,)
    assert r.process(np.zeros((0, 1), np.float32)).shape == (0,)
    assert r.flush().shape == (0,)


def test_int_and_float64_input_become_float32():
    r = Resampler(32000)
    y = r.process(np.ones(3200, dtype=np.float64) * 0.25)
    assert y.dtype == np.float32


def test_shape_errors():
    with pytest.raises(ValueError, match="channel"):
        Resampler(48000, channels=2).process(np.zeros((10, 3), np.float32))
    with pytest.raises(ValueError):
        Resampler(48000).process(np.zeros((2, 2, 2), np.float32))
    with pytest.raises(ValueError):
        Resampler(0)
    with pytest.raises(ValueError):
        Resampler(16000, channels=0)


def test_offline_resample_helper():
    x = (0.3 * RNG.standard_normal(4800)).astype(np.float32)
    np.testing.assert_allclose(resample(x, 48000), run(Resampler(48000), [x]), atol=1e-6)
    assert resample(x[:0], 48000).shape == (0,)
