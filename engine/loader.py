"""``load_model``: find the files (a local folder, or a hub repo id fetched first), then build the model on a
backend (``engine.build``)."""

from __future__ import annotations

import os
from pathlib import Path

from .build import build_model, check_options
from .errors import ModelError


def resolve_source(source: str | os.PathLike) -> Path:
    """A local folder for ``source``: the folder itself, or a hub repo id fetched into the HF cache."""
    p = Path(source).expanduser()
    if p.is_dir():
        return p
    if p.exists():
        raise ModelError(f"The model source {source} is a file; give the folder that holds the model.")
    s = str(source)
    if s.count("/") == 1 and not s.startswith((".", "/", "~")):
        from .hub import fetch_model

        return fetch_model(s)
    raise ModelError(f"The model folder {source} does not exist.")


def load_model(source: str | os.PathLike, *, backend: str = "auto", dtype: str | None = None,
               quantize: int | None = None, **options):
    """Load a model from a local folder or a hub repo id, ready for ``start_session``.

    ``backend``: auto | numpy | mlx. ``dtype``: float32 | float16 | bfloat16 (MLX; NumPy is float32 only).
    ``quantize``: 4 | 6 | 8 (MLX only). Raises ModelError / UsageError with one sentence.
    """
    B = check_options(backend, dtype, quantize)
    return build_model(resolve_source(source), B, dtype, quantize, **options)
