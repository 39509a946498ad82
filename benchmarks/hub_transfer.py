"""The download child process (engine/hub.py, engine/hub_worker.py) against the loopback fake hub (tests/fakehub.py):
how long the child takes to start, how fast a cancel ends a transfer (mid-body, and on a silent connection), and
the loopback throughput of one file through it. Medians over ``--runs``.

    .venv/bin/python benchmarks/hub_transfer.py --runs 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine import hub, install  # noqa: E402
from tests.conftest import FIXTURES  # noqa: E402
from tests.fakehub import FakeHub, padded  # noqa: E402

TINY = FIXTURES / "models" / "moon_tiny_like"


def _files(extra: int) -> dict[str, bytes]:
    files = {p.name: p.read_bytes() for p in TINY.iterdir() if p.is_file()}
    files["model.safetensors"] = padded(files["model.safetensors"], extra)
    return files


def _fresh_cache() -> None:
    os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="livecap-bench-")


def start_up(fake: FakeHub, run: int) -> float:
    """Seconds from ``transfer`` being called to the child's first report."""
    fake.add_repo(f"bench/start-{run}", _files(0))
    _fresh_cache()
    plan = hub.plan_download(f"bench/start-{run}")
    first: list[float] = []
    t0 = time.perf_counter()
    hub.transfer(plan, progress=lambda p: first or first.append(time.perf_counter()))
    return first[0] - t0


def cancel_latency(fake: FakeHub, run: int, stalled: bool) -> float:
    """Seconds from ``cancel()`` to ``install_model`` raising, mid-body or on a silent connection."""
    repo = f"bench/cancel-{'stall' if stalled else 'body'}-{run}"
    fake.add_repo(repo, _files(40_000_000))
    _fresh_cache()
    fake.rate = None if stalled else 5_000_000
    if stalled:
        fake.stall_at["model.safetensors"] = 15_000_000
    token = hub.CancelToken()
    seen: list[hub.Progress] = []
    box: dict = {}

    def target() -> None:
        try:
            install.install_model(repo, progress=seen.append, cancel=token)
        except hub.DownloadCancelled as e:
            box["done"] = (time.perf_counter(), e)

    t = threading.Thread(target=target)
    t.start()
    while not any(p.file == "model.safetensors" and p.done > 12_000_000 for p in list(seen)):
        time.sleep(0.01)
    if stalled:
        time.sleep(0.5)
    t0 = time.perf_counter()
    token.cancel()
    t.join(10)
    fake.rate = None
    fake.release.set()
    fake.release.clear()
    return box["done"][0] - t0


def throughput(fake: FakeHub, run: int, size: int) -> float:
    """MB/s of one ``size``-byte file through the child over loopback (the fake hub is single-threaded Python)."""
    fake.add_repo(f"bench/big-{run}", _files(size))
    _fresh_cache()
    plan = hub.plan_download(f"bench/big-{run}")
    t0 = time.perf_counter()
    hub.transfer(plan)
    return plan.total / (time.perf_counter() - t0) / 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--size-mb", type=int, default=200)
    args = ap.parse_args()
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    with FakeHub(chunk=256 * 1024) as fake:
        os.environ["HF_ENDPOINT"] = fake.url
        rows = {
            "child start-up to first report (s)": [start_up(fake, i) for i in range(args.runs)],
            "cancel mid-body to raise (s)": [cancel_latency(fake, i, False) for i in range(args.runs)],
            "cancel on a silent connection to raise (s)": [cancel_latency(fake, i, True) for i in range(args.runs)],
            f"loopback throughput, {args.size_mb} MB file (MB/s)": [
                throughput(fake, i, args.size_mb * 1_000_000) for i in range(args.runs)
            ],
        }
    print("| measure | median | min | max |\n|:---|---:|---:|---:|")
    for name, values in rows.items():
        print(f"| {name} | {statistics.median(values):.3f} | {min(values):.3f} | {max(values):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
