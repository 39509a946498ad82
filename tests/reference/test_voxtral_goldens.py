"""Live check of the committed Voxtral Realtime fixtures against transformers.

For every golden of ``make_voxtral.GOLDEN_PLAN`` the reference outputs are recomputed from the committed model
folder (any dialect: HF ``from_pretrained``; native and mlx4 converted to HF, the mlx4 weights dequantized in
float32) and compared with the committed ``golden/<clip>_d<D>.npz``: floats to 1e-4 of each array's scale
(the goldens were made on one CPU; torch's float32 kernels differ by instruction set at ~1e-5, e.g. AVX-512 vs
AVX2), ids exactly. The native folder must hold exactly the HF weights (un-permuted q/k), the bf16 folder their
bfloat16 rounding, the realwin folder the same file with the real windows, and the mlx4 folder what
``mx.quantize`` makes of them. If a test here fails after a deliberate change to the generator, run
``make fixtures`` and commit the result.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import make_fixtures as mf  # noqa: E402  (tests/fixtures is put on sys.path by conftest.py)
import make_voxtral as mv  # noqa: E402

MODELS_DIR = mf.FIXTURES_DIR / "models"
GOLDENS = [(name, clip, d) for name, plan in mv.GOLDEN_PLAN.items() for clip, ds in plan.items() for d in ds]
FLOAT_RTOL = 1e-4  # of the array's largest magnitude: the design's "logits to about 1e-4"
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _golden(name: str, clip: str, d: int) -> dict[str, np.ndarray]:
    with np.load(MODELS_DIR / name / "golden" / f"{clip}_d{d}.npz") as z:
        return {k: z[k] for k in z.files}


def _clip(clip: str) -> np.ndarray:
    audio, rate = mf.read_wav(mf.FIXTURES_DIR / "audio" / f"{clip}.wav")
    assert rate == mf.SAMPLE_RATE
    return audio


def _compare(live: dict[str, np.ndarray], committed: dict[str, np.ndarray]) -> None:
    assert sorted(live) == sorted(committed)
    for key, want in committed.items():
        got = live[key]
        assert got.shape == want.shape and got.dtype == want.dtype, (key, got.shape, got.dtype, want.shape, want.dtype)
        if np.issubdtype(want.dtype, np.integer):
            np.testing.assert_array_equal(got, want, err_msg=key)
        else:
            atol = FLOAT_RTOL * max(1.0, float(np.abs(want).max(initial=0.0)))
            np.testing.assert_allclose(got, want, rtol=FLOAT_RTOL, atol=atol, err_msg=key)


@pytest.mark.parametrize(("name", "clip", "d"), GOLDENS)
def test_goldens_match_live_reference(name: str, clip: str, d: int) -> None:
    """Every key of the committed npz equals what transformers computes now from the committed files."""
    committed = _golden(name, clip, d)
    live = mv.compute_voxtral_goldens(mv.load_reference(str(MODELS_DIR / name)), _clip(clip), d)
    for key in mv.golden_omit(name, d, clip):
        del live[key]
    _compare(live, committed)


def test_native_goldens_are_the_hf_goldens() -> None:
    """vox_tiny_native points at vox_tiny_hf's goldens; the reference built from the native files gives them."""
    assert (MODELS_DIR / "vox_tiny_native" / "golden_of.txt").read_text().strip() == "vox_tiny_hf"
    live = mv.compute_voxtral_goldens(mv.load_reference(str(MODELS_DIR / "vox_tiny_native")), _clip("speech"), 6)
    _compare(live, _golden("vox_tiny_hf", "speech", 6))


