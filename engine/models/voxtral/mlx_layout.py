"""Config of the mlx-audio conversions: ``{model_type, encoder_args{..., audio_encoding_args}, decoder{...},
quantization{group_size, bits}}`` (mlx_audio/stt/models/voxtral_realtime/config.py, version 0.6.2)."""

from __future__ import annotations

from ...errors import ModelError
from .config import DecoderConfig, EncoderConfig, VoxtralConfig


def config_from_mlx(d: dict) -> VoxtralConfig:
    """A ``VoxtralConfig`` from an mlx-audio ``config.json`` (unknown keys ignored, defaults = the real model)."""
    try:
        e, t = d.get("encoder_args") or {}, d.get("decoder") or {}
        ea = e.get("audio_encoding_args") or d.get("audio_encoding_args") or {}
        enc = EncoderConfig(
            dim=e.get("dim", 1280),
            n_layers=e.get("n_layers", 32),
            n_heads=e.get("n_heads", 32),
            head_dim=e.get("head_dim", 64),
            hidden_dim=e.get("hidden_dim", 5120),
            rope_theta=float(e.get("rope_theta", 1e6)),
            window=e.get("sliding_window", 750),
            norm_eps=e.get("norm_eps", 1e-5),
            num_mel_bins=ea.get("num_mel_bins", 128),
        )
        dec = DecoderConfig(
            dim=t.get("dim", 3072),
            n_layers=t.get("n_layers", 26),
            n_heads=t.get("n_heads", 32),
            n_kv_heads=t.get("n_kv_heads", 8),
            head_dim=t.get("head_dim", 128),
            hidden_dim=t.get("hidden_dim", 9216),
            rope_theta=float(t.get("rope_theta", 1e6)),
            window=t.get("sliding_window", 8192),
            norm_eps=t.get("norm_eps", 1e-5),
            vocab_size=t.get("vocab_size", 131072),
            ada_dim=t.get("ada_rms_norm_t_cond_dim", 32),
        )
        return VoxtralConfig(enc, dec, downsample=e.get("downsample_factor", 4))
    except (TypeError, ValueError, AttributeError) as ex:
        raise ModelError(f"The MLX Voxtral config.json is malformed ({ex}).") from ex
