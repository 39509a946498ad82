"""``engine.stops``: Ctrl+C and SIGTERM stop a command-line run, never inside an import, and are remembered."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import REPO, sigint_default

SLOW_IMPORT = """
import signal, sys, time
from engine import stops

stops.catch()
sys.path.insert(0, sys.argv[1])
began = time.monotonic()
try:
    import stopped_inside  # raises the signal itself, then works for {work_s} s
    {after}
except KeyboardInterrupt as stop:
    late = time.monotonic() - began
    done = getattr(sys.modules.get("stopped_inside"), "DONE", False)
    print(done, stops.signal_of(stop), stops.received(), round(late, 1))
    time.sleep(0.2)  # an alarm left behind would fire here
    sys.exit(130)
print("not stopped")
"""

MODULE = """
import signal, time
signal.raise_signal(signal.{sig})
t = time.monotonic()
while time.monotonic() - t < {work_s}:  # an extension's initialisation, which an exception here would break
    pass
DONE = True
"""


@pytest.mark.parametrize("sig, number", [("SIGINT", 2), ("SIGTERM", 15)])
def test_a_stop_signal_inside_an_import_is_raised_when_the_import_is_over(tmp_path, sig, number):
    """Ctrl+C while ONNX Runtime or soxr initialised aborted the process (SIGABRT) or became an ImportError there."""
    (tmp_path / "stopped_inside.py").write_text(MODULE.format(sig=sig, work_s=0.3))
    r = run(tmp_path, work_s=0.3, after="time.sleep(5)")
    assert (r.returncode, r.stdout, r.stderr) == (130, f"True {number} {number} 0.3\n", "")


def test_a_stop_acted_on_before_the_import_deferral_asks_again_leaves_no_alarm(tmp_path):
    """The signal came 5 ms before an import ended and the caller stopped at its own check: the alarm that was to
    raise it later killed the process (SIGALRM, exit -14) or raised in a finalizer as it exited."""
    (tmp_path / "stopped_inside.py").write_text(MODULE.format(sig="SIGINT", work_s=0.005))
    r = run(tmp_path, work_s=0.005, after="stops.check()")
    assert (r.returncode, r.stdout, r.stderr) == (130, "True 2 2 0.0\n", "")


def run(folder, *, work_s: float, after: str) -> subprocess.CompletedProcess:
    script = SLOW_IMPORT.format(work_s=work_s, after=after)
    return subprocess.run(
        [sys.executable, "-c", script, str(folder)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=sigint_default,
    )
