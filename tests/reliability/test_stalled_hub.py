"""A hub that accepts connections and never answers (issue #12, defect 4): the CLI and the model dialog fail with
one sentence within ~30 s, with the default timeouts (``engine.hub.DEFAULT_TIMEOUT_S``), instead of hanging.

The server is tests/fakehub.py's ``silent`` mode on loopback: it reads each request and sends nothing back.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tests.fakehub import FakeHub, block_network, hub_env

LIMIT_S = 30.0


@pytest.fixture
def silent_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    block_network(monkeypatch)
    monkeypatch.delenv("HF_HUB_ETAG_TIMEOUT", raising=False)
    monkeypatch.delenv("HF_HUB_DOWNLOAD_TIMEOUT", raising=False)
    with FakeHub() as hub:
        hub_env(monkeypatch, hub, tmp_path / "hf")
        hub.silent = True
        yield hub


def test_the_cli_fails_with_one_sentence(silent_hub: FakeHub, capsys: pytest.CaptureFixture) -> None:
    from engine.cli import main

    t0 = time.monotonic()
    code = main([str(FIXTURES / "audio" / "speech.wav"), "--model", "acme/never-answers", "--backend", "numpy"])
    elapsed = time.monotonic() - t0
    err = capsys.readouterr().err.strip().splitlines()
    print(f"CLI against a silent hub: failed after {elapsed:.1f} s")
    assert code == 3 and elapsed < LIMIT_S, (code, elapsed)
    assert len(err) == 1 and "did not answer within 10 s" in err[0] and silent_hub.url in err[0], err
    assert silent_hub.served("GET", "/api/models/acme/never-answers")


def test_the_dialog_download_fails_with_one_sentence(silent_hub: FakeHub, qtbot) -> None:
    from app.downloads import DownloadJob

    job = DownloadJob("acme/never-answers")
    failures: list[str] = []
    job.failed.connect(lambda message, exc: failures.append(message))
    t0 = time.monotonic()
    with qtbot.waitSignal(job.finished, timeout=int(LIMIT_S * 1000)):
        job.start()
    elapsed = time.monotonic() - t0
    print(f"dialog download against a silent hub: failed after {elapsed:.1f} s")
    assert elapsed < LIMIT_S
    (message,) = failures
    assert "\n" not in message and message.endswith(".") and "did not answer within 10 s" in message
