"""The headless session commands of ``livecap`` (no window, no QApplication):

    livecap --sessions                              one JSON object per session and line, newest first
    livecap --export-session ID [--format srt|vtt|txt|json] [-o OUT] [--session-version N]
    livecap --retranscribe ID --model SOURCE [--backend B]
                                                    progress as JSON lines, then the new version

``--export-session`` takes the format from ``OUT``'s extension when ``--format`` is not given, writes
``OUT`` atomically, or stdout without ``-o``; it exports the latest version unless ``--session-version`` says.
Exit codes: 0 ok, 1 the file could not be written, 2 usage (an unknown session), 3 model, 4 audio.
"""

from __future__ import annotations

import json
import sys
from argparse import Namespace
from pathlib import Path
from typing import Any, TextIO

from engine.errors import LivecapError, UsageError, user_message


def wanted(args: Namespace) -> bool:
    """Whether ``args`` ask for a headless session command."""
    return bool(args.sessions or args.export_session or args.retranscribe)


def run(args: Namespace, loader: Any = None, out: TextIO | None = None) -> int:
    """Run the session command in ``args``; returns the exit code (errors: one sentence on stderr)."""
    from app import paths
    from app.session_store import SessionStore

    out = out or sys.stdout
    store = SessionStore(Path(args.sessions_dir) if args.sessions_dir else paths.journal_dir())
    try:
        if args.sessions:
            for summary in store.list():
                out.write(json.dumps(summary.to_json(), ensure_ascii=False) + "\n")
            return 0
        if args.export_session:
            return _export(store, args, out)
        return _retranscribe(store, args, loader, out)
    except LivecapError as exc:
        print(f"livecap: {exc}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:  # one sentence, never a traceback
        print(f"livecap: {user_message(exc, 'the session command failed')}", file=sys.stderr)
        return 1


def _export(store: Any, args: Namespace, out: TextIO) -> int:
    from engine.transcript import format_for_path, format_transcript

    fmt = args.format or (format_for_path(args.output) if args.output and args.output != "-" else None)
    if fmt is None:
        raise UsageError("Say the format with --format srt|vtt|txt|json (or give -o a file name with that extension).")
    if args.output and args.output != "-":
        store.export(args.export_session, args.output, fmt, args.session_version)
    else:
        lines = store.lines(args.export_session, args.session_version)
        out.write(format_transcript(lines, fmt, audio_end=store.audio_seconds(args.export_session)))
    return 0


def _retranscribe(store: Any, args: Namespace, loader: Any, out: TextIO) -> int:
    from app.retranscribe import retranscribe

    if not args.model:
        raise UsageError("Say which model re-transcribes the session: --model SOURCE.")

    def progress(done: float, total: float) -> None:
        out.write(json.dumps({"progress": round(done, 3), "total": round(total, 3)}) + "\n")
        out.flush()

    options = {"delay_ms": args.delay_ms} if args.delay_ms is not None else None
    version = retranscribe(
        store,
        args.retranscribe,
        args.model,
        backend=args.backend or "auto",
        loader=loader,
        options=options,
        progress=progress,
    )
    summary = store.summary(args.retranscribe)
    out.write(json.dumps({"id": summary.id, "version": version, "model": args.model, "lines": summary.lines}) + "\n")
    return 0
