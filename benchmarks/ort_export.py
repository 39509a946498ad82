"""Export a transformers Moonshine Streaming model to ONNX the way an ONNX runtime deploys it (benchmark only).

Three graphs, each from the transformers modules themselves (same weights, traced by ``torch.onnx.export``):

- ``encoder.onnx``: ``input_values [1, n] -> last_hidden_state [1, T, D_enc]`` (the whole offline encoder with
  its sliding-window masks, as transformers runs it with an all-ones ``attention_mask``);
- ``cross_kv.onnx``: ``encoder_hidden_states [1, T, D_enc] -> cross_k.i, cross_v.i [1, H, T, hd]`` for every
  decoder layer (positional embedding, adapter projection, the cross-attention k/v projections), run once
  per memory, like the vendor's runtime;
- ``decoder_step.onnx``: one token with a self-attention cache: ``input_ids [1, 1]``, ``past_k.i, past_v.i
  [1, H, P, hd]``, ``cross_k.i, cross_v.i`` -> ``logits [1, V]``, ``present_k.i, present_v.i [1, H, P + 1, hd]``
  (the decoder layers of transformers with an ``EncoderDecoderCache`` built from those tensors, the final
  norm and ``proj_out``; the position is the cache length, as ``generate`` does).

``quantize_int8`` writes the dynamic int8 variant of a graph (``onnxruntime.quantization.quantize_dynamic``:
int8 weights per tensor, activations quantized on the fly), the usual ONNX Runtime CPU deployment.
"""

from __future__ import annotations

import sys
from pathlib import Path


def _modules(model):
    """(encoder, decoder, proj_out) of a ``MoonshineStreamingForConditionalGeneration``."""
    return model.model.encoder, model.model.decoder, model.proj_out


class _KV:
    def __init__(self, keys, values):
        self.keys, self.values = keys, values


class _Layers:
    """The part of transformers' ``DynamicCache`` the Moonshine attention uses (``layers[i].keys/values``,
    ``update``), over plain tensors: the real class starts from empty tensors that the ONNX tracer cannot
    concatenate."""

    def __init__(self, tensors):
        self.layers = [_KV(tensors[i], tensors[i + 1]) for i in range(0, len(tensors), 2)]

    def update(self, keys, values, layer_idx, **_):
        layer = self.layers[layer_idx]
        layer.keys = torch_cat(layer.keys, keys)
        layer.values = torch_cat(layer.values, values)
        return layer.keys, layer.values


def torch_cat(a, b):
    import torch

    return torch.cat([a, b], dim=2)


