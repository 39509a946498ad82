"""Greedy decoding for Moonshine: to EOS or the token cap, with a self-attention KV cache."""

from __future__ import annotations

import numpy as np

from .model import MoonshineModel


def greedy(model: MoonshineModel, xkv, max_new_tokens: int, mem_valid: np.ndarray | None = None,
           repetition_stop: int = 0) -> list[int]:
    """Greedy ids after the start token, up to and including EOS, at most ``max_new_tokens``.

    Equals the reference ``generate(max_new_tokens=N, do_sample=False)`` ids after the start token.
    ``repetition_stop=n`` (> 0) stops early when the last ``n``-gram has just been emitted 3 times in a row
    (a guard for live use; 0 keeps exact reference behaviour).
    """
    c = model.cfg
    if max_new_tokens <= 0:
        return []
    cache = model.new_self_cache(max_new_tokens + 1)
    logits = model.decode([c.decoder_start_token_id], 0, cache, xkv, mem_valid)
    out: list[int] = []
    for i in range(max_new_tokens):
        t = int(np.argmax(logits))
        out.append(t)
        if t == c.eos_token_id or (repetition_stop and _repeats(out, repetition_stop)):
            break
        if i + 1 < max_new_tokens:
            logits = model.decode([t], i + 1, cache, xkv, mem_valid)
    return out


def _repeats(ids: list[int], n: int) -> bool:
    """True when ``ids`` ends with some k-gram (k <= n) repeated three times in a row."""
    for k in range(1, n + 1):
        if len(ids) >= 3 * k and ids[-k:] == ids[-2 * k : -k] == ids[-3 * k : -2 * k]:
            return True
    return False
