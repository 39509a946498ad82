"""Impossible model configs and non-finite weights are model problems (exit 3, one sentence), not garbage
with exit 0 (issue #12). Each case edits a copy of a small fixture model and runs the CLI."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from engine.cli import main
from engine.errors import ModelError
from engine.models.checks import check_config
from engine.weights import read_header
from tests.conftest import FIXTURES

SPEECH = FIXTURES / "audio" / "speech.wav"
SECTIONS = ("text_config", "audio_config")  # Voxtral's HF config.json


def copy_model(tmp_path, name):
    d = tmp_path / name
    shutil.copytree(FIXTURES / "models" / name, d, ignore=shutil.ignore_patterns("golden"))
    return d


def run_cli(capsys, model, *extra):
    code = main([str(SPEECH), "--model", str(model), "--backend", "numpy", *extra])
    out, err = capsys.readouterr()
    return code, out, err


def edit_json(path, edit):
    d = json.loads(path.read_text())
    edit(d)
    path.write_text(json.dumps(d))


MOONSHINE_CASES = [
    (lambda d: d.update(num_hidden_layers=-1), "num_hidden_layers = -1; it must be a positive whole number"),
    (lambda d: d["encoder_config"].update(num_hidden_layers=-2), "num_hidden_layers = -2"),
    (lambda d: d.update(vocab_size="lots"), "vocab_size = 'lots'; it must be a positive whole number"),
    (lambda d: d.update(num_attention_heads=0), "num_attention_heads = 0"),
    (lambda d: d.update(hidden_size=2.5), "hidden_size = 2.5"),
    (lambda d: d.update(num_key_value_heads=True), "num_key_value_heads = True"),
    (lambda d: d.update(eos_token_id=-3), "eos_token_id = -3; it must be a whole number of at least 0"),
    (lambda d: d.update(bos_token_id=10**6), "outside the vocabulary"),
    (lambda d: d.setdefault("rope_parameters", {}).update(rope_theta=-1.0), "rope_theta = -1.0"),
    (
        lambda d: d["encoder_config"].update(sliding_windows=[[16, -4]] * d["encoder_config"]["num_hidden_layers"]),
        "sliding_windows",
    ),
    (lambda d: d.update(max_position_embeddings=1 << 40), "max_position_embeddings = 1099511627776"),
    # null where a value is needed: "Unexpected error (TypeError ...)" (QA)
    (lambda d: d.update(vocab_size=None), "vocab_size = null; it must be a positive whole number"),
    (lambda d: d.setdefault("rope_parameters", {}).update(rope_theta=None), "rope_theta = null; it must be a positive"),
    (lambda d: d.update(eos_token_id=[]), "eos_token_id = []"),  # "Unexpected error (IndexError ...)" (QA)
    (lambda d: d.update(encoder_config=[1]), "encoder_config as [1]; it must be an object"),  # AttributeError (QA)
]


@pytest.mark.parametrize("edit,message", MOONSHINE_CASES)
def test_impossible_moonshine_config_is_a_model_error(capsys, tmp_path, edit, message):
    d = copy_model(tmp_path, "moon_tiny_like")
    edit_json(d / "config.json", edit)
    code, out, err = run_cli(capsys, d, "--no-vad")
    assert code == 3, err
    assert message in err and out == "" and "Traceback" not in err and err.count("\n") == 1


VOXTRAL_CASES = [
    ("vox_tiny_hf", "config.json", lambda d: d["text_config"].update(num_hidden_layers=-1), "num_hidden_layers = -1"),
    ("vox_tiny_hf", "config.json", lambda d: d["text_config"].update(vocab_size="lots"), "vocab_size = 'lots'"),
    (
        "vox_tiny_hf",
        "config.json",
        lambda d: d["audio_config"].update(num_attention_heads=0),
        "num_attention_heads = 0",
    ),
    ("vox_tiny_native", "params.json", lambda d: d.update(n_layers=-1), "n_layers = -1"),
    ("vox_tiny_native", "params.json", lambda d: d.update(norm_eps=float("nan")), "norm_eps = nan"),
    ("vox_tiny_native", "params.json", lambda d: d.update(n_kv_heads=3), "cannot share 3 key/value heads"),
    ("vox_tiny_mlx4", "config.json", lambda d: d["decoder"].update(n_layers=-1), "n_layers = -1"),
    # null or missing sections: "Unexpected error (AttributeError ...)", or a shape "expected [None, 256]" (QA)
    ("vox_tiny_hf", "config.json", lambda d: d.update(text_config=None), "has no text_config section"),
    ("vox_tiny_hf", "config.json", lambda d: d.pop("audio_config"), "has no audio_config section"),
    ("vox_tiny_hf", "config.json", lambda d: d["text_config"].update(rms_norm_eps=None), "rms_norm_eps = null"),
    ("vox_tiny_native", "params.json", lambda d: d.update(dim=None), "gives dim = null"),
    (
        "vox_tiny_native",
        "params.json",
        lambda d: d["multimodal"]["whisper_model_args"].update(encoder_args=None),
        "not a Voxtral Realtime checkpoint",
    ),
]


@pytest.mark.parametrize(
    "name,file,edit",
    [
        ("moon_tiny_like", "config.json", lambda d: d.update(head_dim=None)),
        ("moon_tiny_like", "config.json", lambda d: d.update(num_key_value_heads=None)),
        ("vox_tiny_hf", "config.json", lambda d: [d[k].update(sliding_window=None) for k in SECTIONS]),
    ],
)
def test_a_null_that_means_derive_it_still_loads(capsys, tmp_path, name, file, edit):
    """HF writes ``head_dim: null`` (heads split the width), ``num_key_value_heads: null`` (one per head) and
    ``sliding_window: null`` (the default window): such configs load and transcribe as before."""
    d = copy_model(tmp_path, name)
    edit_json(d / file, edit)
    code, out, err = run_cli(capsys, d, *(["--no-vad"] if name.startswith("moon") else []))
    assert code == 0 and out.strip(), err


@pytest.mark.parametrize("name,file,edit,message", VOXTRAL_CASES)
def test_impossible_voxtral_config_is_a_model_error(capsys, tmp_path, name, file, edit, message):
    d = copy_model(tmp_path, name)
    edit_json(d / file, edit)
    backend = ("--backend", "mlx") if name.endswith("mlx4") else ()
    code = main([str(SPEECH), "--model", str(d), *backend])
    out, err = capsys.readouterr()
    assert code == 3, err
    assert message in err and out == "" and "Traceback" not in err and err.count("\n") == 1


def test_real_configs_pass():
    for d in sorted((FIXTURES / "models").iterdir()):
        for f in ("config.json", "params.json"):
            if (d / f).exists():
                check_config(json.loads((d / f).read_text()), f"{d.name}/{f}")
    with pytest.raises(ModelError, match="gives dim = 0"):
        check_config({"a": [{"b": {"dim": 0}}]}, "The test config")


def poison(path, tensor: str, value_bits: bytes):
    """Overwrite the first value of ``tensor`` in a safetensors file with ``value_bits``."""
    info = read_header(path)[tensor]
    data = bytearray(path.read_bytes())
    data[info.offset : info.offset + len(value_bits)] = value_bits
    path.write_bytes(bytes(data))
    return info


@pytest.mark.parametrize(
    "name,weights,bits",
    [
        ("moon_tiny_like", "model.safetensors", np.float32(np.nan).tobytes()),
        ("moon_tiny_like", "model.safetensors", np.float32(np.inf).tobytes()),
        ("vox_tiny_hf", "model.safetensors", np.float32(-np.inf).tobytes()),
        ("vox_tiny_native_bf16", "consolidated.safetensors", b"\xc0\x7f"),  # bfloat16 NaN
    ],
)
def test_non_finite_weights_are_a_model_error(capsys, tmp_path, name, weights, bits):
    d = copy_model(tmp_path, name)
    st = d / weights
    # a tensor deep in the model (the last layer's largest matrix), which every run loads
    infos = read_header(st)
    tensor = max(
        (n for n in infos if "layers" in n), key=lambda n: (int(n.split("layers.")[1].split(".")[0]), infos[n].nbytes)
    )
    poison(st, tensor, bits)
    code, out, err = run_cli(capsys, d, *(["--no-vad"] if name.startswith("moon") else []))
    assert code == 3, err
    assert f"tensor '{tensor}' holds NaN or infinite values" in err and out == ""


FEWER_LAYERS = [
    ("moon_tiny_like", "config.json", lambda d: d.update(num_hidden_layers=1)),
    ("moon_tiny_like", "config.json", lambda d: d["encoder_config"].update(num_hidden_layers=3)),
    ("vox_tiny_hf", "config.json", lambda d: d["text_config"].update(num_hidden_layers=1)),
    ("vox_tiny_native", "params.json", lambda d: d.update(n_layers=1)),
    ("vox_tiny_mlx4", "config.json", lambda d: d["decoder"].update(n_layers=1)),
]


@pytest.mark.parametrize("name,file,edit", FEWER_LAYERS)
def test_a_config_with_fewer_layers_than_the_weights_is_refused(capsys, tmp_path, name, file, edit):
    """``n_layers: 1`` over two layers of weights loaded a one-layer model and transcribed with it, exit 0 (QA)."""
    d = copy_model(tmp_path, name)
    edit_json(d / file, edit)
    if "sliding_windows" in json.dumps(json.loads((d / file).read_text())):  # Moonshine's encoder: one per layer
        edit_json(
            d / file,
            lambda c: c["encoder_config"].update(
                sliding_windows=c["encoder_config"]["sliding_windows"][: c["encoder_config"]["num_hidden_layers"]]
            ),
        )
    code, out, err = run_cli(capsys, d, "--no-vad") if name.startswith("moon") else run_cli(capsys, d)
    assert code == 3, err
    assert "has more layers than its configuration says" in err and out == "" and err.count("\n") == 1


def test_a_quantized_matrix_without_its_scales_says_so(capsys, tmp_path):
    """An mlx-community checkpoint missing one ``.scales`` said its ``.weight`` had shape [128, 8], expected [128,
    64] (read as a float matrix), which does not tell what is wrong (QA)."""
    from safetensors.numpy import load_file, save_file

    d = copy_model(tmp_path, "vox_tiny_mlx4")
    (f,) = d.glob("*.safetensors")
    tensors = load_file(str(f))
    gone = next(n for n in sorted(tensors) if n.endswith("wq.scales"))
    del tensors[gone]
    save_file(tensors, str(f))
    code, out, err = run_cli(capsys, d)
    assert code == 3 and f"without its '{gone}'" in err and out == "" and err.count("\n") == 1, err
