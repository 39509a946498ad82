"""Re-transcribe a kept session: run a model over the session's stored audio at full speed (no real-time
pacing) through the engine's normal session API, and store the result as a new version of the session.

No Qt: ``livecap --retranscribe ID --model SOURCE`` runs it in a child process of the app (the GUI starts
that process, shows its progress, and can cancel it), so the model loads and runs outside the GUI and
the engine worker, and its memory is returned when it ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.journal import read_start, recorder_alive
from app.session_audio import RATE, audio_seconds, iter_audio
from app.session_store import SessionStore, made_with
from engine.cli import check_delay_ms
from engine.errors import UsageError
from engine.events import Line

FEED_SECONDS = 10  # audio per feed call: long enough to run at full speed, short enough for progress

Progress = Callable[[float, float], None]  # (seconds done, seconds in all)


def _default_loader(source: str, *, backend: str = "auto", quantize: int | None = None) -> Any:
    from engine import load_model

    return load_model(source, backend=backend, quantize=quantize)


def retranscribe(
    store: SessionStore,
    session_id: str,
    source: str,
    *,
    backend: str = "auto",
    quantize: int | None = None,
    loader: Callable[..., Any] | None = None,
    options: dict[str, Any] | None = None,
    progress: Progress | None = None,
    warn: Callable[[str], None] | None = None,
) -> int:
    """Transcribe the kept audio of ``session_id`` with the model ``source`` and store it as the
    session's next version; returns its number. Raises ``engine.errors.LivecapError`` (one sentence)
    when the session has no audio, the model cannot load or the audio cannot be read, and ``ExportError``
    (``session_store.NO_SPEECH``) when the model found no speech in it; nothing is stored then (an empty
    version would become the latest and hide the session's transcript). ``quantize``: 8 or 4-bit float
    weights (``engine.load_model``'s; None: as stored). ``warn`` gets a sentence when the kept audio is
    shorter than the session (the disk filled while it was recorded): the new version, which becomes the
    one exported, covers less."""
    summary = store.summary(session_id)
    if summary.audio is None:
        raise UsageError(
            f"The session {session_id} has no kept audio; turn on \u201cKeep audio\u201d before recording."
        )
    if not summary.finished and recorder_alive(read_start(store.journal_path(session_id))) is not False:
        raise UsageError(f"The session {session_id} is still being recorded; re-transcribe it when it has ended.")
    # unfinished, its recorder gone (the app stopped during it): its audio up to there is transcribed
    with store.working_on(session_id):  # retention and delete leave it alone meanwhile
        total = audio_seconds(summary.audio)
        if warn is not None and summary.finished and total < summary.duration - max(1.0, 0.02 * summary.duration):
            warn(
                f"The kept audio holds {total:.1f} s of the session's {summary.duration:.1f} s (the disk may have "
                "filled while it was recorded); the new version covers only that part."
            )
        options = options or {}
        weights = {"quantize": quantize} if quantize else {}
        model = (loader or _default_loader)(source, backend=backend, **weights)
        check_delay_ms(options.get("delay_ms"), getattr(model, "family", None))  # Voxtral's only
        session = model.start_session(**options)
        lines: list[Line] = []
        done = 0
        for block in iter_audio(summary.audio, block=RATE * FEED_SECONDS):
            for event in session.feed(block):
                lines.extend(event.committed)
            done += len(block)
            if progress is not None:
                progress(done / RATE, total)
        for event in session.finish():
            lines.extend(event.committed)
        info = {
            "model": source,
            "family": str(getattr(model, "family", "")),
            "backend": str(getattr(model, "backend_name", backend)),
            "from": "audio",
        }
        info |= made_with(int(getattr(model, "weight_bits", None) or 0), options)  # bits: stored so or converted
        return store.add_version(session_id, lines, info)
