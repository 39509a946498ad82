"""Moonshine Streaming (tiny / small / medium) over the backend op set.

Parity contract: with ``window_semantics="hf"`` (default) every function here reproduces the HF
transformers 5.24.0 reference (``MoonshineStreamingForConditionalGeneration``, called with an
``attention_mask``) in float32 to ~1e-5: frontend, encoder, adapter ("memory"), decoder logits and
greedy ids. ``window_semantics="inclusive"`` widens each (L, R) window by one on both sides, as the
vendor runtime and training do (notes §2.3).

Shapes are batch-free: audio ``[n]``, frames ``[T, D]``, heads ``[H, T, hd]``. Each layer is written as
pure pieces (``LayerPiece``: normed input -> heads, attention output -> residual + MLP) around the attention
calls, which read caches and masks; the backend compiles the pieces where that pays (MLX on a GPU).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...backends import Backend, LayerPiece, window_mask
from ...errors import UsageError
from ...weights import TensorStore
from ..rope import RopeRows, inv_freq
from .config import MoonshineConfig
from .live import LiveSession
from .session import WholeSession

ENC_BLOCK = 512  # queries per block in the windowed offline encoder (bounds the masks at ~0.3 MB)


@dataclass
class EncoderLayer:
    ln1: object
    ln2: object
    qkv: object  # q, k, v projections stacked on the output axis (one product per layer)
    o: object
    fc1: object
    fc1_b: object
    fc2: object
    fc2_b: object
    window: tuple[int, int]


@dataclass
class DecoderLayer:
    ln_in: object
    ln_post: object
    ln_final: object
    qkv: object  # self-attention q, k, v stacked on the output axis
    o: object
    xq: object
    xkv: object  # cross-attention k, v stacked (both read the memory)
    xo: object
    fc1: object
    fc1_b: object
    fc2: object
    fc2_b: object
    blocks: tuple | None = None  # the backend's fused (self, cross) attention blocks, when it has them


class MoonshineModel:
    """Weights on one backend plus the forward pieces; sessions (``session.py``) drive it."""

    family = "moonshine_streaming"

    def __init__(
        self,
        cfg: MoonshineConfig,
        store: TensorStore,
        backend: Backend,
        dtype: str | None = None,
        window_semantics: str = "hf",
        tokenizer=None,
        source: str = "",
    ):
        self.cfg, self.B, self.tokenizer, self.source = cfg, backend, tokenizer, source
        self.window_semantics = window_semantics
        B, e = backend, cfg.encoder
        # The backend picks the compute dtype (MLX: the file's unless asked; NumPy: float32); the frontend and
        # the norms stay float32.
        self.dtype = B.compute_dtype(dtype or store.info("proj_out.weight").dtype)
        wdt, f32 = self.dtype, "float32"

        def W(name, shape, dt=None):
            return B.load(store, name, shape, dt or wdt)

        def lin(name, shape):
            return B.prepare_linear(W(name, shape))

        def stacked(names_shapes):
            """Linears that read the same input, as one ``[sum of outs, in]`` matrix (fewer, larger products;
            each output row is the same dot product as before)."""
            return B.prepare_linear(B.concat([W(n, sh) for n, sh in names_shapes], axis=0))

        D, Hd, F = e.hidden_size, e.num_attention_heads * e.head_dim, e.intermediate_size
        pre = "model.encoder."
        self.log_k = float(store.numpy(pre + "embedder.comp.log_k", ()))
        self.emb_linear = B.prepare_linear(W(pre + "embedder.linear.weight", (D, e.frame_len), f32))
        self.conv1 = B.prepare_conv(W(pre + "embedder.conv1.weight", (2 * D, D, 5), f32))
        self.conv1_b = W(pre + "embedder.conv1.bias", (2 * D,), f32)
        self.conv2 = B.prepare_conv(W(pre + "embedder.conv2.weight", (D, 2 * D, 5), f32))
        self.conv2_b = W(pre + "embedder.conv2.bias", (D,), f32)
        one = np.float32(1.0)
        self.enc_layers = []
        for i in range(e.num_hidden_layers):
            p = f"{pre}layers.{i}."
            L, R = e.sliding_windows[i]
            if window_semantics == "inclusive":
                L, R = L + 1, R + 1
            self.enc_layers.append(
                EncoderLayer(
                    ln1=B.asarray(store.numpy(p + "input_layernorm.gamma", (D,)) + one, f32),
                    ln2=B.asarray(store.numpy(p + "post_attention_layernorm.gamma", (D,)) + one, f32),
                    qkv=stacked([(p + f"self_attn.{x}_proj.weight", (Hd, D)) for x in "qkv"]),
                    o=lin(p + "self_attn.o_proj.weight", (D, Hd)),
                    fc1=lin(p + "mlp.fc1.weight", (F, D)),
                    fc1_b=W(p + "mlp.fc1.bias", (F,)),
                    fc2=lin(p + "mlp.fc2.weight", (D, F)),
                    fc2_b=W(p + "mlp.fc2.bias", (D,)),
                    window=(L, R),
                )
            )
        self.enc_final = B.asarray(store.numpy(pre + "final_norm.gamma", (D,)) + one, f32)

        Dd, Hq, Hkv, hd, Fd = (
            cfg.hidden_size,
            cfg.num_attention_heads,
            cfg.num_key_value_heads,
            cfg.head_dim,
            cfg.intermediate_size,
        )
        dp = "model.decoder."
        self.pos_emb = W(dp + "pos_emb.weight", (cfg.max_position_embeddings, D), f32)
        self.adapter = lin(dp + "proj.weight", (Dd, D)) if D != Dd else None
        self.embed = W(dp + "embed_tokens.weight", (cfg.vocab_size, Dd))
        self.dec_layers = []
        for i in range(cfg.num_hidden_layers):
            p = f"{dp}layers.{i}."
            self.dec_layers.append(
                DecoderLayer(
                    ln_in=W(p + "input_layernorm.weight", (Dd,), f32),
                    ln_post=W(p + "post_attention_layernorm.weight", (Dd,), f32),
                    ln_final=W(p + "final_layernorm.weight", (Dd,), f32),
                    qkv=stacked(
                        [
                            (p + "self_attn.q_proj.weight", (Hq * hd, Dd)),
                            (p + "self_attn.k_proj.weight", (Hkv * hd, Dd)),
                            (p + "self_attn.v_proj.weight", (Hkv * hd, Dd)),
                        ]
                    ),
                    o=lin(p + "self_attn.o_proj.weight", (Dd, Hq * hd)),
                    xq=lin(p + "encoder_attn.q_proj.weight", (Hq * hd, Dd)),
                    xkv=stacked(
                        [
                            (p + "encoder_attn.k_proj.weight", (Hkv * hd, Dd)),
                            (p + "encoder_attn.v_proj.weight", (Hkv * hd, Dd)),
                        ]
                    ),
                    xo=lin(p + "encoder_attn.o_proj.weight", (Dd, Hq * hd)),
                    fc1=lin(p + "mlp.fc1.weight", (2 * Fd, Dd)),
                    fc1_b=W(p + "mlp.fc1.bias", (2 * Fd,)),
                    fc2=lin(p + "mlp.fc2.weight", (Dd, Fd)),
                    fc2_b=W(p + "mlp.fc2.bias", (Dd,)),
                )
            )
        self.dec_norm = W(dp + "norm.weight", (Dd,), f32)
        self.proj_out = lin("proj_out.weight", (cfg.vocab_size, Dd))
        # partial interleaved RoPE over rot = int(head_dim * factor) channels, float64 angles
        self.rope_rows = RopeRows(B, inv_freq(cfg.rotary_dim, cfg.rope_parameters["rope_theta"]), self.dtype)
        self._tri = np.zeros((0, 0), dtype=bool)  # causal mask rows (grown on demand)
        self.enc_in = LayerPiece(B, self._enc_in_fn, ("ln1", "qkv"))
        self.enc_out = LayerPiece(B, self._enc_out_fn, ("o", "ln2", "fc1", "fc1_b", "fc2", "fc2_b"))
        self.dec_self_in = LayerPiece(B, self._dec_self_in_fn, ("ln_in", "qkv"))
        self.dec_cross_in = LayerPiece(B, self._dec_cross_in_fn, ("o", "ln_post", "xq"))
        self.dec_out = LayerPiece(B, self._dec_out_fn, ("xo", "ln_final", "fc1", "fc1_b", "fc2", "fc2_b"))
        self.stack = None  # the decoder layers as one block stack, where the backend has one (prepare_blocks)

    def prepare_blocks(self) -> None:
        """Give the decoder's blocks the backend's fused forms where it has them (after any quantization): each
        layer norm with the product after it, the self-attention's output projection with the cross-attention
        query, the gated MLP as one block (``Backend.prepare_norm_linear``, ``prepare_residual_norm_linear``,
        ``prepare_gated_mlp``); or, where the backend has them, each attention with its projections as one block
        (``prepare_attention_block``: NumPy's float32 blocks cut by heads), and then the whole decoder as one
        stack of them (``prepare_block_stack``); the head with its norm. Once only: the matrices it is given may
        be rearranged."""
        B, c = self.B, self.cfg
        heads = (c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.head_dim**-0.5)
        for layer in self.dec_layers:
            own = B.prepare_attention_block(layer.qkv, layer.o, *heads, True, layer.ln_in, 1e-5)
            if own is not None:
                cross = B.prepare_attention_block(layer.xq, layer.xo, *heads, None, layer.ln_post, 1e-5)
                if cross is None:  # the two blocks have the same heads: a backend takes both or neither
                    raise ValueError("The backend fused the self-attention block but not the cross-attention one.")
                layer.blocks = own, cross
                layer.qkv = layer.o = layer.xq = layer.xo = None  # the blocks hold what they compute with
            else:
                layer.qkv = B.prepare_norm_linear(layer.ln_in, 1e-5, layer.qkv)
                layer.o, layer.xq = B.prepare_residual_norm_linear(layer.o, layer.ln_post, 1e-5, layer.xq)
            layer.fc1, layer.fc1_b, layer.fc2, layer.fc2_b = B.prepare_gated_mlp(
                layer.fc1, layer.fc1_b, layer.fc2, layer.fc2_b, layer.ln_final, 1e-5
            )
        if self.dec_layers and self.dec_layers[0].blocks is not None:
            sublayers = []
            for layer in self.dec_layers:
                own, cross = layer.blocks
                sublayers += [(layer.ln_in, own), (layer.ln_post, cross), (layer.ln_final, layer.fc1)]
            self.stack = B.prepare_block_stack(sublayers, 1e-5)  # None: the blocks run one by one
        self.proj_out = B.prepare_norm_linear(self.dec_norm, 1e-5, self.proj_out)

    # ---- sessions -----------------------------------------------------------------------------
    def start_session(
        self,
        vad: bool = True,
        partial_ms: float = 160.0,
        repetition_stop: int = 4,
        vad_options=None,
        vad_model=None,
        **unknown,
    ):
        """A session over this model's weights (cheap; weights are shared).

        ``vad=True``: live segmentation (see ``live.LiveSession``): partials every ``partial_ms`` of audio
        (0 = none), committed lines per voice segment, ``repetition_stop`` n-gram guard (0 = off).
        ``vad=False``: the whole input is one segment, committed at ``finish()``. ``vad_options`` is a
        ``engine.vad.VadOptions``; ``vad_model`` replaces Silero (a callable hop -> probability with reset()).
        """
        if unknown:
            raise UsageError(f"Unknown Moonshine session option(s): {', '.join(sorted(unknown))}.")
        if not vad:
            return WholeSession(self)
        if not 0 <= partial_ms <= 10000:
            raise UsageError("The partial cadence must be between 0 and 10000 ms.")
        return LiveSession(
            self, partial_ms=partial_ms, repetition_stop=repetition_stop, vad=vad_options, vad_model=vad_model
        )

    # ---- properties ---------------------------------------------------------------------------
    @property
    def backend_name(self) -> str:
        return self.B.name

    @property
    def weight_bits(self) -> int | None:
        """The bits of the decoder's quantized matrices (stored so or converted on load), None when float."""
        return getattr(self.dec_layers[0].fc1, "bits", None)

    @property
    def lookahead(self) -> int:
        """Encoder frames of look-ahead: the sum over layers of (R - 1) for R > 1."""
        return sum(max(R - 1, 0) for (_, R) in (layer.window for layer in self.enc_layers))

    # ---- frontend -----------------------------------------------------------------------------
    def frame_features(self, frames: np.ndarray):
        """Per 5 ms frame ``[N, 80]`` (NumPy float32) -> ``silu(linear(asinh(k * cmvn(frame))))`` ``[N, D]``.
        The per-frame normalisation runs on the host, where the frames are (80 values per 5 ms)."""
        B = self.B
        x = np.asarray(frames, dtype=np.float32)
        c = x - np.mean(x, axis=-1, keepdims=True)
        y = c / np.sqrt(np.mean(c * c, axis=-1, keepdims=True) + 1e-6)
        y = np.arcsinh(np.float32(np.exp(np.float32(self.log_k))) * y)
        return B.silu(B.linear(B.asarray(y, "float32"), self.emb_linear))

    def conv_stage(self, x, which: int):
        """One causal stride-2 conv on input already left-padded/prefixed with 4 frames of state."""
        B = self.B
        if which == 1:
            return B.silu(B.conv1d(x, self.conv1, self.conv1_b, stride=2))
        return B.conv1d(x, self.conv2, self.conv2_b, stride=2)

    def frontend(self, audio: np.ndarray):
        """Offline frontend as the reference: pad to a multiple of 80, zero frames past the valid samples.

        Returns ``(features [T, D], valid [T] bool)``; T = ceil(ceil(n / 80) / 4) encoder frames.
        """
        B, fl = self.B, self.cfg.encoder.frame_len
        n = len(audio)
        nf = -(-n // fl)
        padded = np.zeros(nf * fl, dtype=np.float32)
        padded[:n] = audio
        valid = np.arange(nf) < n // fl
        h = self.frame_features(padded.reshape(nf, fl))
        if not valid.all():
            h = h * B.asarray(valid[:, None].astype(np.float32))
        for which in (1, 2):
            c_in = h.shape[1]
            h = self.B.concat([B.zeros((4, c_in)), h], axis=0)
            h = self.conv_stage(h, which)
            valid = np.convolve(np.concatenate([np.zeros(4), valid.astype(float)]), np.ones(5), "valid")[::2] > 0
            if not valid.all():
                h = h * B.asarray(valid[:, None].astype(np.float32))
        return h, valid

    # ---- layer pieces (pure: compiled into fused graphs where the backend does that) -------------
    def _enc_in_fn(self, W, x):
        """Encoder layer input ``x [T, D]`` -> normed -> (q, k, v) heads ``[H, T, hd]``."""
        B, e = self.B, self.cfg.encoder
        h = B.astype(B.layer_norm(x, W["ln1"], None, 1e-5), self.dtype)
        t, H = x.shape[0], e.num_attention_heads
        qkv = B.linear(h, W["qkv"]).reshape(t, 3 * H, e.head_dim).transpose(1, 0, 2)
        return qkv[:H], qkv[H : 2 * H], qkv[2 * H :]

    def _enc_out_fn(self, W, x, attn):
        """Residual + output projection + GELU MLP for queries ``x [T, D]`` given their attention ``[H, T, hd]``."""
        B = self.B
        x = x + B.linear(attn.transpose(1, 0, 2).reshape(x.shape[0], -1), W["o"])
        h = B.astype(B.layer_norm(x, W["ln2"], None, 1e-5), self.dtype)
        return x + B.linear(B.gelu(B.linear(h, W["fc1"], W["fc1_b"])), W["fc2"], W["fc2_b"])

    def _dec_self_in_fn(self, W, x, cos, sin):
        """Decoder layer input ``x [n, D]`` -> normed -> RoPE-rotated q, k and v heads for self-attention."""
        B, c = self.B, self.cfg
        hq, hkv = c.num_attention_heads, c.num_key_value_heads
        qkv = B.norm_linear(x, W["ln_in"], 1e-5, W["qkv"], self.dtype)
        qkv = qkv.reshape(x.shape[0], hq + 2 * hkv, c.head_dim).transpose(1, 0, 2)
        qk = B.rope(qkv[: hq + hkv], cos, sin, True)  # q and k heads rotated in one call
        return qk[:hq], qk[hq:], qkv[hq + hkv :]

    def _dec_cross_in_fn(self, W, x, attn):
        """Residual after self-attention ``attn [Hq, n, hd]``, then the normed cross-attention queries."""
        B, c = self.B, self.cfg
        n = x.shape[0]
        a = attn.transpose(1, 0, 2).reshape(n, -1)
        x, q = B.residual_norm_linear(x, a, W["o"], W["ln_post"], 1e-5, W["xq"], self.dtype)
        return x, q.reshape(n, c.num_attention_heads, c.head_dim).transpose(1, 0, 2)

    def _dec_out_fn(self, W, x, attn):
        """Residual after cross-attention ``attn [Hq, n, hd]``, then the gated SiLU MLP block."""
        B = self.B
        x = x + B.linear(attn.transpose(1, 0, 2).reshape(x.shape[0], -1), W["xo"])
        return self._dec_mlp(x, W["fc1"], W["fc1_b"], W["fc2"], W["fc2_b"], W["ln_final"])

    def _dec_mlp(self, x, fc1, fc1_b, fc2, fc2_b, norm):
        """The residual gated SiLU MLP block of a decoder layer (fc1: up rows, then gate rows)."""
        return x + self.B.gated_mlp(x, fc1, fc1_b, fc2, fc2_b, norm=norm, eps=1e-5, dtype=self.dtype)

    def _normed(self, x, norm):
        """A decoder block's normed input in the compute dtype."""
        return self.B.astype(self.B.layer_norm(x, norm, None, 1e-5), self.dtype)

    # ---- encoder ------------------------------------------------------------------------------
    def encode(self, audio: np.ndarray):
        """Offline encoder over a whole segment: ``(enc [T, D], valid [T])`` (final norm applied)."""
        x, valid = self.frontend(audio)
        return self.encoder_layers(self.B.astype(x, self.dtype), valid), valid

    def encoder_layers(self, x, valid: np.ndarray | None = None):
        """All encoder layers plus the final norm on frames ``x [T, D]`` (keys limited to ``valid``)."""
        B = self.B
        T = x.shape[0]
        scale = self.cfg.encoder.head_dim**-0.5
        pos = np.arange(T)
        masks = {}  # (block, window) -> (key range, mask): the layers with the same window share them
        for layer in self.enc_layers:
            q, k, v = self.enc_in(layer, x)
            L, R = layer.window
            outs = []
            for a in range(0, T, ENC_BLOCK):
                if (a, L, R) not in masks:
                    b = min(T, a + ENC_BLOCK)
                    ka, kb = max(0, a - L + 1), min(T, b + max(R, 1) - 1)
                    m = window_mask(pos[a:b], pos[ka:kb], L, R)
                    if valid is not None and not valid.all():
                        m = m & valid[None, ka:kb]
                    masks[a, L, R] = (b, ka, kb, B.asarray(m))
                b, ka, kb, m = masks[a, L, R]
                outs.append(B.attention(q[:, a:b], k[:, ka:kb], v[:, ka:kb], scale, m))
            attn = outs[0] if len(outs) == 1 else B.concat(outs, axis=1)
            x = self.enc_out(layer, x, attn)
        return B.layer_norm(x, self.enc_final, None, 1e-5)

    # ---- adapter and decoder ------------------------------------------------------------------
    def memory(self, enc, offset: int = 0):
        """Adapter: ``proj(enc[t] + pos_emb[offset + t])`` -> ``[T, D_dec]``."""
        B = self.B
        m = B.astype(enc + self.pos_emb[offset : offset + enc.shape[0]], self.dtype)
        return m if self.adapter is None else B.linear(m, self.adapter)

    def cross_kv(self, memory) -> list[tuple[object, object]]:
        """Cross-attention K/V heads ``[Hkv, T, hd]`` for every decoder layer (per frame; appendable), each head's
        frames contiguous (the layout the live segment's buffers keep): every decoder step reads them whole."""
        B, c = self.B, self.cfg
        t, hkv = memory.shape[0], c.num_key_value_heads
        shape, every = (hkv, t, c.head_dim), (slice(None),)
        out = []
        for layer in self.dec_layers:
            kv = B.linear(memory, layer.xkv).reshape(t, 2 * hkv, c.head_dim).transpose(1, 0, 2)
            out.append(
                (
                    B.write(B.kv_zeros(shape, self.dtype), every, kv[:hkv]),
                    B.write(B.kv_zeros(shape, self.dtype), every, kv[hkv:]),
                )
            )
        return out

    def new_self_cache(self, capacity: int) -> list[list]:
        """Empty self-attention K/V caches ``[Hkv, capacity, hd]`` for every decoder layer."""
        c, B = self.cfg, self.B
        shape, dt = (c.num_key_value_heads, capacity, c.head_dim), self.dtype
        # fused blocks may compute half of their heads in a helper process: their caches go where it sees them
        zeros = B.kv_zeros if self.dec_layers and self.dec_layers[0].blocks is not None else B.zeros
        return [[zeros(shape, dt), zeros(shape, dt)] for _ in self.dec_layers]

    def causal(self, start: int, n: int):
        """Boolean ``[n, start + n]``: token ``start + i`` sees keys ``0 .. start + i``."""
        if start + n > self._tri.shape[0]:
            size = max(start + n, 2 * self._tri.shape[0], 256)
            self._tri = np.tril(np.ones((size, size), dtype=bool))
        return self.B.asarray(self._tri[start : start + n, : start + n])

    def decode(
        self,
        tokens: list[int],
        start: int,
        cache: list[list],
        xkv,
        mem_valid: np.ndarray | None = None,
        all_logits: bool = False,
    ):
        """Run ``tokens`` at positions ``start..`` through the decoder, writing their K/V into ``cache``.

        Returns float32 NumPy logits of the last token ``[V]`` (or of every token ``[L, V]``).
        """
        B = self.B
        n = len(tokens)
        x = B.embed(self.embed, tokens)
        cos, sin = self.rope_rows(start, n)
        xmask = None
        if mem_valid is not None and not mem_valid.all():
            xmask = B.asarray(np.broadcast_to(mem_valid, (n, len(mem_valid))))
        if self.stack is not None:  # the backend's blocks, as one stack (prepare_blocks)
            arrays = [a for kv, xkv_ in zip(cache, xkv) for a in (*kv, *xkv_)]
            x = B.block_stack(x, self.stack, arrays, start, cos, sin, xmask)
        else:
            x = self._decoder_layers(x, start, cos, sin, cache, xkv, xmask)
        if not all_logits:
            x = x[n - 1 :]
        logits = B.norm_linear(x, self.dec_norm, 1e-5, self.proj_out, self.dtype)
        out = B.to_numpy(logits)
        return out if all_logits else out[0]

    def _decoder_layers(self, x, start: int, cos, sin, cache: list[list], xkv, xmask):
        """The decoder layers op by op (MLX, quantized weights the backend does not cut), or block by block
        where the backend gave blocks but no stack for them: ``x [n, D]`` after them."""
        B, n, scale = self.B, x.shape[0], self.cfg.head_dim**-0.5
        causal = self.causal(start, n) if n > 1 else None
        for layer, kv, (xk, xv) in zip(self.dec_layers, cache, xkv):
            if layer.blocks is not None:
                own, cross = layer.blocks
                y, kv[0], kv[1] = B.self_attention_block(x, own, *kv, start, cos, sin, layer.ln_in, 1e-5)
                x = x + y
                x = x + B.cross_attention_block(x, cross, xk, xv, xmask, layer.ln_post, 1e-5)
                x = self._dec_mlp(x, layer.fc1, layer.fc1_b, layer.fc2, layer.fc2_b, layer.ln_final)
                continue
            q, k, v = self.dec_self_in(layer, x, cos, sin)
            kv[0] = B.write(kv[0], (slice(None), slice(start, start + n)), k)
            kv[1] = B.write(kv[1], (slice(None), slice(start, start + n)), v)
            a = B.attention(q, kv[0][:, : start + n], kv[1][:, : start + n], scale, causal)
            x, q = self.dec_cross_in(layer, x, a)
            x = self.dec_out(layer, x, B.attention(q, xk, xv, scale, xmask))
        return x
