"""The Hugging Face hub: plan a download, transfer it, scan and delete the cache. Installing a model (picking
revisions and aliases, checking the result) is ``engine.install``'s job.

Everything lands in the standard HF cache through huggingface_hub's public API, so a model another tool
downloaded is found and ours are visible to other tools. ``HF_HOME``, ``HF_HUB_CACHE``, ``HF_ENDPOINT``,
``HF_HUB_OFFLINE`` and ``HF_TOKEN`` are read **at call time** (functions below) and passed on explicitly.

- ``plan_download``: one ``model_info`` call (with a timeout) for the file list, sizes and commit;
- ``transfer``: ``hf_hub_download`` per file in a child process (``engine.hub_worker``, a plain subprocess) that the
  parent watches: byte progress with speed and time left comes back over a pipe; ``cancel`` ends the process at
  once (``stop_transfers`` every running one, for a process about to exit); a transfer that brings no byte for
  ``STALL_LIMIT_S`` is stopped with one sentence;
- ``scan_models`` / ``delete_model``: ``scan_cache_dir`` and its delete strategy.
Errors are ``HubError`` (a ``ModelError``) with one sentence for the user.
"""

from __future__ import annotations

import errno
import fnmatch
import json
import logging
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import children
from .errors import ModelError, os_reason

log = logging.getLogger(__name__)

# huggingface_hub reads this once, when first imported (the engine imports it through this module only, later):
# without it, the user-agent header of each call names the torch version, and building it asks the hub for its
# list of AI agents (``GET /api/agent-harnesses``, at most once a day): livecap goes online only for the model asked
# for. A value the user set is kept; the download child always gets "1" (``transfer``).
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

# Files the engine reads when a repo is not in the catalog; everything else (ONNX, other formats) is skipped.
ALLOW_PATTERNS = ["*.json", "*.safetensors", "tekken.json", "*.model"]
DEFAULT_ENDPOINT = "https://huggingface.co"
LIBRARY_NAME = "livecap"
PARTIAL_FOLDER = ".livecap-partial"  # inside a repo's cache folder: bytes a later transfer resumes from

SPACE_MARGIN = 64 * 1024 * 1024  # keep this much free beyond the download
DEFAULT_TIMEOUT_S = 10.0  # connect/read timeout of each hub call (HF_HUB_ETAG_TIMEOUT overrides it)
STALL_LIMIT_S = 25.0  # a transfer that brings no byte for this long is given up (it resumes later)
PROGRESS_INTERVAL_S = 0.1
WORKER_FLAG = "--livecap-hub-worker"  # argv[1] of a frozen app run as the download worker (livecap_main.py)
STOP_GRACE_S = 1.0  # after an interrupt, how long the child may take to clean up before it is ended


# ---------------------------------------------------------------------------------------------------------
# Environment, read at call time


