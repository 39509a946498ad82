"""Which model a folder holds, from its files alone: ``detect`` reads ``config.json`` or ``params.json``.

Imports nothing of the engine but its errors, so the installer (``engine.install``) and the loader can both use
it without importing each other.
"""

from __future__ import annotations

import json
from pathlib import Path

from .errors import ModelError

# The files that say "this folder is a model": an installer fetches them last, so a folder whose download
# stopped half-way never looks like a model.
MARKER_FILES = ("config.json", "params.json")


def detect(folder: Path) -> tuple[str, str, dict]:
    """``(family, dialect, config)`` from the files in ``folder``; ModelError when no model is there."""
    folder = Path(folder)
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
        raise ModelError(
            f"Unsupported model type '{mt}' in {cfg_path}; livecap runs Moonshine Streaming and Voxtral Realtime."
        )
    if params_path.is_file():
        try:
            params = json.loads(params_path.read_text())
        except (OSError, ValueError) as e:
            raise ModelError(f"The params.json in {folder} is unreadable.") from e
        return "voxtral_realtime", "mistral", params
    raise ModelError(f"No model found in {folder} (no config.json or params.json).")
