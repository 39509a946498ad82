"""Voxtral checkpoints: the tensor names of each dialect mapped to one canonical set, and weight loading.

Dialects (detected by ``engine.build``): ``hf`` (config.json + model.safetensors, legacy names, q/k rows
permuted for half-split RoPE), ``mistral`` (params.json + consolidated.safetensors, interleaved RoPE) and
``mlx`` (the mlx-audio layout published as mlx-community/Voxtral-Mini-4B-Realtime-2602-*, interleaved RoPE,
optionally affine-quantized: ``.weight`` packed uint32 + ``.scales`` + ``.biases``). Weights are used as
stored; the RoPE flavour follows the dialect, so one loaded model uses one convention only.
"""

from __future__ import annotations

from ...errors import ModelError

# canonical per-layer suffix -> dialect suffix
_ENC_LAYER = {
    "hf": {
        "attn_norm": "self_attn_layer_norm.weight",
        "wq.weight": "self_attn.q_proj.weight",
        "wq.bias": "self_attn.q_proj.bias",
        "wk.weight": "self_attn.k_proj.weight",
        "wv.weight": "self_attn.v_proj.weight",
        "wv.bias": "self_attn.v_proj.bias",
        "wo.weight": "self_attn.o_proj.weight",
        "wo.bias": "self_attn.o_proj.bias",
        "ffn_norm": "final_layer_norm.weight",
        "w1.weight": "mlp.gate_proj.weight",
        "w3.weight": "mlp.up_proj.weight",
        "w2.weight": "mlp.down_proj.weight",
        "w2.bias": "mlp.down_proj.bias",
    },
    "mistral": {
        "attn_norm": "attention_norm.weight",
        "wq.weight": "attention.wq.weight",
        "wq.bias": "attention.wq.bias",
        "wk.weight": "attention.wk.weight",
        "wv.weight": "attention.wv.weight",
        "wv.bias": "attention.wv.bias",
        "wo.weight": "attention.wo.weight",
        "wo.bias": "attention.wo.bias",
        "ffn_norm": "ffn_norm.weight",
        "w1.weight": "feed_forward.w1.weight",
        "w3.weight": "feed_forward.w3.weight",
        "w2.weight": "feed_forward.w2.weight",
        "w2.bias": "feed_forward.w2.bias",
    },
}
_DEC_LAYER = {
    "hf": {
        "attn_norm": "input_layernorm.weight",
        "wq.weight": "self_attn.q_proj.weight",
        "wk.weight": "self_attn.k_proj.weight",
        "wv.weight": "self_attn.v_proj.weight",
        "wo.weight": "self_attn.o_proj.weight",
        "ffn_norm": "post_attention_layernorm.weight",
        "w1.weight": "mlp.gate_proj.weight",
        "w3.weight": "mlp.up_proj.weight",
        "w2.weight": "mlp.down_proj.weight",
        "ada_down.weight": "ada_rms_norm.linear1.weight",
        "ada_up.weight": "ada_rms_norm.linear2.weight",
    },
    "mistral": {
        "attn_norm": "attention_norm.weight",
        "wq.weight": "attention.wq.weight",
        "wk.weight": "attention.wk.weight",
        "wv.weight": "attention.wv.weight",
        "wo.weight": "attention.wo.weight",
        "ffn_norm": "ffn_norm.weight",
        "w1.weight": "feed_forward.w1.weight",
        "w3.weight": "feed_forward.w3.weight",
        "w2.weight": "feed_forward.w2.weight",
        "ada_down.weight": "ada_rms_norm_t_cond.0.weight",
        "ada_up.weight": "ada_rms_norm_t_cond.2.weight",
    },
}
_NAT = "mm_streams_embeddings.embedding_module."
_GLOBAL = {
    "hf": {
        "conv1.weight": "audio_tower.embedder.conv1.weight",
        "conv1.bias": "audio_tower.embedder.conv1.bias",
        "conv2.weight": "audio_tower.embedder.conv2.weight",
        "conv2.bias": "audio_tower.embedder.conv2.bias",
        "enc_norm": "audio_tower.norm.weight",
        "proj1.weight": "multi_modal_projector.linear_1.weight",
        "proj2.weight": "multi_modal_projector.linear_2.weight",
        "tok.weight": "language_model.model.embed_tokens.weight",
        "dec_norm": "language_model.model.norm.weight",
        "enc_layer": "audio_tower.layers.{i}.",
        "dec_layer": "language_model.model.layers.{i}.",
    },
    "mistral": {
        "conv1.weight": _NAT + "whisper_encoder.conv_layers.0.conv.weight",
        "conv1.bias": _NAT + "whisper_encoder.conv_layers.0.conv.bias",
        "conv2.weight": _NAT + "whisper_encoder.conv_layers.1.conv.weight",
        "conv2.bias": _NAT + "whisper_encoder.conv_layers.1.conv.bias",
        "enc_norm": _NAT + "whisper_encoder.transformer.norm.weight",
        "proj1.weight": _NAT + "audio_language_projection.0.weight",
        "proj2.weight": _NAT + "audio_language_projection.2.weight",
        "tok.weight": _NAT + "tok_embeddings.weight",
        "dec_norm": "norm.weight",
        "enc_layer": _NAT + "whisper_encoder.transformer.layers.{i}.",
        "dec_layer": "layers.{i}.",
    },
}


def names(dialect: str, n_enc: int, n_dec: int) -> dict[str, str]:
    """Canonical name -> stored name for every tensor the engine reads."""
    if dialect not in _GLOBAL:
        raise ModelError(f"Unsupported Voxtral checkpoint layout '{dialect}'.")
    g = _GLOBAL[dialect]
    out = {k: v for k, v in g.items() if not k.endswith("_layer")}
    for i in range(n_enc):
        for k, v in _ENC_LAYER[dialect].items():
            out[f"enc.{i}.{k}"] = g["enc_layer"].format(i=i) + v
    for i in range(n_dec):
        for k, v in _DEC_LAYER[dialect].items():
            out[f"dec.{i}.{k}"] = g["dec_layer"].format(i=i) + v
    return out


# The mlx-audio layout (mlx-community/Voxtral-Mini-4B-Realtime-2602-*): native names re-rooted under
# ``encoder.``/``decoder.``, conv kernels stored MLX-style ``[out, k, in]`` (the loader transposes them back).
_ENC_LAYER["mlx"] = {k: v.replace("feed_forward.", "feed_forward_") for k, v in _ENC_LAYER["mistral"].items()}
_DEC_LAYER["mlx"] = {
    k: v.replace("feed_forward.", "feed_forward_")
    .replace("t_cond.0.", "t_cond.ada_down.")
    .replace("t_cond.2.", "t_cond.ada_up.")
    for k, v in _DEC_LAYER["mistral"].items()
}
_GLOBAL["mlx"] = {
    "conv1.weight": "encoder.conv_layers_0_conv.conv.weight",
    "conv1.bias": "encoder.conv_layers_0_conv.conv.bias",
    "conv2.weight": "encoder.conv_layers_1_conv.conv.weight",
    "conv2.bias": "encoder.conv_layers_1_conv.conv.bias",
    "enc_norm": "encoder.transformer_norm.weight",
    "proj1.weight": "encoder.audio_language_projection_0.weight",
    "proj2.weight": "encoder.audio_language_projection_2.weight",
    "tok.weight": "decoder.tok_embeddings.weight",
    "dec_norm": "decoder.norm.weight",
    "enc_layer": "encoder.transformer_layers.{i}.",
    "dec_layer": "decoder.layers.{i}.",
}