def _truthy(value: str | None) -> bool:
    return (value or "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def endpoint() -> str:
    """``HF_ENDPOINT`` (a mirror, or a test server) or https://huggingface.co, without a trailing slash."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set: no network access at all."""
    return _truthy(os.environ.get("HF_HUB_OFFLINE")) or _truthy(os.environ.get("TRANSFORMERS_OFFLINE"))


def timeout_s() -> float:
    """Seconds each hub call may wait to connect or for the next byte: ``HF_HUB_ETAG_TIMEOUT`` or 10."""
    try:
        return max(1.0, float(os.environ.get("HF_HUB_ETAG_TIMEOUT") or DEFAULT_TIMEOUT_S))
    except ValueError:
        return DEFAULT_TIMEOUT_S


def _expand(p: str) -> Path:
    return Path(os.path.expandvars(os.path.expanduser(p)))


def hf_home() -> Path:
    """``HF_HOME``, else ``$XDG_CACHE_HOME/huggingface``, else ``~/.cache/huggingface``."""
    home = os.environ.get("HF_HOME")
    if home:
        return _expand(home)
    return _expand(os.environ.get("XDG_CACHE_HOME") or "~/.cache") / "huggingface"


def cache_dir() -> Path:
    """The hub cache: ``HF_HUB_CACHE`` (or the legacy ``HUGGINGFACE_HUB_CACHE``), else ``hf_home()/hub``."""
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    return _expand(explicit) if explicit else hf_home() / "hub"


def token_path() -> Path:
    """Where huggingface_hub keeps the login token: ``HF_TOKEN_PATH`` or ``hf_home()/token``."""
    explicit = os.environ.get("HF_TOKEN_PATH")
    return _expand(explicit) if explicit else hf_home() / "token"


def get_token(token: str | None = None) -> str | None:
    """The token to send: ``token`` if given, else ``HF_TOKEN``, else the saved login token, else None."""
    for candidate in (token, os.environ.get("HF_TOKEN"), os.environ.get("HUGGING_FACE_HUB_TOKEN")):
        if candidate and candidate.strip():
            return candidate.strip()
    try:
        saved = token_path().read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return saved or None


def save_token(token: str) -> Path:
    """Store ``token`` where huggingface_hub's login keeps it (readable by the user only); returns the path."""
    token = token.strip()
    if not token:
        raise ValueError("empty token")
    path = token_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token)
    os.replace(tmp, path)
    return path


def forget_token() -> None:
    """Remove the saved login token (the ``HF_TOKEN`` environment variable is left alone)."""
    try:
        token_path().unlink()
    except FileNotFoundError:
        pass


def repo_folder(repo_id: str) -> str:
    """The cache folder name of a model repo: ``models--org--name``."""
    return "models--" + repo_id.replace("/", "--")


def partial_dir(repo_id: str) -> Path:
    """Where the bytes of unfinished files of ``repo_id`` are kept for the next transfer to resume from."""
    return cache_dir() / repo_folder(repo_id) / PARTIAL_FOLDER


# ---------------------------------------------------------------------------------------------------------
# Errors


class HubError(ModelError):
    """A problem reaching or using the hub, or storing a download; ``str()`` is one sentence."""


class GatedModelError(HubError):
    """The repo is gated: accept its terms and use a token."""


class ModelNotFoundError(HubError):
    """No such repo, revision or file (or it is private and the token cannot see it)."""


class RevisionMissingError(ModelNotFoundError):
    """The requested (pinned) revision is not on the hub (a rewritten history, say)."""


class OfflineError(HubError):
    """HF_HUB_OFFLINE is set and the model is not fully downloaded."""


class HubUnreachableError(HubError):
    """The network or the hub is down, silent, or the connection kept dropping."""


class DiskSpaceError(HubError):
    """Not enough free disk space for the download."""


class CacheFolderError(HubError):
    """The model cache folder cannot be written (read-only, not a folder, no permission)."""


class DownloadCancelled(HubError):
    """The download was cancelled; what was downloaded is kept and a later download resumes."""


_ERRORS = {
    cls.__name__: cls
    for cls in (
        HubError,
        GatedModelError,
        ModelNotFoundError,
        RevisionMissingError,
        OfflineError,
        HubUnreachableError,
        DiskSpaceError,
        CacheFolderError,
        DownloadCancelled,
    )
}


_UNWRITABLE = {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EISDIR}  # the cache cannot be written


def offline_message(repo_id: str) -> str:
    return (
        f"Offline mode is on (HF_HUB_OFFLINE is set) and {repo_id} is not fully downloaded; unset "
        "HF_HUB_OFFLINE to download it, or choose a model that is already on this computer."
    )


def _short(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0]
    return text[:160] or type(exc).__name__


def _unreachable(exc: BaseException) -> HubUnreachableError:
    import httpx2

    if isinstance(exc, httpx2.TimeoutException):
        return HubUnreachableError(
            f"The hub at {endpoint()} did not answer within {timeout_s():.0f} s; check the connection and try again."
        )
    return HubUnreachableError(
        f"The hub at {endpoint()} cannot be reached ({_short(exc)}); check the connection and try again."
    )


