"""``livecap-transcribe``: transcribe a WAV file (or raw float32 on stdin) through a streaming session.

Exit codes: 0 ok, 2 usage, 3 model problem, 4 audio problem; errors are one sentence on stderr.
Set LIVECAP_DEBUG=1 to see tracebacks of unexpected errors.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from .audio import SAMPLE_RATE
from .errors import LivecapError, UsageError
from .models.voxtral.session import DELAYS_MS as VOXTRAL_DELAYS

PROG = "livecap-transcribe"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one sentence, exit 2
        raise UsageError(message[:1].upper() + message[1:] + ".")


def build_parser() -> argparse.ArgumentParser:
    """The CLI's arguments (design.md)."""
    p = _Parser(prog=PROG, description="Transcribe audio with a streaming speech recogniser.")
    p.add_argument("audio", metavar="AUDIO", help="a WAV file, or - for raw float32 16 kHz mono on stdin")
    p.add_argument("--model", required=True, metavar="SOURCE", help="a model folder or a hub repo id")
    p.add_argument("--backend", default="auto", choices=("auto", "mlx", "numpy"))
    p.add_argument("--dtype", choices=("float32", "float16", "bfloat16"))
    p.add_argument("--quantize", type=int, choices=(4, 6, 8))
    p.add_argument("--format", default="txt", choices=("txt", "srt", "vtt", "json"))
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
    if args.chunk_ms <= 0:
        raise UsageError("--chunk-ms must be positive.")
    from .audio import read_audio
    from .loader import load_model

    audio = read_audio(args.audio)
    model = load_model(args.model, backend=args.backend, dtype=args.dtype, quantize=args.quantize)
    options: dict = {}
    if model.family == "voxtral_realtime":
        if args.no_vad:
            raise UsageError("--no-vad applies to Moonshine models only.")
        if args.delay_ms is not None:
            if args.delay_ms not in VOXTRAL_DELAYS:
                raise UsageError("--delay-ms must be a multiple of 80 from 80 to 1200, or 2400.")
            options["delay_ms"] = args.delay_ms
    else:
        if args.delay_ms is not None:
            raise UsageError("--delay-ms applies to Voxtral models only.")
        options["vad"] = not args.no_vad
        if not args.no_vad and not args.realtime:
            options["partial_ms"] = 0  # only committed lines are printed: skip the partial decodes
    session = model.start_session(**options)
    lines = []
    step = max(1, int(round(args.chunk_ms * (SAMPLE_RATE / 1000))))
    t0 = time.monotonic()
    for i in range(0, len(audio), step):
        if args.realtime:
            wait = t0 + i / SAMPLE_RATE - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        for ev in session.feed(audio[i : i + step]):
            lines.extend(ev.committed)
    for ev in session.finish():
        lines.extend(ev.committed)
    text = render(model, session, lines, args)
    if args.output:
        _write(args.output, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0


def render(model, session, lines, args) -> str:
    """The output document for ``lines`` in the requested form."""
    if args.tokens:
        if model.family == "voxtral_realtime":
            doc = {"family": model.family, "delay_tokens": session.delay_tokens, "tokens": session.tokens}
        else:
            doc = {"family": model.family,
                   "segments": [{"start": (ln.span or (ln.start, ln.end))[0], "end": (ln.span or (ln.start, ln.end))[1],
                                 "tokens": list(ln.tokens)} for ln in lines]}
        return json.dumps(doc) + "\n"
    from .transcript import format_transcript

    return format_transcript([ln for ln in lines if ln.text], args.format)


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise LivecapError(f"Cannot write {path}: {e.strerror or e}.") from e


def main(argv: list[str] | None = None) -> int:
    """Console entry point: run and map errors to exit codes."""
    try:
        return run(argv)
    except LivecapError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except MemoryError:
        print(f"{PROG}: Out of memory; try a smaller model or the MLX backend.", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - never a traceback for the user unless asked
        if os.environ.get("LIVECAP_DEBUG"):
            raise
        print(f"{PROG}: Unexpected error ({type(e).__name__}: {e}); set LIVECAP_DEBUG=1 for details.",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
