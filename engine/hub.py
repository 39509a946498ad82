"""Hub access through huggingface_hub: cache state, resumable downloads with byte progress and cancel,
delete, token handling, offline mode, and the check that a downloaded folder is a model the loader accepts.

Everything lands in the standard HF cache (``$HF_HOME/hub/models--org--name/{blobs,snapshots,refs}``), so a
model another tool already downloaded is found, and ours are visible to other tools. ``HF_HOME``,
``HF_HUB_CACHE``, ``HF_ENDPOINT``, ``HF_HUB_OFFLINE`` and ``HF_TOKEN`` are read **at call time** (functions
below) and passed to huggingface_hub explicitly (``endpoint=``, ``cache_dir=``, ``token=``), because
huggingface_hub itself reads them once at import.

How a download works (``download``):
1. the plan: the repo's file list with sizes (``model_info(files_metadata=True)``), filtered by the
   catalog's ``allow_patterns``, pinned to one commit; what is already in the cache (complete blobs and
   ``blobs/<etag>.incomplete`` partial files) is subtracted, then the free disk space is checked;
2. each missing file is streamed over plain HTTP (never Xet, whose Rust transfer cannot be cancelled) into
   ``blobs/<etag>.incomplete`` as the bytes arrive, with a cancel check and a progress report per read; a
   dropped connection or a later call resumes with a ``Range`` request from the partial file's end;
3. only when every file is complete are the ``snapshots/<commit>/`` links (and ``refs/<branch>``) made,
   so a cancelled or failed download never leaves a folder the loader could mistake for a model;
4. the snapshot is checked with ``engine.build.detect`` and the weight headers; a folder that fails is
   removed again and the loader's sentence raised.
Errors are ``HubError`` (a ``ModelError``) with one sentence for the user.
"""

from __future__ import annotations

import errno
import fnmatch
import logging
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ModelError

log = logging.getLogger(__name__)

# Files the engine reads when a repo is not in the catalog; everything else (ONNX, other formats) is skipped.
ALLOW_PATTERNS = ["*.json", "*.safetensors", "tekken.json", "*.model"]
DEFAULT_ENDPOINT = "https://huggingface.co"
LIBRARY_NAME = "livecap"

SPACE_MARGIN = 64 * 1024 * 1024  # keep this much free beyond the download
RETRIES = 5  # attempts in a row without new bytes before a dropped connection is an error
RETRY_WAIT_S = 0.5
FULL_LOAD_LIMIT = 2_000_000_000  # check_folder(full=True) loads weights up to this size with NumPy
PROGRESS_INTERVAL_S = 0.1


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


def _hf():
    """Import huggingface_hub and mirror the call-time environment into it (it reads variables once, at import).

    Offline mode follows ``HF_HUB_OFFLINE`` now. Telemetry is switched off: besides extra user-agent fields,
    huggingface_hub 2.x fetches an "agent harness" registry from the endpoint it saw at import time (the
    real hub even when ``HF_ENDPOINT`` now names a mirror) and caches it under the import-time ``HF_HOME``.
    """
    try:
        import huggingface_hub
        from huggingface_hub import constants
    except ImportError as e:  # pragma: no cover - a dependency
        raise ModelError("huggingface_hub is not installed; give a local model folder instead.") from e
    constants.HF_HUB_OFFLINE = offline()
    constants.HF_HUB_DISABLE_TELEMETRY = True
    return huggingface_hub


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
    """The network or the hub is down, or the connection kept dropping."""


class DiskSpaceError(HubError):
    """Not enough free disk space for the download."""


class DownloadCancelled(HubError):
    """The download was cancelled; what was downloaded is kept and a later download resumes."""


class DownloadBusyError(HubError):
    """Another process is downloading the same file right now."""


def _httpx():
    """The HTTP client module huggingface_hub uses: ``httpx2`` (2.x) or ``httpx`` (1.x)."""
    try:
        import httpx2 as module
    except ImportError:  # pragma: no cover - huggingface_hub 1.x
        import httpx as module
    return module


