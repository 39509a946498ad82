"""Moonshine Streaming configuration, read from an HF ``config.json`` (unknown keys are ignored)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ...audio import SAMPLE_RATE
from ...errors import ModelError
from ..checks import require, show


def _from_dict(cls, d: dict):
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class EncoderConfig:
    """The streaming encoder (``encoder_config`` in config.json)."""

    hidden_size: int = 320
    intermediate_size: int = 1280
    num_hidden_layers: int = 6
    num_attention_heads: int = 8
    head_dim: int | None = None
    hidden_act: str = "gelu"
    sample_rate: int = SAMPLE_RATE
    frame_ms: float = 5.0
    sliding_windows: list = field(default_factory=lambda: [[16, 4], [16, 4], [16, 0], [16, 0], [16, 4], [16, 4]])

    def __post_init__(self):
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        self.sliding_windows = [tuple(int(v) for v in w) for w in self.sliding_windows]

    @property
    def frame_len(self) -> int:
        """Samples per input frame (80 at 16 kHz and 5 ms)."""
        return int(round(self.sample_rate * self.frame_ms / 1000.0))


@dataclass
class MoonshineConfig:
    """The whole encoder-decoder model; every dimension comes from the checkpoint's config.json."""

    encoder: EncoderConfig
    vocab_size: int = 32768
    hidden_size: int = 320
    intermediate_size: int = 1280
    num_hidden_layers: int = 6
    num_attention_heads: int = 8
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    hidden_act: str = "silu"
    max_position_embeddings: int = 4096
    bos_token_id: int = 1
    eos_token_id: int = 2
    decoder_start_token_id: int | None = None
    rope_parameters: dict | None = None
    tie_word_embeddings: bool = False

    def __post_init__(self):
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        if self.decoder_start_token_id is None:
            self.decoder_start_token_id = self.bos_token_id
        if isinstance(self.eos_token_id, list):
            self.eos_token_id = int(self.eos_token_id[0])
        rp = self.rope_parameters or {}
        self.rope_parameters = {"rope_theta": 10000.0, "partial_rotary_factor": 0.8, **rp}

    @property
    def rotary_dim(self) -> int:
        """``int(head_dim * partial_rotary_factor)`` exactly as the reference computes it (may be odd)."""
        return int(self.head_dim * self.rope_parameters["partial_rotary_factor"])

    @classmethod
    def from_dict(cls, d: dict) -> MoonshineConfig:
        """Build from a parsed config.json; raises ModelError when required parts are missing or odd."""
        for key in ("encoder_config", "rope_parameters"):
            if d.get(key) is not None and not isinstance(d[key], dict):
                raise ModelError(f"The Moonshine config.json gives {key} as {show(d[key])}; it must be an object.")
        try:
            enc = _from_dict(EncoderConfig, d.get("encoder_config") or {})
            cfg = _from_dict(cls, {**d, "encoder": enc})
        except (TypeError, ValueError, ArithmeticError) as e:
            raise ModelError(f"The Moonshine config.json is malformed ({e}).") from e
        if len(enc.sliding_windows) != enc.num_hidden_layers:
            raise ModelError("The Moonshine config.json has a sliding window count that differs from its layers.")
        if cfg.rope_parameters.get("rope_type", "default") != "default":
            raise ModelError(f"Unsupported RoPE type '{cfg.rope_parameters['rope_type']}' in config.json.")
        for act, want in ((enc.hidden_act, "gelu"), (cfg.hidden_act, "silu")):
            if act != want:
                raise ModelError(f"Unsupported activation '{act}' in the Moonshine config.json.")
        where = "The Moonshine config.json"
        require(
            cfg.num_attention_heads % cfg.num_key_value_heads == 0,
            where,
            f"{cfg.num_attention_heads} attention heads cannot share {cfg.num_key_value_heads} key/value heads",
        )
        ids = (cfg.bos_token_id, cfg.eos_token_id, cfg.decoder_start_token_id)
        require(
            all(isinstance(i, int) and 0 <= i < cfg.vocab_size for i in ids),
            where,
            f"its token ids {list(ids)} lie outside the vocabulary of {cfg.vocab_size}",
        )
        require(
            0 < cfg.rope_parameters["partial_rotary_factor"] <= 1 and cfg.rotary_dim >= 2,
            where,
            "its partial_rotary_factor leaves no rotary dimensions or more than the head has",
        )
        require(
            enc.head_dim >= 1 and cfg.head_dim >= 1 and enc.frame_len >= 1, where, "a head or frame size is below 1"
        )
        return cfg
