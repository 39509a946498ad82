#!/usr/bin/env python3
"""Moonshine offline speed against ONNX Runtime: livecap's NumPy engine (float32 and, where the engine has
them, 8-bit / 4-bit weights) against the same transformers model exported to ONNX (float32 and dynamic int8).

For each variant (tiny / small / medium at full size, random weights, the folders of ``moonshine_offline``):

- **encoder ms per second of audio**: the whole offline encoder on ``--seconds`` of seeded noise;
- **decoder ms per token**: the mean of the cached single-token steps at positions 1..N (N = 6.5 tokens per
  second of audio), cross-attending over the whole memory; the first step (start token, with the cross K/V
  computation) is timed apart;
- **bound**: the bytes one step must read (decoder weights as stored, in float32 / int8 / 4-bit, plus the
  cross-attention K/V of every layer and the self-attention K/V, both float32) over the read bandwidth of
  this machine, measured here (float32 matrix-vector products over 512 MiB with one and two threads, the
  faster counts; at the start and after each variant's rounds, the best of the run counts, since this VM's
  rate moves by half between minutes); "of bound" = bound / measured step. The rate also moves within seconds
  (25-50 GB/s between consecutive 512 MiB products, median 42, on the development VM), so a probe after each
  side's steps in every round (after ``--pause``: the threads a side leaves spinning, ONNX Runtime's pool and the
  twin, slowed probes taken at once) gives the rate of the rounds' minutes: "of bound at the rounds' median rate"
  = the step's bytes over that median rate / measured step (both medians of the same rounds); "of bound per
  round" pairs each round's step with the probe taken right after it and gives the median of those shares.
- **ratios**: their time / ours from the medians, and per round (each round times both sides within a second or
  two, so the VM's drift between minutes cancels): the median of the rounds' ratios, their range, and in how many
  rounds livecap was faster.

ONNX Runtime runs the graphs of ``ort_export.py`` (``encoder``, ``cross_kv``, ``decoder_step`` with a
self-attention cache passed in and out as ``OrtValue``s, as a C++ deployment would), with ``--threads``
intra-op threads; ``ort-int8`` is the ``quantize_dynamic`` variant of the same graphs. All sides run in one
process, interleaved round-robin (a warm-up round, then ``--runs`` timed rounds, the order reversed every
round, a short ``--pause`` between sides so that the threads ONNX Runtime's pool leaves spinning for ~30 ms do
not run into the next side); each cell is the median over the rounds. ``--busy N`` runs N busy-looping processes
during the rounds (a deliberately loaded machine, e.g. a video call beside the captions).

    .venv/bin/python benchmarks/moonshine_ort.py --variants tiny,small --runs 7
    .venv/bin/python benchmarks/moonshine_ort.py --variants small --sides numpy,ort --busy 1
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import multiprocessing
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (ROOT, HERE):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import _common  # noqa: E402  (before numpy: thread settings)

SIDES = ("numpy", "numpy-q8", "numpy-q4", "ort", "ort-int8")
SAMPLE_RATE = 16000
TOKENS_PER_SECOND = 6.5


# ---------------------------------------------------------------------------------------------------
# Machine: read bandwidth
# ---------------------------------------------------------------------------------------------------


def read_bandwidth(mib: int = 512, runs: int = 5) -> dict[str, float]:
    """GB/s of a float32 matrix-vector product over ``mib`` MiB (NumPy/OpenBLAS) with one thread and with every
    thread; the better is this machine's read bound."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    rows = mib * 2**20 // (4 * 4096)
    w = np.random.default_rng(0).standard_normal((rows, 4096), dtype=np.float32)
    x = np.ones(4096, np.float32)
    out = {}
    for threads in (1, os.cpu_count() or 1):
        with threadpool_limits(threads, user_api="blas"):
            best, _ = _common.median_time(lambda: w @ x, runs, warmup=1)
        out[f"{threads} thread{'s' if threads > 1 else ''}"] = w.nbytes / best / 1e9
    return out


