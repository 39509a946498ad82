"""``livecap --self-test`` from the source tree. The bundle runs the same code (``make package`` checks it there)."""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.main import build_parser
from engine.backends import cpu_twin
from tests.conftest import FIXTURES, golden

REPO = Path(__file__).resolve().parents[2]
SELFTEST = REPO / "resources" / "selftest"


def run_selftest(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m app.main --self-test ARGS`` with private XDG folders and no display: QT_QPA_PLATFORM names a
    platform that cannot start here, so the run only passes if the flag switches Qt to offscreen itself."""
    e = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "LIVECAP_SELFTEST_DIR")}
    e.update(
        QT_QPA_PLATFORM="xcb",
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        PYTHONPATH=str(REPO),
    )
    e.update(env or {})
    cmd = [sys.executable, "-m", "app.main", "--self-test", *args]
    return subprocess.run(cmd, cwd=tmp_path, env=e, capture_output=True, text=True, timeout=180)


def failure_line(result: subprocess.CompletedProcess) -> str:
    """The one sentence a failed self-test ends with (and nothing else that looks like a traceback)."""
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines, "no message"
    line = lines[-1]
    assert line.startswith("livecap self-test failed: ") and line.endswith(".")
    return line


def copy_data(tmp_path: Path) -> Path:
    target = tmp_path / "selftest"
    shutil.copytree(SELFTEST, target)
    return target


def test_flag_is_parsed():
    args = build_parser().parse_args(["--self-test"])
    assert args.self_test and args.self_test_dir is None


def test_passes_from_the_source_tree(tmp_path):
    r = run_selftest(tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1, r.stdout
    assert lines[0].startswith("livecap self-test passed")
    assert "offscreen main window drawn" in lines[0]
    assert "Silero VAD found speech" in lines[0]
    n = len(json.loads((SELFTEST / "expected.json").read_text())["tokens"])
    assert f"reproduced all {n} reference ids" in lines[0]
    assert ("CPU twin process computed" if cpu_twin.enabled() else "no CPU twin on this platform") in lines[0]
    assert "Traceback" not in r.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux") or not cpu_twin.enabled(), reason="started twin: Linux")
def test_passes_with_a_started_cpu_twin(tmp_path):
    """As on Windows, which has no fork: the twin is a process started over shared memory (``twin_spawn``)."""
    r = run_selftest(tmp_path, env={"LIVECAP_CPU_TWIN": "spawn"})
    assert r.returncode == 0, r.stderr
    assert "CPU twin process computed" in r.stdout and "Traceback" not in r.stderr


def test_fails_when_the_expected_ids_are_altered(tmp_path):
    data = copy_data(tmp_path)
    doc = json.loads((data / "expected.json").read_text())
    doc["tokens"][2] += 1
    (data / "expected.json").write_text(json.dumps(doc))
    line = failure_line(run_selftest(tmp_path, "--self-test-dir", str(data)))
    assert "token ids that differ" in line and "from token 2 on" in line


def test_fails_when_ids_are_missing_at_the_end(tmp_path):
    data = copy_data(tmp_path)
    doc = json.loads((data / "expected.json").read_text())
    doc["tokens"].append(doc["tokens"][-1])
    (data / "expected.json").write_text(json.dumps(doc))
    line = failure_line(run_selftest(tmp_path, env={"LIVECAP_SELFTEST_DIR": str(data)}))
    assert "token ids that differ" in line


def test_fails_in_one_sentence_when_the_model_is_broken(tmp_path):
    data = copy_data(tmp_path)
    (data / "model" / "model.safetensors").write_bytes(b"not a safetensors file")
    line = failure_line(run_selftest(tmp_path, env={"LIVECAP_SELFTEST_DIR": str(data)}))
    assert "the self-test model did not load" in line


def test_fails_in_one_sentence_without_data(tmp_path):
    line = failure_line(run_selftest(tmp_path, "--self-test-dir", str(tmp_path / "nothing")))
    assert "expected.json is missing or unreadable" in line


def test_data_is_a_copy_of_the_fixtures():
    """resources/selftest = moon_tiny_like without golden/, speech.wav, and the reference's greedy ids for them."""
    model = FIXTURES / "models" / "moon_tiny_like"
    shipped = sorted(p.name for p in (SELFTEST / "model").iterdir())
    assert shipped == sorted(p.name for p in model.iterdir() if p.name != "golden")
    for name in shipped:
        assert filecmp.cmp(SELFTEST / "model" / name, model / name, shallow=False), name
    assert filecmp.cmp(SELFTEST / "speech.wav", FIXTURES / "audio" / "speech.wav", shallow=False)
    doc = json.loads((SELFTEST / "expected.json").read_text())
    assert doc["tokens"] == golden("moon_tiny_like", "speech")["greedy"].tolist()
    assert doc["backend"] == "numpy" and doc["session_options"] == {"vad": False}
    assert "transformers" in doc["origin"]


def test_data_is_small():
    """It ships inside every bundle."""
    assert sum(p.stat().st_size for p in SELFTEST.rglob("*") if p.is_file()) < 8_000_000
