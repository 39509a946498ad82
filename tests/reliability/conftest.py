"""The reliability suite (issue #12): faults, bad inputs and long runs, end to end. Part of ``make test``.

Qt runs offscreen; every platformdirs folder (settings, journals, logs) points into the test's tmp_path.
"""

from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # before any Qt import

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

import app  # noqa: E402,F401 - pins None/True/False on an affected PySide6 build before any Qt use
from tests.helpers import private_xdg_dirs  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"


@pytest.fixture(autouse=True)
def private_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Settings, journals, logs and caches of this test live under ``tmp_path/home``."""
    return private_xdg_dirs(tmp_path / "home", monkeypatch)
