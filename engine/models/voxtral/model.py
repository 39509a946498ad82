"""Voxtral Mini 4B Realtime over the backend op set: conv stem, causal encoder, projector, decoder.

Parity contract (float32): mel, encoder output, audio embeddings and decoder logits equal the HF
transformers 5.24.0 reference (``VoxtralRealtimeForConditionalGeneration``) to ~1e-5 relative, with the
encoder run incrementally against a KV ring of its 750-frame window and the decoder against a ring of its
8192 window. RoPE angles are computed from absolute positions in float64, so hours-long sessions stay exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np

from ...backends import Backend, LayerPiece, load_affine
from ...errors import ModelError
from ..rope import RopeRows, inv_freq
from .config import VoxtralConfig
from .ring import KVRing

ENC_BLOCK = 16  # positions (4 encoder frames each) per encoder call


@dataclass
class EncLayer:
    attn_norm: object
    wq: object
    bq: object
    wk: object
    wv: object
    bv: object
    wo: object
    bo: object
    ffn_norm: object
    w1: object
    w2: object
    b2: object
    w3: object


@dataclass
class DecLayer:
    attn_norm: object
    wq: object
    wk: object
    wv: object
    wo: object
    ffn_norm: object
    w1: object
    w2: object
    w3: object
    ada_down: object
    ada_up: object


def time_embedding(delay_tokens: int, dim: int) -> np.ndarray:
    """The ada conditioning input ``[cos(D w), sin(D w)]``, ``w_i = 10000^(-i/(dim/2))``."""
    half = dim // 2
    w = np.exp(-math.log(10000.0) * np.arange(half, dtype=np.float64) / half)
    return np.concatenate([np.cos(delay_tokens * w), np.sin(delay_tokens * w)]).astype(np.float32)


class VoxtralModel:
    """Weights on one backend plus the forward pieces; ``session.VoxtralSession`` drives them."""

    family = "voxtral_realtime"

    def __init__(
        self,
        cfg: VoxtralConfig,
        store,
        names: dict[str, str],
        backend: Backend,
        dtype: str | None,
        interleaved: bool,
        tokenizer,
        source: str = "",
        conv_nlc: bool = False,
    ):
        self.cfg, self.B, self.tok, self.source = cfg, backend, tokenizer, source
        self.tokenizer = tokenizer
        self.interleaved = interleaved
        B, e, d = backend, cfg.encoder, cfg.decoder
        file_dtype = store.info(names["tok.weight"]).dtype
        if file_dtype not in ("float32", "float16", "bfloat16"):
            file_dtype = "float16"  # quantized tables carry their scales' dtype
            sc = names["tok.weight"][: -len("weight")] + "scales"
            if sc in store:
                file_dtype = store.info(sc).dtype
        self.dtype = B.compute_dtype(dtype or file_dtype)
        f32 = "float32"

        def raw(canon, shape=None, dt=None):
            return B.load(store, names[canon], shape, dt or self.dtype)

        def lin(canon, shape):
            """A matmul weight, affine-quantized where the checkpoint is (the backend picks its form)."""
            name = names[canon]
            base = name[: -len("weight")]
            if base + "scales" in store:
                return B.prepare_linear(load_affine(B, store, base, shape))
            if store.info(name).dtype == "uint32":  # packed 4/8-bit values: read as floats they "had a wrong shape"
                raise ModelError(
                    f"The checkpoint in {store.where} has the quantized '{name}' without its '{base}scales'."
                )
            return B.prepare_linear(B.load(store, name, shape, self.dtype))

        def vec(canon, n, dt=None):
            return raw(canon, (n,), dt)

        A, Hd = e.dim, e.n_heads * e.head_dim

        def conv(canon, c_in):  # stored [out, in, k] (PyTorch) or [out, k, in] (MLX conversions)
            if conv_nlc:
                return B.prepare_conv(B.asarray(store.numpy(names[canon], (A, 3, c_in)).transpose(0, 2, 1), f32))
            return B.prepare_conv(raw(canon, (A, c_in, 3), f32))

        self.conv1 = conv("conv1.weight", e.num_mel_bins)
        self.conv1_b = vec("conv1.bias", A, f32)
        self.conv2 = conv("conv2.weight", A)
        self.conv2_b = vec("conv2.bias", A, f32)
        self.enc = [
            EncLayer(
                attn_norm=vec(f"enc.{i}.attn_norm", A, f32),
                wq=lin(f"enc.{i}.wq.weight", (Hd, A)),
                bq=vec(f"enc.{i}.wq.bias", Hd),
                wk=lin(f"enc.{i}.wk.weight", (Hd, A)),
                wv=lin(f"enc.{i}.wv.weight", (Hd, A)),
                bv=vec(f"enc.{i}.wv.bias", Hd),
                wo=lin(f"enc.{i}.wo.weight", (A, Hd)),
                bo=vec(f"enc.{i}.wo.bias", A),
                ffn_norm=vec(f"enc.{i}.ffn_norm", A, f32),
                w1=lin(f"enc.{i}.w1.weight", (e.hidden_dim, A)),
                w3=lin(f"enc.{i}.w3.weight", (e.hidden_dim, A)),
                w2=lin(f"enc.{i}.w2.weight", (A, e.hidden_dim)),
                b2=vec(f"enc.{i}.w2.bias", A),
            )
            for i in range(e.n_layers)
        ]
        self.enc_norm = vec("enc_norm", A, f32)
        D = d.dim
        self.proj1 = lin("proj1.weight", (D, A * cfg.downsample))
        self.proj2 = lin("proj2.weight", (D, D))
        self.tok_emb = lin("tok.weight", (d.vocab_size, D))
        self.dec = [
            DecLayer(
                attn_norm=vec(f"dec.{i}.attn_norm", D, f32),
                wq=lin(f"dec.{i}.wq.weight", (d.n_heads * d.head_dim, D)),
                wk=lin(f"dec.{i}.wk.weight", (d.n_kv_heads * d.head_dim, D)),
                wv=lin(f"dec.{i}.wv.weight", (d.n_kv_heads * d.head_dim, D)),
                wo=lin(f"dec.{i}.wo.weight", (D, d.n_heads * d.head_dim)),
                ffn_norm=vec(f"dec.{i}.ffn_norm", D, f32),
                w1=lin(f"dec.{i}.w1.weight", (d.hidden_dim, D)),
                w3=lin(f"dec.{i}.w3.weight", (d.hidden_dim, D)),
                w2=lin(f"dec.{i}.w2.weight", (D, d.hidden_dim)),
                ada_down=B.prepare_linear(raw(f"dec.{i}.ada_down.weight", (d.ada_dim, D), f32)),
                ada_up=B.prepare_linear(raw(f"dec.{i}.ada_up.weight", (D, d.ada_dim), f32)),
            )
            for i in range(d.n_layers)
        ]
        self.dec_norm = vec("dec_norm", D, f32)
        self.enc_in = LayerPiece(
            B, partial(self._attn_in_fn, e, e.n_heads), ("attn_norm", "wq", "bq", "wk", "wv", "bv")
        )
        self.enc_out = LayerPiece(B, partial(self._attn_out_fn, e), ("wo", "bo", "ffn_norm", "w1", "w3", "w2", "b2"))
        self.dec_in = LayerPiece(B, partial(self._attn_in_fn, d, d.n_kv_heads), ("attn_norm", "wq", "wk", "wv"))
        self.dec_out = LayerPiece(B, partial(self._attn_out_fn, d), ("wo", "ffn_norm", "w1", "w3", "w2"))
        self.enc_rope = RopeRows(B, inv_freq(e.head_dim, e.rope_theta), self.dtype)
        self.dec_rope = RopeRows(B, inv_freq(d.head_dim, d.rope_theta), self.dtype)

    # ---- helpers ------------------------------------------------------------------------------
    @property
    def backend_name(self) -> str:
        return self.B.name

    @property
    def weight_bits(self) -> int | None:
        """The bits of the decoder's quantized matrices (stored so or converted on load), None when float."""
        return getattr(self.dec[0].w1, "bits", None)

    def _rope(self, x, cos, sin):
        return self.B.rope(x, cos, sin, self.interleaved)

    def ada_scales(self, delay_tokens: int) -> list:
        """Per decoder layer ``1 + s_l(D)``, computed once per session."""
        B = self.B
        t = B.asarray(time_embedding(delay_tokens, self.cfg.decoder.dim)[None, :], "float32")
        return [1.0 + B.linear(B.gelu(B.linear(t, L.ada_down)), L.ada_up) for L in self.dec]

    # ---- audio side ---------------------------------------------------------------------------
    def conv_stem(self, mel, state):
        """Mel frames ``[8k, bins]`` (NumPy) + state ``(last 2 mel frames, last conv1 output)`` ->
        ``(encoder inputs [4k, dim], new state)``; state None means the start of the stream (zeros)."""
        B, A = self.B, self.cfg.encoder.dim
        m = B.asarray(mel, "float32")
        if state is None:
            state = (B.zeros((2, mel.shape[1])), B.zeros((1, A)))
        prev_mel, prev_c1 = state
        x = B.concat([prev_mel, m], axis=0)
        c1 = B.gelu(B.conv1d(x, self.conv1, self.conv1_b, stride=1))
        y = B.concat([prev_c1, c1], axis=0)
        c2 = B.gelu(B.conv1d(y, self.conv2, self.conv2_b, stride=2))
        return c2, (x[-2:], y[-1:])

    # ---- layer pieces (pure: compiled into fused graphs where the backend does that) ---------------
    def _heads(self, y, n: int, h: int, hd: int):
        return y.reshape(n, h, hd).transpose(1, 0, 2)

    def _attn_in_fn(self, c, n_kv: int, W, x, cos, sin):
        """Normed input -> rotated q, k and v heads ``[H, n, hd]`` of one layer (``c``: the encoder's or the
        decoder's config; q and v biases where the layer has them)."""
        B = self.B
        n = x.shape[0]
        h = B.astype(B.rms_norm(x, W["attn_norm"], c.norm_eps), self.dtype)
        q = self._rope(self._heads(B.linear(h, W["wq"], W.get("bq")), n, c.n_heads, c.head_dim), cos, sin)
        k = self._rope(self._heads(B.linear(h, W["wk"]), n, n_kv, c.head_dim), cos, sin)
        v = self._heads(B.linear(h, W["wv"], W.get("bv")), n, n_kv, c.head_dim)
        return q, k, v

    def _attn_out_fn(self, c, W, x, a, ada=None):
        """Residual after attention ``a [H, n, hd]``, then the SwiGLU MLP block, its input scaled by ``ada``
        (the decoder's per-session ``1 + s(D)``) where given."""
        B = self.B
        x = x + B.linear(a.transpose(1, 0, 2).reshape(x.shape[0], -1), W["wo"], W.get("bo"))
        h = B.rms_norm(x, W["ffn_norm"], c.norm_eps)
        h = B.astype(h if ada is None else h * ada, self.dtype)
        return x + B.linear(B.silu(B.linear(h, W["w1"])) * B.linear(h, W["w3"]), W["w2"], W.get("b2"))

    def encoder(self, x, start: int, ring: KVRing):
        """Encoder layers + final norm on frames ``x [n, dim]`` at absolute frame positions ``start..``."""
        B, e = self.B, self.cfg.encoder
        n = x.shape[0]
        claim = ring.advance(start, n, e.window)
        cos, sin = self.enc_rope(start, n)
        x = B.astype(x, self.dtype)
        scale = e.head_dim**-0.5
        for i, L in enumerate(self.enc):
            q, k, v = self.enc_in(L, x, cos, sin)
            ring.write(i, claim, k, v)
            a = B.attention(q, *ring.keys(i, claim), scale, claim.mask)
            x = self.enc_out(L, x, a)
        return B.astype(B.rms_norm(x, self.enc_norm, e.norm_eps), self.dtype)

    def project(self, frames):
        """Groups of ``downsample`` encoder frames ``[4k, dim]`` -> audio embeddings ``[k, D]``."""
        B, ds = self.B, self.cfg.downsample
        g = frames.reshape(frames.shape[0] // ds, ds * frames.shape[1])
        return B.linear(B.gelu(B.linear(g, self.proj1)), self.proj2)

    # ---- decoder ------------------------------------------------------------------------------
    def new_decoder_ring(self, max_block: int = 64) -> KVRing:
        d = self.cfg.decoder
        return KVRing(self.B, d.n_layers, d.n_kv_heads, d.head_dim, d.window - 1 + max_block, self.dtype)

    def new_encoder_ring(self) -> KVRing:
        e = self.cfg.encoder
        return KVRing(self.B, e.n_layers, e.n_heads, e.head_dim, e.window - 1 + 4 * ENC_BLOCK, self.dtype)

    def decoder(self, tokens, audio, start: int, ring: KVRing, ada: list, last_only: bool = True, host: bool = True):
        """Decoder on ``E[tokens] + audio`` at positions ``start..``; returns float32 NumPy logits (last row
        ``[V]``, or all rows), or with ``host=False`` the backend array ``[rows, V]`` left on the device.
        ``tokens`` is a list of ids or a backend int array (a token sampled on the device)."""
        B, d = self.B, self.cfg.decoder
        n = tokens.shape[0] if hasattr(tokens, "shape") else len(tokens)
        claim = ring.advance(start, n, d.window)
        cos, sin = self.dec_rope(start, n)
        x = B.astype(B.embed(self.tok_emb, tokens) + audio, self.dtype)
        scale = d.head_dim**-0.5
        for i, L in enumerate(self.dec):
            q, k, v = self.dec_in(L, x, cos, sin)
            ring.write(i, claim, k, v)
            a = B.attention(q, *ring.keys(i, claim), scale, claim.mask)
            x = self.dec_out(L, x, a, ada[i])
        if last_only:
            x = x[n - 1 :]
        logits = B.linear(B.astype(B.rms_norm(x, self.dec_norm, d.norm_eps), self.dtype), self.tok_emb)
        if not host:
            return logits
        logits = B.to_numpy(logits)
        return logits[0] if last_only else logits

    def start_session(self, delay_ms: int = 480, **options):
        """A streaming session (see ``session.VoxtralSession``); ``delay_ms`` 80..1200 step 80, or 2400."""
        from .session import VoxtralSession

        return VoxtralSession(self, delay_ms=delay_ms, **options)
