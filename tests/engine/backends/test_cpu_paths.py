"""The NumPy backend's CPU paths for large inputs: products and convolutions split over cpu_pool, elementwise ops on
ONNX Runtime cut into row ranges, windowed attention over gathered key bands, the weight arena. Each against a
float64 formula, and the split paths bit-identical whether or not the helper thread takes part (the result may
not depend on how busy the machine is)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.backends import cpu_pool, heap, numpy_attention, ort_ops, window_mask
from engine.backends.numpy_backend import SPLIT_MACS, NumpyBackend

rng = np.random.default_rng(99)


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.fixture
def B():
    return NumpyBackend()


@pytest.fixture
def caller_only(monkeypatch):
    """Runs a function once with cpu_pool's helper allowed and once with the caller alone (as when other
    processes keep the CPU busy); returns both results."""

    def both(fn):
        monkeypatch.setattr(cpu_pool.contention, "busy", lambda: False)
        shared = fn()
        monkeypatch.setattr(cpu_pool.contention, "busy", lambda: True)
        alone = fn()
        return shared, alone

    return both


def close(got, ref, tol=2e-5):
    scale = max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(np.asarray(got, np.float64), ref, atol=tol * scale, rtol=0)


def test_many_row_products_split_over_the_weight_rows(B, caller_only):
    x, w, b = r(300, 512), r(700, 512), r(700)
    assert x.shape[0] * w.size >= SPLIT_MACS  # the split path
    ref = x.astype(np.float64) @ w.astype(np.float64).T + b
    shared, alone = caller_only(lambda: B.linear(x, B.prepare_linear(w), b))
    close(shared, ref)
    assert np.array_equal(shared, alone)


def test_large_few_row_products_split_and_blocked(B, caller_only):
    x, w = r(3, 1024), r(8192, 1024)  # 32 MB: cut into ranges, 2-12 rows over L2-sized blocks
    ref = x.astype(np.float64) @ w.astype(np.float64).T
    shared, alone = caller_only(lambda: B.linear(x, B.prepare_linear(w)))
    close(shared, ref)
    assert np.array_equal(shared, alone)


@pytest.mark.parametrize("stride", [1, 2])
def test_large_convolutions_build_im2col_per_range(B, caller_only, stride):
    c_in, c_out, k, t = 256, 256, 5, 1100
    x, w, b = r(t, c_in), r(c_out, c_in, k), r(c_out)
    t_out = (t - k) // stride + 1
    assert t_out * c_out * c_in * k >= SPLIT_MACS
    cols = np.stack([x[j * stride : j * stride + k].astype(np.float64) for j in range(t_out)])  # [T_out, K, C_in]
    ref = np.einsum("tkc,ock->to", cols, w.astype(np.float64)) + b
    shared, alone = caller_only(lambda: B.conv1d(x, B.prepare_conv(w), b, stride))
    close(shared, ref)
    assert np.array_equal(shared, alone)


def _erf(v):
    return np.vectorize(math.erf)(v)


@pytest.mark.parametrize("rows", [3, 1100])  # one session call; row ranges over cpu_pool (>= ort_ops.PAR_ELEMS)
def test_elementwise_ops_small_and_split(B, rows):
    x = r(rows, 1000) * 3
    x64 = x.astype(np.float64)
    if rows * 1000 >= ort_ops.PAR_ELEMS:
        assert ort_ops.get("gelu") is not None  # the split path really runs
    close(B.gelu(x), 0.5 * x64 * (1 + _erf(x64 / math.sqrt(2))), 1e-6)
    close(B.silu(x), x64 / (1 + np.exp(-x64)), 1e-6)
    w, b = r(1000), r(1000)
    mu, var = x64.mean(-1, keepdims=True), x64.var(-1, keepdims=True)
    close(B.layer_norm(x, w, b, 1e-5), (x64 - mu) / np.sqrt(var + 1e-5) * w + b)
    close(B.layer_norm(x, None, None, 1e-5), (x64 - mu) / np.sqrt(var + 1e-5))
    close(B.rms_norm(x, w, 1e-6), x64 / np.sqrt((x64**2).mean(-1, keepdims=True) + 1e-6) * w)


def test_split_elementwise_ops_equal_one_call(caller_only):
    op = ort_ops.get("gelu")
    if op is None:
        pytest.skip("ONNX Runtime has no Gelu here")
    x = r(1200, 1000)
    shared, alone = caller_only(lambda: op(x))
    assert np.array_equal(shared, alone)
    assert np.array_equal(shared[:7], op(x[:7]))  # row by row: the cut changes nothing


def test_without_onnx_runtime_ops_the_backend_computes_with_numpy():
    B = NumpyBackend(kernels=False)
    x = r(5, 64)
    x64 = x.astype(np.float64)
    close(B.gelu(x), 0.5 * x64 * (1 + _erf(x64 / math.sqrt(2))), 1e-6)
    mu, var = x64.mean(-1, keepdims=True), x64.var(-1, keepdims=True)
    close(B.layer_norm(x, None, None, 1e-5), (x64 - mu) / np.sqrt(var + 1e-5))


def attn_ref(q, k, v, scale, mask):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    rep = q.shape[0] // k.shape[0]
    k, v = np.repeat(k, rep, 0), np.repeat(v, rep, 0)
    s = q @ k.transpose(0, 2, 1) * scale
    s = np.where(mask, s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("t,left,right", [(64, 16, 4), (203, 16, 4), (130, 16, 0), (257, 5, 3)])
@pytest.mark.parametrize("hkv", [8, 2])  # grouped-query heads fold the groups into the rows: the dense path
def test_windowed_attention_over_key_bands(B, caller_only, t, left, right, hkv):
    q, k, v = r(8, t, 40), r(hkv, t, 40), r(hkv, t, 40)
    pos = np.arange(t)
    mask = window_mask(pos, pos, left, right)
    mask[:, -3:] = False  # invalid frames at the end (keys only), as the offline encoder masks them
    band = numpy_attention._band(mask, numpy_attention.SUB)
    assert (band is not None) == (t > 64)  # a band narrower than half the keys
    shared, alone = caller_only(lambda: B.attention(q, k, v, 0.3, mask))
    close(shared, attn_ref(q, k, v, 0.3, mask), 1e-5)
    assert np.array_equal(shared, alone)


def test_windowed_attention_without_onnx_runtime_softmax(caller_only):
    B = NumpyBackend(kernels=False)  # NumPy's softmax over the gathered bands
    q, k, v = r(4, 150, 16), r(4, 150, 16), r(4, 150, 16)
    pos = np.arange(150)
    mask = window_mask(pos, pos, 16, 4)
    shared, alone = caller_only(lambda: B.attention(q, k, v, 0.25, mask))
    close(shared, attn_ref(q, k, v, 0.25, mask), 1e-5)
    assert np.array_equal(shared, alone)


def test_bands_are_remembered_by_mask_content():
    pos = np.arange(200)
    mask = window_mask(pos, pos, 16, 4)
    first = numpy_attention._known_band(mask)
    assert numpy_attention._known_band(mask.copy()) is first  # an equal mask: the same band, not found again
    mask[:, -3:] = False  # the same array, changed (the last frames invalid): its own band
    band = numpy_attention._known_band(mask)
    expect = numpy_attention._band(mask, numpy_attention.SUB)
    assert band is not first and np.array_equal(band[0], expect[0]) and np.array_equal(band[1], expect[1])
    for left in range(2, 2 + numpy_attention.BANDS_KEPT + 2):  # only the last few are kept
        numpy_attention._known_band(window_mask(pos, pos, left, 4))
    assert len(numpy_attention._bands) == numpy_attention.BANDS_KEPT


def test_a_row_that_sees_nothing_takes_the_dense_path(B):
    t = 100
    q, k, v = r(2, t, 8), r(2, t, 8), r(2, t, 8)
    pos = np.arange(t)
    mask = window_mask(pos, pos, 4, 0)
    mask[50] = False
    assert numpy_attention._band(mask, numpy_attention.SUB) is None
    with np.errstate(invalid="ignore"):
        got = B.attention(q, k, v, 0.5, mask)
        ref = attn_ref(q, k, v, 0.5, mask)
    assert np.isnan(got[:, 50]).all()  # as the reference: softmax over no key
    keep = np.arange(t) != 50
    close(got[:, keep], ref[:, keep], 1e-5)


@pytest.mark.parametrize("t", [1, 7, 66, 500])
@pytest.mark.parametrize("hkv", [4, 2])
def test_one_query_per_head_attention(B, t, hkv):
    """A decoder step's attention (one query per head, no mask; the keys a strided view of a cache, as a
    self-attention's): the one-query path against the float64 formula, and against the many-query path (the
    same query twice) to float rounding."""
    q, cache = r(4, 1, 40) * 3, r(2 * hkv, t + 5, 40) * 3
    k, v = cache[:hkv, :t], cache[hkv:, :t]
    got = B.attention(q, k, v, 0.16)
    assert got.shape == (4, 1, 40)
    close(got, attn_ref(q, k, v, 0.16, np.ones((1, t), bool)), 1e-5)
    twice = B.attention(np.concatenate([q, q], axis=1), k, v, 0.16)
    close(got[:, 0], twice[:, 1].astype(np.float64), 1e-5)


@pytest.mark.parametrize("shift", [0.0, 30.0])
def test_one_row_norm(shift):
    """The norm before a float32 decoder block for one row: the float64 LayerNorm to float32 rounding whatever the
    mean (a float32 mean of a row near 30 is off by 2e-6, 8x that bound), with and without a weight, and the
    generic op to float rounding where the mean is small."""
    from engine.backends.numpy_backend import one_row_norm

    x, w = r(1, 320) + shift, 1 + r(320) * 0.1
    x64, before = x.astype(np.float64), x.copy()
    ref = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
    assert np.abs(one_row_norm(x, w, 1e-5) - ref * w).max() < 2.5e-7 * np.abs(ref * w).max()
    assert np.abs(one_row_norm(x[0], None, 1e-5)[None] - ref).max() < 2.5e-7 * np.abs(ref).max()
    if not shift:
        close(one_row_norm(x, w, 1e-5), NumpyBackend().layer_norm(x, w, None, 1e-5).astype(np.float64), 1e-6)
    assert one_row_norm(x, w, 1e-5).shape == (1, 320) and np.array_equal(x, before)  # x itself is kept


def test_one_row_pre_norm_product(B):
    """A float32 step's head (``norm_linear`` over one row): the float64 norm and product, and the bits of the
    product over ``one_row_norm``; several rows take the generic norm."""
    from engine.backends.numpy_backend import one_row_norm

    x, norm, w = r(1, 96) + 5, 1 + r(96) * 0.1, r(200, 96)
    x64 = x.astype(np.float64)
    ref = (x64 - x64.mean()) / np.sqrt(x64.var() + 1e-5) * norm @ w.T.astype(np.float64)
    got = B.norm_linear(x, norm, 1e-5, w, "float32")
    close(got, ref, 1e-5)
    assert np.array_equal(got, B.linear(one_row_norm(x, norm, 1e-5), w))
    rows = np.concatenate([x, r(2, 96)])
    assert np.array_equal(
        B.norm_linear(rows, norm, 1e-5, w, "float32"), B.linear(B.layer_norm(rows, norm, None, 1e-5), w)
    )


def test_arena_packs_small_matrices_and_gives_large_ones_their_own_block():
    arena = heap.Arena()
    a, b = r(300, 200), r(5, 7)
    pa, pb = arena.place(a), arena.place(b)
    assert np.array_equal(pa, a) and np.array_equal(pb, b)
    assert pa.flags.c_contiguous and pb.flags.c_contiguous and pa.base is pb.base
    assert pb.ctypes.data % 64 == 0
    big = np.zeros((arena.BLOCK // 16 + 1, 4), np.float32)
    assert arena.place(big).base is not pa.base
    assert arena.place(np.arange(6, dtype=np.float64).reshape(2, 3)).dtype == np.float32
