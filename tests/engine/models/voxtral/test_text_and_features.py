"""Voxtral pieces that need no model: Tekken byte decoding, mel features, RoPE tables at large positions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.errors import ModelError
from engine.models.rope import inv_freq, rope_tables
from engine.models.voxtral.mel import MelStream, log_mel, mel_filters
from engine.models.voxtral.model import time_embedding
from engine.models.voxtral.tekken import ByteText, Tekken
from tests.helpers import write_tekken


def test_bytetext_multibyte_split_across_tokens():
    bt = ByteText()
    snaps = []
    for piece in [b"caf", "é".encode()[:1], "é".encode()[1:], " 日".encode()[:2], "日".encode()[1:], b"!"]:
        bt.add(piece)
        snaps.append(bt.text)
    assert snaps == ["caf", "caf", "café", "café ", "café 日", "café 日!"]
    assert "\ufffd" not in bt.text


def test_bytetext_invalid_bytes_become_one_replacement_and_never_flicker():
    bt = ByteText()
    seen = []
    for piece in [b"ab", b"\xe6", b"\x97", b"x", b"\xff", b"c"]:  # truncated 3-byte char, then a stray 0xFF
        bt.add(piece)
        seen.append(bt.text)
    bt.flush()
    assert bt.text == "ab\ufffdx\ufffdc"
    # every snapshot is a prefix of the next: nothing shown is ever taken back
    for a, b in zip(seen, seen[1:] + [bt.text]):
        assert b.startswith(a)


def test_tekken_specials_by_name_and_bytes(tmp_path):
    f = tmp_path / "tekken.json"
    write_tekken(
        f,
        [b" hello", b" w\xc3", b"\xa9rld"],
        {0: "<unk>", 1: "<s>", 2: "</s>", 40: "[STREAMING_PAD]", 41: "[STREAMING_WORD]"},
    )
    t = Tekken(f)
    assert (t.bos, t.eos, t.pad, t.word) == (1, 2, 40, 41)  # looked up by name, not hard-coded
    assert t.decode([1, 40, 1256, 41, 1257, 1258, 2]) == " hello wérld"
    assert t.token_bytes(40) == b"" and t.token_bytes(1000 + 65) == b"A"


def test_tekken_errors(tmp_path):
    with pytest.raises(ModelError, match="no tekken.json"):
        Tekken(tmp_path / "tekken.json")
    (tmp_path / "tekken.json").write_text("{not json")
    with pytest.raises(ModelError, match="unreadable"):
        Tekken(tmp_path / "tekken.json")


def test_mel_filters_are_slaney_triangles():
    f = mel_filters()
    assert f.shape == (201, 128)
    assert (f >= 0).all() and (f.sum(axis=0) > 0).all()
    # Slaney area normalisation: each triangle integrates (over Hz) to ~1 (2 / bandwidth x half base x height)
    hz = np.linspace(0, 8000, 201)
    area = np.trapezoid(f, hz, axis=0)
    # on the 40 Hz bin grid the area is only sampled: about 1 on average where triangles are wide
    assert abs(area[60:].mean() - 1.0) < 0.01 and np.allclose(area[60:], 1.0, atol=0.15)


def test_mel_of_a_sine_peaks_in_the_right_band():
    t = np.arange(16000 * 2) / 16000
    x = np.concatenate([np.zeros(400), 0.5 * np.sin(2 * np.pi * 1000 * t), np.zeros(400)]).astype(np.float32)
    m = log_mel(x)
    mid = m[len(m) // 2]
    hz = np.linspace(0, 8000, 201)
    centre = (mel_filters() * hz[:, None]).sum(0) / mel_filters().sum(0)
    assert abs(centre[int(np.argmax(mid))] - 1000) < 60
    assert m.min() >= (1.5 - 8 + 4) / 4 - 1e-6  # the fixed floor, never the per-utterance max


@pytest.mark.parametrize("chunk", [1, 160, 333, 1280, 16000])
def test_mel_stream_equals_offline(chunk):
    rng = np.random.default_rng(3)
    x = np.concatenate([np.zeros(2000), rng.standard_normal(16000) * 0.2, np.zeros(2000)]).astype(np.float32)
    ref = log_mel(x)
    s = MelStream()
    out = [s.push(x[i : i + chunk]) for i in range(0, len(x), chunk)]
    out.append(s.push(np.zeros(40, np.float32)))  # the reflect padding of the last frame (zeros)
    got = np.concatenate(out)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, atol=1e-6, rtol=0)  # BLAS batch size may change the last ulp


def test_rope_tables_exact_at_hours_long_positions():
    pos = np.array([0, 1, 540_000, 1_000_003, 10_800_000])  # 3 h of 50 Hz encoder frames, and beyond
    cos, sin = rope_tables(pos, inv_freq(64, 1e6))
    inv = [1e6 ** (-2 * i / 64) for i in range(32)]
    for r, p in enumerate(pos):
        for i in (0, 1, 7, 31):
            assert cos[r, i] == pytest.approx(math.cos(p * inv[i]), abs=1e-9)
            assert sin[r, i] == pytest.approx(math.sin(p * inv[i]), abs=1e-9)


def test_time_embedding_layout():
    t = time_embedding(6, 16)
    w = np.exp(-math.log(10000.0) * np.arange(8) / 8)
    np.testing.assert_allclose(t, np.concatenate([np.cos(6 * w), np.sin(6 * w)]), rtol=1e-6)
