"""The headless session commands of ``livecap`` (no window, no QApplication):

    livecap --sessions                              one JSON object per session and line, newest first
    livecap --export-session ID [--format srt|vtt|txt|json] [-o OUT] [--session-version N]
    livecap --retranscribe ID --model SOURCE [--backend B]
                                                    progress as JSON lines, then the new version

``--export-session`` takes the format from ``OUT``'s extension when ``--format`` is not given (and refuses a
``--format`` that contradicts it), writes ``OUT`` atomically, or stdout without ``-o``; it exports the latest
version unless ``--session-version`` says. A reader of stdout that goes away (``| head``) ends the output
quietly. Exit codes: 0 ok, 1 nothing to write (an export of a session with no captions, a re-transcription that
found no speech: no version is stored) or the file (or stdout) could not be written, 2 usage (an unknown session),
3 model, 4 audio.
"""

from __future__ import annotations

import json
import sys
from argparse import Namespace
from pathlib import Path
from typing import Any, TextIO

from engine.errors import ExportError, LivecapError, UsageError, user_message


def wanted(args: Namespace) -> bool:
    """Whether ``args`` ask for a headless session command."""
    return bool(args.sessions or args.export_session is not None or args.retranscribe is not None)


class _Out:
    """Standard output (or ``stream``) written line by line through ``engine.cli.write_stdout``: once the reader
    has gone away (``| head``), ``gone`` is True and further writes are dropped."""

    def __init__(self, stream: TextIO) -> None:
        self.stream, self.gone = stream, False

    def write(self, text: str) -> None:
        from engine.cli import write_stdout

        if not self.gone:
            self.gone = not write_stdout(text, self.stream)


def run(args: Namespace, loader: Any = None, out: TextIO | None = None) -> int:
    """Run the session command in ``args``; returns the exit code (errors: one sentence on stderr)."""
    from app import paths
    from app.session_store import SessionStore

    out = _Out(out or sys.stdout)
    try:
        for option, value in (("--export-session", args.export_session), ("--retranscribe", args.retranscribe)):
            if value is not None and not value.strip():
                raise UsageError(f"{option} needs a session id (livecap --sessions lists them).")
        check_options(args)
        if args.sessions_dir and not Path(args.sessions_dir).is_dir():  # a typo listed "no sessions", exit 0
            what = "is not a folder" if Path(args.sessions_dir).exists() else "does not exist"
            raise UsageError(f"The sessions folder {args.sessions_dir} {what}.")
        store = SessionStore(Path(args.sessions_dir) if args.sessions_dir else paths.journal_dir())
        if args.sessions:
            for summary in store.list():
                out.write(json.dumps(summary.to_json(), ensure_ascii=False) + "\n")
                if out.gone:
                    break
            return 0
        if args.export_session is not None:
            return _export(store, args, out)
        return _retranscribe(store, args, loader, out)
    except LivecapError as exc:
        print(f"livecap: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as stop:  # Ctrl+C (or SIGTERM) during a re-transcription: nothing half-stored
        from engine import stops

        print("livecap: stopped; no new version was stored.", file=sys.stderr)
        return 128 + stops.signal_of(stop)
    except Exception as exc:  # one sentence, never a traceback
        print(f"livecap: {user_message(exc, 'the session command failed')}", file=sys.stderr)
        return 1


def _export(store: Any, args: Namespace, out: _Out) -> int:
    from engine.transcript import format_for_path, format_transcript, write_transcript
    from engine.transcript.export import output_format, refuse_read_only

    fmt = output_format(args.format, args.output)
    if fmt is None:
        if args.output and args.output != "-":
            format_for_path(args.output)  # raises: the name's extension names no format
        raise UsageError("Say the format with --format srt|vtt|txt|json (or give -o a file name with that extension).")
    to_file = bool(args.output and args.output != "-")
    if to_file:
        refuse_read_only(args.output)  # kept, as --save-transcript and livecap-transcribe -o keep one
    lines = store.lines(args.export_session, args.session_version)
    if fmt != "json" and not any(line.text.strip() for line in lines):  # an empty SRT: players refuse the file
        raise ExportError(f"Session {args.export_session} has no captions to export.")
    audio_end = store.audio_seconds(args.export_session)
    if to_file:
        write_transcript(lines, args.output, fmt, audio_end=audio_end)
    else:
        out.write(format_transcript(lines, fmt, audio_end=audio_end))
    return 0


#: The session commands (option, ``args`` name) and the other options of livecap each of them takes.
COMMANDS = (("--sessions", "sessions"), ("--export-session", "export_session"), ("--retranscribe", "retranscribe"))
TAKES = {
    "--sessions": (),
    "--export-session": ("format", "output", "session_version"),
    "--retranscribe": ("model", "backend", "weights", "delay_ms"),
}
#: Options a session command would ignore unless it takes them (the export's, the model's, a live run's).
OPTIONS = (
    *("format", "output", "session_version", "model", "backend", "weights", "delay_ms"),
    *("input", "speed", "save_transcript", "quit_at_end", "source", "device", "quit_after"),
)


def check_options(args: Namespace) -> None:
    """UsageError (one sentence) when ``args`` give two session commands, or an option their command would
    ignore (``--sessions -o x.srt`` listed the sessions, exit 0; ``--retranscribe ID -o x.srt`` wrote no file)."""
    given = [option for option, name in COMMANDS if getattr(args, name, None) not in (None, False)]
    if len(given) > 1:
        raise UsageError(f"Give one of {' and '.join(given)} at a time.")
    extra = [_flag(n) for n in OPTIONS if n not in TAKES[given[0]] and getattr(args, n, None) not in (None, False)]
    if extra:
        raise UsageError(f"{' and '.join(extra[:2])} {'does' if len(extra) == 1 else 'do'} not go with {given[0]}.")


def _flag(name: str) -> str:
    return "-o" if name == "output" else "--" + name.replace("_", "-")


def _retranscribe(store: Any, args: Namespace, loader: Any, out: _Out) -> int:
    from app.retranscribe import retranscribe
    from app.settings import weight_bits
    from engine import stops

    if not args.model:
        raise UsageError("Say which model re-transcribes the session: --model SOURCE.")

    def progress(done: float, total: float) -> None:
        stops.check()  # a Ctrl+C that a library swallowed while the model loaded: nothing is stored
        out.write(json.dumps({"progress": round(done, 3), "total": round(total, 3)}) + "\n")

    options = {"delay_ms": args.delay_ms} if args.delay_ms is not None else None
    stops.catch()
    try:
        version = retranscribe(
            store,
            args.retranscribe,
            args.model,
            backend=args.backend or "auto",
            quantize=weight_bits(args.weights or "stored") or None,
            loader=loader,
            options=options,
            progress=progress,
            warn=lambda text: out.write(json.dumps({"warning": text}) + "\n"),
        )
    except Exception:
        stops.check()  # a library's view of a Ctrl+C (an ImportError, ...) is the Ctrl+C
        raise
    summary = store.summary(args.retranscribe)
    out.write(json.dumps({"id": summary.id, "version": version, "model": args.model, "lines": summary.lines}) + "\n")
    return 0
