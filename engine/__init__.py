"""livecap engine: audio in, caption events out. Never imports Qt.

Nothing leaves the machine: ONNX Runtime (the NumPy backend's 8/4-bit kernels and a few fused ops) sends usage
telemetry from its official Linux and macOS builds since 1.2x and writes a device id under the user's cache folder on
import; ``ORT_DISABLE_TELEMETRY=1``, set here before anything imports it, turns all of that off (a value the user set
is kept). Windows builds are asked through ``onnxruntime.disable_telemetry_events`` where a session is made.
"""

import os

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

from typing import TYPE_CHECKING

from .errors import AudioError, LivecapError, ModelError, UsageError
from .events import CaptionEvent, Line, Word

if TYPE_CHECKING:
    from .loader import load_model


def __getattr__(name: str):
    """``load_model`` on first use: importing ``engine`` stays light (NumPy and the backends load with it), so
    ``livecap-transcribe`` can take Ctrl+C as one sentence from its first moments."""
    if name == "load_model":
        from .loader import load_model

        return load_model
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["load_model", "CaptionEvent", "Line", "Word", "LivecapError", "ModelError", "UsageError", "AudioError"]
