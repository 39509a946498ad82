"""``load_model``: find the files (a local folder, or a hub repo id installed first by ``engine.install``), then
build the model on a backend (``engine.build``). ``check_folder`` is the loader's verdict on a folder."""

from __future__ import annotations

import os
from pathlib import Path

from .build import build_model, check_options
from .errors import ModelError
from .install import check_files, fetch_model

FULL_LOAD_LIMIT = 2_000_000_000  # check_folder(full=True) loads weights up to this size with NumPy


def resolve_source(source: str | os.PathLike) -> Path:
    """A local folder for ``source``: the folder itself, or a hub repo id fetched into the HF cache (``owner/name``
    where no folder ``owner`` is here: ``models/voxtral`` beside a folder ``models`` is a mistyped path)."""
    p = Path(source).expanduser()
    if p.is_dir():
        return p
    if p.exists():
        raise ModelError(f"The model source {source} is a file; give the folder that holds the model.")
    s = str(source)
    if s.count("/") == 1 and not s.startswith((".", "/", "~")) and not p.parent.is_dir():
        return fetch_model(s)
    raise ModelError(f"The model folder {source} does not exist.")


def check_folder(folder: str | os.PathLike, *, full: bool = False) -> tuple[str, str]:
    """``(family, dialect)`` when the loader accepts ``folder``; else ModelError with the loader's sentence.

    Checks the files (``engine.install.check_files``: config, weight headers against file sizes, tokenizer);
    ``full=True`` also builds the model with the NumPy backend when its weights are at most ``FULL_LOAD_LIMIT``
    bytes (bigger ones would need many GB of memory in float32; for them the file check is the validation).
    """
    family, dialect = check_files(folder)
    if full:
        size = sum(p.stat().st_size for p in Path(folder).glob("*.safetensors"))
        if size <= FULL_LOAD_LIMIT:
            build_model(Path(folder), check_options("numpy", None, None))
    return family, dialect


def load_model(
    source: str | os.PathLike,
    *,
    backend: str = "auto",
    dtype: str | None = None,
    quantize: int | None = None,
    **options,
):
    """Load a model from a local folder or a hub repo id, ready for ``start_session``.

    ``backend``: auto | numpy | mlx. ``dtype``: float32 | float16 | bfloat16 (MLX; NumPy is float32 only).
    ``quantize``: 4 | 6 | 8 on MLX, 4 | 8 on NumPy (with ONNX Runtime's kernels): the float matrices become
    that many bits; a checkpoint's matrices stored quantized already stay as they are. Raises ModelError /
    UsageError with one sentence.
    """
    B = check_options(backend, dtype, quantize)
    return build_model(resolve_source(source), B, dtype, quantize, **options)
