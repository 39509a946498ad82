"""Nothing leaves the machine: the libraries the engine runs on send nothing and leave no identifiers behind."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.helpers import REPO


def test_onnx_runtime_keeps_no_device_id_and_sends_no_telemetry(tmp_path):
    """ONNX Runtime's official builds (1.32 here) write ``Microsoft/DeveloperTools/.onnxruntime/deviceid`` under the
    cache folder when imported and send usage telemetry from Linux and macOS; the engine turns that off before it
    imports it (``ORT_DISABLE_TELEMETRY``), on the path the 8/4-bit weights take."""
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}
    env.update(HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"), XDG_DATA_HOME=str(tmp_path / "data"))
    code = "from engine.backends import ort_kernels; assert ort_kernels.available()"
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=REPO, timeout=120)
    assert not [p for p in tmp_path.rglob("*") if "onnxruntime" in p.name.lower() or p.name == "Microsoft"]
