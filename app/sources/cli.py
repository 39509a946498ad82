"""``--source`` / ``--device`` for one run: applied to the Source picker without saving them."""

from __future__ import annotations

from typing import Any

from app.sources.base import MIC, SYSTEM


def apply_source_args(picker: Any, kind: str | None, device: str | None) -> str | None:
    """Select ``kind`` and the microphone (mic, both) or output (system) named ``device`` in ``picker``
    (an ``app.source_picker.SourcePicker``). Returns one sentence when that cannot be done, else None."""
    audio = picker.audio
    kind = kind or picker.kind
    if audio is None:
        return picker.no_audio()
    if kind != MIC:
        reason = audio.system_unavailable()
        if reason:
            return reason
    picker.set_kind(kind, save=False)
    if device:
        target = SYSTEM if kind == SYSTEM else MIC
        ident = audio.find(target, device)
        if ident is None:
            what = "output" if target == SYSTEM else "microphone"
            return f"No {what} called \u201c{device}\u201d was found."
        picker.choose("output" if target == SYSTEM else "device", ident)
    return None