def translate(
    exc: BaseException, repo_id: str, *, token_sent: bool, revision: str | None = None, filename: str | None = None
) -> HubError:
    """One sentence for an exception raised by huggingface_hub or its HTTP client."""
    import httpx2
    from huggingface_hub import errors

    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(exc, HubError):
        return exc
    if isinstance(exc, errors.OfflineModeIsEnabled):
        return OfflineError(offline_message(repo_id))
    if isinstance(exc, errors.GatedRepoError):
        if token_sent and status == 403:
            return GatedModelError(
                f"Your token has no access to the gated model {repo_id} yet: accept its terms on "
                "the model page while logged in as the token's owner, then try again."
            )
        if token_sent:
            return GatedModelError(
                f"The hub refused your token for the gated model {repo_id}: check that it is "
                "valid and that you accepted the model's terms."
            )
        return GatedModelError(
            f"The model {repo_id} is gated: accept its terms on the model page (logged in on "
            "huggingface.co) and give an access token."
        )
    if isinstance(exc, errors.RevisionNotFoundError):
        return RevisionMissingError(f"The revision {revision or 'main'} of {repo_id} was not found on the hub.")
    if isinstance(exc, (errors.RemoteEntryNotFoundError, errors.EntryNotFoundError)):
        return ModelNotFoundError(f"The file {filename or '?'} is missing from {repo_id} on the hub.")
    if isinstance(exc, errors.RepositoryNotFoundError) or status == 404:
        if token_sent:
            return ModelNotFoundError(f"The model {repo_id} was not found on the hub, or your token cannot see it.")
        return ModelNotFoundError(
            f"The model {repo_id} was not found on the hub; check the name (a private model also needs a token)."
        )
    if isinstance(exc, errors.HFValidationError):
        return ModelNotFoundError(f"{repo_id} is not a valid hub model id (expected owner/name).")
    if status == 401:
        return GatedModelError(f"The hub refused access to {repo_id} (401): check your access token.")
    if status == 403:
        return GatedModelError(f"The hub refused access to {repo_id} (403): your token lacks permission for it.")
    if isinstance(exc, errors.HfHubHTTPError) and status is not None:
        return HubUnreachableError(f"The hub answered {status} for {repo_id}; try again later.")
    cause = exc.__cause__ or exc.__context__
    if isinstance(exc, errors.LocalEntryNotFoundError) and cause is not None and not isinstance(cause, type(exc)):
        return translate(cause, repo_id, token_sent=token_sent, revision=revision, filename=filename)
    if isinstance(exc, (httpx2.HTTPError, errors.LocalEntryNotFoundError, ConnectionError, TimeoutError)):
        return _unreachable(exc)
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return DiskSpaceError(f"The disk filled up while downloading {repo_id}; free some space and try again.")
    if isinstance(exc, OSError) and exc.errno in _UNWRITABLE:
        return CacheFolderError(
            f"livecap cannot store models in {cache_dir()}: {os_reason(exc)}. Set HF_HOME to a folder it can write, "
            "or make this one writable."
        )
    if isinstance(exc, OSError):
        return HubError(f"Downloading {repo_id} failed: {exc.strerror or _short(exc)}.")
    return HubError(f"Downloading {repo_id} failed ({type(exc).__name__}: {_short(exc)}).")


# ---------------------------------------------------------------------------------------------------------
# Formatting helpers (shared by the dialog and the CLI)


def format_bytes(n: float | None) -> str:
    """``"8.9 GB"``, ``"562 MB"``, ``"12 kB"`` (decimal units, like the hub)."""
    if n is None:
        return "?"
    n = float(n)
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            v = n / scale
            return f"{v:.1f} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return f"{n:.0f} B"


