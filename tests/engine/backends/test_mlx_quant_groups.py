"""Quantizing on MLX produces only layouts MLX multiplies (groups of 32, 64 or 128): a width no such group divides
stays float there (NumPy takes groups of 16, which MLX's product accepts lazily and refuses at the first decode);
each backend caches its own copy; a stored layout it cannot multiply is a ModelError at load."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from engine.backends.numpy_backend import NumpyBackend
from engine.backends.quant import QuantizedWeight, quantize_affine
from engine.cli import main
from engine.errors import ModelError
from engine.models import quantize as Q
from tests.conftest import FIXTURES

mx = pytest.importorskip("mlx.core")
rng = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def _cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture
def mlx():
    from engine.backends import get_backend

    return get_backend("mlx")


def plain(out_dim: int, in_dim: int) -> np.ndarray:
    return (rng.standard_normal((out_dim, in_dim)) * 0.05).astype(np.float32)


def test_mlx_quantizes_only_in_groups_it_multiplies(mlx):
    w = mlx.asarray(plain(8, 80))  # 5 groups of 16, no whole group of 32
    for g in (16, 64):  # a group MLX does not multiply in; padding 80 to 128 would add more than an eighth
        with pytest.raises(ValueError):
            mlx.quantize(w, g, 8)
    padded = mlx.quantize(w, 32, 8)  # no MLX group divides 80: padded to 96 in groups of 32
    assert mlx.multiplies(padded) and padded.cols == 80 and padded.packed_cols == 96
    q = mlx.quantize(mlx.asarray(plain(8, 96)), 32, 8)
    assert mlx.multiplies(q) and q.group_size == 32
    sixteen = quantize_affine(plain(8, 80), 16, 8)
    assert not mlx.multiplies(sixteen) and NumpyBackend().multiplies(sixteen)
    with pytest.raises(ModelError, match="groups of 16"):  # at load, not at the first product
        mlx.prepare_linear(
            QuantizedWeight(*(mlx.asarray(a) for a in (sixteen.w, sixteen.scales, sixteen.biases)), 16, 8)
        )


def test_a_lazy_quantizer_cannot_slip_groups_of_16_through(mlx, monkeypatch, tmp_path):
    """An MLX whose ``quantize`` accepted groups of 16 (failing only when the product runs): the matrix stays float."""

    def lazy(self, w, g, bits):
        if g != 16:
            raise ValueError("80 columns are no whole groups of 32 or 64.")
        packed = mx.zeros((w.shape[0], 80 * bits // 32), dtype=mx.uint32)
        return QuantizedWeight(packed, mx.ones((w.shape[0], 5)), mx.zeros((w.shape[0], 5)), g, bits)

    monkeypatch.setattr(type(mlx), "quantize", lazy)
    owner = SimpleNamespace(w80=mlx.asarray(plain(8, 80)))
    ckpt = tmp_path / "model.safetensors"
    ckpt.write_bytes(b"weights")
    assert not Q.quantize_targets(mlx, [("m.80", owner, "w80")], 8, ckpt, tag="t")
    assert not isinstance(owner.w80, QuantizedWeight)


def test_a_backends_quantized_weights_do_not_depend_on_which_backend_converted_first(mlx, tmp_path):
    """QA: NumPy took MLX's cached copy (80 columns padded to groups of 32) where it converts in groups of 16
    itself, so its 8-bit transcript depended on whether MLX had run first. Each backend keeps its own copy."""
    ckpt = tmp_path / "model.safetensors"
    ckpt.write_bytes(b"weights")
    floats = {c: plain(96, c) for c in (80, 128)}

    def load(B, wrap):
        owner = SimpleNamespace(**{f"w{c}": wrap(w.copy()) for c, w in floats.items()})
        hit = Q.quantize_targets(B, [(f"m.{c}", owner, f"w{c}") for c in floats], 8, ckpt, tag="t")
        return hit, owner

    assert load(mlx, mlx.asarray)[0] is False
    npy = NumpyBackend()
    hit, owner = load(npy, np.asarray)
    assert not hit and owner.w80.q.group_size == 16 and not owner.w80.q.padded  # its own groups, not MLX's 32
    path = Q.cache_path(ckpt, 8, "t", backend="numpy")
    before = path.read_bytes()
    hit, again = load(mlx, mlx.asarray)
    assert hit and again.w80.group_size == 32 and again.w80.cols == 80  # MLX's own copy, padded
    assert again.w128.bits == 8 and again.w128.group_size == 64
    x = rng.standard_normal((2, 80)).astype(np.float32)
    np.testing.assert_allclose(mlx.to_numpy(mlx.linear(mlx.asarray(x), again.w80)), x @ floats[80].T, atol=0.05)
    assert path.read_bytes() == before  # NumPy's copy stays NumPy's
    hit, owner2 = load(npy, np.asarray)
    assert hit and owner2.w80.q.group_size == 16
    np.testing.assert_array_equal(npy.linear(x, owner2.w80), npy.linear(x, owner.w80))


@pytest.mark.parametrize(
    "name,bits", [("moon_tiny_like", 8), ("moon_tiny_like", 4), ("moon_small_like", 8), ("moon_small_like", 4)]
)
@pytest.mark.parametrize("numpy_first", [True, False])
def test_cli_transcribes_on_mlx_quantized(name, bits, numpy_first, capsys):
    """QA's case: ``--backend mlx --quantize 8|4`` after (or without) a NumPy run that cached its copy."""
    args = [str(FIXTURES / "audio" / "speech.wav"), "--model", str(FIXTURES / "models" / name), "--quantize", str(bits)]
    if numpy_first:
        assert main([*args, "--backend", "numpy"]) == 0
        capsys.readouterr()
    code = main([*args, "--backend", "mlx", "--no-vad", "--tokens"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Unexpected error" not in err
    (segment,) = json.loads(out)["segments"]
    assert segment["tokens"]
