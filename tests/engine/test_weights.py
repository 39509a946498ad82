"""Safetensors reading: dtypes, sharding, and the errors a user can meet."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from safetensors.numpy import save_file

from engine.backends import get_backend
from engine.errors import ModelError
from engine.weights import open_checkpoint


def write_bf16(path, tensors: dict[str, np.ndarray]):
    """A safetensors file with BF16 tensors (round-to-nearest-even from float32), written by hand."""
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        u = a.astype(np.float32).view(np.uint32)
        bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")
        blob = bits.tobytes()
        header[name] = {"dtype": "BF16", "shape": list(a.shape), "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    h = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def test_float32_and_float16_on_both_backends(tmp_path):
    a = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    save_file({"w": a, "h": a.astype(np.float16)}, str(tmp_path / "model.safetensors"))
    st = open_checkpoint(tmp_path)
    np.testing.assert_array_equal(st.numpy("w", (3, 4)), a)
    for name in ("numpy", "mlx"):
        B = get_backend(name)
        np.testing.assert_array_equal(B.to_numpy(B.load(st, "w")), a)
        np.testing.assert_allclose(B.to_numpy(B.load(st, "h")), a.astype(np.float16).astype(np.float32))
    import mlx.core as mx

    mlx = get_backend("mlx")
    assert mlx.load(st, "h").dtype == mx.float16  # MLX keeps the file dtype
    assert mlx.load(st, "h", dtype="float32").dtype == mx.float32
    assert get_backend("numpy").load(st, "h").dtype == np.float32  # NumPy computes in float32


def test_bfloat16_is_widened_exactly(tmp_path):
    a = np.array([[1.0, -2.5, 3.140625, 1e-3]], dtype=np.float32)
    write_bf16(tmp_path / "model.safetensors", {"w": a})
    st = open_checkpoint(tmp_path)
    # 1e-3 is 0x3A83126F in float32; bfloat16 keeps the top half 0x3A83 -> 0x3A830000.
    want = np.array([[1.0, -2.5, 3.140625, np.uint32(0x3A830000).view(np.float32)]], dtype=np.float32)
    np.testing.assert_array_equal(st.numpy("w"), want)
    import mlx.core as mx

    mlx = get_backend("mlx")
    x = mlx.load(st, "w")
    assert x.dtype == mx.bfloat16
    np.testing.assert_array_equal(mlx.to_numpy(x), want)


def test_sharded_checkpoint(tmp_path):
    save_file({"a": np.ones((2,), np.float32)}, str(tmp_path / "model-00001-of-00002.safetensors"))
    save_file({"b": np.zeros((3,), np.float32)}, str(tmp_path / "model-00002-of-00002.safetensors"))
    idx = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(idx))
    st = open_checkpoint(tmp_path)
    assert st.numpy("a").tolist() == [1, 1] and st.numpy("b").shape == (3,)
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(ModelError, match="shard .* is missing"):
        open_checkpoint(tmp_path)


def test_truncated_corrupt_missing_and_wrong_shape(tmp_path):
    f = tmp_path / "model.safetensors"
    save_file({"w": np.ones((64, 64), np.float32)}, str(f))
    st = open_checkpoint(tmp_path)
    with pytest.raises(ModelError, match="missing the tensor 'nope'"):
        st.numpy("nope")
    with pytest.raises(ModelError, match=r"shape \[64, 64\], expected \[64, 32\]"):
        st.numpy("w", (64, 32))
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match="truncated"):
        open_checkpoint(tmp_path)
    f.write_bytes(b"\x05\x00")
    with pytest.raises(ModelError, match="empty or truncated"):
        open_checkpoint(tmp_path)
    f.write_bytes(struct.pack("<Q", 10) + b"not json!!" + b"\0" * 10)
    with pytest.raises(ModelError, match="corrupt"):
        open_checkpoint(tmp_path)
    f.write_bytes(b"hello world, this is a text file and not a model at all" * 3)
    with pytest.raises(ModelError):
        open_checkpoint(tmp_path)
    f.unlink()
    with pytest.raises(ModelError, match="No model.safetensors"):
        open_checkpoint(tmp_path)
