"""Live check of the committed Moonshine Streaming fixtures against transformers.

For each committed model (``tests/fixtures/models/<name>``) and clip (``tests/fixtures/audio/<clip>.wav``)
the goldens are recomputed from the committed model files with transformers and compared with the
committed ``golden/<clip>.npz``: floats to 1e-4 of each array's scale, token ids exactly (the goldens were
made on one CPU; torch's float32 kernels differ by instruction set at ~1e-5, e.g. AVX-512 vs AVX2). This is
what lets the default suite trust those npz files without torch. If a test here fails after a deliberate
change to the generator, run ``make fixtures`` and commit the result.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import make_fixtures as mf  # noqa: E402  (tests/fixtures is put on sys.path by conftest.py)

MODELS = sorted(mf.MOONSHINE_CONFIGS)
FLOAT_RTOL = 1e-4  # of the array's largest magnitude: the design's "logits to about 1e-4"


def _model_dir(name: str):
    return mf.FIXTURES_DIR / "models" / name


@pytest.mark.parametrize("clip", mf.CLIPS)
@pytest.mark.parametrize("name", MODELS)
def test_goldens_match_live_reference(name: str, clip: str) -> None:
    """Every key of the committed npz equals what transformers computes now from the committed files."""
    committed = dict(np.load(_model_dir(name) / "golden" / f"{clip}.npz"))
    audio, rate = mf.read_wav(mf.FIXTURES_DIR / "audio" / f"{clip}.wav")
    assert rate == mf.SAMPLE_RATE
    assert len(audio) % mf.CHUNK_SAMPLES == 0
    np.testing.assert_array_equal(committed["audio"], audio, err_msg="the npz audio is not the WAV's samples")

    live = mf.compute_goldens(_model_dir(name), audio)
    assert sorted(live) == sorted(committed)
    for key, want in committed.items():
        got = live[key]
        assert got.shape == want.shape and got.dtype == want.dtype, (
            key,
            got.shape,
            got.dtype,
            want.shape,
            want.dtype,
        )
        if np.issubdtype(want.dtype, np.integer):
            np.testing.assert_array_equal(got, want, err_msg=key)
        else:
            atol = FLOAT_RTOL * max(1.0, float(np.abs(want).max(initial=0.0)))
            np.testing.assert_allclose(got, want, atol=atol, rtol=FLOAT_RTOL, err_msg=key)


@pytest.mark.parametrize("clip", mf.CLIPS)
@pytest.mark.parametrize("name", MODELS)
def test_goldens_are_well_formed(name: str, clip: str) -> None:
    """Shapes, the decoding budget, teacher forcing = greedy, and clear top-1/top-2 margins."""
    g = dict(np.load(_model_dir(name) / "golden" / f"{clip}.npz"))
    cfg = mf.MOONSHINE_CONFIGS[name]
    n = len(g["audio"])
    t = n // 320
    d_enc, d_dec, vocab = cfg["encoder_config"]["hidden_size"], cfg["hidden_size"], cfg["vocab_size"]
    assert g["embedder"].shape == g["encoder"].shape == (t, d_enc)
    assert g["memory"].shape == (t, d_dec)
    assert int(g["max_new_tokens"]) == mf.max_new_tokens_for(n) == int(np.ceil(6.5 * n / 16000))
    greedy = g["greedy"]
    assert 1 <= len(greedy) <= int(g["max_new_tokens"])
    assert (greedy[:-1] != cfg["eos_token_id"]).all(), "EOS may only come last"
    assert len(greedy) == int(g["max_new_tokens"]) or greedy[-1] == cfg["eos_token_id"]
    assert g["decoder_input_ids"][0] == cfg["decoder_start_token_id"]
    np.testing.assert_array_equal(g["decoder_input_ids"][1:], greedy[:-1])
    assert g["logits"].shape == (len(greedy), vocab)
    assert mf.check_goldens(g) >= mf.MIN_MARGIN
    for k in mf.PREFIX_CHUNKS:
        if k * mf.CHUNK_SAMPLES <= n:
            prefix = g[f"encoder_prefix_{k}"]
            assert prefix.shape == (4 * k, d_enc)
            # Frames that are final after k chunks (all but the 12 look-ahead frames) equal the full run's.
            final = max(0, 4 * k - 12)
            np.testing.assert_allclose(prefix[:final], g["encoder"][:final], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", MODELS)
def test_committed_model_is_reproducible(name: str, tmp_path) -> None:
    """Rebuilding with the committed seed gives bit-identical weights and the same config."""
    from safetensors.numpy import load_file

    out = mf.build_moonshine(name, mf.COMMITTED_SEEDS[name], tmp_path / name)
    want = load_file(str(_model_dir(name) / "model.safetensors"))
    got = load_file(str(out / "model.safetensors"))
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key].dtype == want[key].dtype == np.float32, key
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    cfg_want = json.loads((_model_dir(name) / "config.json").read_text())
    cfg_got = json.loads((out / "config.json").read_text())
    assert cfg_got == cfg_want


@pytest.mark.parametrize("name", MODELS)
def test_model_files_have_real_layout(name: str) -> None:
    """The fields and tensors the engine relies on are present, as in the hub checkpoints."""
    from safetensors.numpy import load_file

    d = _model_dir(name)
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["model_type"] == "moonshine_streaming"
    assert cfg["architectures"] == ["MoonshineStreamingForConditionalGeneration"]
    assert cfg["tie_word_embeddings"] is False
    assert cfg["num_key_value_heads"] == cfg["num_attention_heads"]
    assert cfg["encoder_config"]["sliding_windows"] == [[16, 4], [16, 0], [16, 0], [16, 4]]
    tensors = load_file(str(d / "model.safetensors"))
    assert tensors["model.encoder.embedder.comp.log_k"].shape == ()
    assert ("model.decoder.proj.weight" in tensors) == (cfg["hidden_size"] != cfg["encoder_config"]["hidden_size"])
    assert tensors["model.decoder.pos_emb.weight"].shape == (4096, cfg["encoder_config"]["hidden_size"])
    # No parameter keeps its HF init value (which would hide "+1", "exp" or missing-bias bugs).
    for key, value in tensors.items():
        if key.endswith((".gamma", ".bias")):
            assert np.all(value != 0.0), key
        elif key.endswith("layernorm.weight") or key == "model.decoder.norm.weight":
            assert np.all(value != 1.0), key
    assert tensors["model.encoder.embedder.comp.log_k"] != np.float32(np.log(0.75))
    for fname in (
        "generation_config.json",
        "processor_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ):
        assert (d / fname).is_file(), fname


@pytest.mark.parametrize("name", MODELS)
def test_tokenizer_decodes_like_moonshine(name: str) -> None:
    """tokenizer.json: specials 0-2, byte tokens 3-258, '▁' pieces after; byte fallback and strip work."""
    from tokenizers import Tokenizer
    from transformers import AutoProcessor

    d = _model_dir(name)
    tok = Tokenizer.from_file(str(d / "tokenizer.json"))
    vocab = mf.MOONSHINE_CONFIGS[name]["vocab_size"]
    assert tok.get_vocab_size() == vocab
    assert [tok.id_to_token(i) for i in (0, 1, 2, 3, 258)] == ["<unk>", "<s>", "</s>", "<0x00>", "<0xFF>"]
    pieces = [i for i in range(259, vocab) if tok.id_to_token(i).startswith(mf.WORD_MARKER)][:2]
    text = "h\u00e9llo w\u00f6rld"
    ids = tok.encode(text, add_special_tokens=False).ids
    assert tok.decode(ids) == text
    assert (
        tok.decode([1, *pieces, 2], skip_special_tokens=True)
        == "".join(tok.id_to_token(i) for i in pieces).replace(mf.WORD_MARKER, " ")[1:]
    )
    processor = AutoProcessor.from_pretrained(str(d))
    assert processor.tokenizer.decode([1, *ids, 2], skip_special_tokens=True) == text
    assert processor.feature_extractor.sampling_rate == 16000
    assert processor.feature_extractor.do_normalize is False