def offline_message(repo_id: str) -> str:
    return (f"Offline mode is on (HF_HUB_OFFLINE is set) and {repo_id} is not fully downloaded; unset "
            "HF_HUB_OFFLINE to download it, or choose a model that is already on this computer.")


def _short(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0]
    return text[:160] or type(exc).__name__


def _translate(exc: BaseException, repo_id: str, *, token_sent: bool, revision: str | None = None,
               filename: str | None = None) -> HubError:
    """One sentence for an exception raised by huggingface_hub or its HTTP client."""
    hf = _hf()
    errors = hf.errors
    httpx = _httpx()

    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(exc, HubError):
        return exc
    if isinstance(exc, errors.OfflineModeIsEnabled):
        return OfflineError(offline_message(repo_id))
    if isinstance(exc, errors.GatedRepoError):
        if token_sent and status == 403:
            return GatedModelError(f"Your token has no access to the gated model {repo_id} yet: accept its terms on "
                                   "the model page while logged in as the token's owner, then try again.")
        if token_sent:
            return GatedModelError(f"The hub refused your token for the gated model {repo_id}: check that it is "
                                   "valid and that you accepted the model's terms.")
        return GatedModelError(f"The model {repo_id} is gated: accept its terms on the model page (logged in on "
                               "huggingface.co) and give an access token.")
    if isinstance(exc, errors.RevisionNotFoundError):
        return RevisionMissingError(f"The revision {revision or 'main'} of {repo_id} was not found on the hub.")
    if isinstance(exc, (errors.RemoteEntryNotFoundError, errors.EntryNotFoundError)):
        return ModelNotFoundError(f"The file {filename or '?'} is missing from {repo_id} on the hub.")
    if isinstance(exc, errors.RepositoryNotFoundError) or status == 404:
        if token_sent:
            return ModelNotFoundError(f"The model {repo_id} was not found on the hub, or your token cannot see it.")
        return ModelNotFoundError(f"The model {repo_id} was not found on the hub; check the name (a private "
                                  "model also needs a token).")
    if isinstance(exc, errors.HFValidationError):
        return ModelNotFoundError(f"{repo_id} is not a valid hub model id (expected owner/name).")
    if status == 401:
        return GatedModelError(f"The hub refused access to {repo_id} (401): check your access token.")
    if status == 403:
        return GatedModelError(f"The hub refused access to {repo_id} (403): your token lacks permission for it.")
    if isinstance(exc, errors.HfHubHTTPError) and status is not None:
        return HubUnreachableError(f"The hub answered {status} for {repo_id}; try again later.")
    if isinstance(exc, (httpx.HTTPError, errors.LocalEntryNotFoundError, ConnectionError, TimeoutError)):
        return HubUnreachableError(f"The hub at {endpoint()} cannot be reached ({_short(exc)}); check the "
                                   "connection and try again.")
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return DiskSpaceError(f"The disk filled up while downloading {repo_id}; free some space and try again "
                              "(the part already downloaded is kept).")
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
    """Set from any thread to stop a download. The running download raises ``DownloadCancelled`` within one
    chunk; a connection that is stalled (no bytes coming) is closed so the stop is immediate too."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._closers: list[Callable[[], Any]] = []

    def cancel(self) -> None:
        self._event.set()
        with self._lock:
            closers = list(self._closers)
        for close in closers:
            try:
                close()
            except Exception:  # noqa: BLE001 - closing a socket another thread reads from: best effort
                log.debug("closing the download connection failed", exc_info=True)

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True (early) when cancelled."""
        return self._event.wait(seconds)

    def _push(self, close: Callable[[], Any]) -> None:
        with self._lock:
            self._closers.append(close)

    def _pop(self, close: Callable[[], Any]) -> None:
        with self._lock:
            if close in self._closers:
                self._closers.remove(close)


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

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total else 0.0


ProgressCallback = Callable[[Progress], Any]