def format_duration(seconds: float | None) -> str:
    """``"40 s"``, ``"3 min"``, ``"1 h 05 min"``; ``""`` when unknown."""
    if seconds is None or seconds != seconds or seconds < 0:
        return ""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{(s + 30) // 60} min"
    return f"{s // 3600} h {(s % 3600) // 60:02d} min"


# ---------------------------------------------------------------------------------------------------------
# Cancel and progress


class CancelToken:
    """Set from any thread to stop a download: the running transfer is ended at once (``DownloadCancelled``)."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True (early) when cancelled."""
        return self._event.wait(seconds)


@dataclass(frozen=True)
class Progress:
    """One progress report. ``done``/``total`` count the bytes of the whole download, including what was
    already on disk from an earlier try; ``speed`` (bytes/s) and ``eta`` (s) cover this try only."""

    repo_id: str
    done: int
    total: int
    file: str
    file_index: int
    file_count: int
    speed: float = 0.0
    eta: float | None = None
    finished: bool = False
    stalled: bool = False  # nothing arrived for a while (said by the app's job, which watches the time)

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total else 0.0


ProgressCallback = Callable[[Progress], Any]


# ---------------------------------------------------------------------------------------------------------
# Planning


@dataclass(frozen=True)
class RemoteFile:
    name: str
    size: int | None
    etag: str | None = None  # sha256 for LFS files, git blob id otherwise (what the hub sends as ETag)


@dataclass(frozen=True)
class Plan:
    """What a download of ``repo_id`` at ``commit`` involves. Bytes: ``total`` = all selected files,
    ``have`` = complete or kept partial bytes on disk already, ``remaining`` = still to fetch."""

    repo_id: str
    revision: str
    commit: str
    files: tuple[RemoteFile, ...]
    total: int
    have: int
    gated: bool = False

    @property
    def remaining(self) -> int:
        return max(0, self.total - self.have)


def _select(names: Iterable[str], allow_patterns: Sequence[str] | None) -> list[str]:
    names = list(names)
    if allow_patterns:
        return [n for n in names if any(fnmatch.fnmatch(n, p) for p in allow_patterns)]
    chosen = [n for n in names if "/" not in n and any(fnmatch.fnmatch(n, p) for p in ALLOW_PATTERNS)]
    # A repo with both HF and Mistral-native weights (the official Voxtral): the loader reads the HF set.
    if any(fnmatch.fnmatch(n, "model*.safetensors") for n in chosen):
        chosen = [n for n in chosen if not fnmatch.fnmatch(n, "consolidated*.safetensors")]
    return chosen


def _have_bytes(repo_id: str, commit: str, f: RemoteFile) -> int:
    repo_dir = cache_dir() / repo_folder(repo_id)
    if (repo_dir / "snapshots" / commit / f.name).is_file():
        return f.size or 0
    if f.etag:
        for p in (repo_dir / "blobs" / f.etag, partial_dir(repo_id) / f.etag):
            if p.is_file():
                return min(p.stat().st_size, f.size or 0)
    return 0


def plan_download(
    repo_id: str, *, revision: str | None = None, allow_patterns: Sequence[str] | None = None, token: str | None = None
) -> Plan:
    """The file list, sizes and commit of ``repo_id`` (one hub call, ``timeout_s()`` at most between bytes)
    and what the cache already has."""
    if offline():
        raise OfflineError(offline_message(repo_id))
    from huggingface_hub import HfApi

    tok = get_token(token)
    try:
        info = HfApi(endpoint=endpoint(), library_name=LIBRARY_NAME).model_info(
            repo_id, revision=revision, files_metadata=True, token=tok or False, timeout=timeout_s()
        )
    except Exception as e:  # noqa: BLE001 - translated into one sentence
        raise translate(e, repo_id, token_sent=bool(tok), revision=revision) from e
    if not info.sha:
        raise HubError(f"The hub did not say which commit of {repo_id} to download.")
    siblings = {s.rfilename: s for s in (info.siblings or [])}
    files = []
    for name in sorted(_select(siblings, allow_patterns)):
        s = siblings[name]
        if s.lfs is not None:
            files.append(RemoteFile(name, s.lfs.size if s.lfs.size is not None else s.size, s.lfs.sha256))
        else:
            files.append(RemoteFile(name, s.size, s.blob_id))
    if not files:
        raise ModelNotFoundError(f"The model {repo_id} has none of the files livecap reads.")
    rid = info.id or repo_id
    total = sum(f.size or 0 for f in files)
    have = sum(_have_bytes(rid, info.sha, f) for f in files)
    return Plan(rid, revision or "main", info.sha, tuple(files), total, have, bool(info.gated))


def free_space(folder: Path) -> int:
    """Free bytes on the disk that holds ``folder`` (or its nearest existing parent)."""
    for p in [folder, *folder.parents]:
        try:
            return shutil.disk_usage(p).free
        except OSError:
            continue
    return 0


def check_free_space(needed: int, folder: Path | None = None, repo_id: str = "the model") -> None:
    """DiskSpaceError when ``folder`` (default: the cache) has less than ``needed`` bytes plus a margin."""
    folder = folder or cache_dir()
    free = free_space(folder)
    if needed + SPACE_MARGIN > free:
        raise DiskSpaceError(
            f"Not enough free disk space for {repo_id}: it needs {format_bytes(needed + SPACE_MARGIN)} free in "
            f"{folder} ({format_bytes(needed)} to download, {format_bytes(SPACE_MARGIN)} to spare), but only "
            f"{format_bytes(free)} is free; free up {format_bytes(needed + SPACE_MARGIN - free)}."
        )


# ---------------------------------------------------------------------------------------------------------
# Transfer


class _Meter:
    """Turns the child's byte counts into throttled ``Progress`` reports with speed and time left."""

    def __init__(self, plan: Plan, callback: ProgressCallback | None) -> None:
        self.plan, self.callback = plan, callback
        self.sizes = [f.size or 0 for f in plan.files]
        self.complete = 0  # bytes of finished files
        self.file, self.index, self.resumed, self.current = "", 0, 0, 0
        self.network = 0  # bytes received in this try: the speed counts these only
        self.last_emit = 0.0
        self.pending = False  # a count held back by the throttle, sent by ``flush``
        self.speed = 0.0
        self._window: list[tuple[float, int]] = []

    @property
    def done(self) -> int:
        return self.complete + max(self.resumed, self.current)

    def start_file(self, index: int, name: str, resumed: int) -> None:
        self.file, self.index, self.resumed, self.current = name, index, resumed, 0
        self.emit(force=True)

    def bytes(self, current: int, network: int) -> None:
        """``current`` bytes of the file on disk, ``network`` received in this try. A file fetched again from its
        start (huggingface_hub after a dropped connection) keeps the count it had until the new try passes it: a
        bar going backwards looks like a failure."""
        self.current, self.network = max(self.current, current), network
        self.emit()

    def end_file(self, index: int) -> None:
        self.complete += self.sizes[index - 1]
        self.resumed = self.current = 0

    def flush(self) -> None:
        """Send the count the throttle held back once its interval has passed (the last bytes before the
        network goes quiet would otherwise never be shown)."""
        if self.pending and time.monotonic() - self.last_emit >= PROGRESS_INTERVAL_S:
            self.emit(force=True)

    def emit(self, force: bool = False, finished: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last_emit < PROGRESS_INTERVAL_S:
            self.pending = True
            return
        self.last_emit, self.pending = now, False
        done = min(self.done, self.plan.total) if self.plan.total else self.done
        self._window.append((now, self.network))
        while len(self._window) > 2 and now - self._window[0][0] > 5.0:
            self._window.pop(0)
        t_first, got_first = self._window[0]
        if now - t_first > 0.2 and self.network > got_first:
            self.speed = (self.network - got_first) / (now - t_first)
        total = self.plan.total
        eta = (total - done) / self.speed if self.speed > 0 and total >= done else None
        if self.callback is not None:
            self.callback(
                Progress(
                    self.plan.repo_id,
                    done,
                    total,
                    self.file,
                    self.index,
                    len(self.plan.files),
                    self.speed,
                    eta,
                    finished,
                )
            )


def _worker_command() -> list[str]:
    """How to start ``engine.hub_worker``: this Python with ``-m``, or a frozen app with the worker flag."""
    return children.command("engine.hub_worker", WORKER_FLAG)


def _worker_env() -> dict[str, str]:
    return children.environment()


def _stop(proc: subprocess.Popen, interrupt: bool) -> None:
    """End the child: an interrupt first (POSIX; huggingface_hub then removes its temporary file itself), then
    terminate, then kill."""
    steps = [proc.terminate, proc.kill]
    if interrupt and os.name == "posix":
        steps.insert(0, lambda: proc.send_signal(signal.SIGINT))
    for step in steps:
        if proc.poll() is not None:
            return
        try:
            step()
            proc.wait(STOP_GRACE_S)
        except (OSError, subprocess.TimeoutExpired):
            continue


_TRANSFERS: dict[subprocess.Popen, Callable[[], bool]] = {}  # running download children: whether each talks yet
_TRANSFERS_LOCK = threading.Lock()


def stop_transfers() -> int:
    """End every running download child of this process now, from any thread, as a cancel does (what was
    downloaded is kept; the next download resumes from it); returns how many ran. For a process that exits
    without waiting for the threads that run the transfers (livecap quit while a model loads): a child left
    behind would go on downloading. The transfers themselves then end with an error."""
    with _TRANSFERS_LOCK:
        running = list(_TRANSFERS.items())
    for proc, talking in running:
        _stop(proc, interrupt=talking())
    return len(running)


def _read_messages(stream, inbox: queue.Queue) -> None:
    for line in stream:
        try:
            inbox.put(json.loads(line))
        except ValueError:
            log.debug("download process: %s", line.rstrip())
    inbox.put(None)


def cancelled_error(repo_id: str) -> DownloadCancelled:
    return DownloadCancelled(
        f"The download of {repo_id} was cancelled; what was downloaded is kept and the next "
        "download resumes from there."
    )


def transfer(
    plan: Plan, *, token: str | None = None, progress: ProgressCallback | None = None, cancel: CancelToken | None = None
) -> Path:
    """Fetch every file of ``plan`` into the HF cache with ``hf_hub_download`` in a child process; returns the
    snapshot folder. Files already complete are not fetched again, and kept partial bytes are resumed from.

    ``progress`` is called on this thread; ``cancel`` ends the transfer at once (``DownloadCancelled``). A
    transfer that brings no byte for ``STALL_LIMIT_S`` stops with ``HubUnreachableError``. The snapshot folder
    may hold some files of an unfinished transfer; the files that mark it as a model come last.
    """
    tok = get_token(token)
    job = {
        "env": {
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_ETAG_TIMEOUT": str(int(timeout_s())),
            "HF_HUB_DOWNLOAD_TIMEOUT": os.environ.get("HF_HUB_DOWNLOAD_TIMEOUT") or str(int(timeout_s())),
        },
        "repo_id": plan.repo_id,
        "revision": plan.revision,
        "commit": plan.commit,
        "endpoint": endpoint(),
        "cache_dir": str(cache_dir()),
        "token": tok or False,
        "partial_dir": str(partial_dir(plan.repo_id)),
        "files": [[f.name, f.size, f.etag] for f in plan.files],
    }
    meter = _Meter(plan, progress)
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            _worker_command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=_worker_env(),
            text=True,
            encoding="utf-8",
            creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0),
        )
    except OSError as e:
        raise HubError(f"The download of {plan.repo_id} could not start ({e.strerror or e}).") from e
    inbox: queue.Queue = queue.Queue()
    assert proc.stdin is not None and proc.stdout is not None
    threading.Thread(
        target=_read_messages, args=(proc.stdout, inbox), name="livecap-download-reader", daemon=True
    ).start()
    heard_from = ended = False  # talking: an interrupt now reaches huggingface_hub, not an import
    last_bytes = time.monotonic()
    with _TRANSFERS_LOCK:
        _TRANSFERS[proc] = lambda: heard_from
    try:
        try:
            proc.stdin.write(json.dumps(job) + "\n")
            proc.stdin.close()
        except OSError:
            pass  # the child died at once: its end of the pipe says so below
        while True:
            if cancel is not None and cancel.cancelled:
                _stop(proc, interrupt=heard_from)
                raise cancelled_error(plan.repo_id)
            try:
                message = inbox.get(timeout=0.05)
            except queue.Empty:
                meter.flush()
                if time.monotonic() - last_bytes > STALL_LIMIT_S:
                    _stop(proc, interrupt=heard_from)
                    raise HubUnreachableError(
                        f"The hub at {endpoint()} sent nothing for {STALL_LIMIT_S:.0f} s while "
                        f"downloading {plan.repo_id}; try again later: the download resumes "
                        "where it stopped."
                    ) from None
                continue
            if message is None:
                code = proc.wait()
                raise HubError(
                    f"The download of {plan.repo_id} stopped unexpectedly (exit code {code}); try "
                    "again: it resumes where it stopped."
                )
            kind, *rest = message
            ended = kind in ("done", "cancelled", "error")  # the child exits right after these
            if not heard_from:
                heard_from = True
                log.debug("download process for %s ready after %.2f s", plan.repo_id, time.monotonic() - started)
            if kind == "log":
                log.log(min(rest[0], logging.INFO), "%s: %s", plan.repo_id, rest[1])
            elif kind == "file":
                last_bytes = time.monotonic()
                meter.start_file(*rest)
            elif kind == "bytes":
                if rest[0] != meter.current or rest[1] != meter.network:
                    last_bytes = time.monotonic()
                meter.bytes(*rest)
            elif kind == "file_done":
                last_bytes = time.monotonic()
                meter.end_file(rest[0])
            elif kind == "done":
                meter.emit(force=True, finished=True)
                return Path(rest[0])
            elif kind == "cancelled":
                raise cancelled_error(plan.repo_id)
            elif kind == "error":
                raise _ERRORS.get(rest[0], HubError)(rest[1])
    finally:
        if ended:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        _stop(proc, interrupt=heard_from)
        with _TRANSFERS_LOCK:
            _TRANSFERS.pop(proc, None)
        proc.stdout.close()


