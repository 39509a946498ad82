"""Which Moonshine matrices ``--quantize`` converts: every projection of the encoder and decoder layers, the
adapter and the output head (the frontend, the convolutions, the norms, the positional and token embeddings
stay float32: they are small, or read one row at a time)."""

from __future__ import annotations

from pathlib import Path

from ..quantize import quantize_targets

_ENC = ("qkv", "o", "fc1", "fc2")
_DEC = ("qkv", "o", "xq", "xkv", "xo", "fc1", "fc2")


def targets(model) -> list[tuple[str, object, str]]:
    """(canonical name, owner object, attribute) of every matrix that gets quantized."""
    out = [("proj_out", model, "proj_out")]
    if model.adapter is not None:
        out.append(("adapter", model, "adapter"))
    for i, layer in enumerate(model.enc_layers):
        out += [(f"enc.{i}.{a}", layer, a) for a in _ENC]
    for i, layer in enumerate(model.dec_layers):
        out += [(f"dec.{i}.{a}", layer, a) for a in _DEC]
    return out


def quantize_model(model, bits: int, weights_file: Path | None = None) -> bool:
    """Quantize ``model``'s matrices in place (before ``MoonshineModel.prepare_blocks``); True when a cached
    copy was used."""
    return quantize_targets(model.B, targets(model), bits, weights_file, tag="moonshine")
