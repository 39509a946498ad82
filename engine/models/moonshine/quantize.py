"""Which Moonshine matrices ``--quantize`` converts: every projection of the encoder and decoder layers, the
adapter and the output head (the frontend, the convolutions, the norms, the positional and token embeddings
stay float32: they are small, or read one row at a time)."""

from __future__ import annotations

import contextlib

from ..quantize import GROUPS, Weights, cache_path, discard, quantize_targets

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


def half_head_groups(model) -> dict[str, tuple[int, ...]]:
    """Group sizes for the decoder's attention output projections (``o``, ``xo``) where half of their heads is no
    whole number of groups of the default size, but of a smaller one: the backend can then cut those blocks by
    heads (``ort_blocks.QuantSplitAttention``: tiny's half is 4 x 40 = 160 columns, 5 groups of 32, measured ~10 %
    faster per 8-bit step than its op-by-op path). Empty where the default already fits (small, medium)."""
    cfg = model.cfg
    half = cfg.num_attention_heads // 2 * cfg.head_dim
    if cfg.num_attention_heads % 2 or half % GROUPS[0] == 0:
        return {}
    fits = tuple(g for g in GROUPS if half % g == 0)
    if not fits:
        return {}
    return {f"dec.{i}.{a}": fits for i in range(len(model.dec_layers)) for a in ("o", "xo")}


def quantize_model(model, bits: int, weights_file: Weights | None = None) -> bool:
    """Quantize ``model``'s matrices in place (before ``MoonshineModel.prepare_blocks``); True when a cached
    copy was used. ``weights_file``: the checkpoint's file or all its shards (the cache's key)."""
    groups = half_head_groups(model)
    tag = "moonshine" if not groups else f"moonshine|half-heads-{next(iter(groups.values()))[0]}"
    hit = quantize_targets(model.B, targets(model), bits, weights_file, tag=tag, groups=groups)
    if not hit and groups and weights_file is not None:
        with contextlib.suppress(OSError):  # the copy in groups of 64 it replaces
            discard(cache_path(weights_file, bits, "moonshine", backend=model.B.name))
    return hit
