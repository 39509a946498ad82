"""Voxtral Mini 4B Realtime: config, checkpoints, mel, tokenizer, model and streaming session."""

from __future__ import annotations

from pathlib import Path

from ...backends import Backend
from ...errors import ModelError
from ...weights import open_checkpoint
from ..checks import check_layers_used
from .checkpoint import names
from .config import VoxtralConfig
from .model import VoxtralModel
from .tekken import Tekken

__all__ = ["VoxtralConfig", "VoxtralModel", "load"]


def load(
    folder: Path, config: dict, dialect: str, backend: Backend, dtype: str | None = None, quantize: int | None = None
) -> VoxtralModel:
    """A Voxtral model from a folder in the ``hf``, ``mistral`` or ``mlx`` layout; ``quantize`` (MLX: 4/6/8, NumPy: 4/8)
    converts the large matmuls to 4/6/8 bits (cached for the next start)."""
    if dialect == "mistral":
        cfg = VoxtralConfig.from_params(config)
        store = open_checkpoint(folder, "consolidated")
    elif dialect == "hf":
        cfg = VoxtralConfig.from_hf(config)
        store = open_checkpoint(folder, "model")
    else:
        from .mlx_layout import config_from_mlx

        cfg = config_from_mlx(config)
        store = open_checkpoint(folder, "model")
    tok = Tekken(folder / "tekken.json", cfg.decoder.vocab_size)
    table = names(dialect, cfg.encoder.n_layers, cfg.decoder.n_layers)
    backend.check_fits(store, "Voxtral")
    try:
        model = VoxtralModel(
            cfg,
            store,
            table,
            backend,
            dtype,
            interleaved=dialect != "hf",
            tokenizer=tok,
            source=str(folder),
            conv_nlc=dialect == "mlx",
        )
    except (ValueError, TypeError) as e:
        raise ModelError(f"The Voxtral checkpoint in {folder} does not fit its configuration ({e}).") from e
    check_layers_used(store, str(folder))
    if quantize:
        from .quantize import quantize_model

        model.cache_hit = quantize_model(model, quantize, store.files())
    return model
