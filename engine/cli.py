"""``livecap-transcribe``: transcribe an audio file (or raw float32 on stdin) through a streaming session.

The audio is decoded and fed block by block (``engine.audio.open_audio``), so memory does not grow with
the file's length. ``-o`` replaces its file atomically (``engine.transcript.write_text_atomic``): a failed
write leaves the old file as it was. Exit codes: 0 ok, 1 the output could not be written, 2 usage, 3 model
problem, 4 audio problem (also: standard input held no audio), 128 + the signal when Ctrl+C (130) or SIGTERM
(143) stopped it: what was transcribed until then is still written, and stderr says so. Errors are one sentence
on stderr. ``-o -`` is standard output. Without ``--format`` the format follows ``-o``'s extension (.txt, .srt,
.vtt, .json; else txt); a ``--format`` that contradicts it is refused, as is a text format with ``--tokens``
(JSON). Set LIVECAP_DEBUG=1 to see tracebacks of unexpected errors.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import signal
import sys
import time

from . import stops
from .errors import AudioError, LivecapError, UsageError, os_reason

# Nothing heavier than the standard library is imported at module level: NumPy and the engine load inside ``main``,
# whose handlers turn a Ctrl+C in the first moments into exit 130 without a traceback.

PROG = "livecap-transcribe"
RAW_MISREAD_SHARE = 0.01  # raw stdin with more invalid samples than this is not float32 (16-bit PCM: ~25 %)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one sentence, exit 2
        raise UsageError(message[:1].upper() + message[1:] + ".")


def build_parser() -> argparse.ArgumentParser:
    """The CLI's arguments (design.md)."""
    p = _Parser(prog=PROG, description="Transcribe audio with a streaming speech recogniser.")
    p.add_argument(
        "audio",
        metavar="AUDIO",
        help="an audio or video file (WAV, FLAC, OGG, MP3, M4A, MP4, ...), or - for raw float32 16 kHz mono on stdin",
    )
    p.add_argument("--model", required=True, metavar="SOURCE", help="a model folder or a hub repo id")
    p.add_argument("--backend", default="auto", choices=("auto", "mlx", "numpy"))
    p.add_argument("--dtype", choices=("float32", "float16", "bfloat16"))
    p.add_argument(
        "--quantize", type=int, choices=(4, 6, 8), help="float weights to this many bits (stored quantized: kept)"
    )
    p.add_argument(
        "--format", choices=("txt", "srt", "vtt", "json"), help="output format (default: -o's extension, else txt)"
    )
    p.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout")
    p.add_argument("--chunk-ms", type=float, default=80.0, metavar="N", help="feed chunk size (default 80)")
    p.add_argument("--realtime", action="store_true", help="pace the feed at wall-clock speed")
    p.add_argument("--delay-ms", type=int, metavar="N", help="Voxtral: transcription delay (80..1200 step 80, 2400)")
    p.add_argument("--no-vad", action="store_true", help="Moonshine: the whole input is one segment")
    p.add_argument("--tokens", action="store_true", help="print JSON with the raw token ids instead of text")
    return p


