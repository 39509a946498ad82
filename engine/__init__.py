"""livecap engine: audio in, caption events out. Never imports Qt."""

from .errors import AudioError, LivecapError, ModelError, UsageError
from .events import CaptionEvent, Line, Word
from .loader import load_model

__all__ = ["load_model", "CaptionEvent", "Line", "Word", "LivecapError", "ModelError", "UsageError", "AudioError"]