class _StepCache:
    """An ``EncoderDecoderCache`` stand-in: self-attention K/V of the past tokens, cross-attention K/V ready."""

    def __init__(self, past, cross):
        self.self_attention_cache, self.cross_attention_cache = _Layers(past), _Layers(cross)
        self.is_updated = dict.fromkeys(range(len(past) // 2), True)


def export_all(model, folder: Path, n_samples: int) -> None:
    """Write ``encoder.onnx``, ``cross_kv.onnx`` and ``decoder_step.onnx`` of ``model`` into ``folder``."""
    import torch
    from torch import nn

    enc_mod, dec, head = _modules(model)
    cfg = model.config
    n_layers, hkv, hd = cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.head_dim
    d_enc = cfg.encoder_config.hidden_size

    windows = [tuple(w) for w in cfg.encoder_config.sliding_windows]

    class Encoder(nn.Module):
        """The encoder's embedder, layers and final norm; the sliding-window masks are built here with plain
        tensor ops (transformers builds them through ``torch.vmap``, which the ONNX tracer cannot follow), with
        transformers' semantics: query q sees key k iff ``0 <= q - k < L`` or ``0 < k - q < R``."""

        def __init__(self):
            super().__init__()
            self.enc = enc_mod

        def forward(self, input_values):
            h, _ = self.enc.embedder(input_values)
            pos = torch.arange(h.shape[1])
            d = pos[:, None] - pos[None, :]
            for layer, (left, right) in zip(self.enc.layers, windows):
                mask = ((d >= 0) & (d < left)) | ((d < 0) & (-d < right))
                h = layer(h, attention_mask=mask[None, None])
            return self.enc.final_norm(h)

    class CrossKV(nn.Module):
        def __init__(self):
            super().__init__()
            self.dec = dec

        def forward(self, enc):
            t = enc.shape[1]
            m = self.dec.proj(enc + self.dec.pos_emb.weight[:t][None])
            out = []
            for layer in self.dec.layers:
                a = layer.encoder_attn
                out.append(a.k_proj(m).view(1, t, hkv, hd).transpose(1, 2))
                out.append(a.v_proj(m).view(1, t, hkv, hd).transpose(1, 2))
            return tuple(out)

    class Step(nn.Module):
        def __init__(self):
            super().__init__()
            self.dec, self.head = dec, head

        def forward(self, input_ids, *kv):
            past, cross = kv[: 2 * n_layers], kv[2 * n_layers :]
            cache = _StepCache(past, cross)
            position_ids = (torch.arange(1) + past[0].shape[2])[None]
            h = self.dec.embed_tokens(input_ids)
            rope = self.dec.rotary_emb(h, position_ids=position_ids)
            dummy = h.new_zeros(1, 1, d_enc)  # cross K/V come from the cache; the layer only checks it is given
            for layer in self.dec.layers:
                h = layer(
                    h, None, dummy, position_ids=position_ids, cache=cache, use_cache=True, position_embeddings=rope
                )
            logits = self.head(self.dec.norm(h))[:, -1]
            present = [t for layer in cache.self_attention_cache.layers for t in (layer.keys, layer.values)]
            return (logits, *present)

    # ONNX has Asinh (opset 9) but the TorchScript exporter has no symbolic for aten::asinh
    torch.onnx.register_custom_op_symbolic("aten::asinh", lambda g, v: g.op("Asinh", v), 9)
    folder.mkdir(parents=True, exist_ok=True)
    x = torch.zeros(1, n_samples)
    t_enc = n_samples // 320
    with torch.inference_mode():
        enc_out = Encoder()(x)
    kv_names = [f"{kind}_{x}.{i}" for i in range(n_layers) for kind, x in (("past", "k"), ("past", "v"))]
    cross_names = [f"cross_{x}.{i}" for i in range(n_layers) for x in ("k", "v")]
    present_names = [f"present_{x}.{i}" for i in range(n_layers) for x in ("k", "v")]
    past = tuple(torch.zeros(1, hkv, 3, hd) for _ in kv_names)
    cross = tuple(torch.zeros(1, hkv, t_enc, hd) for _ in cross_names)
    jobs = [
        (
            "encoder.onnx",
            Encoder(),
            (x,),
            ["input_values"],
            ["last_hidden_state"],
            {"input_values": {1: "samples"}, "last_hidden_state": {1: "frames"}},
        ),
        (
            "cross_kv.onnx",
            CrossKV(),
            (enc_out,),
            ["encoder_hidden_states"],
            cross_names,
            {"encoder_hidden_states": {1: "frames"}, **{n: {2: "frames"} for n in cross_names}},
        ),
        (
            "decoder_step.onnx",
            Step(),
            (torch.tensor([[5]]), *past, *cross),
            ["input_ids", *kv_names, *cross_names],
            ["logits", *present_names],
            {
                **{n: {2: "past"} for n in kv_names},
                **{n: {2: "frames"} for n in cross_names},
                **{n: {2: "total"} for n in present_names},
            },
        ),
    ]
    for name, mod, args, inputs, outputs, axes in jobs:
        path = folder / name
        print(f"exporting {path} ...", file=sys.stderr, flush=True)
        with torch.no_grad():
            if name == "decoder_step.onnx":  # the TorchScript exporter mis-ranks the RoPE repeat_interleave
                dims = {n: {a: torch.export.Dim(v, min=1, max=4096) for a, v in d.items()} for n, d in axes.items()}
                shapes = {"input_ids": None, "kv": tuple(dims[n] for n in kv_names + cross_names)}
                prog = torch.onnx.export(
                    mod.eval(),
                    args,
                    input_names=inputs,
                    output_names=outputs,
                    dynamic_shapes=shapes,
                    opset_version=18,
                    dynamo=True,
                    optimize=True,
                )
                prog.save(str(path))
            else:
                torch.onnx.export(
                    mod.eval(),
                    args,
                    str(path),
                    input_names=inputs,
                    output_names=outputs,
                    dynamic_axes=axes,
                    opset_version=17,
                    dynamo=False,
                )


def quantize_int8(src: Path, dst: Path) -> None:
    """The dynamic int8 variant of ONNX graph ``src`` (weights int8 per tensor, activations on the fly)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8)