class ReadProbe:
    """One float32 matrix-vector product over 512 MiB with every thread: this machine's read rate at a moment
    (taken after each side's decoder steps, so the rounds' median rate is measured in the same minutes)."""

    def __init__(self, mib: int = 512):
        import numpy as np

        self.w = np.random.default_rng(0).standard_normal((mib * 2**20 // (4 * 4096), 4096), dtype=np.float32)
        self.x = np.ones(4096, np.float32)

    def rate(self) -> float:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(os.cpu_count() or 1, user_api="blas"):
            t0 = time.perf_counter()
            self.w @ self.x
            return self.w.nbytes / (time.perf_counter() - t0) / 1e9


def step_bytes(cfg: dict, frames: int, past: float, weight_bytes: float) -> float:
    """Bytes one decoder step reads: the decoder's matrices at ``weight_bytes`` per element (biases, norms and
    the embedding row in float32), the cross K/V over ``frames`` and the self K/V over ``past`` positions."""
    d, f, h, hd, n = (
        cfg["hidden_size"],
        cfg["intermediate_size"],
        cfg["num_attention_heads"],
        cfg["head_dim"],
        cfg["num_hidden_layers"],
    )
    hkv = cfg["num_key_value_heads"]
    per_layer = d * (h + 2 * hkv) * hd + h * hd * d + d * h * hd + h * hd * d + 2 * f * d + f * d
    mats = n * per_layer + cfg["vocab_size"] * d
    small = 4 * (n * (3 * d + 2 * f + d) + d + d)
    kv = 4 * n * 2 * hkv * hd * (frames + past)
    return mats * weight_bytes + small + kv


# packed values + (livecap) a float32 scale and an integer zero point per group of 64 (MLX-quantized biases are
# whole multiples of the scale: no float rest, ort_kernels); ORT int8 (dynamic): one scale per matrix
WEIGHT_BYTES = {"numpy": 4.0, "ort": 4.0, "numpy-q8": 1 + 5 / 64, "ort-int8": 1.0, "numpy-q4": 0.5 + 4.5 / 64}


# ---------------------------------------------------------------------------------------------------
# Runners
# ---------------------------------------------------------------------------------------------------


class OrtRunner:
    """The exported transformers graphs on ONNX Runtime's CPU provider (``suffix`` "" or ".int8")."""

    def __init__(self, onnx_dir: Path, audio, tokens: list[int], cfg: dict, threads: int, suffix: str = ""):
        import numpy as np
        import onnxruntime as ort

        self.ort, self.np = ort, np
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL

        def sess(name):
            return ort.InferenceSession(str(onnx_dir / f"{name}{suffix}.onnx"), so, providers=["CPUExecutionProvider"])

        self.enc_s, self.kv_s, self.step_s = sess("encoder"), sess("cross_kv"), sess("decoder_step")
        self.n_layers, self.hkv, self.hd = cfg["num_hidden_layers"], cfg["num_key_value_heads"], cfg["head_dim"]
        self.bos = cfg.get("decoder_start_token_id", 1)
        self.audio = audio[None].astype(np.float32)
        self.tokens = tokens
        self.kv_names = [f"past_{x}.{i}" for i in range(self.n_layers) for x in ("k", "v")]
        self.cross_names = [f"cross_{x}.{i}" for i in range(self.n_layers) for x in ("k", "v")]
        self.present_names = [f"present_{x}.{i}" for i in range(self.n_layers) for x in ("k", "v")]
        self.enc = self.enc_s.run(None, {"input_values": self.audio})[0]

    def encode(self) -> float:
        t0 = time.perf_counter()
        self.enc_s.run(None, {"input_values": self.audio})
        return time.perf_counter() - t0

    def _step(self, tok: int, past: list, cross: list):
        ov = self.ort.OrtValue
        feed = {"input_ids": ov.ortvalue_from_numpy(self.np.array([[tok]], dtype=self.np.int64))}
        feed.update(zip(self.kv_names, past))
        feed.update(zip(self.cross_names, cross))
        out = self.step_s.run_with_ort_values(["logits", *self.present_names], feed)
        return out[0].numpy()[0], list(out[1:])

    def _start(self):
        """The cross K/V and the start token's step: ``(logits, past, cross)``."""
        ov = self.ort.OrtValue
        cross = [ov.ortvalue_from_numpy(a) for a in self.kv_s.run(None, {"encoder_hidden_states": self.enc})]
        empty = self.np.zeros((1, self.hkv, 0, self.hd), self.np.float32)
        logits, past = self._step(self.bos, [ov.ortvalue_from_numpy(empty) for _ in self.kv_names], cross)
        return logits, past, cross

    def first_logits(self):
        return self._start()[0]

    def decode(self) -> tuple[float, float]:
        np = self.np
        t0 = time.perf_counter()
        logits, past, cross = self._start()
        int(np.argmax(logits))
        t1 = time.perf_counter()
        for tok in self.tokens:
            logits, past = self._step(tok, past, cross)
            int(np.argmax(logits))
        t2 = time.perf_counter()
        return t1 - t0, (t2 - t1) / len(self.tokens)

    def encoder_output(self):
        return self.enc[0]


def onnx_dir(folder: Path, n_samples: int) -> Path:
    """The exported graphs of the model in ``folder`` (float32 and int8), built on first use."""
    out = folder / "onnx"
    if (out / ".complete").is_file():
        return out
    import ort_export
    import torch
    from transformers import MoonshineStreamingForConditionalGeneration

    model = MoonshineStreamingForConditionalGeneration.from_pretrained(folder, dtype=torch.float32).eval()
    ort_export.export_all(model, out, n_samples)
    for name in ("encoder", "cross_kv", "decoder_step"):
        ort_export.quantize_int8(out / f"{name}.onnx", out / f"{name}.int8.onnx")
    (out / ".complete").write_text("ok\n")
    del model
    gc.collect()
    return out


# ---------------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------------


def _busy_loop() -> None:  # a process that keeps one core busy
    x = 0
    while True:
        x += 1


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--variants", default="tiny,small", help="comma list of tiny, small, medium")
    p.add_argument("--sides", default=",".join(SIDES), help=f"comma list of {', '.join(SIDES)}")
    p.add_argument("--runs", type=int, default=5, help="timed rounds (median reported)")
    p.add_argument("--seconds", type=float, default=10.0, help="audio length (whole 80 ms chunks)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads for every library")
    p.add_argument(
        "--pause",
        type=float,
        default=0.05,
        metavar="S",
        help="seconds between sides: ONNX Runtime's pool threads spin ~0.03 s after a run; a longer "
        "idle gap lets this VM's cores slow down (after 0.3 s the next 50 ms ran ~30%% slower)",
    )
    p.add_argument("--busy", type=int, default=0, metavar="N", help="N busy-looping processes during the rounds")
    p.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        metavar="S",
        help="before the rounds of each variant wait up to S seconds for the machine to be idle",
    )
    p.add_argument("--json", type=Path, help="also write the raw numbers here")
    p.add_argument("--markdown", type=Path, help="also write the report here")
    a = p.parse_args(argv)
    a.variants = [v.strip() for v in a.variants.split(",") if v.strip()]
    a.sides = [s.strip() for s in a.sides.split(",") if s.strip()]
    for s in a.sides:
        if s not in SIDES:
            p.error(f"unknown side {s!r}; choose from {', '.join(SIDES)}")
    return a


def main(argv=None) -> int:
    args = parse_args(argv)
    _common.set_threads(args.threads)
    import moonshine_offline as mo
    import numpy as np

    chunk = 1280
    n_samples = max(chunk, int(round(args.seconds * SAMPLE_RATE / chunk)) * chunk)
    seconds = n_samples / SAMPLE_RATE
    frames = n_samples // 320
    n_tokens = math.ceil(TOKENS_PER_SECOND * seconds)
    audio = (np.random.default_rng(0).standard_normal(n_samples) * 0.1).astype(np.float32)
    tokens = [int(t) for t in np.random.default_rng(1).integers(259, 32000, n_tokens)]

    lines = ["## Machine", ""] + _common.machine_report(
        args.threads, {"numpy": "numpy", "onnxruntime": "onnxruntime", "torch": "torch"}
    )
    lines += [
        f"- engine source: {mo.git_state()}",
        f"- load average at start: {_common.load_average()}",
        f"- audio: {seconds:g} s of seeded noise ({frames} encoder frames); decoder: {n_tokens} cached steps",
        f"- {args.runs} timed rounds after one warm-up round, sides interleaved (order reversed every round); medians",
    ]
    bw = read_bandwidth()
    rates = [max(bw.values())]  # measured again after each variant's rounds: this VM's rate moves by 50 %
    lines.append(
        "- read bandwidth at the start (float32 matrix-vector product, 512 MiB): "
        + ", ".join(f"{k} {v:.1f} GB/s" for k, v in bw.items())
    )
    if args.busy:
        lines.append(f"- **loaded machine: {args.busy} busy-looping process(es) ran during the rounds**")
    print("\n".join(lines), flush=True)

    busy = [multiprocessing.Process(target=_busy_loop, daemon=True) for _ in range(args.busy)]
    results, notes, probe, round_rates = {}, [], ReadProbe(), {}
    try:
        for variant in args.variants:
            folder = mo.model_folder(variant)
            cfg = json.loads((folder / "config.json").read_text())
            runners = {}
            for side in args.sides:
                print(f"[{variant}] loading {side} ...", file=sys.stderr, flush=True)
                if side.startswith("numpy"):
                    q = None if side == "numpy" else int(side[-1])
                    try:
                        runners[side] = mo.EngineRunner(folder, "numpy", audio, tokens, q)
                    except Exception as e:  # noqa: BLE001 - an engine without quantized weights: skip that side
                        notes.append(f"- {variant}: {side} skipped ({e})")
                else:
                    runners[side] = OrtRunner(
                        onnx_dir(folder, n_samples), audio, tokens, cfg, args.threads, "" if side == "ort" else ".int8"
                    )
            ref = runners.get("ort") or next(iter(runners.values()))
            ref_enc, ref_logits = ref.encoder_output(), ref.first_logits()
            for side, r in runners.items():
                if r is not ref:
                    d_enc = float(np.max(np.abs(r.encoder_output() - ref_enc)))
                    lg = r.first_logits()
                    d_log = float(np.max(np.abs(lg - ref_logits)))
                    same = "equal" if np.argmax(lg) == np.argmax(ref_logits) else "differs"
                    notes.append(
                        f"- {variant}: {side} vs ort max |diff|: encoder {d_enc:.2e}, first-step logits "
                        f"{d_log:.2e} (argmax {same})"
                    )
            if args.wait_quiet:
                share = _common.wait_quiet(timeout=args.wait_quiet)
                print(f"[{variant}] busy share before the rounds: {share:.2f}", file=sys.stderr, flush=True)
            for b in busy:
                if not b.is_alive():
                    b.start()
            other = _common.OtherLoad().start()
            samples = {s: {"enc": [], "first": [], "tok": [], "rate": []} for s in runners}
            round_rates[variant] = []
            order = list(runners.items())
            for r in range(1 + args.runs):
                for side, runner in order if r % 2 == 0 else order[::-1]:
                    time.sleep(args.pause)  # the spinning pool threads of the side before settle
                    te = runner.encode()
                    tf, tt = runner.decode()
                    if r:
                        samples[side]["enc"].append(te)
                        samples[side]["first"].append(tf)
                        samples[side]["tok"].append(tt)
                        time.sleep(args.pause)  # not while the side's spinning threads (ORT's pool, the twin) run
                        round_rates[variant].append(probe.rate())
                        samples[side]["rate"].append(round_rates[variant][-1])
                print(f"[{variant}] round {r}/{args.runs} (load {_common.load_average()})", file=sys.stderr, flush=True)
            share = other.stop()
            if share is not None:
                notes.append(
                    f"- {variant}: other processes used {100 * share:.0f}% of the CPU time during the "
                    "rounds" + (" (the busy loops included)" if args.busy else "")
                )
            med = {}
            for side, s in samples.items():
                med[side] = {
                    "enc_ms_per_s": 1000 * float(np.median(s["enc"])) / seconds,
                    "first_ms": 1000 * float(np.median(s["first"])),
                    "tok_ms": 1000 * float(np.median(s["tok"])),
                    "step_bytes": step_bytes(cfg, frames, n_tokens / 2, WEIGHT_BYTES[side]),
                    "samples": {k: [float(x) for x in v] for k, v in s.items()},
                }
            results[variant] = med
            del runners
            gc.collect()
            rates.append(max(read_bandwidth().values()))
    finally:
        for b in busy:
            if b.is_alive():
                b.terminate()

    bound_bw = max(rates)  # the best read rate seen in the run bounds every step of it
    for variant, med in results.items():
        typical = float(np.median(round_rates[variant]))  # the rate of the rounds' minutes, as the medians are
        for v in med.values():
            v["bound_ms"] = 1000 * v["step_bytes"] / (bound_bw * 1e9)
            v["of_bound"] = v["bound_ms"] / v["tok_ms"]
            v["of_typical"] = 1000 * v["step_bytes"] / (typical * 1e9) / v["tok_ms"]
            own = [v["step_bytes"] / (rate * 1e9) / tok for rate, tok in zip(v["samples"]["rate"], v["samples"]["tok"])]
            v["of_own"] = float(np.median(own))  # each round's step against the rate probed right after it
        rr = round_rates[variant]
        notes.append(
            f"- {variant}: read rate after each side's steps (all threads, {len(rr)} probes): median {typical:.1f}, "
            f"range {min(rr):.1f}-{max(rr):.1f} GB/s"
        )
    notes.append(
        "- read rate (best of 1 and all threads) at the start and after each variant: "
        + ", ".join(f"{r:.1f}" for r in rates)
        + f" GB/s; the bound uses the best, {bound_bw:.1f}"
    )

    rows = []
    for variant, med in results.items():
        for side, v in med.items():
            rows.append(
                [
                    variant,
                    side,
                    _common.fmt(v["enc_ms_per_s"]),
                    _common.fmt(v["first_ms"]),
                    _common.fmt(v["tok_ms"], 2),
                    _common.fmt(v["bound_ms"], 2),
                    f"{100 * v['of_bound']:.0f}%",
                    f"{100 * v['of_typical']:.0f}%",
                    f"{100 * v['of_own']:.0f}%",
                ]
            )
    report = [
        "",
        "## Results",
        "",
        _common.markdown_table(
            [
                "variant",
                "side",
                "encoder ms / s audio",
                "first step ms",
                "decoder ms / token",
                "bound ms / token",
                "of bound",
                "of bound at the rounds' median rate",
                "of bound per round (median)",
            ],
            rows,
        ),
        "",
    ]
    pairs = [("numpy", "ort"), ("numpy-q8", "ort-int8"), ("numpy-q4", "ort-int8"), ("numpy", "ort-int8")]
    rrows = []
    for variant, med in results.items():
        for a, b in pairs:
            if a in med and b in med:
                paired = sorted(x / y for x, y in zip(med[b]["samples"]["tok"], med[a]["samples"]["tok"]))
                rrows.append(
                    [
                        variant,
                        f"{a} vs {b}",
                        f"{med[b]['enc_ms_per_s'] / med[a]['enc_ms_per_s']:.2f}x",
                        f"{med[b]['tok_ms'] / med[a]['tok_ms']:.2f}x",
                        f"{np.median(paired):.2f}x ({paired[0]:.2f}-{paired[-1]:.2f}), "
                        f"{sum(x > 1 for x in paired)} of {len(paired)}",
                    ]
                )
    if rrows:
        report += [
            "Ratios (their time / ours; > 1 = livecap faster):",
            "",
            _common.markdown_table(
                ["variant", "pair", "encoder", "decoder / token", "per round: median (range), rounds faster"], rrows
            ),
            "",
        ]
    report += [f"- load average at end: {_common.load_average()}"] + notes
    print("\n".join(report), flush=True)
    if args.json:
        raw = {"bandwidth": bw, "read_rates": rates, "round_rates": round_rates, "results": results}
        args.json.write_text(json.dumps(raw, indent=2))
    if args.markdown:
        args.markdown.write_text("\n".join(lines + report) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
