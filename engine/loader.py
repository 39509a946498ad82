"""``load_model``: find the files, detect the family and dialect, build the model on a backend."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .backends import get_backend
from .errors import ModelError, UsageError

DTYPES = ("float32", "float16", "bfloat16")


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


def detect(folder: Path) -> tuple[str, str, dict]:
    """``(family, dialect, config)`` from the files in ``folder``; ModelError when no model is there."""
    cfg_path, params_path = folder / "config.json", folder / "params.json"
    if cfg_path.is_file():
        try:
            cfg = json.loads(cfg_path.read_text())
        except (OSError, ValueError) as e:
            raise ModelError(f"The config.json in {folder} is unreadable.") from e
        if not isinstance(cfg, dict):
            raise ModelError(f"The config.json in {folder} is not a JSON object.")
        mt = cfg.get("model_type")
        if mt == "moonshine_streaming":
            return "moonshine_streaming", "hf", cfg
        if mt == "voxtral_realtime":
            return "voxtral_realtime", "mlx" if "quantization" in cfg else "hf", cfg
        raise ModelError(f"Unsupported model type '{mt}' in {cfg_path}; livecap runs Moonshine Streaming "
                         "and Voxtral Realtime.")
    if params_path.is_file():
        try:
            params = json.loads(params_path.read_text())
        except (OSError, ValueError) as e:
            raise ModelError(f"The params.json in {folder} is unreadable.") from e
        return "voxtral_realtime", "mistral", params
    raise ModelError(f"No model found in {folder} (no config.json or params.json).")


def load_model(source: str | os.PathLike, *, backend: str = "auto", dtype: str | None = None,
               quantize: int | None = None, **options):
    """Load a model from a local folder or a hub repo id, ready for ``start_session``.

    ``backend``: auto | numpy | mlx. ``dtype``: float32 | float16 | bfloat16 (MLX; NumPy is float32 only).
    ``quantize``: 4 | 6 | 8 on MLX, 4 | 8 on NumPy (with ONNX Runtime's kernels). Raises ModelError /
    UsageError with one sentence.
    """
    if dtype is not None and dtype not in DTYPES:
        raise UsageError(f"Unknown dtype '{dtype}'; choose one of {', '.join(DTYPES)}.")
    if quantize is not None and quantize not in (4, 6, 8):
        raise UsageError("--quantize takes 4, 6 or 8 bits.")
    B = get_backend(backend)
    if B.name == "numpy" and dtype not in (None, "float32"):
        raise UsageError(f"The NumPy backend computes in float32 only; use --backend mlx for {dtype}.")
    if B.name == "numpy" and quantize is not None and (quantize not in (4, 8) or not getattr(B, "kernels", False)):
        raise UsageError("The NumPy backend quantizes to 8 or 4 bits, with onnxruntime installed."
                         if quantize == 6 or getattr(B, "kernels", False) else
                         "Quantizing on the NumPy backend needs onnxruntime (pip install onnxruntime).")
    folder = resolve_source(source)
    family, dialect, cfg = detect(folder)
    if family == "moonshine_streaming":
        from .models import moonshine

        return moonshine.load(folder, cfg, B, dtype, quantize=quantize, **options)
    from .models import voxtral

    return voxtral.load(folder, cfg, dialect, B, dtype, quantize=quantize, **options)
