"""Greedy decoding for Moonshine: the token cap, plain greedy decoding to EOS (the reference's ``generate``)
and the prefix-reusing decoder of the live session."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...audio import SAMPLE_RATE

if TYPE_CHECKING:
    from .model import MoonshineModel


def token_cap(n_samples: int, sample_rate: int = SAMPLE_RATE) -> int:
    """The decode cap: ceil(6.5 tokens per second of audio), computed exactly in integers."""
    return (13 * n_samples + 2 * sample_rate - 1) // (2 * sample_rate)


def greedy(
    model: MoonshineModel, xkv, max_new_tokens: int, mem_valid: np.ndarray | None = None, repetition_stop: int = 0
) -> list[int]:
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
        if t == c.eos_token_id or (repetition_stop and repeats(out, repetition_stop)):
            break
        if i + 1 < max_new_tokens:
            logits = model.decode([t], i + 1, cache, xkv, mem_valid)
    return out


def repeats(ids: list[int], n: int) -> bool:
    """True when ``ids`` ends with some k-gram (k <= n) repeated three times in a row."""
    for k in range(1, n + 1):
        if len(ids) >= 3 * k and ids[-k:] == ids[-2 * k : -k] == ids[-3 * k : -2 * k]:
            return True
    return False


class PrefixDecoder:
    """Greedy decoding of a segment that grows, reusing the previous hypothesis ``hyp``.

    ``decode`` runs one teacher-forced pass over the start token and ``hyp``, keeps the prefix the model
    still agrees with and continues greedily from the first disagreement: when the hypothesis has settled, a
    decode costs one batched pass and a few steps instead of one step per token. The ids equal plain greedy
    decoding of the same memory (``greedy``) with the same cap, since every kept id is the argmax given the
    ids before it. The self-attention cache is allocated once, for ``max_tokens``.

    Counters for callers: ``runs`` (decodes made) and ``passes`` (tokens per decoder pass of the latest one).
    """

    def __init__(self, model: MoonshineModel, max_tokens: int, repetition_stop: int = 0):
        self.m = model
        self.max_tokens = max_tokens
        self.repetition_stop = repetition_stop
        self.cache = model.new_self_cache(max_tokens + 1)
        self.hyp: list[int] = []
        self.runs = 0
        self.passes: list[int] = []

    def decode(self, xkv: list, n_frames: int, cap: int) -> list[int]:
        """Greedy ids over the first ``n_frames`` frames of the memory ``xkv`` (per layer the cross K/V
        buffers ``[Hkv, frames, hd]``), at most ``cap``; they become the hypothesis the next decode reuses."""
        m, c = self.m, self.m.cfg
        if n_frames <= 0 or cap <= 0:
            return []
        self.runs += 1
        self.passes = []
        cap = min(cap, self.max_tokens)
        xkv = [(k[:, :n_frames], v[:, :n_frames]) for k, v in xkv]
        prev = [t for t in self.hyp if t != c.eos_token_id][: cap - 1]
        seq = [c.decoder_start_token_id] + prev
        self.passes.append(len(seq))
        pred = m.decode(seq, 0, self.cache, xkv, all_logits=True).argmax(axis=-1).tolist()
        out: list[int] = []
        for i, t in enumerate(pred):
            out.append(int(t))
            if t == c.eos_token_id or len(out) >= cap or self._looping(out):
                self.hyp = out
                return out
            if i >= len(prev) or t != prev[i]:
                break
        while len(out) < cap:
            self.passes.append(1)
            t = int(np.argmax(m.decode([out[-1]], len(out), self.cache, xkv)))
            out.append(t)
            if t == c.eos_token_id or self._looping(out):
                break
        self.hyp = out
        return out

    def _looping(self, ids: list[int]) -> bool:
        return self.repetition_stop > 0 and repeats(ids, self.repetition_stop)