class _Meter:
    """Turns per-chunk byte counts into throttled ``Progress`` reports with speed and time left."""

    def __init__(self, repo_id: str, total: int, already: int, file_count: int,
                 callback: ProgressCallback | None, cancel: CancelToken | None) -> None:
        self.repo_id, self.total, self.file_count = repo_id, total, file_count
        self.callback, self.cancel = callback, cancel
        self.base = already  # bytes of files that are complete (or were, before this try)
        self.current = 0  # bytes of the file being downloaded (its partial prefix included)
        self.file, self.index = "", 0
        self.transferred = 0  # bytes received in this try: the speed counts these only
        self.last_emit = 0.0
        self.speed = 0.0
        self._window: list[tuple[float, int]] = []

    @property
    def done(self) -> int:
        return self.base + self.current

    def start_file(self, name: str, index: int, have: int) -> None:
        self.file, self.index, self.current = name, index, have
        self.emit(force=True)

    def set_file_bytes(self, have: int) -> None:
        self.current = have
        self.emit(force=True)

    def check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.cancelled:
            raise DownloadCancelled(f"The download of {self.repo_id} was cancelled; what was downloaded is kept "
                                    "and the next download resumes from there.")

    def advance(self, n: int) -> None:
        self.current += n
        self.transferred += n
        self.check_cancel()
        self.emit()

    def end_file(self, size: int) -> None:
        self.base += size
        self.current = 0

    def emit(self, force: bool = False, finished: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last_emit < PROGRESS_INTERVAL_S:
            return
        self.last_emit = now
        done = self.done
        self._window.append((now, self.transferred))
        while len(self._window) > 2 and now - self._window[0][0] > 5.0:
            self._window.pop(0)
        t_first, got_first = self._window[0]
        if now - t_first > 0.2 and self.transferred > got_first:
            self.speed = (self.transferred - got_first) / (now - t_first)
        eta = (self.total - done) / self.speed if self.speed > 0 and self.total >= done else None
        if self.callback is not None:
            self.callback(Progress(self.repo_id, done, self.total, self.file, self.index, self.file_count,
                                   self.speed, eta, finished))


# ---------------------------------------------------------------------------------------------------------
# Cache state


def _repo_folder(repo_id: str) -> str:
    return "models--" + repo_id.replace("/", "--")


@dataclass(frozen=True)
class RepoScan:
    """What the cache holds for one repo id (from ``scan_cache_dir`` plus the partial files)."""

    repo_id: str
    path: Path
    size_on_disk: int  # blobs referenced by snapshots
    partial_bytes: int  # .incomplete files and complete blobs no snapshot uses yet
    revisions: dict[str, Path]  # commit -> snapshot folder
    refs: dict[str, str]  # ref name -> commit
    last_modified: dict[str, float] = field(default_factory=dict)  # commit -> time


def scan_models(cache: Path | None = None) -> dict[str, RepoScan]:
    """Every cached model repo, keyed by lower-case repo id. Never touches the network."""
    cache = Path(cache) if cache is not None else cache_dir()
    if not cache.is_dir():
        return {}
    hf = _hf()
    info = hf.scan_cache_dir(cache)
    result: dict[str, RepoScan] = {}
    for repo in info.repos:
        if repo.repo_type != "model":
            continue
        used = {f.blob_path.resolve() for rev in repo.revisions for f in rev.files}
        partial = 0
        blobs = repo.repo_path / "blobs"
        if blobs.is_dir():
            for b in blobs.iterdir():
                try:
                    if b.name.endswith(".incomplete") or (b.is_file() and b.resolve() not in used):
                        partial += b.stat().st_size
                except OSError:
                    continue
        if not repo.revisions and not partial:
            continue  # an empty folder left by a download that failed before its first byte
        result[repo.repo_id.lower()] = RepoScan(
            repo_id=repo.repo_id, path=repo.repo_path, size_on_disk=repo.size_on_disk, partial_bytes=partial,
            revisions={r.commit_hash: r.snapshot_path for r in repo.revisions},
            refs={ref: r.commit_hash for r in repo.revisions for ref in r.refs},
            last_modified={r.commit_hash: r.last_modified for r in repo.revisions})
    # Repos with partial downloads only (no snapshots folder yet) are scan warnings, not repos.
    for folder in cache.glob("models--*"):
        repo_id = folder.name[len("models--"):].replace("--", "/")
        if repo_id.lower() in result or not folder.is_dir():
            continue
        partial = sum(p.stat().st_size for p in (folder / "blobs").glob("*") if p.is_file())
        if partial:
            result[repo_id.lower()] = RepoScan(repo_id, folder, 0, partial, {}, {})
    return result


@dataclass(frozen=True)
class LocalModel:
    """The local state of a model (under its id or one of its aliases).

    ``complete``: ``path`` is a snapshot the loader accepts. Otherwise ``problem`` says why not, and
    ``partial_bytes`` tells how much a download would resume from."""

    repo_id: str
    commit: str | None
    path: Path | None
    size_on_disk: int
    partial_bytes: int
    complete: bool
    problem: str = ""


def local_state(repo_ids: str | Sequence[str], revision: str | None = None, required: Sequence[str] = (),
                scans: dict[str, RepoScan] | None = None) -> LocalModel | None:
    """What is on disk for a model; None when nothing of it is cached. No network.

    Among the cached snapshots the pinned ``revision`` wins, then ``refs/main``, then the newest; a copy at
    another revision (downloaded by another tool, say) still counts as installed when the loader accepts it.
    """
    ids = [repo_ids] if isinstance(repo_ids, str) else list(repo_ids)
    scans = scan_models() if scans is None else scans
    best: LocalModel | None = None
    for rid in ids:
        s = scans.get(rid.lower())
        if s is None:
            continue
        order: list[str] = []
        if revision and revision in s.revisions:
            order.append(revision)
        if "main" in s.refs and s.refs["main"] in s.revisions:
            order.append(s.refs["main"])
        order += sorted(s.revisions, key=lambda c: -s.last_modified.get(c, 0.0))
        seen: set[str] = set()
        first_problem = ""
        for commit in order:
            if commit in seen:
                continue
            seen.add(commit)
            path = s.revisions[commit]
            problem = snapshot_problem(path, required)
            if not problem:
                return LocalModel(s.repo_id, commit, path, s.size_on_disk, s.partial_bytes, True)
            first_problem = first_problem or problem
        if best is None:
            commit = order[0] if order else None
            best = LocalModel(s.repo_id, commit, s.revisions.get(commit) if commit else None, s.size_on_disk,
                              s.partial_bytes, False, first_problem or "The download is not finished.")
    return best


def snapshot_problem(folder: Path, required: Sequence[str] = ()) -> str:
    """``""`` when ``folder`` holds every required file and passes ``check_folder``; else one sentence."""
    missing = [name for name in required if not (folder / name).is_file()]
    if missing:
        return f"The file {missing[0]} is missing from the downloaded model."
    try:
        check_folder(folder)
    except ModelError as e:
        return str(e)
    return ""


def check_folder(folder: str | os.PathLike, *, full: bool = False) -> tuple[str, str]:
    """``(family, dialect)`` when the loader accepts ``folder``; else ModelError with the loader's sentence.

    Checks the config (``engine.build.detect``), the safetensors headers against the file sizes (a
    truncated download fails here) and the tokenizer file. ``full=True`` also builds the model with the
    NumPy backend when its weights are at most ``FULL_LOAD_LIMIT`` bytes (bigger ones would need many GB of
    memory in float32; for them the structural check is the validation).
    """
    from .build import build_model, check_options, detect
    from .weights import open_checkpoint

    folder = Path(folder)
    if not folder.is_dir():
        raise ModelError(f"The model folder {folder} does not exist.")
    family, dialect, _ = detect(folder)
    stem = "consolidated" if dialect == "mistral" else "model"
    open_checkpoint(folder, stem)
    tokenizer = "tokenizer.json" if family == "moonshine_streaming" else "tekken.json"
    if not (folder / tokenizer).is_file():
        raise ModelError(f"The model folder {folder} has no {tokenizer}.")
    if full:
        size = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
        if size <= FULL_LOAD_LIMIT:
            build_model(folder, check_options("numpy", None, None))
    return family, dialect


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
    ``have`` = complete or partial on disk already, ``remaining`` = still to fetch."""

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


def _have_bytes(repo_dir: Path, commit: str, f: RemoteFile) -> int:
    if (repo_dir / "snapshots" / commit / f.name).is_file():
        return f.size or 0
    if f.etag:
        blob = repo_dir / "blobs" / f.etag
        if blob.is_file():
            return blob.stat().st_size
        part = repo_dir / "blobs" / (f.etag + ".incomplete")
        if part.is_file():
            return min(part.stat().st_size, f.size or 0)
    return 0


def plan_download(repo_id: str, *, revision: str | None = None, allow_patterns: Sequence[str] | None = None,
                  token: str | None = None) -> Plan:
    """The file list, sizes and commit of ``repo_id`` (one hub API call) and what the cache already has."""
    hf = _hf()
    if offline():
        raise OfflineError(offline_message(repo_id))
    tok = get_token(token)
    try:
        info = hf.HfApi(endpoint=endpoint(), library_name=LIBRARY_NAME).model_info(
            repo_id, revision=revision, files_metadata=True, token=tok or False)
    except Exception as e:  # noqa: BLE001 - translated into one sentence
        raise _translate(e, repo_id, token_sent=bool(tok), revision=revision) from e
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
    repo_dir = cache_dir() / _repo_folder(info.id or repo_id)
    total = sum(f.size or 0 for f in files)
    have = sum(_have_bytes(repo_dir, info.sha, f) for f in files)
    return Plan(info.id or repo_id, revision or "main", info.sha, tuple(files), total, have, bool(info.gated))


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
        raise DiskSpaceError(f"Not enough free disk space for {repo_id}: it needs {format_bytes(needed)} more in "
                             f"{folder}, but only {format_bytes(free)} is free.")


# ---------------------------------------------------------------------------------------------------------
# Downloading


def _headers(token: str | None) -> dict[str, str]:
    hf = _hf()
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("livecap")
    except PackageNotFoundError:
        ver = "dev"
    headers = hf.utils.build_hf_headers(token=token or False, library_name=LIBRARY_NAME, library_version=ver)
    headers["Accept-Encoding"] = "identity"  # sizes and ranges must be of the file itself
    return headers


def _same_origin(a: str, b: str) -> bool:
    from urllib.parse import urlsplit

    ua, ub = urlsplit(a), urlsplit(b)
    return (ua.scheme, ua.hostname, ua.port) == (ub.scheme, ub.hostname, ub.port)


def _stream_file(repo_id: str, commit: str, f: RemoteFile, repo_dir: Path, token: str | None,
                 meter: _Meter, cancel: CancelToken | None) -> Path:
    """Fetch one file into ``blobs/<etag>`` (resuming ``blobs/<etag>.incomplete``); returns the blob path."""
    hf = _hf()
    httpx = _httpx()
    ep = endpoint()
    url = hf.hf_hub_url(repo_id, f.name, revision=commit, endpoint=ep)
    failures = 0
    meta = None
    blob = part = None
    while True:
        if cancel is not None and cancel.cancelled:
            meter.check_cancel()
        try:
            if meta is None:  # (re)read the metadata: a signed CDN address may have expired
                meta = hf.get_hf_file_metadata(url, token=token or False, endpoint=ep,
                                               timeout=float(os.environ.get("HF_HUB_ETAG_TIMEOUT") or 10))
                if not meta.etag:
                    raise HubError(f"The hub sent no ETag for {f.name} of {repo_id}.")
                blob = repo_dir / "blobs" / meta.etag
                part = blob.with_name(meta.etag + ".incomplete")
            assert blob is not None and part is not None
            size = meta.size if meta.size is not None else f.size
            if blob.is_file():
                return blob
            blob.parent.mkdir(parents=True, exist_ok=True)
            have = part.stat().st_size if part.is_file() else 0
            if size is not None and have > size:
                part.unlink()
                have = 0
            meter.set_file_bytes(have)
            if size is not None and have == size:
                os.replace(part, blob)
                return blob
            got = _get_range(meta.location or url, url, part, have, token, meter, cancel)
            if size is None or part.stat().st_size == size:
                os.replace(part, blob)
                return blob
            failures = 0 if got else failures + 1
        except DownloadCancelled:
            raise
        except (httpx.TransportError, httpx.StreamError) as e:
            meter.check_cancel()
            failures += 1
            meta = None
            if failures > RETRIES:
                raise HubUnreachableError(f"The connection to {ep} kept dropping while downloading {f.name} "
                                          f"({_short(e)}); try again later: the download resumes where it "
                                          "stopped.") from e
            log.info("download of %s interrupted (%s); resuming", f.name, _short(e))
            if cancel is not None:
                cancel.wait(RETRY_WAIT_S * failures)
            else:
                time.sleep(RETRY_WAIT_S * failures)
        except (ModelError, KeyboardInterrupt):
            raise
        except Exception as e:  # noqa: BLE001 - hub HTTP errors, disk errors: one sentence
            raise _translate(e, repo_id, token_sent=bool(token), revision=commit, filename=f.name) from e


def _get_range(location: str, hub_url: str, part: Path, have: int, token: str | None, meter: _Meter,
               cancel: CancelToken | None) -> int:
    """Append the bytes from offset ``have`` to ``part``; returns how many arrived."""
    hf = _hf()
    headers = _headers(token)
    if not _same_origin(location, hub_url):
        headers.pop("authorization", None)  # a signed CDN address: the token stays on the hub
    if have:
        headers["Range"] = f"bytes={have}-"
    timeout = float(os.environ.get("HF_HUB_DOWNLOAD_TIMEOUT") or 10)
    got = 0
    with hf.utils.get_session().stream("GET", location, headers=headers, timeout=timeout) as r:
        close = _closer(r)
        if cancel is not None:
            cancel._push(close)
        try:
            if r.status_code >= 400:
                r.read()
                hf.utils.hf_raise_for_status(r)
            if have and r.status_code != 206:  # the server ignored the range: start the file again
                have = 0
                meter.set_file_bytes(0)
            with open(part, "ab" if have else "wb") as out:
                for chunk in r.iter_bytes():  # as it arrives: a drop loses nothing already received
                    if not chunk:
                        continue
                    out.write(chunk)
                    got += len(chunk)
                    meter.advance(len(chunk))
        finally:
            if cancel is not None:
                cancel._pop(close)
    return got


def _closer(response) -> Callable[[], None]:
    """Something that stops a read blocked in another thread: shutting the socket down wakes ``recv``
    (closing the response object alone does not)."""

    def close() -> None:
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            import socket

            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        else:
            response.close()

    return close


def _link(blob: Path, pointer: Path) -> None:
    """``snapshots/<commit>/<file>`` -> ``../../blobs/<etag>`` (relative, as huggingface_hub makes it); where
    symlinks are not allowed (Windows without developer mode) the blob is copied instead."""
    pointer.parent.mkdir(parents=True, exist_ok=True)
    if pointer.is_symlink() or pointer.exists():
        pointer.unlink()
    try:
        os.symlink(os.path.relpath(blob, pointer.parent), pointer)
    except (OSError, NotImplementedError):
        shutil.copyfile(blob, pointer)


def _write_ref(repo_dir: Path, revision: str, commit: str) -> None:
    if revision == commit:
        return
    ref = repo_dir / "refs" / revision
    ref.parent.mkdir(parents=True, exist_ok=True)
    tmp = ref.with_name(ref.name + ".tmp")
    tmp.write_text(commit)
    os.replace(tmp, ref)


def remove_revision(repo_dir: Path, commit: str) -> None:
    """Delete one cached revision (its links, refs, and blobs nobody else uses) via ``scan_cache_dir``."""
    hf = _hf()
    info = hf.scan_cache_dir(repo_dir.parent)
    if any(rev.commit_hash == commit for repo in info.repos for rev in repo.revisions):
        info.delete_revisions(commit).execute()


def download(repo_id: str, *, revision: str | None = None, allow_patterns: Sequence[str] | None = None,
             token: str | None = None, progress: ProgressCallback | None = None, cancel: CancelToken | None = None,
             aliases: Sequence[str] = (), required: Sequence[str] = (), validate: bool = True,
             pin_fallback: bool = True) -> Path:
    """Download what is missing of ``repo_id`` and return its snapshot folder (see the module docstring).

    ``progress`` is called from this thread with ``Progress`` reports (bytes monotonic within one try);
    ``cancel`` stops it with ``DownloadCancelled``. ``aliases`` are tried in turn when the hub does not know
    ``repo_id``. When the pinned ``revision`` is gone from the hub (histories do get squashed) and
    ``pin_fallback`` is set, the newest revision is downloaded instead (with a warning in the log); the
    validation still decides whether it is usable. Raises HubError/ModelError with one sentence; a failure
    leaves no snapshot behind.
    """
    _hf()
    tok = get_token(token)
    if offline():
        state = local_state([repo_id, *aliases], revision, required)
        if state is not None and state.complete and state.path is not None:
            return state.path
        raise OfflineError(offline_message(repo_id))
    plan = None
    for i, rid in enumerate([repo_id, *aliases]):
        try:
            try:
                plan = plan_download(rid, revision=revision, allow_patterns=allow_patterns, token=tok)
            except RevisionMissingError:
                if not (pin_fallback and revision):
                    raise
                log.warning("revision %s of %s is not on the hub; downloading the newest one", revision, rid)
                plan = plan_download(rid, revision=None, allow_patterns=allow_patterns, token=tok)
            break
        except ModelNotFoundError:
            if i == len(aliases):
                raise
    assert plan is not None
    repo_dir = cache_dir() / _repo_folder(plan.repo_id)
    check_free_space(plan.remaining, cache_dir(), plan.repo_id)
    (repo_dir / "snapshots").mkdir(parents=True, exist_ok=True)  # scan_cache_dir lists the repo from now on
    meter = _Meter(plan.repo_id, plan.total, 0, len(plan.files), progress, cancel)
    blobs: list[tuple[RemoteFile, Path]] = []
    hf = _hf()
    for index, f in enumerate(plan.files, 1):
        pointer = repo_dir / "snapshots" / plan.commit / f.name
        meter.start_file(f.name, index, 0)
        known_blob = repo_dir / "blobs" / f.etag if f.etag else None
        existing = next((p for p in (pointer, known_blob) if p is not None and p.is_file()
                         and (f.size is None or p.stat().st_size == f.size)), None)
        if existing is not None:  # complete already: no request at all
            blobs.append((f, existing))
            meter.end_file(existing.stat().st_size)
            continue
        lock = repo_dir.parent / ".locks" / repo_dir.name / f"{f.etag or f.name.replace('/', '_')}.lock"
        lock.parent.mkdir(parents=True, exist_ok=True)
        from filelock import Timeout

        try:
            with hf.utils.WeakFileLock(lock, timeout=1.0):
                blob = _stream_file(plan.repo_id, plan.commit, f, repo_dir, tok, meter, cancel)
        except Timeout as e:
            raise DownloadBusyError(f"{f.name} of {plan.repo_id} is being downloaded by another program; try again "
                                    "when it has finished.") from e
        blobs.append((f, blob))
        meter.end_file(blob.stat().st_size)
    meter.emit(force=True, finished=True)
    # Every file is complete: only now does the snapshot appear.
    snapshot = repo_dir / "snapshots" / plan.commit
    for f, blob in blobs:
        pointer = snapshot / f.name
        if blob != pointer:
            _link(blob, pointer)
    _write_ref(repo_dir, plan.revision, plan.commit)
    if validate:
        problem = snapshot_problem(snapshot, required)
        if problem:
            try:
                remove_revision(repo_dir, plan.commit)
            except Exception:  # noqa: BLE001 - the sentence below matters more than the clean-up
                log.warning("could not remove the unusable download %s", snapshot, exc_info=True)
                shutil.rmtree(snapshot, ignore_errors=True)
            raise ModelError(problem)
    return snapshot


def delete_model(repo_ids: str | Sequence[str], scans: dict[str, RepoScan] | None = None) -> int:
    """Delete every cached revision and partial download of a model (all its ids); returns the bytes freed."""
    hf = _hf()
    ids = [repo_ids] if isinstance(repo_ids, str) else list(repo_ids)
    scans = scan_models() if scans is None else scans
    freed = 0
    for rid in ids:
        s = scans.get(rid.lower())
        if s is None:
            continue
        if s.revisions:
            strategy = hf.scan_cache_dir(s.path.parent).delete_revisions(*s.revisions)
            freed += strategy.expected_freed_size
            strategy.execute()
        if s.path.exists():  # partial files only, or leftovers
            freed += s.partial_bytes
            shutil.rmtree(s.path, ignore_errors=True)
        lock_dir = s.path.parent / ".locks" / s.path.name
        shutil.rmtree(lock_dir, ignore_errors=True)
    return freed


# ---------------------------------------------------------------------------------------------------------
# The CLI path


class _TerminalBar:
    """A tqdm byte bar on stderr when it is a terminal (and HF_HUB_DISABLE_PROGRESS_BARS is not set)."""

    def __init__(self, repo_id: str) -> None:
        self.repo_id = repo_id
        self.bar = None
        stream = sys.stderr
        self.enabled = (stream is not None and hasattr(stream, "isatty") and stream.isatty()
                        and not _truthy(os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS")))
        self.announced = False

    def __call__(self, p: Progress) -> None:
        if not self.enabled:
            if not self.announced and sys.stderr is not None:
                print(f"Downloading {self.repo_id} ({format_bytes(p.total)})...", file=sys.stderr, flush=True)
                self.announced = True
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=p.total, initial=p.done, unit="B", unit_scale=True, unit_divisor=1000,
                            desc=self.repo_id, file=sys.stderr, dynamic_ncols=True)
        self.bar.update(p.done - self.bar.n)
        self.bar.set_postfix_str(p.file, refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def fetch_model(repo_id: str, revision: str | None = None) -> Path:
    """The local snapshot folder of ``repo_id``, downloading missing files into the HF cache.

    A model that is already complete on disk is used as is, without asking the hub (so it works offline).
    Repos in the catalog use its pinned revision, aliases and file list; others download ``ALLOW_PATTERNS``.
    Shows a byte progress bar on stderr when it is a terminal. Raises ModelError with one sentence.
    """
    from .catalog import find_entry

    entry = find_entry(repo_id)
    ids = [repo_id] + ([r for r in entry.repo_ids if r.lower() != repo_id.lower()] if entry else [])
    rev = revision or (entry.revision if entry else None)
    patterns = list(entry.allow_patterns) if entry and entry.allow_patterns else None
    required = list(entry.required_files) if entry else []
    state = local_state(ids, rev, required)
    if state is not None and state.complete and state.path is not None:
        return state.path
    if offline():
        raise OfflineError(offline_message(repo_id))
    bar = _TerminalBar(repo_id)
    try:
        return download(ids[0], revision=rev, allow_patterns=patterns, aliases=ids[1:], required=required,
                        progress=bar)
    finally:
        bar.close()
