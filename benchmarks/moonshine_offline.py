#!/usr/bin/env python3
"""Offline Moonshine Streaming speed: our NumPy and MLX backends against the transformers reference.

For each variant (tiny / small / medium at full size, random weights) this measures, in one process with
the same thread count for every library:

- **encoder ms per second of audio**: the whole offline encoder (frontend + layers + final norm) on
  ``--seconds`` of seeded noise. NumPy / MLX: ``model.encode(audio)`` (MLX forced with ``mx.eval``);
  torch: ``model.model.encoder(x, attention_mask=mask)`` under ``torch.inference_mode`` (the mask makes
  HF apply the sliding windows, as the processor always does).
- **decoder ms per token**: the mean of the cached single-token steps at positions 1..N, N =
  ceil(6.5 tokens/s x seconds), cross-attending over the whole memory (500 frames for 10 s). The start
  token at position 0 is run first and timed separately ("first step"). NumPy / MLX:
  ``model.decode([token], pos, cache, xkv)`` with the cross K/V from ``model.cross_kv(model.memory(enc))``
  (their cost is in the first-step column); torch: ``model(encoder_outputs=..., decoder_input_ids=...,
  cache=EncoderDecoderCache(DynamicCache, DynamicCache), use_cache=True)`` step by step, as ``generate``
  does, where the first step fills the cross-attention cache. Every backend is fed the same fixed token
  ids (the cost of a step does not depend on them).
- **torch generate() ms per token** (cross-check of the manual loop): ``(t(generate N+1 tokens) -
  t(generate 1 token)) / N`` with ``min_new_tokens = max_new_tokens``, which cancels the encoder and the
  first step and keeps generate's own per-step overhead.

NumPy and torch runs are interleaved round-robin (a warm-up round first, then ``--runs`` timed rounds; the
order alternates every round, and ``--pause`` can put a sleep before each turn), so background load and
drift hit both alike; MLX (whose CPU backend is 20-100x slower) runs its ``--mlx-runs`` rounds
afterwards, warmed up by its load-time encode and parity step. Each cell is the median over the rounds.
The report also gives the share of CPU time other processes used during the rounds (the load average
cannot tell, since it counts this benchmark's own threads), and a parity check (max |diff| of encoder
output and first-step logits against torch) to show that every backend computes the same thing.

The models are built once with transformers (HF init, seed 0) and cached under ``benchmarks/.cache``
(config.json, generation_config.json, model.safetensors, and a decode-only tokenizer.json so that our
loader accepts the folder).

    .venv/bin/python benchmarks/moonshine_offline.py                       # tiny, small, medium; 10 s; 5 runs
    .venv/bin/python benchmarks/moonshine_offline.py --quick               # smoke check (tiny, 2 s, 1 run)
    .venv/bin/python benchmarks/moonshine_offline.py --variants small --backends numpy --profile

``--profile`` adds, for the NumPy backend, a per-op time breakdown (the backend's methods wrapped with
timers; "model glue" is everything else in model.py) and a cProfile listing. ``--patch-numpy-ops`` is a
what-if: it swaps NumPy's gelu / layer_norm / single-query attention for the candidates in
``numpy_ops.py`` inside this process (the engine is not changed) and says so in the report;
``--full-blas-pool`` is another: NumPy keeps every BLAS thread for small products too (the engine picks
one thread for products below 64M multiply-adds over matrices below 4M elements: in the Moonshine decoder,
every matrix-vector product except the 32k-vocabulary head).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import _common  # noqa: E402  (stdlib only; must come before numpy / torch for the thread settings)

CACHE = HERE / ".cache"
SAMPLE_RATE = 16000
TOKENS_PER_SECOND = 6.5
BACKENDS = ("numpy", "torch", "mlx")

# ---------------------------------------------------------------------------------------------------
# Variants (notes/moonshine_streaming.md section 1)
# ---------------------------------------------------------------------------------------------------

_DECODER_COMMON = {
    "vocab_size": 32768,
    "hidden_act": "silu",
    "max_position_embeddings": 4096,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
    "decoder_start_token_id": 1,
    "tie_word_embeddings": False,
    "attention_bias": False,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.8},
}
_ENCODER_COMMON = {
    "hidden_act": "gelu",
    "max_position_embeddings": 4096,
    "sample_rate": 16000,
    "frame_ms": 5.0,
    "attention_bias": False,
}


def _windows(n_causal: int) -> list[list[int]]:
    """(16,4) x 2, (16,0) x n_causal, (16,4) x 2 as a list of lists (what 5.24.0's config accepts)."""
    return [[16, 4]] * 2 + [[16, 0]] * n_causal + [[16, 4]] * 2


def _variant(enc: tuple[int, int, int, int, int], dec: tuple[int, int, int, int, int]) -> dict:
    """Config kwargs from (hidden, layers, heads, head_dim, ffn) of the encoder and the decoder."""
    eh, el, ea, ed, ef = enc
    dh, dl, da, dd, df = dec
    return {
        **_DECODER_COMMON,
        "hidden_size": dh,
        "num_hidden_layers": dl,
        "num_attention_heads": da,
        "num_key_value_heads": da,
        "head_dim": dd,
        "intermediate_size": df,
        "encoder_config": {
            **_ENCODER_COMMON,
            "hidden_size": eh,
            "num_hidden_layers": el,
            "num_attention_heads": ea,
            "num_key_value_heads": ea,
            "head_dim": ed,
            "intermediate_size": ef,
            "sliding_windows": _windows(el - 4),
        },
    }


VARIANTS: dict[str, dict] = {
    "tiny": _variant((320, 6, 8, 40, 1280), (320, 6, 8, 40, 1280)),
    "small": _variant((620, 10, 8, 64, 2480), (512, 10, 8, 64, 2048)),
    "medium": _variant((768, 14, 10, 64, 3072), (640, 14, 10, 64, 2560)),
}

# ---------------------------------------------------------------------------------------------------
# Model folders
# ---------------------------------------------------------------------------------------------------


def tokenizer_json(vocab_size: int) -> str:
    """A decode-only Llama-style tokenizer.json: BPE without merges, byte fallback (notes section 3.3).

    Ids: 0 ``<unk>``, 1 ``<s>``, 2 ``</s>``, 3..258 ``<0x00>``..``<0xFF>``, then made-up pieces.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers

    marker = "\u2581"
    vocab = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    vocab += [(marker if i % 2 == 0 else "") + f"w{i}" for i in range(vocab_size - len(vocab))]
    tok = Tokenizer(
        models.BPE(
            vocab={t: i for i, t in enumerate(vocab)}, merges=[], unk_token="<unk>", byte_fallback=True, fuse_unk=True
        )
    )
    tok.normalizer = normalizers.Sequence([normalizers.Prepend(marker), normalizers.Replace(" ", marker)])
    tok.decoder = decoders.Sequence(
        [decoders.Replace(marker, " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ("<unk>", "<s>", "</s>")])
    return tok.to_str()


def model_folder(variant: str) -> Path:
    """The cached random-weight model folder for ``variant``, built on first use."""
    kwargs = VARIANTS[variant]
    key = hashlib.sha1(json.dumps(kwargs, sort_keys=True).encode()).hexdigest()[:10]
    folder = CACHE / f"moonshine-{variant}-{key}"
    if (folder / ".complete").is_file():
        return folder
    import torch
    from transformers import MoonshineStreamingConfig, MoonshineStreamingForConditionalGeneration

    print(f"building {variant} in {folder} ...", file=sys.stderr, flush=True)
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    cfg = MoonshineStreamingConfig(**json.loads(json.dumps(kwargs)))
    model = MoonshineStreamingForConditionalGeneration(cfg).eval()
    model.save_pretrained(folder, safe_serialization=True)
    (folder / "tokenizer.json").write_text(tokenizer_json(cfg.vocab_size))
    (folder / ".complete").write_text(key + "\n")
    del model
    gc.collect()
    return folder


# ---------------------------------------------------------------------------------------------------
# Runners: one per backend, each with encode() -> seconds and decode() -> (first_step_s, per_token_s)
# ---------------------------------------------------------------------------------------------------


class EngineRunner:
    """Our engine (NumPy or MLX backend) through the model API (``quantize``: None, 8 or 4-bit weights)."""

    def __init__(self, folder: Path, backend: str, audio, tokens: list[int], quantize: int | None = None):
        from engine import load_model

        self.m = load_model(folder, backend=backend, quantize=quantize)
        self.audio, self.tokens = audio, tokens
        enc, self.valid = self.m.encode(audio)
        self.m.B.eval(enc)
        self.enc = enc

    def encode(self) -> float:
        t0 = time.perf_counter()
        enc, _ = self.m.encode(self.audio)
        self.m.B.eval(enc)
        return time.perf_counter() - t0

    def decode(self) -> tuple[float, float]:
        import numpy as np

        m = self.m
        t0 = time.perf_counter()
        xkv = m.cross_kv(m.memory(self.enc))
        cache = m.new_self_cache(len(self.tokens) + 1)
        logits = m.decode([m.cfg.decoder_start_token_id], 0, cache, xkv, self.valid)
        int(np.argmax(logits))
        t1 = time.perf_counter()
        for i, tok in enumerate(self.tokens):
            logits = m.decode([tok], i + 1, cache, xkv, self.valid)
            int(np.argmax(logits))
        t2 = time.perf_counter()
        return t1 - t0, (t2 - t1) / len(self.tokens)

    def first_logits(self):
        m = self.m
        xkv = m.cross_kv(m.memory(self.enc))
        return m.decode([m.cfg.decoder_start_token_id], 0, m.new_self_cache(1), xkv, self.valid)

    def encoder_output(self):
        return self.m.B.to_numpy(self.enc)


class TorchRunner:
    """The transformers reference (torch CPU, float32, eager modules, the model's default attention)."""

    def __init__(self, folder: Path, audio, tokens: list[int]):
        import torch
        from transformers import MoonshineStreamingForConditionalGeneration

        self.torch = torch
        cls = MoonshineStreamingForConditionalGeneration
        self.model = cls.from_pretrained(folder, dtype=torch.float32).eval()
        self.x = torch.from_numpy(audio)[None]
        self.mask = torch.ones_like(self.x, dtype=torch.long)
        self.tokens = tokens
        with torch.inference_mode():
            self.enc_out = self.model.model.encoder(self.x, attention_mask=self.mask)
            self.enc = self.enc_out.last_hidden_state.clone()

    @property
    def attn_implementation(self) -> str:
        return str(getattr(self.model.config, "_attn_implementation", "?"))

    def encode(self) -> float:
        with self.torch.inference_mode():
            t0 = time.perf_counter()
            self.model.model.encoder(self.x, attention_mask=self.mask)
            return time.perf_counter() - t0

    def _steps(self, n: int | None = None):
        """Run the start token then ``n`` cached steps; returns (first_s, total_steps_s, first_logits)."""
        torch = self.torch
        from transformers.cache_utils import DynamicCache, EncoderDecoderCache
        from transformers.models.moonshine_streaming.modeling_moonshine_streaming import (
            MoonshineStreamingEncoderModelOutput,
        )

        tokens = self.tokens if n is None else self.tokens[:n]
        cfg = self.model.config
        with torch.inference_mode():
            # The decoder adds pos_emb to encoder_hidden_states in place (notes section 2.6): give it a copy.
            enc_out = MoonshineStreamingEncoderModelOutput(
                last_hidden_state=self.enc.clone(), attention_mask=self.enc_out.attention_mask
            )
            t0 = time.perf_counter()
            cache = EncoderDecoderCache(DynamicCache(config=cfg), DynamicCache(config=cfg))
            ids = torch.tensor([[cfg.decoder_start_token_id]])
            out = self.model(encoder_outputs=enc_out, decoder_input_ids=ids, cache=cache, use_cache=True)
            int(out.logits[0, -1].argmax())
            first_logits = out.logits[0, -1].numpy().copy()
            t1 = time.perf_counter()
            for tok in tokens:
                out = self.model(
                    encoder_outputs=enc_out, decoder_input_ids=torch.tensor([[tok]]), cache=out.cache, use_cache=True
                )
                int(out.logits[0, -1].argmax())
            t2 = time.perf_counter()
        return t1 - t0, t2 - t1, first_logits

    def decode(self) -> tuple[float, float]:
        first, steps, _ = self._steps()
        return first, steps / len(self.tokens)

    def generate_time(self, new_tokens: int) -> float:
        torch = self.torch
        with torch.inference_mode():
            t0 = time.perf_counter()
            self.model.generate(
                input_values=self.x,
                attention_mask=self.mask,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                do_sample=False,
            )
            return time.perf_counter() - t0

    def first_logits(self):
        return self._steps(0)[2]

    def encoder_output(self):
        return self.enc[0].numpy()


# ---------------------------------------------------------------------------------------------------
# Profiling (NumPy backend)
# ---------------------------------------------------------------------------------------------------

_OPS = (
    "linear",
    "attention",
    "layer_norm",
    "gelu",
    "silu",
    "rope",
    "conv1d",
    "write",
    "softmax",
    "concat",
    "asarray",
    "to_numpy",
    "zeros",
)


def op_profile(runner: EngineRunner, what: str, detail_linear: bool = True) -> list[tuple[str, float]]:
    """Wall time per backend op for one ``what`` ('encode' or 'decode') call of the NumPy runner.

    The backend instance's methods are wrapped with timers for the duration (nested ops are charged
    to the outermost, e.g. softmax inside attention goes to attention). ``linear`` is split by weight
    shape and by whether x has one row (a matrix-vector product) or many.
    """
    acc: dict[str, float] = {}

    def record(name, args, dt):
        key = name
        if name == "linear" and detail_linear:
            x, w = args[0], args[1]
            key = f"linear {tuple(w.shape)} x{'1' if x.shape[0] == 1 else 'T'}"
            if len(args) > 2 and args[2] is not None:
                key += " +bias"
        acc[key] = acc.get(key, 0.0) + dt

    with _common.timed_ops(runner.m.B, _OPS, record):
        t0 = time.perf_counter()
        if what == "encode":
            runner.encode()
        else:
            runner.decode()
        total = time.perf_counter() - t0
    rows = sorted(acc.items(), key=lambda kv: -kv[1])
    rows.append(("model glue (everything else)", total - sum(acc.values())))
    rows.append(("TOTAL", total))
    return rows


def print_profiles(variant: str, runner: EngineRunner, n_tokens: int) -> str:
    """Op breakdown and cProfile of the NumPy encoder and decoder; returns markdown."""
    import cProfile
    import io
    import pstats

    out = [f"\n### NumPy profile: {variant}\n"]
    runner.encode()  # warm
    for what in ("encode", "decode"):
        rows = op_profile(runner, what)
        total = rows[-1][1]
        scale = 1000.0 if what == "encode" else 1000.0 / n_tokens
        unit = "ms per call" if what == "encode" else "ms per token (steps 1..N, first step included)"
        table = [[k, _common.fmt(v * scale, 2), f"{100 * v / total:.1f}%"] for k, v in rows if v * scale >= 0.005]
        out.append(f"{what} ({unit}):\n")
        out.append(_common.markdown_table(["op", "ms", "share"], table) + "\n")
        prof = cProfile.Profile()
        prof.enable()
        runner.encode() if what == "encode" else runner.decode()
        prof.disable()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(12)
        body = "\n".join(line for line in s.getvalue().splitlines() if line.strip())
        out.append(f"cProfile {what}, top by tottime:\n\n```\n{body}\n```\n")
    text = "\n".join(out)
    print(text, flush=True)
    return text


# ---------------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------------


def timed_rounds(variant: str, runners: dict, runs: int, warmup: int, pause: float = 0.0):
    """Round-robin ``encode`` + ``decode`` over ``runners``; returns the samples per backend.

    ``pause`` seconds of sleep before each backend's turn let the previous library's pool threads
    (OpenBLAS, OpenMP) stop spinning, so that they do not slow the next one down on a small machine.
    """
    samples = {b: {"enc": [], "first": [], "tok": []} for b in runners}
    order = list(runners.items())
    for r in range(warmup + runs):
        for b, runner in order if r % 2 == 0 else order[::-1]:  # alternate the order: no position bias
            if pause:
                time.sleep(pause)
            te = runner.encode()
            tf, tt = runner.decode()
            if r >= warmup:
                samples[b]["enc"].append(te)
                samples[b]["first"].append(tf)
                samples[b]["tok"].append(tt)
        tag = "warm-up" if r < warmup else f"round {r - warmup + 1}/{runs}"
        print(
            f"[{variant}] {'/'.join(runners)} {tag} done (load {_common.load_average()})", file=sys.stderr, flush=True
        )
    return samples


def guarded(args, notes: list[str], variant: str, what: str, fn):
    """``fn()`` under the quiet-wait / repeat-when-disturbed policy of ``args``; appends the disturbance
    (share of the CPU other processes used while ``fn`` ran) to ``notes``."""
    for attempt in range(1 + args.retries):
        if args.wait_quiet:
            share = _common.wait_quiet(timeout=args.wait_quiet)
            print(f"[{variant}] machine busy share before the {what}: {share:.2f}", file=sys.stderr)
        other = _common.OtherLoad().start()
        out = fn()
        other_load = other.stop()
        if other_load is None or other_load <= args.max_other_load or attempt == args.retries:
            break
        print(
            f"[{variant}] other processes used {100 * other_load:.0f}% of the CPU during the {what}: repeating",
            file=sys.stderr,
            flush=True,
        )
    if other_load is not None:
        notes.append(
            f"- {variant}: other processes used {100 * other_load:.0f}% of the machine's CPU time "
            f"during the {what} (attempt {attempt + 1})"
        )
    return out


def patch_numpy_ops() -> str:
    """What-if: swap the NumPy backend's gelu, layer_norm and single-query attention for the candidates
    in ``numpy_ops.py`` (on the shared backend instance, in this process only; the engine is unchanged)."""
    import numpy_ops

    from engine.backends import get_backend

    B = get_backend("numpy")
    orig_attention = B.attention

    def attention(q, k, v, scale, mask=None):
        if mask is None and q.shape[1] == 1 and q.shape[0] == k.shape[0]:
            if getattr(B, "blas", None) is not None:
                B.blas.for_work(q.size * k.shape[1])  # the engine's thread policy, as the original does
            return numpy_ops.attention_one(q, k, v, scale)
        return orig_attention(q, k, v, scale, mask)

    def layer_norm(x, weight, bias, eps):
        y = numpy_ops.layer_norm_lean(x, weight, eps)
        return y if bias is None else y + bias

    B.gelu = numpy_ops.gelu_f32
    B.layer_norm = layer_norm
    B.attention = attention
    return (
        "gelu -> numpy_ops.gelu_f32, layer_norm -> numpy_ops.layer_norm_lean, "
        "1-query attention -> numpy_ops.attention_one"
    )


def full_blas_pool() -> str:
    """What-if: keep the whole BLAS pool for every product (switch off the NumPy backend's policy of one
    BLAS thread for small products, ``engine.backends.blas``), in this process."""
    from engine.backends import get_backend

    B = get_backend("numpy")
    blas = getattr(B, "blas", None)
    if blas is None:
        return "no BLAS thread policy in this engine version; nothing changed"
    blas.for_work(1 << 62)  # select the full pool once
    blas.for_work = lambda *a, **k: None
    return f"BLAS pool fixed at {blas.full} threads for every product"


def git_state() -> str:
    """HEAD commit and the number of uncommitted changes under engine/ (others edit it concurrently)."""
    import subprocess

    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "engine"], capture_output=True, text=True, check=True
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"HEAD {head}; uncommitted changes under engine/: " + (", ".join(x[3:] for x in dirty) or "none")


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--variants", default="tiny,small,medium", help="comma list of tiny, small, medium")
    p.add_argument("--backends", default="numpy,torch,mlx", help="comma list of numpy, torch, mlx")
    p.add_argument("--runs", type=int, default=5, help="timed rounds per variant (median reported)")
    p.add_argument(
        "--mlx-runs", type=int, default=None, help="timed rounds for MLX (default: --runs; MLX's CPU backend is slow)"
    )
    p.add_argument("--seconds", type=float, default=10.0, help="audio length (rounded to whole 80 ms chunks)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads for every library")
    p.add_argument("--no-generate", action="store_true", help="skip the torch generate() cross-check")
    p.add_argument(
        "--pause",
        type=float,
        default=0.0,
        metavar="S",
        help="sleep before each backend's turn in a round (lets thread pools go idle)",
    )
    p.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        metavar="S",
        help="before each group of rounds wait up to S seconds for the machine to be idle",
    )
    p.add_argument(
        "--max-other-load",
        type=float,
        default=0.10,
        metavar="F",
        help="repeat a group of rounds when other processes used more than this share of the CPU",
    )
    p.add_argument("--retries", type=int, default=0, help="how many times to repeat a disturbed group")
    p.add_argument("--profile", action="store_true", help="add a NumPy op breakdown and cProfile listing")
    p.add_argument(
        "--patch-numpy-ops",
        action="store_true",
        help="what-if: run NumPy with the candidate ops of numpy_ops.py (gelu, layer_norm, attention)",
    )
    p.add_argument(
        "--full-blas-pool",
        action="store_true",
        help="what-if: NumPy keeps every BLAS thread for small products too (engine policy off)",
    )
    p.add_argument("--json", type=Path, help="also write the raw numbers here")
    p.add_argument("--markdown", type=Path, help="also write the report (markdown) here")
    p.add_argument("--quick", action="store_true", help="smoke check: tiny, 2 s, 1 run, no generate check")
    a = p.parse_args(argv)
    if a.quick:
        if a.variants == "tiny,small,medium":
            a.variants = "tiny"
        a.seconds, a.runs, a.no_generate = min(a.seconds, 2.0), 1, True
    a.variants = [v.strip() for v in a.variants.split(",") if v.strip()]
    a.backends = [b.strip() for b in a.backends.split(",") if b.strip()]
    for v in a.variants:
        if v not in VARIANTS:
            p.error(f"unknown variant {v!r}; choose from {', '.join(VARIANTS)}")
    for b in a.backends:
        if b not in BACKENDS:
            p.error(f"unknown backend {b!r}; choose from {', '.join(BACKENDS)}")
    if a.runs < 1 or a.threads < 1 or a.seconds <= 0:
        p.error("--runs, --threads and --seconds must be positive")
    if a.mlx_runs is None:
        a.mlx_runs = a.runs
    return a


