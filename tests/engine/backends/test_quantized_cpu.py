"""Quantized products on the CPU: the NumPy affine quantizer against MLX's, the ONNX Runtime kernels against
the dequantized float64 product, and the ONNX protobuf writer they are built with."""

from __future__ import annotations

import numpy as np
import pytest

from engine.backends import onnx_proto as P
from engine.backends import ort_kernels
from engine.backends.numpy_blocks import SplitMlp
from engine.backends.quant import QuantizedWeight, dequantize, quantize_affine

rng = np.random.default_rng(7)


def weights(out_dim: int, in_dim: int) -> np.ndarray:
    w = (rng.standard_normal((out_dim, in_dim)) * 0.05).astype(np.float32)
    w[0, :32] = 0.0  # a constant group (scale at its floor, bias 0)
    w[1, :32] = 0.02  # a constant non-zero group
    w[2] *= 40  # a row with a much larger range
    return w


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("group", [32, 64, 128])
def test_numpy_affine_quantization_is_bit_identical_to_mlx(bits, group):
    mx = pytest.importorskip("mlx.core")  # the oracle; a dependency of the package on Linux and macOS
    w = weights(96, 256)
    q = quantize_affine(w, group, bits)
    ref = [np.asarray(a) for a in mx.quantize(mx.array(w), group_size=group, bits=bits)]
    np.testing.assert_array_equal(q.w, ref[0])
    np.testing.assert_array_equal(q.scales, ref[1])
    np.testing.assert_array_equal(q.biases, ref[2])
    assert (q.group_size, q.bits, q.shape) == (group, bits, w.shape)


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("group,in_dim", [(32, 256), (64, 192), (128, 512)])
@pytest.mark.parametrize("rows", [1, 3, 40])
def test_nbits_linear_computes_the_dequantized_product(bits, group, in_dim, rows):
    """Odd group counts (192 / 64 = 3) exercise the nibble padding of the zero points. Against float64, the
    only error allowed is that of int8 activations: each input off by at most max|x| / 254, so output j off
    by at most sum_k |W_jk| max|x| / 254 (with a margin for rounding; float32 activations: 1e-5 relative)."""
    q = quantize_affine(weights(160, in_dim), group, bits)
    lin = ort_kernels.NBitsLinear(q.w, q.scales, q.biases, group, bits)
    x = rng.standard_normal((rows, in_dim)).astype(np.float32)
    deq = dequantize(q).astype(np.float64)
    ref = x.astype(np.float64) @ deq.T
    got = lin(x)
    assert got.shape == (rows, 160) and got.dtype == np.float32
    if ort_kernels.ACCURACY[bits] == 4:
        bound = 1.2 * np.abs(x).max(axis=1, keepdims=True) / 254 * np.abs(deq).sum(axis=1)[None, :] + 1e-5
    else:
        bound = 1e-5 * np.abs(ref).max()
    assert (np.abs(got - ref) <= bound).all()


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("pad", [False, True])
def test_over_many_rows_a_product_is_the_exact_one_of_the_quantized_weights(bits, pad):
    """From ``DEQUANT_ROWS`` rows (an encoder over a segment) the int8-activation kernels ran 2.3x a float32
    product's time on an AVX2 machine and erred as above; the product is now the float32 one of the dequantized
    weights: within float32 rounding of float64 (1e-5 of the largest output), with a pre-norm as with its graphs,
    and for a matrix padded to whole groups; fewer rows still run on the int8 kernels."""
    B = fusing_backend()
    in_dim = 200 if pad else 256
    q = quantize_affine(plain(320, in_dim), 64, bits, pad=pad)
    w = B.prepare_linear(q)
    rows = ort_kernels.DEQUANT_ROWS + 50
    x = (rng.standard_normal((rows, in_dim)) * 2 + 0.5).astype(np.float32)
    deq = dequantize(q).astype(np.float64)
    got = B.linear(x, w)
    ref = x.astype(np.float64) @ deq.T
    assert got.shape == (rows, 320) and np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()
    few = B.linear(x[:8], w)  # the int8 kernels: off by the activations' rounding
    assert 1e-4 * np.abs(ref).max() < np.abs(few - ref[:8]).max() < 0.05 * np.abs(ref).max()
    norm = (1 + rng.standard_normal(in_dim) * 0.1).astype(np.float32)
    fused = B.prepare_norm_linear(norm, 1e-5, B.prepare_linear(q))
    h = B.layer_norm(x, norm, None, 1e-5)
    ref = h.astype(np.float64) @ deq.T
    assert np.abs(B.norm_linear(x, norm, 1e-5, fused, "float32") - ref).max() <= 1e-5 * np.abs(ref).max()


