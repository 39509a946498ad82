"""Which Voxtral matrices ``--quantize`` converts (``engine.models.quantize`` does it, and caches it): every
large matmul (encoder and decoder projections, the projector and the tied embedding/head); norms, convs and
the ada MLP stay in float."""

from __future__ import annotations

from ..quantize import Weights, quantize_targets

_MATS = ("wq", "wk", "wv", "wo", "w1", "w2", "w3")


def _targets(model):
    """(canonical name, owner object, attribute) of every matrix that gets quantized."""
    out = [("proj1", model, "proj1"), ("proj2", model, "proj2"), ("tok", model, "tok_emb")]
    for i, L in enumerate(model.enc):
        out += [(f"enc.{i}.{a}", L, a) for a in _MATS]
    for i, L in enumerate(model.dec):
        out += [(f"dec.{i}.{a}", L, a) for a in _MATS]
    return out


def quantize_model(model, bits: int, weights_file: Weights | None = None) -> bool:
    """Quantize ``model``'s matrices in place; returns True when a cached copy was used. ``weights_file``: the
    checkpoint's file or all its shards (the cache's key)."""
    return quantize_targets(model.B, _targets(model), bits, weights_file, tag="voxtral")