def run(argv: list[str] | None = None) -> int:
    """Parse, transcribe, print; raises LivecapError subclasses for the caller to report."""
    args = build_parser().parse_args(argv)
    if not 0 < args.chunk_ms < math.inf:
        raise UsageError("--chunk-ms must be a positive number of milliseconds.")
    check_delay_ms(args.delay_ms)
    if args.output == "-":
        args.output = None  # standard output, as for livecap --export-session
    check_output(args.audio, args.output)
    from .transcript.export import output_format

    asked = args.format
    args.format = output_format(args.format, args.output, None)
    if args.tokens and args.format not in (None, "json"):
        advice = "drop --format or give -o a .json name" if asked else "give -o a .json name"
        raise UsageError(f"--tokens writes JSON, not {args.format}; {advice}.")
    args.format = args.format or "txt"
    from .audio import SAMPLE_RATE, open_audio
    from .loader import load_model

    with open_audio(args.audio) as audio:
        model = load_model(args.model, backend=args.backend, dtype=args.dtype, quantize=args.quantize)
        options: dict = {}
        if model.family == "voxtral_realtime":
            if args.no_vad:
                raise UsageError("--no-vad applies to Moonshine models only.")
            if args.delay_ms is not None:
                options["delay_ms"] = args.delay_ms
            options["keep_tokens"] = args.tokens
        else:
            check_delay_ms(args.delay_ms, model.family)
            options["vad"] = not args.no_vad
            if args.tokens:
                options["repetition_stop"] = 0  # the ids up to EOS, as the reference generate() gives them
            if not args.no_vad and not args.realtime:
                options["partial_ms"] = 0  # only committed lines are printed: skip the partial decodes
        session = model.start_session(**options)
        step = min(max(1, round(args.chunk_ms * SAMPLE_RATE / 1000)), 1 << 24)
        stops.check()  # a Ctrl+C while the model loaded that a library swallowed
        lines, fed, stopped = transcribe(session, audio, step, args.realtime)
    if not fed and args.audio == "-" and audio.format == "raw float32" and not stopped:  # the command before | failed?
        raise AudioError("Standard input held no audio (nothing, or less than one sample); nothing was written.")
    if not fed and audio.ended_early and not stopped:  # a header and nothing that decodes: no transcript of it
        raise AudioError(
            f"Cannot read audio from {audio.name}: none of its audio could be decoded (it is cut short or damaged); "
            "nothing was written."
        )
    if audio.ended_early and not stopped:
        print(f"{PROG}: warning: {audio.ended_early}", file=sys.stderr)
    bad = getattr(session, "invalid_samples", 0)
    if bad:
        from .audio.finite import describe

        hint = ""
        if audio.format == "raw float32" and bad > RAW_MISREAD_SHARE * max(fed, 1):  # 16-bit samples, say
            hint = " Raw input must be 32-bit float 16 kHz mono; pipe a WAV file instead (ffmpeg ... -f wav -)."
        print(f"{PROG}: warning: {describe(bad)}{hint}", file=sys.stderr)
    if not fed and not stopped:  # a header and no samples: a whole file, but an empty transcript needs a word
        print(f"{PROG}: warning: {audio.name} holds no audio, only a header; the transcript is empty.", file=sys.stderr)
    elif not stopped and not args.tokens and not any(ln.text.strip() for ln in lines):  # an empty SRT: broken?
        print(f"{PROG}: warning: nothing was recognised in {audio.name}; the transcript is empty.", file=sys.stderr)
    text = render(model, session, lines, args, audio_end=fed / SAMPLE_RATE)
    kept = stopped and args.output and not any(ln.text.strip() for ln in lines)  # an earlier file stays as it was
    if not args.output:
        write_stdout(text)
    elif not kept:
        from .transcript.export import write_text_atomic

        write_text_atomic(args.output, text)
    if stopped:
        name, seconds = signal.Signals(stopped).name, fed / SAMPLE_RATE
        held = (
            f"nothing was transcribed, so {args.output} was not written"
            if kept
            else "the transcript holds what was transcribed until then"
        )
        print(f"{PROG}: stopped ({name}) after {seconds:.1f} s of audio; {held}.", file=sys.stderr)
        return 128 + stopped
    return 0


def check_delay_ms(delay_ms: int | None, family: str | None = None) -> None:
    """Refuse a ``--delay-ms`` that no model takes, or (with the model's ``family``) one given for a model
    without a delay: UsageError with one sentence. ``None`` (not given) is always fine. Shared with ``livecap``."""
    if delay_ms is None:
        return
    from .models.voxtral.session import DELAYS_MS

    if delay_ms not in DELAYS_MS:
        raise UsageError("--delay-ms must be a multiple of 80 from 80 to 1200, or 2400.")
    if family is not None and family != "voxtral_realtime":
        raise UsageError("--delay-ms applies to Voxtral models only.")


def transcribe(session, audio, step: int, realtime: bool = False) -> tuple[list, int, int]:
    """Feed ``audio`` (an ``AudioStream``) in chunks of ``step`` samples, then finish; the committed lines, the
    number of samples fed, and the signal that stopped the feed early (Ctrl+C: SIGINT, ``Terminated``: SIGTERM;
    the session is then finished over what it was fed) or 0."""
    lines = []
    fed = stopped = 0
    t0 = time.monotonic()
    try:
        while True:
            chunk = audio.read(step)
            if not len(chunk):
                break
            if realtime:
                wait = t0 + fed / 16000 - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
            for ev in session.feed(chunk):
                lines.extend(ev.committed)
            fed += len(chunk)
            stops.check()
    except KeyboardInterrupt as stop:  # keep what was heard; a second Ctrl+C while finishing ends at once
        stopped = stops.signal_of(stop)
    try:
        for ev in session.finish():
            lines.extend(ev.committed)
    except Exception:  # noqa: BLE001 - stopped inside a step: the lines committed before it stand
        if not stopped:
            raise
    if not stopped:
        stops.check()  # stopped while finishing: as a KeyboardInterrupt there, nothing to keep
    return lines, fed, stopped