def test_nbits_linear_keeps_the_biases():
    """A matrix whose groups sit far from zero: dropping or mis-scaling the float rest fails this."""
    w = weights(64, 128) + np.float32(0.3)
    q = quantize_affine(w, 64, 8)
    lin = ort_kernels.NBitsLinear(q.w, q.scales, q.biases, 64, 8)
    x = np.ones((1, 128), np.float32)
    ref = x.astype(np.float64) @ dequantize(q).astype(np.float64).T
    np.testing.assert_allclose(lin(x), ref, rtol=2e-3)


@pytest.mark.parametrize("bits", [4, 8])
def test_nbits_linear_keeps_a_bias_that_is_no_multiple_of_the_scale(bits):
    """Biases from another quantizer (not MLX's nudged scales): the float rest is a real part of each weight,
    here 0.4 of a step on every group; leaving it out fails this (ones are exact int8 activations)."""
    q = quantize_affine(weights(64, 128) + np.float32(0.3), 64, bits)
    biases = q.biases + np.float32(0.4) * q.scales
    lin = ort_kernels.NBitsLinear(q.w, q.scales, biases, 64, bits)
    assert lin.with_rest
    x = np.ones((2, 128), np.float32)
    deq = dequantize(QuantizedWeight(q.w, q.scales, biases, 64, bits)).astype(np.float64)
    np.testing.assert_allclose(lin(x), x.astype(np.float64) @ deq.T, rtol=1e-5)


def test_nbits_linear_leaves_out_the_rounding_rest_of_mlx_quantized_weights():
    """MLX's quantizer makes each bias a whole multiple of its scale, so no float rest is computed; a bias
    off that by 1/256 of a step keeps it (the rest is then weight, not rounding)."""
    q = quantize_affine(weights(64, 128), 64, 8)
    assert not ort_kernels.NBitsLinear(q.w, q.scales, q.biases, 64, 8).with_rest
    off = q.biases.copy()
    off[5, 1] += q.scales[5, 1] * np.float32(2.0**-8)
    assert ort_kernels.NBitsLinear(q.w, q.scales, off, 64, 8).with_rest


def test_unsupported_layouts_are_refused():
    assert not ort_kernels.supports(64, 6, 256) and not ort_kernels.supports(48, 4, 192)
    q = quantize_affine(weights(8, 96), 32, 4)
    with pytest.raises(ValueError, match="cannot run"):
        ort_kernels.NBitsLinear(q.w, q.scales, q.biases, 64, 4)  # 96 columns are not whole groups of 64


def test_onnx_writer_round_trips_through_onnx_runtime():
    """A hand-written model: an initializer with a negative int64, symbolic and fixed dimensions, an int
    attribute; ONNX Runtime must parse it and compute the graph."""
    ort = pytest.importorskip("onnxruntime")
    model = P.model(
        [P.node("Reshape", ["x", "shape"], ["r"]), P.node("ReduceSum", ["r", "axes"], ["y"], keepdims=0)],
        [P.tensor("shape", np.array([-1, 2, 3], np.int64)), P.tensor("axes", np.array([2], np.int64))],
        [P.value_info("x", ["n", 6])],
        [P.value_info("y", ["n", 2])],
        {"": 17},
    )
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x.reshape(4, 2, 3).sum(-1))


def test_quantized_weight_round_trip_is_close():
    """Each value within half a step of its group (a step is at most 2 max|w| / (2^bits - 1), a little more
    where MLX makes the larger edge exact)."""
    w = weights(16, 128)
    for bits, tol in ((8, 0.01), (4, 0.15)):
        q = quantize_affine(w, 64, bits)
        assert isinstance(q, QuantizedWeight)
        err = np.abs(dequantize(q) - w).max(axis=1) / (np.abs(w).max(axis=1) + 1e-12)
        assert err.max() < tol


def plain(out_dim: int, in_dim: int) -> np.ndarray:
    """Weights without constant groups (whose biases MLX's quantizer cannot make a multiple of the scale)."""
    return (rng.standard_normal((out_dim, in_dim)) * 0.05).astype(np.float32)


