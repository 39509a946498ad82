"""Safetensors checkpoints: memory-mapped, validated, sharded through ``*.safetensors.index.json``.

``open_checkpoint(folder, stem)`` returns a ``TensorStore``: name -> tensor metadata, with ``numpy(name)``
giving a read-only memory-mapped view (bfloat16 is widened to float32, since NumPy has no bfloat16) and
``raw(name)`` giving the stored bits (bfloat16 as uint16) for backends that keep the file dtype.
Every problem a user can meet (missing, truncated or corrupt file; missing tensor; wrong shape; NaN or
infinite values in a floating-point tensor) raises ``ModelError`` with one sentence.

Non-finite weights are looked for when a tensor is first handed out (``raw``, and so ``numpy``), over the
stored bits in blocks of 1M values: every tensor the model loads is checked exactly once, and nothing it
does not load is read. The check reads each weight once at load time (about 20 GB/s from memory); with
the NumPy backend's memory-mapped float32 weights that read is also what brings them in from disk, so a
model is not read from disk twice for it.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import ModelError

_DTYPES = {
    "F32": np.float32,
    "F16": np.float16,
    "BF16": np.uint16,
    "F64": np.float64,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "U32": np.uint32,
    "BOOL": np.bool_,
}
_NAMES = {
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "F64": "float64",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U8": "uint8",
    "U32": "uint32",
    "BOOL": "bool",
}
_MAX_HEADER = 100 * 1024 * 1024
_CHECK_BLOCK = 1 << 20


@dataclass(frozen=True)
class TensorInfo:
    """Where one tensor lives: file, dtype name (``float32``, ``bfloat16``, ...), shape, byte offset."""

    path: Path
    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int


def read_header(path: Path) -> dict[str, TensorInfo]:
    """Parse and validate one safetensors file's header against the file size."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ModelError(f"The weight file {path.name} is empty or truncated.")
            (n,) = struct.unpack("<Q", head)
            if n > _MAX_HEADER or 8 + n > size:
                raise ModelError(f"The weight file {path.name} is not a valid safetensors file (bad header).")
            header = json.loads(f.read(n))
    except OSError as e:
        raise ModelError(f"Cannot read the weight file {path}: {e.strerror or e}.") from e
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelError(f"The weight file {path.name} is corrupt (unreadable header).") from e
    if not isinstance(header, dict):
        raise ModelError(f"The weight file {path.name} is corrupt (unreadable header).")
    base = 8 + n
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        try:
            code, shape, (start, end) = meta["dtype"], tuple(int(s) for s in meta["shape"]), meta["data_offsets"]
            itemsize = np.dtype(_DTYPES[code]).itemsize
        except (KeyError, TypeError, ValueError) as e:
            raise ModelError(f"The weight file {path.name} has an unsupported or corrupt entry '{name}'.") from e
        nbytes = int(np.prod(shape, dtype=np.int64)) * itemsize
        if end - start != nbytes or start < 0:
            raise ModelError(f"The weight file {path.name} is corrupt (tensor '{name}' has a wrong size).")
        if base + end > size:
            raise ModelError(f"The weight file {path.name} is truncated (it ends before tensor '{name}').")
        out[name] = TensorInfo(path, _NAMES[code], shape, base + start, nbytes)
    return out


class TensorStore:
    """Read-only mapping of tensor names to memory-mapped arrays over one or more safetensors files."""

    def __init__(self, infos: dict[str, TensorInfo], where: str):
        self.infos = infos
        self.where = where
        self._maps: dict[Path, np.memmap] = {}
        self._checked: set[str] = set()

    def __contains__(self, name: str) -> bool:
        return name in self.infos

    def keys(self) -> Iterable[str]:
        return self.infos.keys()

    def read(self) -> set[str]:
        """The names of the tensors read so far."""
        return set(self._checked)

    def files(self) -> list[Path]:
        """The safetensors files the tensors come from (every shard), in path order."""
        return sorted({info.path for info in self.infos.values()})

    def info(self, name: str, shape: tuple[int, ...] | None = None) -> TensorInfo:
        """Metadata of ``name``; checks the shape when given (ModelError on a mismatch or a missing tensor)."""
        if name not in self.infos:
            raise ModelError(f"The checkpoint in {self.where} is missing the tensor '{name}'.")
        info = self.infos[name]
        if shape is not None and tuple(shape) != info.shape:
            raise ModelError(
                f"The tensor '{name}' in {self.where} has shape {list(info.shape)}, expected {list(shape)}."
            )
        return info

    def raw(self, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
        """The stored array, memory-mapped (bfloat16 as its uint16 bit pattern)."""
        info = self.info(name, shape)
        mm = self._maps.get(info.path)
        if mm is None:
            mm = self._maps[info.path] = np.memmap(info.path, dtype=np.uint8, mode="r")
        code = next(k for k, v in _NAMES.items() if v == info.dtype)
        buf = mm[info.offset : info.offset + info.nbytes]
        a = buf.view(_DTYPES[code]).reshape(info.shape)
        if name not in self._checked:
            if not _all_finite(a, info.dtype):
                raise ModelError(
                    f"The weight file {info.path.name} is corrupt: tensor '{name}' holds NaN or infinite values."
                )
            self._checked.add(name)
        return a

    def numpy(self, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
        """The tensor as a NumPy array; bfloat16 widened to float32, other dtypes as stored."""
        a = self.raw(name, shape)
        if self.infos[name].dtype == "bfloat16":
            return (a.astype(np.uint32) << 16).view(np.float32)
        return a


def _all_finite(a: np.ndarray, dtype: str) -> bool:
    """Whether a stored tensor has no NaN/inf (bfloat16 given as its uint16 bits; integer tensors: True)."""
    if dtype not in ("float32", "float16", "float64", "bfloat16"):
        return True
    flat = a.reshape(-1)
    for i in range(0, flat.size, _CHECK_BLOCK):
        block = flat[i : i + _CHECK_BLOCK]
        if dtype == "bfloat16":
            if np.any((block & 0x7F80) == 0x7F80):  # exponent all ones: inf or NaN
                return False
        elif not np.isfinite(block).all():
            return False
    return True


def open_checkpoint(folder: Path, stem: str = "model") -> TensorStore:
    """All tensors of ``folder/{stem}.safetensors`` or of the shards listed in its index file."""
    folder = Path(folder)
    single = folder / f"{stem}.safetensors"
    index = folder / f"{stem}.safetensors.index.json"
    if single.is_file():
        return TensorStore(read_header(single), folder.name)
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ModelError(f"The shard index {index.name} in {folder} is unreadable.") from e
        infos: dict[str, TensorInfo] = {}
        for shard in sorted(set(weight_map.values())):
            path = folder / shard
            if not path.is_file():
                raise ModelError(f"The checkpoint shard {shard} listed in {index.name} is missing.")
            infos.update(read_header(path))
        missing = [k for k in weight_map if k not in infos]
        if missing:
            raise ModelError(f"The checkpoint in {folder} is missing the tensor '{missing[0]}'.")
        return TensorStore(infos, folder.name)
    raise ModelError(f"No {stem}.safetensors weights found in {folder}.")
