"""Shared set-up for the live reference suite (``make reference`` = ``pytest tests/reference``).

These tests need torch and transformers (``pip install -e '.[reference]'``) and never the network:
the hub is switched off here, so anything that tried to download would fail instead of hanging.
``tests/fixtures`` is put on ``sys.path`` so that the tests can import ``make_fixtures``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES_DIR = REPO_ROOT / "tests" / "fixtures"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

if str(FIXTURES_DIR) not in sys.path:
    sys.path.insert(0, str(FIXTURES_DIR))