def main(argv=None) -> int:
    args = parse_args(argv)
    _common.set_threads(args.threads)

    import numpy as np
    import torch
    from transformers.utils import logging as hf_logging

    torch.set_num_threads(args.threads)
    hf_logging.set_verbosity_error()
    if "mlx" in args.backends:
        from engine.backends import mlx_available

        if not mlx_available():
            print("mlx is not importable here; skipping the MLX backend", file=sys.stderr)
            args.backends = [b for b in args.backends if b != "mlx"]

    chunk = 1280
    n_samples = max(chunk, int(round(args.seconds * SAMPLE_RATE / chunk)) * chunk)
    seconds = n_samples / SAMPLE_RATE
    n_tokens = math.ceil(TOKENS_PER_SECOND * seconds)
    audio = (np.random.default_rng(0).standard_normal(n_samples) * 0.1).astype(np.float32)
    tokens = [int(t) for t in np.random.default_rng(1).integers(259, 32000, n_tokens)]

    patched = patch_numpy_ops() if args.patch_numpy_ops and "numpy" in args.backends else ""
    if args.full_blas_pool and "numpy" in args.backends:
        patched = "; ".join(x for x in (patched, full_blas_pool()) if x)
    load_start = _common.load_average()
    lines = ["## Machine", ""] + _common.machine_report(
        args.threads, {"numpy": "numpy", "torch": "torch", "transformers": "transformers", "mlx": "mlx.core"}
    )
    lines += [f"- engine source: {git_state()}"]
    if patched:
        lines += [f"- **WHAT-IF RUN: NumPy backend changed in this process: {patched}**"]
    lines += [
        f"- load average at start (1, 5, 15 min): {load_start}",
        f"- audio: {seconds:g} s of seeded noise ({n_samples} samples, {n_samples // 320} encoder "
        f"frames); decoder: N = {n_tokens} cached steps (positions 1..{n_tokens})",
        f"- timed rounds: {args.runs} after one warm-up round, NumPy and torch interleaved; MLX "
        f"{args.mlx_runs} round(s) afterwards; medians",
    ]
    print("\n".join(lines), flush=True)

    results: dict[str, dict[str, dict[str, float]]] = {}
    extra: list[str] = []
    for variant in args.variants:
        folder = model_folder(variant)
        runners: dict[str, object] = {}
        for b in args.backends:
            print(f"[{variant}] loading {b} ...", file=sys.stderr, flush=True)
            if b == "torch":
                runners[b] = TorchRunner(folder, audio, tokens)
            else:
                runners[b] = EngineRunner(folder, b, audio, tokens)
        if "torch" in runners:
            impl = runners["torch"].attn_implementation
            extra.append(f"- {variant}: torch attention implementation `{impl}`")
        # Parity sanity: we are timing the same computation.
        if "torch" in runners:
            ref_enc, ref_logits = runners["torch"].encoder_output(), runners["torch"].first_logits()
            for b in runners:
                if b != "torch":
                    d_enc = float(np.max(np.abs(runners[b].encoder_output() - ref_enc)))
                    d_log = float(np.max(np.abs(runners[b].first_logits() - ref_logits)))
                    extra.append(
                        f"- {variant}: {b} vs torch max |diff|: encoder {d_enc:.2e}, first-step logits {d_log:.2e}"
                    )
        # numpy and torch interleaved (warm-up round, then timed rounds); MLX afterwards, on its own: its
        # CPU backend is ~20-100x slower, and its load-time encode and parity step serve as its warm-up.
        fast = {b: r for b, r in runners.items() if b != "mlx"}
        samples = {}

        for group, runs, warm in ((fast, args.runs, 1), ({"mlx": runners.get("mlx")}, args.mlx_runs, 0)):
            if group and None not in group.values():
                samples.update(
                    guarded(
                        args,
                        extra,
                        variant,
                        f"{'/'.join(group)} rounds",
                        lambda v=variant, g=group, r=runs, w=warm: timed_rounds(v, g, r, w, args.pause),
                    )
                )
        med = {b: {k: float(np.median(v)) for k, v in s.items()} for b, s in samples.items()}
        for b in med:
            sm = samples[b]
            med[b]["enc_ms_per_s"] = 1000.0 * med[b]["enc"] / seconds
            med[b]["enc_ms_per_s_range"] = [1000.0 * min(sm["enc"]) / seconds, 1000.0 * max(sm["enc"]) / seconds]
            med[b]["first_ms"] = 1000.0 * med[b]["first"]
            med[b]["tok_ms"] = 1000.0 * med[b]["tok"]
            med[b]["tok_ms_range"] = [1000.0 * min(sm["tok"]), 1000.0 * max(sm["tok"])]
            med[b]["samples"] = {k: [float(x) for x in v] for k, v in sm.items()}
        if "torch" in runners and not args.no_generate:
            tr = runners["torch"]

            def gen_check(tr=tr):
                t1, _ = _common.median_time(lambda: tr.generate_time(1), args.runs)
                tn, _ = _common.median_time(lambda: tr.generate_time(n_tokens + 1), args.runs)
                return 1000.0 * (tn - t1) / n_tokens

            med["torch"]["generate_tok_ms"] = guarded(args, extra, variant, "torch generate() check", gen_check)
        results[variant] = med
        if args.profile and "numpy" in runners:
            extra.append(print_profiles(variant, runners["numpy"], n_tokens))
        del runners
        gc.collect()

    header = [
        "variant",
        "backend",
        "encoder ms / s audio (min-max)",
        "decoder ms / token (min-max)",
        "first step ms",
        "torch generate() ms / token",
    ]
    rows = []
    for variant, med in results.items():
        for b, v in med.items():
            er, tr_ = v["enc_ms_per_s_range"], v["tok_ms_range"]
            rows.append(
                [
                    variant,
                    b,
                    f"{v['enc_ms_per_s']:.1f} ({er[0]:.1f}-{er[1]:.1f})",
                    f"{v['tok_ms']:.2f} ({tr_[0]:.2f}-{tr_[1]:.2f})",
                    _common.fmt(v["first_ms"]),
                    _common.fmt(v.get("generate_tok_ms"), 2),
                ]
            )
    report = ["", "## Results", "", _common.markdown_table(header, rows), ""]
    if all("numpy" in m and "torch" in m for m in results.values()):
        rrows = []
        for variant, med in results.items():
            enc = med["torch"]["enc_ms_per_s"] / med["numpy"]["enc_ms_per_s"]
            tok = med["torch"]["tok_ms"] / med["numpy"]["tok_ms"]
            first = med["torch"]["first_ms"] / med["numpy"]["first_ms"]
            ok = "yes" if enc >= 1.5 and tok >= 1.5 else "no"
            rrows.append([variant, f"{enc:.2f}x", f"{tok:.2f}x", f"{first:.2f}x", ok])
        report += [
            "Speed-up of NumPy over torch (torch time / NumPy time; goal >= 1.5x for encoder and decoder):",
            "",
            _common.markdown_table(["variant", "encoder", "decoder / token", "first step", "goal met"], rrows),
            "",
        ]
    report += [f"- load average at end (1, 5, 15 min): {_common.load_average()}"] + extra
    print("\n".join(report), flush=True)
    if args.json:
        args.json.write_text(
            json.dumps(
                {"seconds": seconds, "n_tokens": n_tokens, "threads": args.threads, "results": results}, indent=2
            )
        )
    if args.markdown:
        args.markdown.write_text("\n".join(lines + report) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
