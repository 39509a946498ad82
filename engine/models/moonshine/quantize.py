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
    """Quantize ``model``'s matrices in place; True when a cached copy was used. The decoder's blocks then take
    the backend's fused forms where it has them: each layer norm with the product after it, the self-attention's
    output projection with the cross-attention query (``Backend.prepare_norm_linear``,
    ``prepare_residual_norm_linear``, ``prepare_gated_mlp``)."""
    hit = quantize_targets(model.B, targets(model), bits, weights_file, tag="moonshine")
    B = model.B
    for layer in model.dec_layers:
        layer.qkv = B.prepare_norm_linear(layer.ln_in, 1e-5, layer.qkv)
        layer.o, layer.xq = B.prepare_residual_norm_linear(layer.o, layer.ln_post, 1e-5, layer.xq)
        layer.fc1, layer.fc1_b, layer.fc2, layer.fc2_b = B.prepare_gated_mlp(
            layer.fc1, layer.fc1_b, layer.fc2, layer.fc2_b, layer.ln_final, 1e-5
        )
    return hit
