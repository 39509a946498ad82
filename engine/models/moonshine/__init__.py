"""Moonshine Streaming: config, model, decoding and sessions."""

from __future__ import annotations

import json
from pathlib import Path

from ...backends import Backend
from ...errors import ModelError
from ...weights import open_checkpoint
from ..checks import check_layers_used
from .config import MoonshineConfig
from .model import MoonshineModel
from .tokenizer import MoonshineTokenizer

__all__ = ["MoonshineConfig", "MoonshineModel", "load"]


def load(
    folder: Path,
    config: dict,
    backend: Backend,
    dtype: str | None = None,
    window_semantics: str = "hf",
    quantize: int | None = None,
) -> MoonshineModel:
    """A Moonshine model from an HF folder (config.json, model.safetensors, tokenizer.json); ``quantize``
    converts its projections to 8 or 4 bits (cached for the next start, ``quantize.py``)."""
    cfg = MoonshineConfig.from_dict(config)
    gen = folder / "generation_config.json"
    if gen.is_file():
        try:
            g = json.loads(gen.read_text())
        except ValueError:
            g = {}
        for key in ("eos_token_id", "decoder_start_token_id", "bos_token_id"):
            if isinstance(g.get(key), int) and 0 <= g[key] < cfg.vocab_size:
                setattr(cfg, key, g[key])
    tokenizer = MoonshineTokenizer(folder / "tokenizer.json")
    store = open_checkpoint(folder)
    if window_semantics not in ("hf", "inclusive"):
        raise ModelError(f"Unknown window semantics '{window_semantics}'.")
    try:
        model = MoonshineModel(cfg, store, backend, dtype, window_semantics, tokenizer, str(folder))
    except (ValueError, TypeError) as e:
        raise ModelError(f"The Moonshine checkpoint in {folder} does not fit its config.json ({e}).") from e
    check_layers_used(store, str(folder))
    if quantize:
        from .quantize import quantize_model

        model.cache_hit = quantize_model(model, quantize, store.files())
    model.prepare_blocks()
    return model
