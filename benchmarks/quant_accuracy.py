#!/usr/bin/env python3
"""How far 8-bit / 4-bit weights move Moonshine's output from float32 on the NumPy backend (not a timed test).

For each model (the committed fixtures ``moon_small_like`` / ``moon_tiny_like`` and the full-size random
tiny / small / medium of ``moonshine_offline``) and each clip, the float32 engine decodes greedily
(``--tokens`` ids, EOS off for the full-size ones: random weights never stop) and the quantized engines
are measured against those ids:

- **teacher-forced agreement**: the quantized decoder fed the float32 ids; the share of positions where
  its argmax equals the float32 id (every position counts, so one early flip does not hide the rest);
- **greedy prefix**: the quantized engine's own greedy ids; the share of the float32 ids it reproduces
  before the first difference (what a user would see change);
- **max |logit diff|** over the teacher-forced positions, and the same relative to the largest float32
  logit.

Random weights are harsher than trained ones: their top-2 logit margins are small, so flips are more
frequent than a real checkpoint would show.

    .venv/bin/python benchmarks/quant_accuracy.py                 # fixtures + tiny, small
    .venv/bin/python benchmarks/quant_accuracy.py --models small,medium --markdown /tmp/acc.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (ROOT, HERE):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import _common  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "models"
AUDIO = ROOT.parent / "shared" / "audio"  # the checkout sits beside shared/


def clips(seconds: float) -> dict[str, object]:
    """Seeded noise and, where the shared recordings are, the first seconds of real speech (16 kHz)."""
    import numpy as np

    n = int(seconds * 16000) // 1280 * 1280
    out = {"noise": (np.random.default_rng(0).standard_normal(n) * 0.1).astype(np.float32)}
    for name in ("beckett.wav", "two_cities.wav"):
        path = AUDIO / name
        if path.is_file():
            from engine.audio import read_audio

            out[name[:-4]] = read_audio(path)[:n].astype(np.float32)
    return out


def folder_of(name: str) -> Path:
    if (FIXTURES / name).is_dir():
        return FIXTURES / name
    import moonshine_offline as mo

    return mo.model_folder(name)


def greedy(m, audio, n_tokens: int, eos: bool) -> tuple[list[int], object]:
    """Greedy ids (up to ``n_tokens``, stopping at EOS when ``eos``) and the context to teacher-force."""
    import numpy as np

    enc, valid = m.encode(audio)
    xkv = m.cross_kv(m.memory(enc))
    cache = m.new_self_cache(n_tokens + 2)
    ids, tok = [], m.cfg.decoder_start_token_id
    for pos in range(n_tokens):
        tok = int(np.argmax(m.decode([tok], pos, cache, xkv, valid)))
        ids.append(tok)
        if eos and tok == m.cfg.eos_token_id:
            break
    return ids, (xkv, valid)


def forced_logits(m, audio, ids: list[int]):
    """Logits of every position when the decoder is fed ``[start] + ids[:-1]`` (one batched pass)."""
    enc, valid = m.encode(audio)
    xkv = m.cross_kv(m.memory(enc))
    cache = m.new_self_cache(len(ids) + 1)
    return m.decode([m.cfg.decoder_start_token_id, *ids[:-1]], 0, cache, xkv, valid, all_logits=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="moon_small_like,moon_tiny_like,tiny,small")
    p.add_argument("--bits", default="8,4")
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--markdown", type=Path)
    a = p.parse_args(argv)
    _common.set_threads(2)
    import numpy as np

    from engine import load_model

    rows = []
    for name in a.models.split(","):
        folder = folder_of(name)
        fixture = folder.parent == FIXTURES
        ref = load_model(folder, backend="numpy")
        quant = {b: load_model(folder, backend="numpy", quantize=int(b)) for b in a.bits.split(",")}
        for clip, audio in clips(a.seconds).items():
            n = int(np.ceil(6.5 * len(audio) / 16000))
            ids, _ = greedy(ref, audio, n, eos=fixture)
            lf = forced_logits(ref, audio, ids)
            for b, m in quant.items():
                lq = forced_logits(m, audio, ids)
                agree = float(np.mean(np.argmax(lq, axis=-1) == np.asarray(ids)))
                own, _ = greedy(m, audio, len(ids), eos=fixture)
                prefix = next((i for i, (x, y) in enumerate(zip(own, ids)) if x != y), min(len(own), len(ids)))
                diff = float(np.abs(lq - lf).max())
                rows.append(
                    [
                        name,
                        clip,
                        f"{b}-bit",
                        str(len(ids)),
                        f"{100 * agree:.1f}%",
                        f"{100 * prefix / len(ids):.0f}% ({prefix})",
                        f"{diff:.3f}",
                        f"{diff / float(np.abs(lf).max()):.3f}",
                    ]
                )
                print(" | ".join(rows[-1]), flush=True)
    table = _common.markdown_table(
        [
            "model",
            "clip",
            "weights",
            "f32 ids",
            "teacher-forced agreement",
            "greedy prefix kept",
            "max |logit diff|",
            "relative",
        ],
        rows,
    )
    print(table)
    if a.markdown:
        a.markdown.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
