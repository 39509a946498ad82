"""``load_model``: find the files, detect the family and dialect, build the model on a backend."""

from __future__ import annotations

import os
from pathlib import Path

from .backends import get_backend
from .errors import ModelError, UsageError
from .formats import detect
from .install import check_files, fetch_model

DTYPES = ("float32", "float16", "bfloat16")
FULL_LOAD_LIMIT = 2_000_000_000  # check_folder(full=True) loads weights up to this size with NumPy


def resolve_source(source: str | os.PathLike) -> Path:
    """A local folder for ``source``: the folder itself, or a hub repo id fetched into the HF cache."""
    p = Path(source).expanduser()
    if p.is_dir():
        return p
    if p.exists():
        raise ModelError(f"The model source {source} is a file; give the folder that holds the model.")
    s = str(source)
    if s.count("/") == 1 and not s.startswith((".", "/", "~")):
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
            load_model(str(folder), backend="numpy")
    return family, dialect


def load_model(source: str | os.PathLike, *, backend: str = "auto", dtype: str | None = None,
               quantize: int | None = None, **options):
    """Load a model from a local folder or a hub repo id, ready for ``start_session``.

    ``backend``: auto | numpy | mlx. ``dtype``: float32 | float16 | bfloat16 (MLX; NumPy is float32 only).
    ``quantize``: 4 | 6 | 8 (MLX only). Raises ModelError / UsageError with one sentence.
    """
    if dtype is not None and dtype not in DTYPES:
        raise UsageError(f"Unknown dtype '{dtype}'; choose one of {', '.join(DTYPES)}.")
    if quantize is not None and quantize not in (4, 6, 8):
        raise UsageError("--quantize takes 4, 6 or 8 bits.")
    B = get_backend(backend)
    if B.name == "numpy" and dtype not in (None, "float32"):
        raise UsageError(f"The NumPy backend computes in float32 only; use --backend mlx for {dtype}.")
    if B.name == "numpy" and quantize is not None:
        raise UsageError("Quantization runs on the MLX backend only.")
    folder = resolve_source(source)
    family, dialect, cfg = detect(folder)
    if family == "moonshine_streaming":
        if quantize is not None:
            raise UsageError("Quantization is not supported for Moonshine models (they are small).")
        from .models import moonshine

        return moonshine.load(folder, cfg, B, dtype, **options)
    from .models import voxtral

    return voxtral.load(folder, cfg, dialect, B, dtype, quantize=quantize, **options)
