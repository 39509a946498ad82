"""Quantized matrices whose width is no multiple of the group (Moonshine small's 620 and 2480-wide encoder
matrices), padded with zero columns to whole groups: the quantizer against MLX's on the padded matrix, the
ONNX Runtime product against the same graph over zero-padded inputs, the NumPy backend's choice of when to
pad, MLX computing with a padded copy, and the cached copy of a padded model."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from engine.backends import ort_kernels
from engine.backends.numpy_backend import NumpyBackend
from engine.backends.quant import dequantize, quantize_affine
from engine.models import quantize as Q

pytest.importorskip("onnxruntime")
rng = np.random.default_rng(11)


def plain(out_dim: int, in_dim: int) -> np.ndarray:
    return (rng.standard_normal((out_dim, in_dim)) * 0.05).astype(np.float32)


def zero_padded(a: np.ndarray, width: int) -> np.ndarray:
    out = np.zeros((a.shape[0], width), np.float32)
    out[:, : a.shape[1]] = a
    return out


@pytest.mark.parametrize("bits", [4, 8])
def test_padding_quantizes_the_zero_padded_matrix_as_mlx_does(bits):
    mx = pytest.importorskip("mlx.core")  # the oracle
    w = plain(96, 100)
    with pytest.raises(ValueError):
        quantize_affine(w, 64, bits)
    q = quantize_affine(w, 64, bits, pad=True)
    assert (q.shape, q.packed_cols, q.cols, q.padded) == ((96, 100), 128, 100, True)
    ref = [np.asarray(a) for a in mx.quantize(mx.array(zero_padded(w, 128)), group_size=64, bits=bits)]
    for mine, theirs in zip((q.w, q.scales, q.biases), ref):
        np.testing.assert_array_equal(mine, theirs)
    deq = dequantize(q)
    assert deq.shape == (96, 100)
    np.testing.assert_array_equal(deq, dequantize(quantize_affine(zero_padded(w, 128), 64, bits))[:, :100])
    assert np.abs(deq - w).max() < (0.02 if bits == 8 else 0.2) * np.abs(w).max()
    assert not quantize_affine(plain(8, 128), 64, bits, pad=True).padded  # whole groups: nothing to pad


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("rows", [1, 3, 40])
def test_a_padded_product_equals_the_whole_group_product_over_zero_padded_inputs(bits, rows):
    q = quantize_affine(plain(160, 620), 64, bits, pad=True)
    lin = ort_kernels.NBitsLinear(q.w, q.scales, q.biases, 64, bits, cols=620)
    whole = ort_kernels.NBitsLinear(q.w, q.scales, q.biases, 64, bits)  # the same blocks over 640 columns
    assert lin.shape == (160, 620) and whole.shape == (160, 640)
    x = rng.standard_normal((rows, 620)).astype(np.float32)
    got = lin(x)
    np.testing.assert_array_equal(got, whole(zero_padded(x, 640)))
    ref = x.astype(np.float64) @ dequantize(q).astype(np.float64).T
    bound = 1.2 * np.abs(x).max(axis=1, keepdims=True) / 254 * np.abs(dequantize(q)).sum(axis=1)[None, :] + 1e-5
    assert (np.abs(got - ref) <= bound).all()  # int8 activations' error only


def test_the_numpy_backend_pads_only_where_it_pays():
    B = NumpyBackend()
    for cols, group, packed in ((620, 64, 640), (2480, 64, 2496), (100, 64, 128), (128, 64, 128)):
        q = B.quantize(plain(32, cols), group, 8)
        assert (q.shape[1], q.packed_cols) == (cols, packed), cols
    for cols, group in ((80, 64), (80, 32), (48, 64)):  # a third or more of padding where groups of 16 fit
        with pytest.raises(ValueError):
            B.quantize(plain(32, cols), group, 8)
    assert not B.quantize(plain(32, 80), 16, 8).padded


@pytest.mark.parametrize("kernels", [True, False])
def test_the_numpy_backend_computes_with_a_padded_matrix(kernels, monkeypatch):
    B = NumpyBackend(kernels=kernels)
    q = B.quantize(plain(1024, 620), 64, 8)  # 640 KB packed: halves, one for the twin where it runs
    w = B.prepare_linear(q)
    assert isinstance(w, ort_kernels.NBitsLinear) == kernels
    assert w.shape == (1024, 620)
    x = rng.standard_normal((2, 620)).astype(np.float32)
    ref = x @ dequantize(q).T
    got = B.linear(x, w)
    np.testing.assert_allclose(got, ref, atol=0.02 * np.abs(ref).max())
    monkeypatch.setenv("LIVECAP_CPU_TWIN", "0")  # one process, one chunk: the same bits
    alone = NumpyBackend(kernels=kernels)
    np.testing.assert_array_equal(alone.linear(x, alone.prepare_linear(q)), got)
    norm = (1 + rng.standard_normal(620) * 0.1).astype(np.float32)
    h = B.layer_norm(x, norm, None, 1e-5)
    want = B.linear(h, w)  # first: a float matrix is rearranged in place (numpy_blocks.step_layout)
    fused = B.prepare_norm_linear(norm, 1e-5, w)
    got = B.norm_linear(x, norm, 1e-5, fused, "float32")
    if kernels:
        np.testing.assert_array_equal(got, want)
    else:  # the transposed layout sums in another order
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


def test_padded_matrices_are_not_fused_into_larger_graphs():
    B = NumpyBackend()
    d, f = 620, 2480
    up_gate, down = B.quantize(plain(2 * f, d), 64, 8), B.quantize(plain(d, f), 64, 8)
    assert not ort_kernels.gated_halves(up_gate, down)
    parts = (B.prepare_linear(up_gate), None, B.prepare_linear(down), None)
    assert B.prepare_gated_mlp(*parts) == parts
    x = rng.standard_normal((1, d)).astype(np.float32)
    deq_up, deq_down = dequantize(up_gate), dequantize(down)
    u = x @ deq_up.T
    ref = (u[:, f:] / (1 + np.exp(-u[:, f:])) * u[:, :f]) @ deq_down.T
    np.testing.assert_allclose(B.gated_mlp(x, *parts), ref, atol=0.03 * np.abs(ref).max())
    o = B.prepare_linear(B.quantize(plain(d, d), 64, 8))
    assert not ort_kernels.fusable(o)
    norm = np.ones(d, np.float32)
    assert B.prepare_residual_norm_linear(o, norm, 1e-5, o) == (o, o)


def test_mlx_computes_with_a_copy_numpy_padded():
    """A cached copy is shared by the backends: MLX (which cannot pad) must read NumPy's padded matrices."""
    pytest.importorskip("mlx.core")
    from engine.backends import get_backend

    mlx = get_backend("mlx")
    q = quantize_affine(plain(64, 620), 64, 8, pad=True)
    qm = mlx.prepare_linear(type(q)(*(mlx.asarray(a) for a in (q.w, q.scales, q.biases)), 64, 8, 620))
    x = rng.standard_normal((3, 620)).astype(np.float32)
    ref = x.astype(np.float64) @ dequantize(q).astype(np.float64).T
    got = mlx.to_numpy(mlx.linear(mlx.asarray(x), qm))
    np.testing.assert_allclose(got, ref, atol=1e-4 * np.abs(ref).max())
    rows = mlx.to_numpy(mlx.embed(qm, np.array([5, 0])))
    np.testing.assert_array_equal(rows, dequantize(q)[[5, 0]])


