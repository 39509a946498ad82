"""Quantized products on the CPU: the NumPy affine quantizer against MLX's, the ONNX Runtime kernels against
the dequantized float64 product, and the ONNX protobuf writer they are built with."""

from __future__ import annotations

import numpy as np
import pytest

from engine.backends import onnx_proto as P
from engine.backends import ort_kernels
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
