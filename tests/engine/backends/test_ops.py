"""Every backend op against a plain float64 formula, on NumPy and on MLX."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.backends import get_backend, window_mask
from engine.errors import BackendError

BACKENDS = ["numpy", "mlx"]
rng = np.random.default_rng(1234)


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.fixture(params=BACKENDS)
def B(request):
    return get_backend(request.param)


def close(B, x, ref, tol=2e-5):
    got = B.to_numpy(x).astype(np.float64)
    assert got.shape == ref.shape
    scale = max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(got, ref, atol=tol * scale, rtol=0)


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(BackendError, match="Unknown backend"):
        get_backend("tpu")


def test_auto_is_numpy_without_an_accelerator():
    # This machine has no Metal/CUDA: auto must not pick MLX's slow CPU backend.
    from engine.backends.mlx_backend import has_gpu

    assert get_backend("auto").name == ("mlx" if has_gpu() else "numpy")


def test_linear_and_bias(B):
    x, w, b = r(7, 5), r(3, 5), r(3)
    ref = x.astype(np.float64) @ w.astype(np.float64).T + b
    close(B, B.linear(B.asarray(x), B.prepare_linear(B.asarray(w)), B.asarray(b)), ref)
    close(B, B.linear(B.asarray(x), B.prepare_linear(B.asarray(w))), ref - b)


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 9, 12, 13, 33])
def test_linear_few_rows_over_large_matrices(B, rows):
    """Streaming shapes: a few rows (and leading axes) against matrices large enough for the blocked path,
    row counts that do not divide the blocks."""
    x, w, b = r(1, rows, 1001), r(1303, 1001), r(1303)
    ref = x.astype(np.float64) @ w.astype(np.float64).T + b
    close(B, B.linear(B.asarray(x), B.prepare_linear(B.asarray(w)), B.asarray(b)), ref)


def test_layer_norm_and_rms_norm(B):
    x, w, b = r(4, 9) * 3 + 1, r(9), r(9)
    x64 = x.astype(np.float64)
    mu, var = x64.mean(-1, keepdims=True), x64.var(-1, keepdims=True)
    close(B, B.layer_norm(B.asarray(x), B.asarray(w), B.asarray(b), 1e-5), (x64 - mu) / np.sqrt(var + 1e-5) * w + b)
    close(B, B.layer_norm(B.asarray(x), None, None, 1e-5), (x64 - mu) / np.sqrt(var + 1e-5))
    ms = (x64**2).mean(-1, keepdims=True)
    close(B, B.rms_norm(B.asarray(x), B.asarray(w), 1e-6), x64 / np.sqrt(ms + 1e-6) * w)


def test_activations(B):
    x = np.linspace(-9, 9, 1001).astype(np.float32)
    x64 = x.astype(np.float64)
    erf = np.array([math.erf(v) for v in x64 / math.sqrt(2)])
    close(B, B.gelu(B.asarray(x)), 0.5 * x64 * (1 + erf), 1e-6)
    close(B, B.silu(B.asarray(x)), x64 / (1 + np.exp(-x64)), 1e-6)
    close(B, B.erf(B.asarray(x)), np.array([math.erf(v) for v in x64]), 1e-6)
    s = r(3, 11) * 10
    e = np.exp(s - s.max(-1, keepdims=True))
    close(B, B.softmax(B.asarray(s)), e / e.sum(-1, keepdims=True), 1e-6)


def rope_ref(x, pos, inv_freq, interleaved):
    """Rotation by angle pos*f_i of pairs (2i, 2i+1) or (i, i+F), float64."""
    x = x.astype(np.float64).copy()
    F = len(inv_freq)
    for t, p in enumerate(pos):
        for i, f in enumerate(inv_freq):
            a = p * f
            j0, j1 = (2 * i, 2 * i + 1) if interleaved else (i, i + F)
            u, v = x[:, t, j0].copy(), x[:, t, j1].copy()
            x[:, t, j0] = u * math.cos(a) - v * math.sin(a)
            x[:, t, j1] = u * math.sin(a) + v * math.cos(a)
    return x


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("hd,rot", [(8, 8), (40, 32), (64, 51), (32, 25)])
def test_rope_partial_and_odd_widths(B, interleaved, hd, rot):
    # rot odd (51, 25): ceil(rot/2) frequencies with denominator rot, 2*ceil(rot/2) channels rotated.
    inv_freq = 1.0 / 10000 ** (np.arange(0, rot, 2, dtype=np.float64) / rot)
    x = r(3, 6, hd)
    pos = np.array([0, 1, 2, 7, 100, 4095])
    ang = pos[:, None] * inv_freq[None]
    got = B.rope(B.asarray(x), B.asarray(np.cos(ang)), B.asarray(np.sin(ang)), interleaved)
    close(B, got, rope_ref(x, pos, inv_freq, interleaved), 1e-5)


def test_rope_large_positions_with_float64_angles(B):
    # Hours of audio: angles computed in float64 on the host stay exact at position ~5e5 and beyond.
    inv_freq = 1.0 / 1e6 ** (np.arange(0, 64, 2, dtype=np.float64) / 64)
    pos = np.array([500_000, 1_000_003, 2_700_000])
    x = r(2, 3, 64)
    ang = pos[:, None].astype(np.float64) * inv_freq[None]
    got = B.rope(B.asarray(x), B.asarray(np.cos(ang)), B.asarray(np.sin(ang)), False)
    close(B, got, rope_ref(x, pos, inv_freq, False), 1e-5)


def attn_ref(q, k, v, scale, mask):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    rep = q.shape[0] // k.shape[0]
    k, v = np.repeat(k, rep, 0), np.repeat(v, rep, 0)
    s = q @ k.transpose(0, 2, 1) * scale
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


def test_window_mask_semantics():
    q = np.arange(40)
    m = window_mask(q, q, 16, 4)  # HF: keys q-15 .. q+3
    assert m[20].nonzero()[0].tolist() == list(range(5, 24))
    c = window_mask(q, q, None, 0)
    assert (c == np.tril(np.ones((40, 40), bool))).all()
    w = window_mask(q, q, 750, 0)
    assert (w == np.tril(np.ones((40, 40), bool))).all()
    s = window_mask(q, q, 5, 0)  # causal sliding window of 5 (self + 4 past)
    assert s[10].nonzero()[0].tolist() == [6, 7, 8, 9, 10]
    assert window_mask(q, q, None, None).all()


@pytest.mark.parametrize("kind", ["full", "causal", "window", "leftright", "gqa"])
@pytest.mark.parametrize("t", [23, 97])  # below and above the NumPy backend's K @ q^T switch
def test_attention_masks(B, kind, t):
    hq, hkv, d = 4, 4, 8
    if kind == "gqa":
        hkv = 2
    q, k, v = r(hq, t, d), r(hkv, t, d), r(hkv, t, d)
    pos = np.arange(t)
    mask = {
        "full": None,
        "causal": window_mask(pos, pos, None, 0),
        "window": window_mask(pos, pos, 5, 0),
        "leftright": window_mask(pos, pos, 6, 3),
        "gqa": window_mask(pos, pos, None, 0),
    }[kind]
    m = None if mask is None else B.asarray(mask)
    got = B.attention(B.asarray(q), B.asarray(k), B.asarray(v), 0.3, m)
    close(B, got, attn_ref(q, k, v, 0.3, mask), 1e-5)


@pytest.mark.parametrize("stride", [1, 2])
def test_causal_strided_conv1d(B, stride):
    c_in, c_out, K, T = 3, 5, 5, 17
    x, w, b = r(T, c_in), r(c_out, c_in, K), r(c_out)
    xp = np.concatenate([np.zeros((K - 1, c_in), np.float32), x])  # causal: left pad K-1
    t_out = (len(xp) - K) // stride + 1
    ref = np.zeros((t_out, c_out))
    for j in range(t_out):
        seg = xp[j * stride : j * stride + K].astype(np.float64)  # [K, C_in]
        ref[j] = np.einsum("kc,ock->o", seg, w.astype(np.float64)) + b
    got = B.conv1d(B.asarray(xp), B.prepare_conv(B.asarray(w)), B.asarray(b), stride)
    close(B, got, ref, 1e-5)
    assert B.conv1d(B.asarray(xp[:3]), B.prepare_conv(B.asarray(w)), None, stride).shape[0] == 0


def test_cache_write_and_argmax(B):
    buf = B.zeros((2, 6, 3))
    val = r(2, 2, 3)
    buf = B.write(buf, (slice(None), slice(3, 5)), B.asarray(val))
    out = B.to_numpy(buf)
    assert (out[:, 3:5] == val).all() and (out[:, :3] == 0).all() and (out[:, 5:] == 0).all()
    x = r(4, 10)
    ids = B.to_numpy(B.argmax(B.asarray(x)))  # sampled on the backend, read back as integers
    assert (ids == x.argmax(-1)).all() and ids.dtype == np.int32
    pad = B.to_numpy(B.where(B.argmax(B.asarray(x)) == 3, -1, B.argmax(B.asarray(x))))
    assert (pad == np.where(x.argmax(-1) == 3, -1, x.argmax(-1))).all()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_mlx_keeps_reduced_dtypes(dtype):
    import mlx.core as mx

    B = get_backend("mlx")
    x = B.asarray(r(3, 4), dtype)
    assert x.dtype == getattr(mx, dtype) and B.compute_dtype(dtype) == dtype
    assert B.astype(x, dtype) is x  # no cast node when the dtype is already right
    assert B.to_numpy(x).dtype == np.float32


def test_numpy_computes_in_float32():
    B = get_backend("numpy")
    assert B.compute_dtype("bfloat16") == "float32"
    x = B.asarray(r(3, 4), "float16")
    assert x.dtype == np.float32 and B.astype(x, "bfloat16") is x


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 8])
def test_numpy_dequantizes_mlx_affine_weights_exactly(bits):
    """NumPy reads an MLX-quantized matrix (any width, values straddling uint32 words for 3/5/6 bits) to the
    same float32 values as ``mx.dequantize``, and both backends' ``linear`` over it agree with those values
    (NumPy here without its 4/8-bit kernels, which quantize the activations: tests/engine/backends/
    test_quantized_cpu.py holds those to their own bound)."""
    import mlx.core as mx

    from engine.backends import QuantizedWeight
    from engine.backends.numpy_backend import NumpyBackend
    from engine.backends.quant import dequantize

    w = r(300, 192)  # more rows than one unpacking block
    for dt in (mx.float32, mx.bfloat16):
        q, s, b = mx.quantize(mx.array(w).astype(dt), group_size=64, bits=bits)
        want = np.array(mx.dequantize(q, s.astype(mx.float32), b.astype(mx.float32), group_size=64, bits=bits))
        host = QuantizedWeight(np.array(q), np.array(s.astype(mx.float32)), np.array(b.astype(mx.float32)), 64, bits)
        np.testing.assert_array_equal(dequantize(host), want)
    x = r(5, 192)
    ref = x.astype(np.float64) @ want.astype(np.float64).T
    npy, mlx = NumpyBackend(kernels=False), get_backend("mlx")
    close(npy, npy.linear(npy.asarray(x), npy.prepare_linear(host)), ref, 1e-5)
    qw = mlx.prepare_linear(QuantizedWeight(q, s, b, 64, bits))
    close(mlx, mlx.linear(mlx.asarray(x), qw), ref, 2e-2)  # bf16 scales and biases: bf16 products


def test_mlx_quantize_round_trips_through_a_weight_file(tmp_path):
    """``quantize`` then ``save_tensors``: the file holds the packed layout in its own dtypes, and reading it
    back gives the same matrix."""
    import mlx.core as mx

    B = get_backend("mlx")
    w = B.asarray(r(64, 128), "bfloat16")
    q = B.quantize(w, 64, 4)
    B.save_tensors(tmp_path / "q.safetensors", {"m.weight": q.w, "m.scales": q.scales, "m.biases": q.biases})
    back = mx.load(str(tmp_path / "q.safetensors"))
    assert back["m.scales"].dtype == mx.bfloat16 and back["m.weight"].dtype == mx.uint32
    for k, a in (("weight", q.w), ("scales", q.scales), ("biases", q.biases)):
        assert mx.array_equal(back[f"m.{k}"], a)
    # NumPy quantizes too (issue #16: its 4/8-bit kernels), to the same words, and writes them the same way
    from pathlib import Path

    from engine.weights import TensorStore, read_header

    npy = get_backend("numpy")
    w32 = r(64, 128)
    qn = npy.quantize(w32, 64, 4)
    qm = B.quantize(mx.array(w32), 64, 4)
    np.testing.assert_array_equal(qn.w, np.array(qm.w))
    path = Path(tmp_path / "n.safetensors")
    npy.save_tensors(path, {"m.weight": qn.w, "m.scales": qn.scales, "m.biases": qn.biases})
    store = TensorStore(read_header(path), path.name)
    for k, a in (("weight", qn.w), ("scales", qn.scales), ("biases", qn.biases)):
        np.testing.assert_array_equal(npy.load(store, f"m.{k}"), a)
