"""A fake Hugging Face hub on loopback, enough of the HTTP API for the real huggingface_hub client (2.4.0).

It serves plain files (never Xet: no ``X-Xet-*`` headers or links, so every client takes the HTTP path):

- ``GET /api/models/{repo}[/revision/{rev}]`` -> model info with ``sha`` and ``siblings`` (size, ``blobId``,
  ``lfs.sha256`` for ``*.safetensors``), as ``model_info(files_metadata=True)`` reads it;
- ``HEAD|GET /{repo}/resolve/{rev}/{file}`` -> ``X-Repo-Commit``, ``ETag`` (git blob sha1, or the sha256 for
  LFS files), ``Content-Length``, ``Accept-Ranges``; ``Range: bytes=N-`` gives 206 + ``Content-Range``.
  With ``cdn=True`` LFS files answer 302 to ``http://localhost:PORT/cdn/{sha256}`` (another origin, as the
  real hub's CDN) with ``X-Linked-Etag``/``X-Linked-Size``, and the client fetches the body there;
- errors the way the hub sends them: ``X-Error-Code`` ``RepoNotFound`` / ``RevisionNotFound`` /
  ``EntryNotFound`` / ``GatedRepo`` (401 without a token, 403 with a token that has no access).

Switches for failure tests: ``drop_at[file] = offset`` closes the connection once after sending the file up
to that byte (``drop_always`` keeps doing it for requests that cover the offset; ``down_after_drop`` then
takes the whole network down), ``down`` closes every connection unanswered, ``silent`` accepts connections and
reads requests but never answers (until ``release.set()`` or ``stop()``), ``rate`` limits the bytes per second of
every body, ``stall_at[file] = offset`` stops sending there until ``release.set()``. ``requests`` records every
request (method, path, headers) and ``body_bytes[file]`` counts the file bytes actually sent, for assertions.
``padded(data, n)`` makes a safetensors file ``n`` bytes longer (trailing bytes the format allows), so a test
file is bigger than huggingface_hub's 10 MB write step.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

LFS_PATTERNS = ("*.safetensors", "*.bin", "*.npz")


def padded(data: bytes, extra: int) -> bytes:
    """A safetensors file with ``extra`` trailing zero bytes: still valid and loadable, just bigger."""
    return data + b"\0" * extra


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class FakeFile:
    name: str
    data: bytes
    lfs: bool

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def etag(self) -> str:
        return self.sha256 if self.lfs else git_blob_sha1(self.data)


@dataclass
class FakeRepo:
    repo_id: str
    files: dict[str, FakeFile]
    commit: str
    gated: bool = False


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)


def _commit_for(repo_id: str, files: dict[str, bytes]) -> str:
    h = hashlib.sha1(repo_id.encode())
    for name in sorted(files):
        h.update(name.encode() + hashlib.sha1(files[name]).digest())
    return h.hexdigest()


class FakeHub:
    """Start with ``with FakeHub() as hub:`` (or ``start()``/``stop()``); ``hub.url`` is the endpoint."""

    def __init__(self, *, cdn: bool = False, chunk: int = 16 * 1024) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.tokens: set[str] = {"hf_good_token"}  # tokens that may read gated repos
        self.requests: list[Request] = []
        self.drop_at: dict[str, int] = {}
        self.drop_always = False
        self.rate: float | None = None  # bytes per second for bodies
        self.stall_at: dict[str, int] = {}
        self.release = threading.Event()
        self.down = False  # close every connection without an answer (the network is gone)
        self.silent = False  # accept and read every request, answer nothing (a hung server)
        self.body_bytes: dict[str, int] = {}  # file name -> body bytes sent (all requests together)
        self.down_after_drop = False  # a drop_at also takes the network down
        self.cdn = cdn
        self.chunk = chunk
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- content ------------------------------------------------------------------------------------------
    def add_repo(
        self, repo_id: str, files: dict[str, bytes], *, gated: bool = False, commit: str | None = None
    ) -> FakeRepo:
        repo = FakeRepo(
            repo_id,
            {n: FakeFile(n, d, any(fnmatch.fnmatch(n, p) for p in LFS_PATTERNS)) for n, d in files.items()},
            commit or _commit_for(repo_id, files),
            gated,
        )
        self.repos[repo_id.lower()] = repo
        return repo

    def add_folder(self, repo_id: str, folder: Path, **kw) -> FakeRepo:
        """Serve the files directly in ``folder`` (sub-folders such as ``golden/`` are left out)."""
        files = {p.name: p.read_bytes() for p in sorted(Path(folder).iterdir()) if p.is_file()}
        return self.add_repo(repo_id, files, **kw)

    def served(self, method: str | None = None, contains: str = "") -> list[Request]:
        return [r for r in self.requests if (method is None or r.method == method) and contains in r.path]

    # -- lifecycle ----------------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeHub:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        server.hub = self  # type: ignore[attr-defined]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True, name="fakehub"
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
        self._server = self._thread = None

    def __enter__(self) -> FakeHub:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # one request per connection: a dropped body is a closed socket
    server_version = "FakeHub/1.0"

    @property
    def hub(self) -> FakeHub:
        return self.server.hub  # type: ignore[attr-defined]

    def log_message(self, format, *args) -> None:  # noqa: A002 - silence the default stderr log
        pass

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def do_GET(self) -> None:
        self._dispatch(head=False)

    # -- routing ------------------------------------------------------------------------------------------
    def _dispatch(self, head: bool) -> None:
        path = unquote(urlsplit(self.path).path)
        self.hub.requests.append(Request(self.command, path, {k.lower(): v for k, v in self.headers.items()}))
        if self.hub.silent:
            self.hub.release.wait(120)
            self._abort()
            return
        if self.hub.down:
            self._abort()
            return
        try:
            if path.startswith("/api/models/"):
                self._model_info(path[len("/api/models/") :], head)
            elif path.startswith("/cdn/"):
                self._cdn(path[len("/cdn/") :], head)
            elif "/resolve/" in path:
                repo_id, _, rest = path.lstrip("/").partition("/resolve/")
                rev, _, filename = rest.partition("/")
                self._resolve(repo_id, rev, filename, head)
            else:
                self._error(404, None, "Not found")
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            pass  # the client went away (a cancel)

    def _repo(self, repo_id: str) -> FakeRepo | None:
        repo = self.hub.repos.get(repo_id.lower())
        if repo is None:
            self._error(404, "RepoNotFound", "Repository not found")
        return repo

    def _model_info(self, rest: str, head: bool) -> None:
        if "/tree/" in rest:
            self._tree(*rest.split("/tree/", 1), head)
            return
        repo_id, _, rev = rest.partition("/revision/")
        repo = self._repo(repo_id)
        if repo is None:
            return
        if rev and not self._rev_ok(repo, rev):
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            return
        siblings = []
        for f in repo.files.values():
            s = {"rfilename": f.name, "size": len(f.data), "blobId": git_blob_sha1(f.data)}
            if f.lfs:
                s["lfs"] = {"size": len(f.data), "sha256": f.sha256, "pointerSize": 134}
            siblings.append(s)
        self._json(
            {
                "_id": repo.commit[:24],
                "id": repo.repo_id,
                "sha": repo.commit,
                "private": False,
                "gated": "manual" if repo.gated else False,
                "disabled": False,
                "siblings": siblings,
            },
            head,
        )

    def _tree(self, repo_id: str, rev_path: str, head: bool) -> None:
        repo = self._repo(repo_id)
        if repo is None:
            return
        rev = rev_path.split("/", 1)[0]
        if not self._rev_ok(repo, rev):
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            return
        entries = []
        for f in repo.files.values():
            e = {"type": "file", "path": f.name, "size": len(f.data), "oid": git_blob_sha1(f.data)}
            if f.lfs:
                e["lfs"] = {"oid": f.sha256, "size": len(f.data), "pointerSize": 134}
            entries.append(e)
        self._json(entries, head)

    def _json(self, obj, head: bool) -> None:
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    @staticmethod
    def _rev_ok(repo: FakeRepo, rev: str) -> bool:
        return rev == "main" or rev == repo.commit

    def _authorised(self, repo: FakeRepo) -> bool:
        if not repo.gated:
            return True
        auth = self.headers.get("Authorization", "")
        token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else ""
        if token in self.hub.tokens:
            return True
        if token:
            self._error(
                403,
                "GatedRepo",
                f"Access to model {repo.repo_id} is restricted and you are not in the "
                "authorized list. Visit the model page to ask for access.",
            )
        else:
            self._error(
                401,
                "GatedRepo",
                f"Access to model {repo.repo_id} is restricted. You must have access to "
                "it and be authenticated to access it. Please log in.",
            )
        return False

    def _resolve(self, repo_id: str, rev: str, filename: str, head: bool) -> None:
        repo = self._repo(repo_id)
        if repo is None or not self._authorised(repo):
            return
        if not self._rev_ok(repo, rev):
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            return
        f = repo.files.get(filename)
        if f is None:
            self._error(
                404, "EntryNotFound", f'{filename} does not exist on "{rev}"', extra={"X-Repo-Commit": repo.commit}
            )
            return
        if f.lfs and self.hub.cdn:
            self.send_response(302)
            self.send_header("Location", f"http://localhost:{self.hub.port}/cdn/{f.sha256}")
            self.send_header("X-Repo-Commit", repo.commit)
            self.send_header("ETag", f'"{git_blob_sha1(f.data)[:40]}"')
            self.send_header("X-Linked-Etag", f'"{f.sha256}"')
            self.send_header("X-Linked-Size", str(len(f.data)))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self._send_file(f, head, {"X-Repo-Commit": repo.commit, "ETag": f'"{f.etag}"'})

    def _cdn(self, sha: str, head: bool) -> None:
        for repo in self.hub.repos.values():
            for f in repo.files.values():
                if f.lfs and f.sha256 == sha:
                    self._send_file(f, head, {"ETag": f'"{sha}"'})
                    return
        self._error(404, None, "no such object")

    # -- bodies -------------------------------------------------------------------------------------------
    def _send_file(self, f: FakeFile, head: bool, headers: dict[str, str]) -> None:
        size = len(f.data)
        start, end = 0, size
        rng = self.headers.get("Range")
        status = 200
        if rng and rng.startswith("bytes="):
            lo, _, hi = rng[len("bytes=") :].partition("-")
            start = int(lo or 0)
            end = int(hi) + 1 if hi else size
            if start >= size:
                self._error(416, None, "Range not satisfiable", extra={"Content-Range": f"bytes */{size}"})
                return
            status = 206
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(end - start))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.end_headers()
        if head:
            return
        hub = self.hub
        pos = start
        drop = hub.drop_at.get(f.name)
        stall = hub.stall_at.get(f.name)
        while pos < end:
            n = min(hub.chunk, end - pos)
            if drop is not None and pos < drop <= pos + n:
                self._write(f, pos, drop)
                self.wfile.flush()
                if not hub.drop_always:
                    hub.drop_at.pop(f.name, None)
                if hub.down_after_drop:
                    hub.down = True
                self._abort()
                return
            if stall is not None and pos < stall <= pos + n:
                self._write(f, pos, stall)
                self.wfile.flush()
                pos = stall
                hub.stall_at.pop(f.name, None)
                stall = None
                hub.release.wait(30)
                continue
            self._write(f, pos, pos + n)
            pos += n
            if hub.rate:
                self.wfile.flush()
                time.sleep(n / hub.rate)

    def _write(self, f: FakeFile, start: int, end: int) -> None:
        self.wfile.write(f.data[start:end])
        self.hub.body_bytes[f.name] = self.hub.body_bytes.get(f.name, 0) + end - start

    def _abort(self) -> None:
        """Close the socket in the middle of the body (the client sees fewer bytes than Content-Length)."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _error(self, status: int, code: str | None, message: str, extra: dict[str, str] | None = None) -> None:
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        if code:
            self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


# -- helpers for tests ---------------------------------------------------------------------------------------

_LOCAL_HOSTS = {"127.0.0.1", "::1", "localhost"}


def block_network(monkeypatch) -> None:
    """Make any connection to a host other than loopback fail loudly (tests never touch the real network)."""
    real_connect = socket.socket.connect
    real_getaddrinfo = socket.getaddrinfo

    def connect(self, address):
        host = address[0] if isinstance(address, tuple) else None
        if host is not None and host not in _LOCAL_HOSTS:
            raise OSError(f"test tried to reach the network: {address!r}")
        return real_connect(self, address)

    def getaddrinfo(host, *args, **kwargs):
        if host not in _LOCAL_HOSTS and host is not None:
            raise OSError(f"test tried to resolve a network host: {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def hub_env(monkeypatch, hub: FakeHub, home: Path) -> Path:
    """Point HF_HOME at ``home`` and HF_ENDPOINT at ``hub``; clear the other hub variables. Returns the cache."""
    for var in (
        "HF_HUB_CACHE",
        "HUGGINGFACE_HUB_CACHE",
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HF_TOKEN_PATH",
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_HUB_DISABLE_PROGRESS_BARS",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    return home / "hub"