@pytest.mark.parametrize(("name", "clip", "d"), GOLDENS)
def test_goldens_are_well_formed(name: str, clip: str, d: int) -> None:
    """Padding, shapes, the generate() length rule, teacher forcing = greedy, and clear margins."""
    g = _golden(name, clip, d)
    audio = _clip(clip)
    t = -(-len(audio) // mv.SAMPLES_PER_TOKEN)
    p = mv.N_LEFT_PAD_TOKENS + t + d + 1 + mv.RIGHT_PAD_EXTRA_TOKENS
    if "padded_audio" in g:
        np.testing.assert_array_equal(g["padded_audio"], mv.padded_stream(audio, d))
        assert g["padded_audio"].shape == (mv.SAMPLES_PER_TOKEN * p,)
        assert not g["padded_audio"][: 32 * 1280].any() and not g["padded_audio"][(32 + t) * 1280 :].any()
    assert int(g["delay_tokens"]) == d
    np.testing.assert_array_equal(g["prompt_ids"], [mv.BOS] + [mv.STREAMING_PAD] * (32 + d))
    cfg = mv.config_from_params(_params(name))
    a_hidden, t_hidden, vocab = cfg.audio_config.hidden_size, cfg.text_config.hidden_size, cfg.text_config.vocab_size
    shapes = {"mel": (128, 8 * p), "encoder_out": (4 * p, a_hidden), "audio_embeds": (p, t_hidden)}
    for key, shape in shapes.items():
        assert (key in g) == (key not in mv.golden_omit(name, d, clip)), key
        if key in g:
            assert g[key].shape == shape, key
    ids = g["generate_ids"]
    # offline generate(): max_length = ceil(mel frames / 8) = P -> P - (33 + D) = T + 10 ids, unless EOS
    assert len(ids) == mv.expected_num_ids(len(audio)) == t + 10 or (ids[-1] == mv.EOS and len(ids) < t + 10)
    assert (ids[:-1] != mv.EOS).all()
    assert ((ids >= mv.NUM_SPECIAL) | np.isin(ids, [mv.EOS, mv.STREAMING_PAD, mv.STREAMING_WORD])).all()
    np.testing.assert_array_equal(g["tf_positions"], np.arange(32 + d, 32 + d + len(ids)))
    np.testing.assert_array_equal(g["tf_top5_ids"][:, 0], ids)
    assert g["tf_top5_logits"].shape == (len(ids), 5) and (np.diff(g["tf_top5_logits"], axis=1) <= 0).all()
    np.testing.assert_allclose(g["tf_margins"], g["tf_top5_logits"][:, 0] - g["tf_top5_logits"][:, 1], rtol=1e-6)
    long_tiny = name == "vox_tiny_hf" and clip == mv.LONG_CLIP  # one 0.023 margin, kept (see make_voxtral)
    assert mv.check_voxtral_goldens(g) >= (0.02 if long_tiny else mv.MIN_MARGIN)
    assert g["logits_tf"].shape == (len(g["logits_rows"]), vocab)
    k = np.searchsorted(g["tf_positions"], g["logits_rows"])
    np.testing.assert_array_equal(g["tf_positions"][k], g["logits_rows"])
    np.testing.assert_array_equal(g["logits_tf"].argmax(-1), ids[k])


def _params(name: str) -> dict:
    d = MODELS_DIR / name
    if (d / "params.json").is_file():
        return json.loads((d / "params.json").read_text())
    cfg = json.loads((d / "config.json").read_text())
    if "quantization" in cfg:
        return mv.params_from_mlx_config(cfg)
    windows = cfg["audio_config"]["sliding_window"], cfg["text_config"]["sliding_window"]
    return mv.params_json(mv.voxtral_config(*windows))


def test_goldens_cover_eos_and_no_eos() -> None:
    """Some goldens end with EOS in the right padding, others run to T + 10 ids."""
    ends = []
    for name, clip, d in GOLDENS:
        ids = _golden(name, clip, d)["generate_ids"]
        t = -(-len(_clip(clip)) // mv.SAMPLES_PER_TOKEN)
        ends.append(ids[-1] == mv.EOS)
        if ids[-1] == mv.EOS:
            assert len(ids) > t, f"{name} {clip} D={d}: EOS before the audio (plus the delay) has passed"
    assert any(ends) and not all(ends)


def test_generate_variants_lengths() -> None:
    """Offline tensor generate() == streaming generator (windows that end within the stream, whether the stop
    test is ``end > len`` or the HF docs' ``end >= len``) == static cache; 200 more zeros let the streaming
    variant consume position P - 1 too (one more id). Checked on a golden without EOS."""
    name, clip, d = next(
        (n, c, d) for n, c, d in GOLDENS if n == "vox_tiny_hf" and _golden(n, c, d)["generate_ids"][-1] != mv.EOS
    )
    audio = _clip(clip)
    v = mv.generate_variants(mv.load_reference(str(MODELS_DIR / name)), audio, d)
    want = _golden(name, clip, d)["generate_ids"]
    n = mv.expected_num_ids(len(audio))
    assert len(want) == n
    for key in ("offline", "offline_static_cache", "streaming", "streaming_docs_stop"):
        np.testing.assert_array_equal(v[key], want, err_msg=key)
    assert len(v["streaming_plus_200"]) == n + 1
    np.testing.assert_array_equal(v["streaming_plus_200"][:n], want)


def test_committed_model_is_reproducible(tmp_path) -> None:
    """Rebuilding with the committed seed gives the committed HF weights (bit-identical on the CPU that made them;
    elsewhere within 1e-5: a few values differ where torch's float32 kernels differ by instruction set: on an AMD
    EPYC with AVX2 only, 63 of the embedding's 86016 by up to 2.5e-6, its largest value 3.9) and the same config."""
    from safetensors.numpy import load_file

    out = mv.build_voxtral(mv.COMMITTED_SEED, tmp_path / "hf", "hf")
    want = load_file(str(MODELS_DIR / "vox_tiny_hf" / "model.safetensors"))
    got = load_file(str(out / "model.safetensors"))
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key].dtype == want[key].dtype == np.float32, key
        np.testing.assert_allclose(got[key], want[key], rtol=0, atol=1e-5, err_msg=key)
    for fname in ("config.json", "generation_config.json", "processor_config.json", "tekken.json"):
        assert json.loads((out / fname).read_text()) == json.loads((MODELS_DIR / "vox_tiny_hf" / fname).read_text())


def test_hf_layout() -> None:
    """Legacy names, no lm_head, the windows, explicit encoder rope theta, tied embeddings."""
    from safetensors.numpy import load_file

    d = MODELS_DIR / "vox_tiny_hf"
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["model_type"] == "voxtral_realtime"
    a, t = cfg["audio_config"], cfg["text_config"]
    assert (a["sliding_window"], t["sliding_window"]) == mv.VOXTRAL_WINDOWS["vox_tiny"]
    assert a["rope_parameters"]["rope_theta"] == 1e6 and t["rope_parameters"]["rope_theta"] == 1e6
    assert a["num_attention_heads"] * a["head_dim"] != a["hidden_size"]
    assert t["num_attention_heads"] > t["num_key_value_heads"] and t["tie_word_embeddings"]
    assert cfg["downsample_factor"] == 4 and cfg["audio_length_per_tok"] == 8 and a["num_mel_bins"] == 128
    tensors = load_file(str(d / "model.safetensors"))
    assert sorted(tensors) == sorted(mv.hf_native_names(2, 2))
    assert "audio_tower.layers.0.self_attn.k_proj.bias" not in tensors
    gen = json.loads((d / "generation_config.json").read_text())
    assert (gen["bos_token_id"], gen["eos_token_id"], gen["pad_token_id"]) == (1, 2, 11)
    # nothing keeps its HF init value
    for key, value in tensors.items():
        if key.endswith(".bias"):
            assert np.all(value != 0.0), key
        elif key.endswith("norm.weight"):
            assert np.all(value != 1.0), key


def test_native_holds_the_same_weights() -> None:
    """consolidated.safetensors = the HF tensors renamed, q/k (+ encoder q bias) rows un-permuted, F32."""
    from safetensors.numpy import load_file

    hf = load_file(str(MODELS_DIR / "vox_tiny_hf" / "model.safetensors"))
    native = load_file(str(MODELS_DIR / "vox_tiny_native" / "consolidated.safetensors"))
    params = json.loads((MODELS_DIR / "vox_tiny_native" / "params.json").read_text())
    assert all(v.dtype == np.float32 for v in native.values())
    back = mv.native_to_hf(native, params)
    assert sorted(back) == sorted(hf)
    for key in hf:
        np.testing.assert_array_equal(back[key], hf[key], err_msg=key)
    # the permutation is not the identity: q rows really moved
    q = "language_model.model.layers.0.self_attn.q_proj.weight"
    assert not np.array_equal(native["layers.0.attention.wq.weight"], hf[q])
    np.testing.assert_array_equal(native["layers.0.attention.wq.weight"][1], hf[q][16])  # head 0: row 2i+1 <- hd/2+i
    bias = native["mm_streams_embeddings.embedding_module.whisper_encoder.transformer.layers.0.attention.wq.bias"]
    np.testing.assert_array_equal(bias, mv.unpermute_rope(hf["audio_tower.layers.0.self_attn.q_proj.bias"], 4))
    cfg = mv.config_from_params(params)
    hf_cfg = json.loads((MODELS_DIR / "vox_tiny_hf" / "config.json").read_text())
    assert cfg.audio_config.sliding_window == hf_cfg["audio_config"]["sliding_window"]
    assert cfg.text_config.sliding_window == hf_cfg["text_config"]["sliding_window"]
    enc = params["multimodal"]["whisper_model_args"]["encoder_args"]
    assert enc["rope_theta"] == 1e6 and enc["audio_encoding_args"]["num_mel_bins"] == 128


def test_bf16_and_realwin_files() -> None:
    """bf16 = bfloat16 rounding of the native tensors; realwin = byte-identical weights, real windows."""
    import torch
    from safetensors.numpy import load_file
    from safetensors.torch import load_file as load_torch

    native = load_file(str(MODELS_DIR / "vox_tiny_native" / "consolidated.safetensors"))
    bf16 = load_torch(str(MODELS_DIR / "vox_tiny_native_bf16" / "consolidated.safetensors"))
    assert sorted(bf16) == sorted(native)
    for key, v in bf16.items():
        assert v.dtype == torch.bfloat16, key
        assert torch.equal(v, torch.from_numpy(native[key]).to(torch.bfloat16)), key
    a = (MODELS_DIR / "vox_tiny_native" / "consolidated.safetensors").read_bytes()
    b = (MODELS_DIR / "vox_realwin_native" / "consolidated.safetensors").read_bytes()
    assert a == b
    p_tiny = json.loads((MODELS_DIR / "vox_tiny_native" / "params.json").read_text())
    p_real = json.loads((MODELS_DIR / "vox_realwin_native" / "params.json").read_text())
    assert p_real["sliding_window"] == 8192
    assert p_real["multimodal"]["whisper_model_args"]["encoder_args"]["sliding_window"] == 750
    p_real["sliding_window"] = p_tiny["sliding_window"]
    p_real["multimodal"]["whisper_model_args"]["encoder_args"]["sliding_window"] = 16
    assert p_real == p_tiny
    for name in ("vox_tiny_native_bf16", "vox_realwin_native"):
        assert json.loads((MODELS_DIR / name / "tekken.json").read_text()) == mv.build_tekken()
    # the long clip binds the real 750-frame encoder window
    assert 4 * (32 + len(_clip(mv.LONG_CLIP)) // 1280) > 750


def test_mlx4_layout() -> None:
    """mlx-audio layout: names, which tensors are quantized, dtypes and packed shapes, config."""
    from safetensors.numpy import load_file

    d = MODELS_DIR / "vox_tiny_mlx4"
    cfg = json.loads((d / "config.json").read_text())
    assert list(cfg) == sorted(cfg) and cfg["model_type"] == "voxtral_realtime"
    assert cfg["quantization"] == cfg["quantization_config"] == {"group_size": 64, "bits": 4, "mode": "affine"}
    assert cfg["encoder_args"]["downsample_factor"] == 4 and cfg["decoder"]["tied_embeddings"] is True
    native = load_file(str(MODELS_DIR / "vox_tiny_native" / "consolidated.safetensors"))
    tensors = load_file(str(d / "model.safetensors"))
    index = json.loads((d / "model.safetensors.index.json").read_text())
    assert sorted(index["weight_map"]) == sorted(tensors)
    quantized = set()
    for name, w in native.items():
        key = mv.native_to_mlx_names(name)
        base = key[: -len("weight")]
        if mv.mlx_quantized(key, w.shape):
            quantized.add(key)
            out_dim, in_dim = w.shape
            assert tensors[key].dtype == np.uint32 and tensors[key].shape == (out_dim, in_dim * 4 // 32), key
            for part in (base + "scales", base + "biases"):
                assert tensors[part].dtype == np.float16 and tensors[part].shape == (out_dim, in_dim // 64), part
        else:
            assert base + "scales" not in tensors, key
            want = np.float32 if (key.endswith(".bias") or key.split(".")[-2].endswith("norm")) else np.float16
            assert tensors[key].dtype == want, key
    assert "decoder.tok_embeddings.weight" in quantized
    assert "encoder.audio_language_projection_0.weight" in quantized
    assert not any("ada_rms_norm" in k or "conv_layers" in k for k in quantized)
    assert tensors["encoder.conv_layers_0_conv.conv.weight"].shape == (64, 3, 128)  # MLX [out, k, in]
    n_extra = sum(2 for _ in quantized)
    assert len(tensors) == len(native) + n_extra


def test_mlx4_is_mx_quantize_of_the_weights() -> None:
    """The committed quantized tensors are exactly ``mx.quantize(fp16(w), 64, 4)`` of the native weights, and
    dequantize to within one quantization step of them (MLX affine rounding)."""
    pytest.importorskip("mlx.core")
    from safetensors.numpy import load_file

    native = load_file(str(MODELS_DIR / "vox_tiny_native" / "consolidated.safetensors"))
    tensors = load_file(str(MODELS_DIR / "vox_tiny_mlx4" / "model.safetensors"))
    rebuilt = mv.native_to_mlx(native)
    assert sorted(rebuilt) == sorted(tensors)
    for key, want in tensors.items():
        np.testing.assert_array_equal(rebuilt[key], want, err_msg=key)
    deq = mv.mlx_to_native(tensors)
    for name, w in native.items():
        key = mv.native_to_mlx_names(name)
        if mv.mlx_quantized(key, w.shape):
            scales = tensors[key[: -len("weight")] + "scales"].astype(np.float32)
            step = np.repeat(scales, 64, axis=1)
            assert (np.abs(deq[name] - w) <= 1.01 * np.abs(step) + 1e-6).all(), name  # MLX affine: <= 1 step


def test_tekken() -> None:
    """One synthetic tekken.json everywhere; the decode cases hold (and load in mistral-common if installed)."""
    tek = json.loads((MODELS_DIR / "vox_tiny_hf" / "tekken.json").read_text())
    assert tek == mv.build_tekken()
    for name in ("vox_tiny_native", "vox_tiny_mlx4"):
        assert json.loads((MODELS_DIR / name / "tekken.json").read_text()) == tek
    cfg = tek["config"]
    assert cfg["default_vocab_size"] == mv.VOCAB_SIZE and cfg["default_num_special_tokens"] == 1000
    assert len(tek["special_tokens"]) == 1000 and cfg["num_vocab_tokens"] == len(tek["vocab"])
    assert len(tek["vocab"]) > mv.VOCAB_SIZE - 1000  # unused tail entries, as in the real file
    names = {s["token_str"]: s["rank"] for s in tek["special_tokens"]}
    wanted = ("<unk>", "<s>", "</s>", "<pad>", "[STREAMING_PAD]", "[STREAMING_WORD]", "[REPEAT_AUDIO_TEXT]")
    assert [names[n] for n in wanted] == [0, 1, 2, 11, 32, 33, 34]
    import base64

    pieces = [base64.b64decode(v["token_bytes"]) for v in tek["vocab"]]
    assert pieces[:256] == [bytes([i]) for i in range(256)]
    cases = json.loads((MODELS_DIR / "vox_tekken_cases.json").read_text())
    assert cases == json.loads(json.dumps(mv.tekken_cases()))
    for case in cases["cases"]:
        data = b"".join(pieces[i - 1000] for i in case["ids"] if i >= 1000)
        assert data.hex() == case["bytes_hex"], case["name"]
        assert data.decode("utf-8", errors="replace") == case["text"], case["name"]
    try:
        from mistral_common.tokens.tokenizers.base import SpecialTokenPolicy
        from mistral_common.tokens.tokenizers.tekken import Tekkenizer
    except ImportError:
        return
    tk = Tekkenizer.from_file(MODELS_DIR / "vox_tiny_hf" / "tekken.json")
    assert tk.n_words == mv.VOCAB_SIZE
    for case in cases["cases"]:
        assert tk.decode(case["ids"], special_token_policy=SpecialTokenPolicy.IGNORE) == case["text"], case["name"]


def test_mlx_audio_reads_the_mlx4_fixture() -> None:
    """If mlx-audio is installed: its voxtral_realtime ``Model`` (projector resized: it hard-codes 3072) takes
    the folder's config and every tensor with ``strict=True`` after its own ``apply_quantization``."""
    pytest.importorskip("mlx_audio.stt.models.voxtral_realtime")
    import mlx.core as mx
    import mlx.nn as nn
    from mlx_audio.stt.models.voxtral_realtime import Model, ModelConfig
    from mlx_audio.utils import apply_quantization

    d = MODELS_DIR / "vox_tiny_mlx4"
    cfg = json.loads((d / "config.json").read_text())
    model = Model(ModelConfig.from_dict(cfg))
    dim, enc = cfg["decoder"]["dim"], cfg["encoder_args"]
    model.encoder.audio_language_projection_0 = nn.Linear(enc["dim"] * enc["downsample_factor"], dim, bias=False)
    model.encoder.audio_language_projection_2 = nn.Linear(dim, dim, bias=False)
    weights = mx.load(str(d / "model.safetensors"))
    weights = model.sanitize(weights)
    apply_quantization(model, cfg, weights, model.model_quant_predicate)
    model.load_weights(list(weights.items()), strict=True)
