"""The few ONNX protobuf messages the CPU kernels need (a model of one small graph), written as bytes.

ONNX Runtime takes a model as serialized ``ModelProto`` bytes. The ``onnx`` package builds those, but it is a
second ~20 MB runtime dependency (with ``ml_dtypes``) for graphs of at most five nodes, so the protobuf wire
format of the messages used here is written directly: varint and length-delimited fields with the field
numbers of onnx/onnx.proto (IR version 8). Only what the CPU kernels use is covered: nodes with int or float
attributes, initializers as raw little-endian bytes, float32 graph inputs and outputs with symbolic or fixed
dimensions.
"""

from __future__ import annotations

import struct

import numpy as np

IR_VERSION = 8
FLOAT, UINT8, INT64 = 1, 2, 7  # TensorProto.DataType
_DTYPES = {np.dtype(np.float32): FLOAT, np.dtype(np.uint8): UINT8, np.dtype(np.int64): INT64}


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1  # negative int64 values: two's complement, ten bytes
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _int(field: int, n: int) -> bytes:
    return _varint(field << 3) + _varint(n)


def _bytes(field: int, data: bytes | str) -> bytes:
    if isinstance(data, str):
        data = data.encode()
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def tensor(name: str, a: np.ndarray) -> bytes:
    """A ``TensorProto`` initializer holding ``a`` (float32, uint8 or int64)."""
    a = np.ascontiguousarray(a)
    body = b"".join(_int(1, d) for d in a.shape) + _int(2, _DTYPES[a.dtype]) + _bytes(8, name)
    return body + _bytes(9, a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())


def value_info(name: str, dims: list[int | str], elem_type: int = FLOAT) -> bytes:
    """A ``ValueInfoProto``: a tensor of ``elem_type`` with fixed (int) or symbolic (str) dimensions."""
    shape = b"".join(_bytes(1, _int(1, d) if isinstance(d, int) else _bytes(2, d)) for d in dims)
    tensor_type = _int(1, elem_type) + _bytes(2, shape)
    return _bytes(1, name) + _bytes(2, _bytes(1, tensor_type))


def node(op: str, inputs: list[str], outputs: list[str], domain: str = "", **attrs: int | float) -> bytes:
    """A ``NodeProto`` with integer or float attributes."""
    body = b"".join(_bytes(1, i) for i in inputs) + b"".join(_bytes(2, o) for o in outputs)
    body += _bytes(3, f"{op}_{outputs[0]}") + _bytes(4, op)
    for k, v in attrs.items():
        if isinstance(v, float):  # AttributeProto: name, f (32-bit wire type), type FLOAT
            body += _bytes(5, _bytes(1, k) + _varint(2 << 3 | 5) + struct.pack("<f", v) + _int(20, 1))
        else:  # name, i, type INT
            body += _bytes(5, _bytes(1, k) + _int(3, v) + _int(20, 2))
    return body + (_bytes(7, domain) if domain else b"")


def model(
    nodes: list[bytes], initializers: list[bytes], inputs: list[bytes], outputs: list[bytes], opsets: dict[str, int]
) -> bytes:
    """A serialized ``ModelProto`` of one graph; ``opsets`` maps domain ("" = default) to version."""
    graph = b"".join(_bytes(1, n) for n in nodes) + _bytes(2, "g")
    graph += b"".join(_bytes(5, t) for t in initializers)
    graph += b"".join(_bytes(11, v) for v in inputs) + b"".join(_bytes(12, v) for v in outputs)
    out = _int(1, IR_VERSION) + _bytes(2, "livecap") + _bytes(7, graph)
    for domain, version in opsets.items():
        out += _bytes(8, (_bytes(1, domain) if domain else b"") + _int(2, version))
    return out
