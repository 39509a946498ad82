"""Voxtral Realtime configuration from any of the three on-disk dialects (HF, Mistral native, MLX)."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ModelError
from ..checks import require


@dataclass(frozen=True)
class EncoderConfig:
    dim: int = 1280
    n_layers: int = 32
    n_heads: int = 32
    head_dim: int = 64
    hidden_dim: int = 5120
    rope_theta: float = 1e6
    window: int = 750
    norm_eps: float = 1e-5
    num_mel_bins: int = 128


@dataclass(frozen=True)
class DecoderConfig:
    dim: int = 3072
    n_layers: int = 26
    n_heads: int = 32
    n_kv_heads: int = 8
    head_dim: int = 128
    hidden_dim: int = 9216
    rope_theta: float = 1e6
    window: int = 8192
    norm_eps: float = 1e-5
    vocab_size: int = 131072
    ada_dim: int = 32


@dataclass(frozen=True)
class VoxtralConfig:
    encoder: EncoderConfig
    decoder: DecoderConfig
    downsample: int = 4

    def __post_init__(self):
        e, d = self.encoder, self.decoder
        where = "The Voxtral configuration"
        require(
            d.n_heads % d.n_kv_heads == 0,
            where,
            f"{d.n_heads} attention heads cannot share {d.n_kv_heads} key/value heads",
        )
        require(
            min(e.n_layers, d.n_layers, e.n_heads, e.head_dim, self.downsample) >= 1,
            where,
            "a layer, head or downsampling count is below 1",
        )

    @classmethod
    def from_hf(cls, d: dict) -> VoxtralConfig:
        """From an HF ``config.json`` (model_type voxtral_realtime)."""
        for section in ("audio_config", "text_config"):
            if not isinstance(d.get(section), dict):
                raise ModelError(
                    f"The Voxtral config.json has no {section} section: not a Voxtral Realtime checkpoint."
                )
        try:
            a, t = d["audio_config"], d["text_config"]
            ar, tr = a.get("rope_parameters") or {}, t.get("rope_parameters") or {}
            enc = EncoderConfig(
                dim=a["hidden_size"],
                n_layers=a["num_hidden_layers"],
                n_heads=a["num_attention_heads"],
                head_dim=a.get("head_dim") or a["hidden_size"] // a["num_attention_heads"],
                hidden_dim=a["intermediate_size"],
                rope_theta=float(ar.get("rope_theta", a.get("rope_theta", 1e6))),
                window=a.get("sliding_window") or 750,
                norm_eps=a.get("rms_norm_eps", 1e-5),
                num_mel_bins=a.get("num_mel_bins", 128),
            )
            dec = DecoderConfig(
                dim=t["hidden_size"],
                n_layers=t["num_hidden_layers"],
                n_heads=t["num_attention_heads"],
                n_kv_heads=t.get("num_key_value_heads") or t["num_attention_heads"],
                head_dim=t.get("head_dim") or t["hidden_size"] // t["num_attention_heads"],
                hidden_dim=t["intermediate_size"],
                rope_theta=float(tr.get("rope_theta", t.get("rope_theta", 1e6))),
                window=t.get("sliding_window") or 8192,
                norm_eps=t.get("rms_norm_eps", 1e-5),
                vocab_size=t["vocab_size"],
            )
            return cls(enc, dec, downsample=d.get("downsample_factor", 4))
        except (KeyError, TypeError, ArithmeticError) as e:
            raise ModelError(f"The Voxtral config.json is missing or has a malformed entry ({e}).") from e

    @classmethod
    def from_params(cls, p: dict) -> VoxtralConfig:
        """From a Mistral ``params.json`` (its ``multimodal.whisper_model_args`` block holds the encoder)."""
        try:
            mm = p["multimodal"]["whisper_model_args"]
            if not isinstance(mm, dict) or not isinstance(mm["encoder_args"], dict):
                raise TypeError
        except (KeyError, TypeError) as e:
            raise ModelError(
                "The params.json has no multimodal.whisper_model_args block: not a Voxtral Realtime checkpoint."
            ) from e
        try:
            e = mm["encoder_args"]
            enc = EncoderConfig(
                dim=e["dim"],
                n_layers=e["n_layers"],
                n_heads=e["n_heads"],
                head_dim=e.get("head_dim") or e["dim"] // e["n_heads"],
                hidden_dim=e["hidden_dim"],
                rope_theta=float(e.get("rope_theta", 1e6)),
                window=e.get("sliding_window") or 750,
                norm_eps=e.get("norm_eps", 1e-5),
                num_mel_bins=(e.get("audio_encoding_args") or {}).get("num_mel_bins", 128),
            )
            dec = DecoderConfig(
                dim=p["dim"],
                n_layers=p["n_layers"],
                n_heads=p["n_heads"],
                n_kv_heads=p.get("n_kv_heads", p["n_heads"]),
                head_dim=p.get("head_dim") or p["dim"] // p["n_heads"],
                hidden_dim=p["hidden_dim"],
                rope_theta=float(p.get("rope_theta", 1e6)),
                window=p.get("sliding_window") or 8192,
                norm_eps=p.get("norm_eps", 1e-5),
                vocab_size=p["vocab_size"],
                ada_dim=p.get("ada_rms_norm_t_cond_dim", 32),
            )
            ds = (mm.get("downsample_args") or {}).get("downsample_factor", 4)
            return cls(enc, dec, downsample=ds)
        except (KeyError, TypeError, ArithmeticError) as e:
            raise ModelError(f"The params.json is missing or has a malformed entry ({e}).") from e
