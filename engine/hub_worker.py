"""The download child process: huggingface_hub's own ``hf_hub_download`` (Xet included) in a process of its own,
which ``engine.hub.transfer`` starts (``python -m engine.hub_worker``, or the frozen app with ``WORKER_FLAG``) and
stops by ending it.

Why a process: an Xet transfer runs in Rust and cannot be cancelled in-process (huggingface_hub #4632), and neither
can an HTTP read blocked on a silent server; ending the process stops both at once. The child also reads
huggingface_hub's environment variables at its own import, so the endpoint, cache and timeouts are the ones of this
call, and none of the library's internals need touching.

Written by hand, and why: **resume.** Since 1.18, huggingface_hub writes every download to a process-unique
temporary file, deletes it on failure and never resumes one (huggingface_hub #4196, open; hf_xet does not resume
either): a cancelled 9 GB download would start again at byte 0. So the child keeps those bytes: ``ResumeTransport``,
an httpx2 transport installed through the public ``set_client_factory``, gives the library's temporary file a
second name (a hard link, no copy) in livecap's partial folder as soon as the body starts, and answers the next
request for that file with the kept bytes followed by a ``Range`` request for the rest. The library still writes
its own blob, snapshot link and ref. Files that come through Xet bypass HTTP and start again after a cancel (a
dropped connection is retried inside hf_xet); ``HF_HUB_DISABLE_XET=1`` sends every file over resumable HTTP. On a
file system without hard links a download works but does not resume.

A plain subprocess rather than ``multiprocessing``: spawn would import the caller's main module again in the child,
which breaks any script that calls ``load_model("org/name")`` without a ``__main__`` guard. The job comes as one
JSON line on stdin (the token never appears on a command line); messages go back as JSON lines on what was stdout,
whose descriptor the child then points at stderr, so nothing the library or hf_xet prints can garble them:
``["log", level, text]``, ``["file", index, name, resumed_bytes]``, ``["bytes", file_bytes, network_bytes]``,
``["file_done", index]``, ``["done", snapshot_path]``, ``["error", class_name, sentence]``, ``["cancelled"]``.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

REPORT_INTERVAL_S = 0.1
READ_BLOCK = 1 << 20


@dataclass
class Target:
    """The file being fetched: its blob id (ETag), size, where its partial bytes are kept, and the library's
    temporary files for it that existed before this fetch (so the one this fetch writes can be told apart)."""

    etag: str
    size: int
    part: Path
    blobs: Path
    known: frozenset[str] = frozenset()

    def library_file(self) -> Path | None:
        """The temporary file huggingface_hub writes for this fetch (``blobs/<etag>.<nonce>.incomplete``)."""
        fresh = [p for p in self.blobs.glob(f"{self.etag}.*.incomplete") if p.name not in self.known]
        return max(fresh, key=lambda p: p.stat().st_mtime_ns, default=None)


class Reporter:
    """Counts the bytes of the current file and sends throttled reports to the parent.

    Over HTTP the transport sees every network chunk (huggingface_hub itself reports in 10 MB steps); over Xet
    only the library's progress bar does. Each count keeps the larger of the two."""

    def __init__(self, out: Any) -> None:
        self.out = out
        self.bar_written = self.bar_received = 0  # from huggingface_hub's progress bar (replayed bytes included)
        self.position = 0  # how far into the current file the HTTP body has come
        self.network = 0  # HTTP body bytes received from the network in this process
        self.replayed = 0  # bytes of the current file that came from the kept partial file
        self._last = 0.0
        self._sent = (0, 0)
        self._lock = threading.Lock()  # Xet reports progress from its own threads
        self.gone = False  # the parent's end of the pipe is closed

    def send(self, *message: Any) -> None:
        """Write one message to the parent; ``BrokenPipeError`` (or another ``OSError``) once the parent has gone,
        this time and every time after."""
        line = json.dumps(message) + "\n"
        with self._lock:
            if self.gone:
                raise BrokenPipeError(errno.EPIPE, "the parent has gone away")
            try:
                self.out.write(line)
                self.out.flush()
            except (OSError, ValueError):
                self.gone = True
                self._discard()
                raise

    def _discard(self) -> None:
        """Point the pipe's descriptor at the null device: the bytes the failed write left in the buffer then go
        nowhere when the file is closed at exit, instead of a second broken pipe printed by the interpreter."""
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, self.out.fileno())
            finally:
                os.close(null)
        except (OSError, ValueError):
            pass

    def start_file(self, index: int, name: str, resumed: int) -> None:
        self.bar_written = self.position = self.replayed = 0
        self.send("file", index, name, resumed)
        self._last = time.monotonic()

    @property
    def file_bytes(self) -> int:
        return max(self.bar_written, self.position)

    @property
    def received(self) -> int:
        return max(self.network, self.bar_received - self.replayed)

    def report(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last >= REPORT_INTERVAL_S:
            self._last = now
            self._sent = (self.file_bytes, self.received)
            self.send("bytes", *self._sent)

    def tick(self) -> None:
        """Every ``REPORT_INTERVAL_S``, report counts that changed since the last report (the last bytes before
        the network went quiet would otherwise wait for the next chunk). Ends quietly once the parent has gone:
        the main thread's next message fails too, and ends the child."""
        while not self.gone:
            time.sleep(REPORT_INTERVAL_S)
            if (self.file_bytes, self.received) != self._sent:
                try:
                    self.report(force=True)
                except (OSError, ValueError):
                    return


_REPORTER: Reporter | None = None


class ProgressBar:
    """What huggingface_hub's ``tqdm_class`` parameter gets: a bar that only counts (HTTP and Xet both call
    ``update`` for bytes written and ``update_transfer`` for bytes received)."""

    def __init__(self, *args: Any, total: int | None = None, initial: int = 0, **kwargs: Any) -> None:
        self.total, self.n = total, initial

    def update(self, n: int | float | None = 1) -> None:
        self.n += int(n or 0)
        if _REPORTER is not None:
            _REPORTER.bar_written += int(n or 0)
            _REPORTER.report()

    def update_transfer(self, n: int | float | None = 1) -> None:
        if _REPORTER is not None:
            _REPORTER.bar_received += int(n or 0)
            _REPORTER.report()

    def set_postfix_str(self, *args: Any, **kwargs: Any) -> None:
        pass

    set_transfer_postfix_str = set_description = set_description_str = set_postfix_str

    def refresh(self, *args: Any, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


# ---------------------------------------------------------------------------------------------------------
# Resume


def _range_start(value: str | None) -> int | None:
    """0 for no Range header, N for ``bytes=N-``, None for any other range (left alone)."""
    if not value:
        return 0
    m = re.fullmatch(r"\s*bytes=(\d+)-\s*", value)
    return int(m.group(1)) if m else None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _keep(target: Target) -> None:
    """Give the library's temporary file a second name in the partial folder (a hard link: no copy, no extra
    space), so its bytes outlive the library deleting it on a cancel. Nothing to do when the partial file is that
    name already (huggingface_hub retrying a dropped connection itself: the same temporary file goes on); the
    link is made beside it and moved into place, and never outlives this call."""
    source = target.library_file()
    if source is None:
        log.info("no temporary file of %s found: its partial bytes will not be kept", target.etag)
        return
    if _same_file(source, target.part):  # renaming one name of a file onto another would leave both
        return
    link = target.part.with_name(target.part.name + ".link")
    try:
        link.unlink(missing_ok=True)
        os.link(source, link)
        os.replace(link, target.part)
    except OSError as e:  # a file system without hard links: the download works, it just will not resume
        log.info("cannot keep the partial bytes of %s (%s)", target.etag, e)
    finally:
        try:
            link.unlink(missing_ok=True)
        except OSError:
            pass


def _drop_orphans(target: Target) -> None:
    """Remove the library's temporary files of earlier runs that are second names of the kept partial file: a run
    ended (killed, or its clean-up outlasted the stop's grace) before the library removed its file. Their bytes live
    on in the partial file, and no later run would ever remove them. Called while the library reads the body, so
    while it holds the blob's lock: no other process is writing a file of this blob."""
    try:
        kept = target.part.stat().st_ino
    except OSError:
        return
    for name in target.known:
        p = target.blobs / name
        try:
            if p.stat().st_ino == kept:
                p.unlink()
        except OSError:
            continue


def _make_transport_class():
    import httpx2

    class SplicedStream(httpx2.SyncByteStream):
        """Bytes ``[start, have)`` of the partial file, then the network body (which starts at ``have``); once
        the network part begins, the partial file becomes a second name of the library's own file."""

        def __init__(self, target: Target, start: int, have: int, network, reporter: Reporter | None) -> None:
            self.target, self.start, self.have = target, start, have
            self.network, self.reporter = network, reporter

        def __iter__(self):
            _drop_orphans(self.target)
            pos, r = self.start, self.reporter
            if pos < self.have:
                with open(self.target.part, "rb") as f:
                    f.seek(pos)
                    while pos < self.have:
                        block = f.read(min(READ_BLOCK, self.have - pos))
                        if not block:
                            break
                        pos += len(block)
                        if r is not None:
                            r.replayed += len(block)
                            r.position = pos
                            r.report()
                        yield block
            if self.network is not None:
                _keep(self.target)
                for chunk in self.network:
                    pos += len(chunk)
                    if r is not None:
                        r.network += len(chunk)
                        r.position = pos
                        r.report()
                    yield chunk

        def close(self) -> None:
            if self.network is not None:
                self.network.close()

    class ResumeTransport(httpx2.BaseTransport):
        """Resumes the body of ``target`` (the file being fetched) from its partial bytes; every other request
        passes through unchanged."""

        def __init__(self, inner: httpx2.BaseTransport, reporter: Reporter | None = None) -> None:
            self.inner, self.reporter = inner, reporter
            self.target: Target | None = None

        def close(self) -> None:
            self.inner.close()

        def handle_request(self, request: httpx2.Request) -> httpx2.Response:
            t = self.target
            want = _range_start(request.headers.get("Range")) if request.method == "GET" else None
            if t is None or want is None or want >= t.size or "/api/" in request.url.path:
                return self.inner.handle_request(request)
            have = t.part.stat().st_size if t.part.is_file() else 0
            if have > t.size:
                t.part.unlink()
                have = 0
            if have < want:  # the partial file is behind what the caller already holds: leave it be
                return self.inner.handle_request(request)
            if have == t.size:  # complete already (the last run ended before the library moved it)
                return self._answer(t, want, have, None, httpx2.Headers(), request)
            headers = httpx2.Headers(request.headers)
            if have:
                headers["Range"] = f"bytes={have}-"
            sent = httpx2.Request(
                request.method, request.url, headers=headers, stream=request.stream, extensions=request.extensions
            )
            response = self.inner.handle_request(sent)
            encoded = response.headers.get("Content-Encoding", "identity").lower() != "identity"
            if response.status_code == 206 and not encoded:
                m = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+)", response.headers.get("Content-Range", ""))
                if m and int(m.group(1)) == have and int(m.group(3)) == t.size:
                    return self._answer(t, want, have, response.stream, response.headers, request, response)
            elif response.status_code == 200 and not encoded and response.headers.get("Content-Length") == str(t.size):
                # the whole file from byte 0 (no range asked, or the server ignored it)
                return self._answer(t, 0, 0, response.stream, response.headers, request, response)
            return response

        def _answer(
            self, t: Target, start: int, have: int, network, headers, request, response=None
        ) -> httpx2.Response:
            out = httpx2.Headers(headers)
            for key in ("Content-Range", "Content-Length", "Transfer-Encoding"):
                out.pop(key, None)
            out["Content-Length"] = str(t.size - start)
            status = 200
            if start:
                status = 206
                out["Content-Range"] = f"bytes {start}-{t.size - 1}/{t.size}"
            stream = SplicedStream(t, start, have, network, self.reporter)
            return httpx2.Response(
                status,
                headers=out,
                stream=stream,
                request=request,
                extensions=response.extensions if response is not None else {},
            )

    return ResumeTransport


def resume_transport(reporter: Reporter | None = None):
    """A ``ResumeTransport`` over httpx2's default transport (see the module docstring)."""
    import httpx2

    return _make_transport_class()(httpx2.HTTPTransport(), reporter)


# ---------------------------------------------------------------------------------------------------------
# The child's main


class _Forward(logging.Handler):
    def __init__(self, reporter: Reporter) -> None:
        super().__init__(logging.DEBUG)
        self.reporter = reporter

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.reporter.send("log", record.levelno, record.getMessage())
        except Exception:  # noqa: BLE001 - the parent is gone: nothing to tell
            pass


def fetch_order(names: list[str]) -> list[int]:
    """Indices of ``names`` in download order: the files that mark a folder as a model come last."""
    from .formats import MARKER_FILES

    return sorted(range(len(names)), key=lambda i: (names[i] in MARKER_FILES, names[i]))


def main() -> int:
    """Entry point of the child process. The job (one JSON line on stdin): ``env`` (variables set before
    huggingface_hub is imported), ``repo_id``, ``revision`` (the branch the commit was resolved from),
    ``commit``, ``files`` (``[name, size, etag]`` each), ``endpoint``, ``cache_dir``, ``token``,
    ``partial_dir``."""
    global _REPORTER
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # anything else printed to stdout goes to stderr
    sys.stdout = sys.stderr
    try:
        job = json.loads(sys.stdin.readline())
    except ValueError:
        return 2
    os.environ.update(job["env"])
    reporter = _REPORTER = Reporter(out)
    threading.Thread(target=reporter.tick, name="livecap-report", daemon=True).start()
    root = logging.getLogger()
    root.handlers[:] = [_Forward(reporter)]
    root.setLevel(logging.WARNING)
    from . import hub

    repo_id = job["repo_id"]
    name = None
    try:
        try:
            import httpx2
            from huggingface_hub import HfApi, hf_hub_download, set_client_factory

            library_log = logging.getLogger("huggingface_hub")
            library_log.handlers.clear()  # its own stderr handler: the parent logs what matters
            library_log.setLevel(logging.INFO)
            transport = resume_transport(reporter)
            set_client_factory(lambda: httpx2.Client(transport=transport, follow_redirects=True, timeout=None))
            partial = Path(job["partial_dir"])
            files = job["files"]
            for index in fetch_order([f[0] for f in files]):
                name, size, etag = files[index]
                blobs = Path(job["cache_dir"]) / hub.repo_folder(repo_id) / "blobs"
                known = frozenset(p.name for p in blobs.glob(f"{etag}.*.incomplete")) if etag else frozenset()
                target = Target(etag, size, partial / etag, blobs, known) if etag and size else None
                resumed = target.part.stat().st_size if target is not None and target.part.is_file() else 0
                reporter.start_file(index + 1, name, min(resumed, size or 0))
                if target is not None:
                    partial.mkdir(parents=True, exist_ok=True)
                transport.target = target
                hf_hub_download(
                    repo_id,
                    name,
                    revision=job["commit"],
                    cache_dir=job["cache_dir"],
                    endpoint=job["endpoint"],
                    token=job["token"],
                    library_name=hub.LIBRARY_NAME,
                    tqdm_class=ProgressBar,
                )
                transport.target = None
                reporter.report(force=True)
                if target is not None:
                    target.part.unlink(missing_ok=True)
                reporter.send("file_done", index + 1)
            revision = job.get("revision")
            if revision and revision != job["commit"]:
                try:  # record ``refs/<revision>`` (huggingface_hub writes it), so other tools find the snapshot
                    HfApi(endpoint=job["endpoint"], library_name=hub.LIBRARY_NAME).resolve_revision(
                        repo_id, revision=revision, cache_dir=job["cache_dir"], token=job["token"]
                    )
                except Exception as e:  # noqa: BLE001 - the files are all there; only the ref is missing
                    log.warning("could not record which commit %s of %s is (%s)", revision, repo_id, e)
            snapshot = Path(job["cache_dir"]) / hub.repo_folder(repo_id) / "snapshots" / job["commit"]
            reporter.send("done", str(snapshot))
        except KeyboardInterrupt:
            reporter.send("cancelled")
        except BaseException as e:  # noqa: BLE001 - every failure goes back as one sentence
            err = hub.translate(e, repo_id, token_sent=bool(job["token"]), revision=job["commit"], filename=name)
            if isinstance(err, hub.HubUnreachableError) and reporter.file_bytes:
                err = hub.HubUnreachableError(
                    f"The connection to {job['endpoint']} kept dropping while downloading {name} of {repo_id}; try "
                    "again later: the download resumes where it stopped."
                )
            reporter.send("error", type(err).__name__, str(err))
    except (BrokenPipeError, OSError):
        pass  # the parent has gone away
    return 0


if __name__ == "__main__":
    sys.exit(main())