def gated_reference(x, up_gate, b1, down, b2) -> np.ndarray:
    """``down(silu(gate) * up) + b2`` over the dequantized matrices, in float64."""
    u = x.astype(np.float64) @ dequantize(up_gate).astype(np.float64).T + b1
    f = u.shape[1] // 2
    m = u[:, :f] / (1.0 + np.exp(-u[:, f:])) * u[:, f:]
    return m @ dequantize(down).astype(np.float64).T + b2


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("f,group", [(256, 64), (160, 32)])  # 160 / 32: five groups, cut 64 | 96
@pytest.mark.parametrize("rows", [1, 3, 40])
def test_gated_mlp_computes_the_dequantized_block(bits, f, group, rows):
    """Up rows first, then the gate rows: swapping them, a wrong half of the biases or of ``down``'s columns
    fails. The error allowed is that of int8 activations in both products (relative to the output's scale)."""
    d = 128
    up_gate, down = quantize_affine(plain(2 * f, d), 64, bits), quantize_affine(plain(d, f), group, bits)
    b1, b2 = rng.standard_normal(2 * f).astype(np.float32), rng.standard_normal(d).astype(np.float32)
    mlp = ort_kernels.GatedMlp(up_gate, b1, down, b2)
    x = rng.standard_normal((rows, d)).astype(np.float32)
    got, ref = mlp(x), gated_reference(x, up_gate, b1, down, b2)
    assert got.shape == (rows, d) and got.dtype == np.float32
    assert np.abs(got - ref).max() <= (0.03 if bits == 8 else 0.1) * np.abs(ref).max()
    assert mlp.bounds == [0, d, 2 * d] and mlp.bits == bits
    halves = [mlp.run_chunk(i, x) for i in (0, 1)]
    assert np.array_equal(got, halves[0] + halves[1])  # what a twin adds back is the same


def test_gated_mlp_refuses_what_it_cannot_run():
    f, d = 128, 64
    up_gate, down = quantize_affine(plain(2 * f, d), 64, 8), quantize_affine(plain(d, f), 64, 8)
    assert ort_kernels.gated_halves(up_gate, down)
    assert not ort_kernels.gated_halves(quantize_affine(plain(2 * f, d), 64, 4), down)  # mixed widths
    assert not ort_kernels.gated_halves(quantize_affine(plain(d, d), 64, 8), quantize_affine(plain(d, 64), 64, 8))
    off = QuantizedWeight(down.w, down.scales, down.biases + 0.4 * down.scales, 64, 8)  # a float rest
    with pytest.raises(ValueError, match="fused gated MLP"):
        ort_kernels.GatedMlp(up_gate, None, off, None)


def test_the_numpy_backend_fuses_only_mlx_quantized_pairs():
    from engine.backends.numpy_backend import NumpyBackend

    B = NumpyBackend()
    B.twin.failed = True
    f, d = 256, 128
    w1, w2 = plain(2 * f, d), plain(d, f)
    b1, b2 = rng.standard_normal(2 * f).astype(np.float32), rng.standard_normal(d).astype(np.float32)
    x = rng.standard_normal((2, d)).astype(np.float32)
    fl = B.prepare_gated_mlp(B.prepare_linear(w1), b1, B.prepare_linear(w2), b2)
    assert isinstance(fl[0], SplitMlp)  # float32: cut in halves of the middle width (numpy_blocks), not quantized
    exact = Backend_gated_mlp(B, x, w1, b1, w2, b2)  # the uncut float32 block
    assert np.abs(B.gated_mlp(x, *fl) - exact).max() <= 1e-5 * np.abs(exact).max()
    q1, q2 = B.quantize(w1, 64, 8), B.quantize(w2, 64, 8)
    fused = B.prepare_gated_mlp(B.prepare_linear(q1), b1, B.prepare_linear(q2), b2)
    assert isinstance(fused[0], ort_kernels.GatedMlp) and fused[0] is fused[2] and fused[1] is None
    parts = [B.prepare_linear(q1), b1, B.prepare_linear(q2), b2]
    got, unfused = B.gated_mlp(x, *fused), Backend_gated_mlp(B, x, *parts)
    assert np.abs(got - unfused).max() <= 1e-5 * np.abs(unfused).max()  # the same block, summed in two parts
    assert np.abs(got - exact).max() <= 0.03 * np.abs(exact).max()
    off = QuantizedWeight(q2.w, q2.scales, q2.biases + 0.4 * q2.scales, 64, 8)  # another quantizer's biases
    kept = B.prepare_gated_mlp(B.prepare_linear(q1), b1, B.prepare_linear(off), b2)
    assert isinstance(kept[0], ort_kernels.NBitsLinear) and kept[2].with_rest


def Backend_gated_mlp(B, x, *w):
    """The generic op (two products, SiLU and the gate) on this backend's products."""
    from engine.backends.base import Backend

    return Backend.gated_mlp(B, x, *w)