def check_output(audio: str, output: str | None) -> None:
    """Refuse an output that would overwrite the input (the same file, also through links) or that cannot
    be written (its folder is missing, ...), before any work: UsageError."""
    if output:
        from .transcript.export import check_target

        check_target(output, need_format=False, source=audio)


def render(model, session, lines, args, audio_end: float | None = None) -> str:
    """The output document for ``lines`` in the requested form (no time past ``audio_end`` seconds)."""
    if args.tokens:
        if model.family == "voxtral_realtime":
            doc = {"family": model.family, "delay_tokens": session.delay_tokens, "tokens": session.tokens}
        else:
            doc = {
                "family": model.family,
                "segments": [
                    {
                        "start": (ln.span or (ln.start, ln.end))[0],
                        "end": (ln.span or (ln.start, ln.end))[1],
                        "tokens": list(ln.tokens),
                    }
                    for ln in lines
                ],
            }
        return json.dumps(doc) + "\n"
    from .transcript import format_transcript

    return format_transcript([ln for ln in lines if ln.text], args.format, audio_end=audio_end)


def write_stdout(text: str, stream=None) -> bool:
    """Write and flush ``text`` to ``stream`` (default: standard output). False when the reader went away
    (``| head``: not an error of ours; nothing more should be written); LivecapError with one sentence on any
    other failure (a full disk). Shared with ``livecap``'s session commands."""
    stream = stream if stream is not None else sys.stdout
    if stream is None:  # started with standard output closed (>&-)
        raise LivecapError("Cannot write to standard output: it is closed; give -o FILE.")
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        _drop_stdout(stream)  # keeps the interpreter's final flush quiet
        return False
    except OSError as e:
        reason = os_reason(e)
        _drop_stdout(stream)  # the text that did not fit is dropped at exit
        raise LivecapError(f"Cannot write to standard output: {reason}.") from None
    return True


def _drop_stdout(stream) -> None:
    if stream is sys.stdout:
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the interpreter's final flush goes here
        except OSError:
            pass


def main(argv: list[str] | None = None) -> int:
    """Console entry point: run and map errors to exit codes."""
    stops.catch()
    say_warnings()
    try:
        return run(argv)
    except KeyboardInterrupt as stop:  # before the feed (loading the model) or while finishing: nothing to keep
        return 128 + stops.signal_of(stop)
    except Exception as e:
        if stops.received():  # the failure is a library's view of the interrupt (an ImportError, ...)
            return 128 + stops.received()
        return _failed(e)


def _failed(e: Exception) -> int:
    """Say ``e`` in one sentence on stderr (a traceback with LIVECAP_DEBUG set); the exit code."""
    if isinstance(e, LivecapError):
        print(f"{PROG}: {e}", file=sys.stderr)
        return e.exit_code
    if isinstance(e, MemoryError):
        print(f"{PROG}: Out of memory; try a smaller model or the MLX backend.", file=sys.stderr)
        return 1
    if os.environ.get("LIVECAP_DEBUG"):
        raise e
    print(f"{PROG}: Unexpected error ({type(e).__name__}: {e}); set LIVECAP_DEBUG=1 for details.", file=sys.stderr)
    return 1


class _Said(logging.Handler):
    """The engine's warnings as the CLI's other messages: one line, ``livecap-transcribe: warning: ...``."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(f"{PROG}: warning: {record.getMessage()}", file=sys.stderr)
        except Exception:  # noqa: BLE001 - a closed stderr: nothing to tell
            pass


def say_warnings() -> None:
    """Engine log records of WARNING and up go to stderr prefixed with the program's name (Python printed them bare,
    e.g. "CPU twin 8714 stopped ..."); with LIVECAP_DEBUG set, Python's own handling (tracebacks) stays."""
    root = logging.getLogger()
    if os.environ.get("LIVECAP_DEBUG") or root.handlers:
        return
    handler = _Said(logging.WARNING)
    root.addHandler(handler)


if __name__ == "__main__":
    sys.exit(main())
