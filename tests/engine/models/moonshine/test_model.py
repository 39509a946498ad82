"""Moonshine model vs the reference goldens (transformers 5.24.0), on NumPy and MLX in float32."""

from __future__ import annotations

import numpy as np
import pytest

from engine.models.moonshine import model as model_module
from engine.models.moonshine.decoding import greedy, token_cap
from tests.conftest import CLIPS, MOON_MODELS, golden

BACKENDS = ["numpy", "mlx"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", MOON_MODELS)
@pytest.mark.parametrize("clip", CLIPS)
def test_encoder_memory_logits_and_greedy_ids(backend, name, clip, fixture_model, rel_err):
    g = golden(name, clip)
    m = fixture_model(name, backend)
    B = m.B
    feats, _ = m.frontend(g["audio"])
    assert rel_err(B.to_numpy(feats), g["embedder"]) < 1e-4
    enc, valid = m.encode(g["audio"])
    assert valid.all()
    assert rel_err(B.to_numpy(enc), g["encoder"]) < 1e-4
    mem = m.memory(enc)
    assert rel_err(B.to_numpy(mem), g["memory"]) < 1e-4
    xkv = m.cross_kv(mem)
    logits = m.decode(
        g["decoder_input_ids"].tolist(), 0, m.new_self_cache(len(g["decoder_input_ids"])), xkv, all_logits=True
    )
    assert rel_err(logits, g["logits"]) < 1e-4
    assert token_cap(len(g["audio"])) == int(g["max_new_tokens"])
    ids = greedy(m, xkv, int(g["max_new_tokens"]))
    assert ids == g["greedy"].tolist()


@pytest.mark.parametrize("name", MOON_MODELS)
def test_encoder_in_query_blocks(name, fixture_model, rel_err, monkeypatch):
    """Long segments run the encoder's attention in blocks of ``ENC_BLOCK`` queries (each with its keys and mask);
    the fixtures' clips fit in one, so blocks of 48 (uneven, the last one short) stand in for them here."""
    g = golden(name, "speech")
    m = fixture_model(name, "numpy")
    monkeypatch.setattr(model_module, "ENC_BLOCK", 48)
    enc, _ = m.encode(g["audio"])
    assert g["encoder"].shape[0] > 3 * 48
    assert rel_err(m.B.to_numpy(enc), g["encoder"]) < 1e-4


@pytest.mark.parametrize("name", MOON_MODELS)
def test_prefix_encoder_outputs(name, fixture_model, rel_err):
    g = golden(name, "speech")
    m = fixture_model(name, "numpy")
    for key in (k for k in g if k.startswith("encoder_prefix_")):
        k = int(key.rsplit("_", 1)[1])
        enc, _ = m.encode(g["audio"][: 1280 * k])
        assert rel_err(m.B.to_numpy(enc), g[key]) < 1e-4, key


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", MOON_MODELS)
def test_mlx_reduced_precision_agreement(name, dtype, fixture_model):
    """Reduced precision is judged by greedy-id agreement with the float32 reference (measured, not exact)."""
    m = fixture_model(name, "mlx", dtype)
    agree = total = 0
    for clip in CLIPS:
        g = golden(name, clip)
        enc, valid = m.encode(g["audio"])
        ids = greedy(m, m.cross_kv(m.memory(enc)), int(g["max_new_tokens"]), valid)
        ref = g["greedy"].tolist()
        # agreement = length of the common prefix (after the first divergence the contexts differ)
        n = next((i for i, (a, b) in enumerate(zip(ids, ref)) if a != b), min(len(ids), len(ref)))
        agree += n
        total += len(ref)
    rate = agree / total
    floor = 0.5 if dtype == "bfloat16" else 0.8
    assert rate >= floor, f"{dtype} agrees on {rate:.0%} of greedy ids"


def test_odd_length_audio_matches_reference_padding(fixture_model):
    """A length that is not a multiple of 80 pads a zeroed frame like the reference processor."""
    g = golden("moon_small_like", "speech")
    m = fixture_model("moon_small_like", "numpy")
    audio = g["audio"][: 1280 * 10 + 37]
    enc, valid = m.encode(audio)
    full, _ = m.encode(g["audio"][: 1280 * 10])
    # causal frontend: the frames before the padded one are the same as without the tail
    np.testing.assert_allclose(m.B.to_numpy(enc)[:20], m.B.to_numpy(full)[:20], atol=1e-3)
    assert enc.shape[0] == 41 and valid.sum() == 41


def test_compiled_mlx_layer_pieces_give_the_reference_ids(monkeypatch):
    """With ``mx.compile`` on (the GPU default; here forced on MLX's CPU device) the fused encoder and decoder
    pieces still give the reference encoder output and greedy ids, and they really ran compiled."""
    from engine import load_model
    from engine.backends import get_backend
    from tests.conftest import FIXTURES

    monkeypatch.setattr(get_backend("mlx"), "compile_enabled", True)
    m = load_model(FIXTURES / "models" / "moon_tiny_like", backend="mlx", dtype="float32")
    g = golden("moon_tiny_like", "speech")
    enc, valid = m.encode(g["audio"])
    np.testing.assert_allclose(m.B.to_numpy(enc), g["encoder"], atol=1e-4 * max(1.0, np.abs(g["encoder"]).max()))
    assert greedy(m, m.cross_kv(m.memory(enc)), int(g["max_new_tokens"]), valid) == g["greedy"].tolist()
    assert all(p.compiled for p in (m.enc_in, m.enc_out, m.dec_self_in, m.dec_cross_in, m.dec_out))