# ---------------------------------------------------------------------------------------------------------
# Cache scan and delete


@dataclass(frozen=True)
class RepoScan:
    """What the cache holds for one repo id (from ``scan_cache_dir`` plus the kept partial files)."""

    repo_id: str
    path: Path
    size_on_disk: int  # blobs referenced by snapshots
    partial_bytes: int  # kept bytes of unfinished files (a later download resumes from them)
    revisions: dict[str, Path]  # commit -> snapshot folder
    refs: dict[str, str]  # ref name -> commit
    last_modified: dict[str, float] = field(default_factory=dict)  # commit -> time


def _partial_bytes(repo_path: Path) -> int:
    """Bytes of the kept partial files of a repo's cache folder, each file once (a part and its ``.link``, the
    second name ``engine.hub_worker`` moves into place, can be one file). A kept file whose blob is complete holds
    nothing to resume from (a transfer ended just as it finished, or a ``.link`` an older livecap left as a second
    name of the finished blob): it is not counted, and removed."""
    folder = repo_path / PARTIAL_FOLDER
    total = 0
    seen: set[tuple[int, int]] = set()
    if folder.is_dir():
        for p in folder.iterdir():
            try:
                if not p.is_file():
                    continue
                if (repo_path / "blobs" / p.name.removesuffix(".link")).exists():
                    p.unlink()
                    continue
                st = p.stat()
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_size
            except OSError:
                continue
    return total