def fusing_backend():
    from engine.backends.numpy_backend import NumpyBackend

    B = NumpyBackend()
    B.twin.failed = True
    return B


def Backend_op(name: str):
    """The generic op on this backend's products and norms (what a fused graph must reproduce)."""
    from engine.backends.base import Backend

    return getattr(Backend, name)


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("rows", [1, 3])
def test_residual_norm_linear_fused_equals_the_separate_ops_bit_for_bit(bits, rows):
    """Output projection, residual, layer norm and the next projection as one graph: the same kernels, so the
    same bits as the products, the add and ``ort_ops``' norm one after another (a wrong input, epsilon or
    order fails)."""
    B = fusing_backend()
    d = 128
    w_res, w_out = (
        B.prepare_linear(quantize_affine(plain(d, 2 * d), 64, bits)),
        B.prepare_linear(quantize_affine(plain(96, d), 64, bits)),
    )
    norm = (1 + rng.standard_normal(d) * 0.1).astype(np.float32)
    fused = B.prepare_residual_norm_linear(w_res, norm, 1e-5, w_out)
    assert isinstance(fused[0], ort_kernels.ResidualNormLinear) and fused[0] is fused[1]
    x, a = rng.standard_normal((rows, d)).astype(np.float32), rng.standard_normal((rows, 2 * d)).astype(np.float32)
    y, out = B.residual_norm_linear(x, a, fused[0], norm, 1e-5, fused[1], "float32")
    y_ref, out_ref = Backend_op("residual_norm_linear")(B, x, a, w_res, norm, 1e-5, w_out, "float32")
    assert y.shape == (rows, d) and out.shape == (rows, 96)
    assert np.array_equal(y, y_ref) and np.array_equal(out, out_ref)


def test_only_single_session_products_without_a_float_rest_are_fused():
    B = fusing_backend()
    d = 128
    norm = np.ones(d, np.float32)
    q = quantize_affine(plain(d, d), 64, 8)
    off = QuantizedWeight(q.w, q.scales, q.biases + 0.4 * q.scales, 64, 8)  # another quantizer's biases
    f32 = B.prepare_linear(plain(d, d))
    for w_res, w_out in ((f32, f32), (B.prepare_linear(q), B.prepare_linear(off)), (B.prepare_linear(q), f32)):
        kept = B.prepare_residual_norm_linear(w_res, norm, 1e-5, w_out)
        assert kept == (w_res, w_out)
    assert B.prepare_norm_linear(norm, 1e-5, f32) is f32  # the float32 reference path stays as it is


@pytest.mark.parametrize("bits", [8, 4])
def test_a_norm_fused_into_a_product_or_a_gated_mlp_gives_the_same_bits(bits):
    B = fusing_backend()
    d, f = 128, 256
    norm = (1 + rng.standard_normal(d) * 0.1).astype(np.float32)
    x = rng.standard_normal((2, d)).astype(np.float32) * 3 + 1
    w = B.prepare_linear(quantize_affine(plain(192, d), 64, bits))
    fused = B.prepare_norm_linear(norm, 1e-5, w)
    assert fused is not w and fused.norm is norm
    ref = Backend_op("norm_linear")(B, x, norm, 1e-5, w, "float32")
    assert np.array_equal(B.norm_linear(x, norm, 1e-5, fused, "float32"), ref)
    with pytest.raises(ValueError, match="norm_linear"):
        B.linear(x, fused)  # a plain product over it would silently norm its input
    with pytest.raises(ValueError, match="another norm"):
        B.norm_linear(x, norm * 2, 1e-5, fused, "float32")
    up_gate, down = quantize_affine(plain(2 * f, d), 64, bits), quantize_affine(plain(d, f), 64, bits)
    b1, b2 = rng.standard_normal(2 * f).astype(np.float32), rng.standard_normal(d).astype(np.float32)
    parts = (B.prepare_linear(up_gate), b1, B.prepare_linear(down), b2)
    with_norm = B.prepare_gated_mlp(*parts, norm, 1e-5)
    without = B.prepare_gated_mlp(*parts)
    assert with_norm[0].norm is norm and without[0].norm is None
    got = B.gated_mlp(x, *with_norm, norm=norm, eps=1e-5)
    assert np.array_equal(got, B.gated_mlp(x, *without, norm=norm, eps=1e-5))  # the norm as a separate op first
    h = B.layer_norm(x, norm, None, 1e-5)
    assert np.array_equal(got, B.gated_mlp(h, *without))
    with pytest.raises(ValueError, match="another norm"):
        B.gated_mlp(x, *with_norm)
