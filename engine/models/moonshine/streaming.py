"""Exact incremental frontend + encoder for one Moonshine segment.

Parity contract: after feeding any chunking of a segment's audio, the concatenated ``final`` frames equal
the offline encoder (``MoonshineModel.encode``) of the whole segment on those frames (float32, ~1e-6), and
``provisional()`` returns exactly the offline encoder of the audio received so far for the frames not yet
final. Only whole 80-sample frames are used; a shorter remainder waits for more audio.

The encoder has no positions, so each layer is a local operator that runs as a wavefront: a layer keeps the
K/V of the last L-1 inputs (keys of future queries) and the inputs still waiting for their R-1 look-ahead
frames; a query is final once its look-ahead exists. The conv stem keeps its last 4 inputs per stage.
All state is immutable (``advance`` returns new state), so a provisional flush costs no copy.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ...backends import window_mask

if TYPE_CHECKING:
    from .model import MoonshineModel


@dataclass(frozen=True)
class ConvState:
    buf: object  # inputs from absolute index ``start`` on (the first 4 are zeros at -4..-1)
    start: int
    n_out: int  # outputs produced so far


@dataclass(frozen=True)
class LayerState:
    k: object  # [H, nk, hd] keys of inputs ``k_start ..``
    v: object
    k_start: int
    x: object  # [np, D] pending inputs (queries ``q_start ..``)
    q: object  # [H, np, hd]
    q_start: int
    n_in: int


@dataclass(frozen=True)
class EncoderState:
    rem: np.ndarray  # < 80 leftover samples
    conv1: ConvState
    conv2: ConvState
    layers: tuple[LayerState, ...]
    n_final: int  # encoder frames finalised so far


class StreamingEncoder:
    """Builds and advances ``EncoderState`` for one model; stateless itself."""

    def __init__(self, model: MoonshineModel):
        self.m = model
        self.B = model.B

    def initial(self) -> EncoderState:
        """State at the start of a segment."""
        B, e, c = self.B, self.m.cfg.encoder, self.m.cfg.encoder
        D, H, hd = e.hidden_size, c.num_attention_heads, c.head_dim
        dt = self.m.dtype
        empty = LayerState(
            B.zeros((H, 0, hd), dt), B.zeros((H, 0, hd), dt), 0, B.zeros((0, D), dt), B.zeros((H, 0, hd), dt), 0, 0
        )
        return EncoderState(
            rem=np.zeros(0, np.float32),
            conv1=ConvState(B.zeros((4, D)), -4, 0),
            conv2=ConvState(B.zeros((4, 2 * D)), -4, 0),
            layers=tuple(empty for _ in self.m.enc_layers),
            n_final=0,
        )

    # ---- stages -------------------------------------------------------------------------------
    def _conv(self, st: ConvState, new, which: int):
        """Append inputs and emit every output whose 5 inputs (2j-4 .. 2j) now exist."""
        B = self.B
        buf = B.concat([st.buf, new], axis=0) if new.shape[0] else st.buf
        last = st.start + buf.shape[0] - 1  # absolute index of the newest input
        j_last = last // 2
        if j_last < st.n_out:
            return replace(st, buf=buf), None
        lo = 2 * st.n_out - 4 - st.start
        hi = 2 * j_last - st.start + 1
        out = self.m.conv_stage(buf[lo:hi], which)
        keep = 2 * (j_last + 1) - 4  # first input the next output needs
        return ConvState(buf[keep - st.start :], keep, j_last + 1), out

    def _layer(self, li: int, st: LayerState, x_new, final: bool):
        """Feed new inputs to encoder layer ``li``; returns (state, outputs of newly final queries)."""
        B, m = self.B, self.m
        layer = m.enc_layers[li]
        L, R = layer.window
        right = max(R, 1)
        if x_new is not None and x_new.shape[0]:
            q, k, v = m.enc_in(layer, x_new)
            st = replace(
                st,
                k=B.concat([st.k, k], axis=1),
                v=B.concat([st.v, v], axis=1),
                x=B.concat([st.x, x_new], axis=0),
                q=B.concat([st.q, q], axis=1),
                n_in=st.n_in + x_new.shape[0],
            )
        ready_end = st.n_in if final else st.n_in - right + 1
        n_ready = ready_end - st.q_start
        if n_ready <= 0:
            return st, None
        qpos = np.arange(st.q_start, ready_end)
        kpos = np.arange(st.k_start, st.n_in)
        mask = window_mask(qpos, kpos, L, R)
        attn = B.attention(st.q[:, :n_ready], st.k, st.v, m.cfg.encoder.head_dim**-0.5, B.asarray(mask))
        out = m.enc_out(layer, st.x[:n_ready], attn)
        k_keep = max(st.k_start, ready_end - L + 1)
        st = LayerState(
            st.k[:, k_keep - st.k_start :],
            st.v[:, k_keep - st.k_start :],
            k_keep,
            st.x[n_ready:],
            st.q[:, n_ready:],
            ready_end,
            st.n_in,
        )
        return st, out

    # ---- public -------------------------------------------------------------------------------
    def advance(self, st: EncoderState, pcm: np.ndarray, final: bool = False):
        """Feed samples; returns ``(new_state, frames)`` where ``frames [n, D]`` are the newly final
        encoder outputs (final norm applied) or None. ``final=True`` ends the segment: every pending frame
        is finalised with the look-ahead it has."""
        m, B = self.m, self.B
        fl = m.cfg.encoder.frame_len
        audio = np.concatenate([st.rem, np.asarray(pcm, np.float32).reshape(-1)]) if len(pcm) else st.rem
        nf = len(audio) // fl
        c1, c2, x = st.conv1, st.conv2, None
        if nf:
            feats = m.frame_features(audio[: nf * fl].reshape(nf, fl))
            c1, h = self._conv(c1, feats, 1)
            if h is not None:
                c2, x = self._conv(c2, h, 2)
        if x is not None:
            x = B.astype(x, m.dtype)
        layers = []
        for li, ls in enumerate(st.layers):
            ls, x = self._layer(li, ls, x, final)
            layers.append(ls)
        n_new = 0 if x is None else x.shape[0]
        if x is not None:
            x = B.layer_norm(x, m.enc_final, None, 1e-5)
        new = EncoderState(audio[nf * fl :].copy(), c1, c2, tuple(layers), st.n_final + n_new)
        return new, x

    def provisional(self, st: EncoderState):
        """Frames not yet final, computed with the look-ahead available now (the offline encoder of the
        audio so far); ``st`` is unchanged. None when nothing is pending."""
        return self.advance(st, np.zeros(0, np.float32), final=True)[1]