def kept_bytes(repo_id: str, cache: Path | None = None) -> int:
    """Bytes of ``repo_id`` on disk now: its finished files and the kept parts a download resumes from (what a
    cancelled or failed download leaves; a download's own count also holds bytes not yet written)."""
    scan = scan_models(cache).get(repo_id.lower())
    return 0 if scan is None else scan.size_on_disk + scan.partial_bytes


def scan_models(cache: Path | None = None) -> dict[str, RepoScan]:
    """Every cached model repo, keyed by lower-case repo id. Never touches the network; removes kept partial files
    of files that are complete (``_partial_bytes``)."""
    cache = Path(cache) if cache is not None else cache_dir()
    if not cache.is_dir():
        return {}
    from huggingface_hub import scan_cache_dir

    info = scan_cache_dir(cache)
    result: dict[str, RepoScan] = {}
    for repo in info.repos:
        if repo.repo_type != "model":
            continue
        partial = _partial_bytes(repo.repo_path)
        revisions = {r.commit_hash: r.snapshot_path for r in repo.revisions if any(r.snapshot_path.iterdir())}
        if not revisions and not partial:
            continue  # an empty folder left by a download that failed before its first byte
        result[repo.repo_id.lower()] = RepoScan(
            repo_id=repo.repo_id,
            path=repo.repo_path,
            size_on_disk=repo.size_on_disk,
            partial_bytes=partial,
            revisions=revisions,
            refs={ref: r.commit_hash for r in repo.revisions for ref in r.refs},
            last_modified={r.commit_hash: r.last_modified for r in repo.revisions},
        )
    return result


