"""Re-create resources/selftest from the test fixtures (after ``make fixtures`` changed them).

    python packaging/refresh_selftest.py

Copies tests/fixtures/models/moon_tiny_like (without golden/) to resources/selftest/model, the clip
tests/fixtures/audio/speech.wav to resources/selftest/speech.wav, and writes resources/selftest/expected.json
with the reference implementation's greedy ids for them (golden/speech.npz["greedy"], recorded by
tests/fixtures/make_fixtures.py from transformers). tests/packaging/test_selftest.py checks that the copies
match the fixtures.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "fixtures" / "models" / "moon_tiny_like"
CLIP = ROOT / "tests" / "fixtures" / "audio" / "speech.wav"
OUT = ROOT / "resources" / "selftest"

ORIGIN = (
    "Greedy ids of the reference implementation (HF transformers 5.24.0 generate(), torch CPU, float32, "
    "max_new_tokens = ceil(6.5 * seconds)) for model/ on speech.wav as one segment, copied from "
    "tests/fixtures/models/moon_tiny_like/golden/speech.npz['greedy'] (recorded by tests/fixtures/make_fixtures.py). "
    "model/ is tests/fixtures/models/moon_tiny_like without golden/ (random weights), speech.wav is "
    "tests/fixtures/audio/speech.wav; tests/packaging/test_selftest.py checks that these copies still match the "
    "fixtures, and packaging/refresh_selftest.py re-creates them."
)


def main() -> None:
    if (OUT / "model").exists():
        shutil.rmtree(OUT / "model")
    shutil.copytree(MODEL, OUT / "model", ignore=shutil.ignore_patterns("golden"))
    shutil.copy2(CLIP, OUT / "speech.wav")
    with np.load(MODEL / "golden" / "speech.npz") as golden:
        tokens = [int(t) for t in golden["greedy"]]
    doc = {
        "origin": ORIGIN,
        "model": "model",
        "audio": "speech.wav",
        "backend": "numpy",
        "session_options": {"vad": False},
        "tokens": "@TOKENS@",
    }
    text = json.dumps(doc, indent=2).replace('"@TOKENS@"', json.dumps(tokens))  # the ids on one line
    (OUT / "expected.json").write_text(text + "\n")
    print(f"refresh_selftest: wrote {OUT.relative_to(ROOT)} ({len(tokens)} expected ids).")


if __name__ == "__main__":
    main()
