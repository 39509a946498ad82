"""Shared set-up for the live reference suite (``make reference`` = ``pytest tests/reference``).

These tests need torch and transformers (``pip install -e '.[reference]'``) and never the network:
the hub is switched off here, so anything that tried to download would fail instead of hanging.
``tests/fixtures`` is put on ``sys.path`` so that the tests can import ``make_fixtures``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES_DIR = REPO_ROOT / "tests" / "fixtures"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

if str(FIXTURES_DIR) not in sys.path:
    sys.path.insert(0, str(FIXTURES_DIR))


CLI_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def one_torch_thread():
    """The tiny models gain nothing from threads, and on a busy 2-core machine OpenMP spinning makes the
    reference ~8x slower; restored afterwards. Modules opt in with ``pytestmark``."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="session")
def cli_tokens():
    """``cli_tokens(clip_path, model_dir, backend, *args)``: run ``python -m engine.cli CLIP --model DIR
    --backend B --dtype float32 *args --tokens`` and return the JSON object it printed."""

    def run(clip_path, model_dir, backend: str, *args: str) -> dict:
        cmd = [
            sys.executable,
            "-m",
            "engine.cli",
            str(clip_path),
            "--model",
            str(model_dir),
            "--backend",
            backend,
            "--dtype",
            "float32",
            *args,
            "--tokens",
        ]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}
        proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
        assert proc.returncode == 0, (
            f"{' '.join(cmd)}\nexited {proc.returncode}\nstdout:\n{proc.stdout[-2000:]}\nstderr:\n{proc.stderr[-4000:]}"
        )
        text = proc.stdout.strip()
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            # Tolerate stray lines before the object, but the object itself must be the last line.
            return json.loads(text.splitlines()[-1])

    return run
