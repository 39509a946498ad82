"""Build a model from a local folder: detect its family and on-disk dialect from the files, check the
options against the backend, construct the family's model. No downloads here (``engine.loader`` resolves hub
ids first), so the hub can validate a downloaded folder with it.
"""

from __future__ import annotations

import json
from pathlib import Path

from .backends import Backend, get_backend
from .errors import ModelError, UsageError

DTYPES = ("float32", "float16", "bfloat16")


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


def check_options(backend: str, dtype: str | None, quantize: int | None) -> Backend:
    """The backend called ``backend``, once ``dtype`` and ``quantize`` are known to suit it (UsageError)."""
    if dtype is not None and dtype not in DTYPES:
        raise UsageError(f"Unknown dtype '{dtype}'; choose one of {', '.join(DTYPES)}.")
    if quantize is not None and quantize not in (4, 6, 8):
        raise UsageError("--quantize takes 4, 6 or 8 bits.")
    B = get_backend(backend)
    if B.name == "numpy" and dtype not in (None, "float32"):
        raise UsageError(f"The NumPy backend computes in float32 only; use --backend mlx for {dtype}.")
    if B.name == "numpy" and quantize is not None:
        raise UsageError("Quantization runs on the MLX backend only.")
    return B


def build_model(folder: Path, B: Backend, dtype: str | None = None, quantize: int | None = None, **options):
    """The model in the local ``folder`` on backend ``B`` (options as for ``engine.load_model``)."""
    family, dialect, cfg = detect(folder)
    if family == "moonshine_streaming":
        if quantize is not None:
            raise UsageError("Quantization is not supported for Moonshine models (they are small).")
        from .models import moonshine

        return moonshine.load(folder, cfg, B, dtype, **options)
    from .models import voxtral

    return voxtral.load(folder, cfg, dialect, B, dtype, quantize=quantize, **options)