def delete_model(repo_ids: str | Sequence[str], scans: dict[str, RepoScan] | None = None) -> int:
    """Delete every cached revision and unfinished download of a model (all its ids), and the 8/4-bit copies made
    from them; returns the bytes freed.

    Revisions go through ``scan_cache_dir``'s delete strategy; what no revision owns (kept partial bytes,
    temporary files of a transfer that was ended) goes with the repo's folder."""
    from huggingface_hub import scan_cache_dir

    ids = [repo_ids] if isinstance(repo_ids, str) else list(repo_ids)
    scans = scan_models() if scans is None else scans
    freed = 0
    for rid in ids:
        s = scans.get(rid.lower())
        if s is None:
            continue
        leftovers = {}  # by inode: a kept partial file is a second name of a temporary file
        for p in s.path.rglob("*"):
            if (
                p.is_file()
                and not p.is_symlink()
                and (p.name.endswith(".incomplete") or p.parent.name == PARTIAL_FOLDER)
            ):
                st = p.stat()
                leftovers[(st.st_dev, st.st_ino)] = st.st_size
        freed += sum(leftovers.values())
        if s.revisions:
            strategy = scan_cache_dir(s.path.parent).delete_revisions(*s.revisions)
            freed += strategy.expected_freed_size
            strategy.execute()
        shutil.rmtree(s.path, ignore_errors=True)
        shutil.rmtree(s.path.parent / ".locks" / s.path.name, ignore_errors=True)
    from .models.quantize import sweep

    return freed + sweep()  # the quantized copies of what went


def remove_revision(repo_id: str, commit: str) -> None:
    """Delete one cached revision of ``repo_id`` (its links, ref, and blobs nobody else uses)."""
    from huggingface_hub import scan_cache_dir

    info = scan_cache_dir(cache_dir())
    if any(rev.commit_hash == commit for repo in info.repos for rev in repo.revisions):
        info.delete_revisions(commit).execute()