def model_like(widths: list[int]):
    """An owner object with one float matrix per width, and its quantization targets."""
    owner = SimpleNamespace(**{f"w{c}": plain(96, c) for c in widths})
    return owner, [(f"m.{c}", owner, f"w{c}") for c in widths]


def test_padded_matrices_are_cached_and_read_back_the_same(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    ckpt = tmp_path / "model.safetensors"
    ckpt.write_bytes(b"weights")
    old = Q.cache_path(ckpt, 8, "t", layout=1)  # a copy from before padded widths: replaced, not read
    old.parent.mkdir(parents=True)
    old.write_bytes(b"layout 1")
    older_mlx = Q.cache_path(ckpt, 8, "t", layout=2)  # MLX's copies before it padded: 620 columns kept float
    older_mlx.write_bytes(b"layout 2")
    B = NumpyBackend()
    widths = [620, 80, 128]
    first, targets = model_like(widths)
    floats = {c: getattr(first, f"w{c}").copy() for c in widths}
    assert not Q.quantize_targets(B, targets, 8, ckpt, tag="t")
    assert not old.exists() and not older_mlx.exists() and Q.cache_path(ckpt, 8, "t").is_file()
    second, targets = model_like(widths)
    for c in widths:
        setattr(second, f"w{c}", floats[c])
    assert Q.quantize_targets(B, targets, 8, ckpt, tag="t")
    for c in widths:
        a, b = getattr(first, f"w{c}"), getattr(second, f"w{c}")
        assert isinstance(b, ort_kernels.NBitsLinear) and b.shape == (96, c)
        x = rng.standard_normal((2, c)).astype(np.float32)
        np.testing.assert_array_equal(B.linear(x, a), B.linear(x, b))
    third, targets = model_like([600])  # a cached copy that does not fit the model's matrices is rebuilt
    store_targets = [("m.620", third, "w600")]
    assert not Q.quantize_targets(B, store_targets, 8, ckpt, tag="t")
    assert third.w600.shape == (96, 600)


def test_each_backend_caches_its_own_copy_of_the_same_padded_layout(tmp_path, monkeypatch):
    """MLX after NumPy converts and caches its own copy (a backend's results must not depend on which one
    converted first), padded as NumPy's: the same values (``quantize_affine`` is ``mlx.core.quantize``)."""
    pytest.importorskip("mlx.core")
    from engine.backends import get_backend

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    ckpt = tmp_path / "model.safetensors"
    ckpt.write_bytes(b"weights")
    npy, mlx = NumpyBackend(), get_backend("mlx")
    first, targets = model_like([620])
    w = first.w620.copy()
    assert not Q.quantize_targets(npy, targets, 8, ckpt, tag="t")
    second = SimpleNamespace(w620=mlx.asarray(w))
    assert not Q.quantize_targets(mlx, [("m.620", second, "w620")], 8, ckpt, tag="t")
    assert second.w620.padded and second.w620.shape == (96, 620)
    x = rng.standard_normal((2, 620)).astype(np.float32)
    ref = x @ dequantize(first.w620.q).T
    got = mlx.to_numpy(mlx.linear(mlx.asarray(x), second.w620))
    np.testing.assert_allclose(got, ref, atol=1e-4 * np.abs(ref).max())
    paths = {Q.cache_path(ckpt, 8, "t", backend=b.name) for b in (npy, mlx)}
    assert len(paths) == 2 and all(p.is_file() for p in paths)
    third = SimpleNamespace(w620=mlx.asarray(w))
    assert Q.quantize_targets(mlx, [("m.620", third, "w620")], 8, ckpt, tag="t")  # its own copy, read back
    np.testing.assert_array_equal(mlx.to_numpy(mlx.linear(mlx.asarray(x), third.w620)), got)


def test_many_row_products_give_the_same_bits_on_one_thread_or_two(monkeypatch):
    """An encoder over a whole segment (more rows than the twin takes) runs the chunks over cpu_pool."""
    from engine.backends import cpu_pool

    B = NumpyBackend()
    w = B.prepare_linear(B.quantize(plain(1024, 620), 64, 8))
    assert len(w.bounds) == 3  # two chunks
    x = rng.standard_normal((200, 620)).astype(np.float32)
    ran: list = []
    real = cpu_pool.run
    monkeypatch.setattr(cpu_pool, "run", lambda jobs: (ran.append(len(jobs)), real(jobs)))
    monkeypatch.setattr(cpu_pool.contention, "busy", lambda: False)
    shared = B.linear(x, w)
    assert ran == [2]
    monkeypatch.setattr(cpu_pool.contention, "busy", lambda: True)
    np.testing.assert_array_equal(B.linear(x, w), shared)
    ref = x @ dequantize(w.q).T
    np.testing.assert_allclose(shared, ref, atol=0.02 * np.abs(ref).max())


def test_mlx_pads_a_width_no_group_divides_as_numpy_does(tmp_path, monkeypatch):
    """MLX kept a 620-wide matrix float (Moonshine small: nearly every matrix stayed float on Apple Silicon with
    8/4-bit weights); it now pads it to whole groups as NumPy does, to the same bits, so one cached copy serves
    both backends whichever wrote it."""
    pytest.importorskip("mlx.core")
    from engine.backends import get_backend

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    ckpt = tmp_path / "model.safetensors"
    ckpt.write_bytes(b"weights")
    mlx = get_backend("mlx")
    w620, w640 = plain(96, 620), plain(96, 640)
    owner = SimpleNamespace(w620=mlx.asarray(w620), w640=mlx.asarray(w640))
    targets = [("m.620", owner, "w620"), ("m.640", owner, "w640")]
    assert not Q.quantize_targets(mlx, targets, 8, ckpt, tag="t")  # converted now, not read from the cache
    assert owner.w620.bits == 8 and owner.w620.cols == 620 and owner.w620.packed_cols == 640
    assert owner.w640.bits == 8 and not owner.w640.padded
    mine = quantize_affine(w620, 64, 8, pad=True)
    for a, b in ((owner.w620.w, mine.w), (owner.w620.scales, mine.scales), (owner.w620.biases, mine.biases)):
        np.testing.assert_array_equal(mlx.to_numpy(a), b)
    x = rng.standard_normal((3, 620)).astype(np.float32)
    got = mlx.to_numpy(mlx.linear(mlx.asarray(x), owner.w620))
    np.testing.assert_allclose(got, x @ dequantize(mine)[:, :620].T, rtol=1e-4, atol=1e-4)
    again = SimpleNamespace(w620=mlx.asarray(w620), w640=mlx.asarray(w640))
    assert Q.quantize_targets(mlx, [("m.620", again, "w620"), ("m.640", again, "w640")], 8, ckpt, tag="t")
    assert again.w620.cols == 620 and again.w640.bits == 8  # from the cache
