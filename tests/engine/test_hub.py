"""engine.hub against a fake hub on loopback (tests/fakehub.py) with the real huggingface_hub client.

HF_HOME points into tmp_path and HF_ENDPOINT at the fake hub; any other network access fails the test.
"""

from __future__ import annotations

import errno
import hashlib
import io
import logging
import os
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

from engine import hub as H
from engine.catalog import load_catalog
from engine.errors import ModelError
from tests.conftest import FIXTURES
from tests.fakehub import FakeHub, block_network, hub_env

TINY = FIXTURES / "models" / "moon_tiny_like"
SMALL = FIXTURES / "models" / "moon_small_like"
REPO = "acme/moon-tiny"
BIG = "model.safetensors"


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    block_network(monkeypatch)
    monkeypatch.setattr(H, "RETRY_WAIT_S", 0.01)
    with FakeHub() as hub:
        hub_env(monkeypatch, hub, tmp_path / "hf")
        hub.add_folder(REPO, TINY)
        hub.add_folder("acme/moon-small", SMALL)
        yield hub


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _snapshots(cache: Path, repo: str) -> list[Path]:
    d = cache / ("models--" + repo.replace("/", "--")) / "snapshots"
    return sorted(p for p in d.iterdir()) if d.is_dir() else []


def _one_sentence(msg: str) -> None:
    assert "\n" not in msg and msg.endswith(".") and len(msg) < 300, msg


def _resolve_gets(hub: FakeHub, name: str = "") -> list:
    return [r for r in hub.requests if r.method == "GET" and ("/resolve/" in r.path or "/cdn/" in r.path)
            and r.path.endswith(name)]


# -- environment -------------------------------------------------------------------------------------------


def test_environment_is_read_at_call_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_ENDPOINT", "HF_HUB_OFFLINE",
                "TRANSFORMERS_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert H.hf_home() == tmp_path / "xdg" / "huggingface"
    assert H.endpoint() == "https://huggingface.co"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert H.cache_dir() == tmp_path / "home" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "elsewhere"))
    assert H.cache_dir() == tmp_path / "elsewhere"
    monkeypatch.setenv("HF_ENDPOINT", "http://mirror.example/")
    assert H.endpoint() == "http://mirror.example"
    assert not H.offline()
    for value, expected in (("1", True), ("true", True), ("ON", True), ("0", False), ("", False)):
        monkeypatch.setenv("HF_HUB_OFFLINE", value)
        assert H.offline() is expected
    import huggingface_hub.constants as c

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    H._hf()
    assert c.HF_HUB_OFFLINE is True  # mirrored into huggingface_hub, which read it at import
    monkeypatch.delenv("HF_HUB_OFFLINE")
    H._hf()
    assert c.HF_HUB_OFFLINE is False


def test_token_precedence_and_storage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert H.get_token() is None
    path = H.save_token(" hf_saved \n")
    assert path == tmp_path / "hf" / "token" and path.read_text() == "hf_saved"
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert H.get_token() == "hf_saved"
    monkeypatch.setenv("HF_TOKEN", "hf_env")
    assert H.get_token() == "hf_env"
    assert H.get_token("hf_explicit") == "hf_explicit"
    H.forget_token()
    monkeypatch.delenv("HF_TOKEN")
    assert H.get_token() is None


def test_formatting() -> None:
    assert H.format_bytes(8_880_000_000) == "8.9 GB"
    assert H.format_bytes(562_250_000) == "562 MB"
    assert H.format_bytes(999) == "999 B"
    assert H.format_duration(42) == "42 s"
    assert H.format_duration(185) == "3 min"
    assert H.format_duration(3900) == "1 h 05 min"
    assert H.format_duration(None) == ""


# -- the fake hub speaks the real client's protocol -------------------------------------------------------------


@pytest.mark.parametrize("cdn", [False, True])
def test_fake_hub_serves_the_real_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cdn: bool) -> None:
    from huggingface_hub import hf_hub_download, snapshot_download
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    block_network(monkeypatch)
    H._hf()  # telemetry off, so the client asks nothing of the real hub
    with FakeHub(cdn=cdn) as hub:
        hub.add_folder(REPO, TINY)
        hub.add_folder("acme/gated", TINY, gated=True)
        cache = tmp_path / "c"
        p = Path(hf_hub_download(REPO, BIG, cache_dir=cache, endpoint=hub.url, token=False))
        assert p.read_bytes() == (TINY / BIG).read_bytes()
        snap = Path(snapshot_download(REPO, cache_dir=cache, endpoint=hub.url, token=False))
        assert sorted(x.name for x in snap.iterdir()) == sorted(x.name for x in TINY.iterdir() if x.is_file())
        with pytest.raises(GatedRepoError):
            hf_hub_download("acme/gated", BIG, cache_dir=cache, endpoint=hub.url, token=False)
        with pytest.raises(RepositoryNotFoundError):
            hf_hub_download("acme/nothing", BIG, cache_dir=cache, endpoint=hub.url, token=False)


# -- downloads ---------------------------------------------------------------------------------------------------


def test_download_reports_byte_progress_and_installs(fake: FakeHub) -> None:
    events: list[H.Progress] = []
    path = H.download(REPO, progress=events.append)
    files = sorted(p.name for p in TINY.iterdir() if p.is_file())
    assert sorted(p.name for p in path.iterdir()) == [f for f in files if f.endswith((".json", ".safetensors"))]
    for name in ("config.json", BIG, "tokenizer.json"):
        assert (path / name).read_bytes() == (TINY / name).read_bytes()
    total = sum((TINY / p.name).stat().st_size for p in path.iterdir())
    assert events and all(e.total == total for e in events)
    dones = [e.done for e in events]
    assert dones == sorted(dones), "bytes must never go backwards"
    assert events[-1].done == total and events[-1].finished
    assert {e.file for e in events} >= {BIG, "config.json"}
    assert len([e for e in events if e.file == BIG]) >= 2  # within-file progress, not only file boundaries

    state = H.local_state(REPO)
    assert state is not None and state.complete and state.path == path and state.size_on_disk == total
    assert H.check_folder(path) == ("moonshine_streaming", "hf")
    # The standard HF cache layout: other tools find the files.
    from huggingface_hub import scan_cache_dir, try_to_load_from_cache

    assert try_to_load_from_cache(REPO, BIG, cache_dir=H.cache_dir()) == str(path / BIG)
    (repo,) = scan_cache_dir(H.cache_dir()).repos
    assert repo.repo_id == REPO and repo.size_on_disk == total and repo.refs["main"].snapshot_path == path

    # A second download asks the hub for the file list only.
    fake.requests.clear()
    assert H.download(REPO) == path
    assert not _resolve_gets(fake) and not fake.served("HEAD")


def _run_in_thread(fn, *args, **kw):
    box: dict = {}

    def target():
        try:
            box["result"] = fn(*args, **kw)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, box


def test_cancel_mid_file_then_resume_byte_identical(fake: FakeHub) -> None:
    fake.rate = 1_500_000  # bytes/s: the 3.9 MB weight file takes ~2.5 s
    token = H.CancelToken()
    events: list[H.Progress] = []
    t, box = _run_in_thread(H.download, REPO, progress=events.append, cancel=token)
    deadline = time.monotonic() + 10
    while not any(e.file == BIG and e.done > 1_000_000 for e in events):
        assert time.monotonic() < deadline and t.is_alive(), box
        time.sleep(0.02)
    t0 = time.monotonic()
    token.cancel()
    t.join(5)
    assert not t.is_alive() and time.monotonic() - t0 < 2.0
    err = box.get("error")
    assert isinstance(err, H.DownloadCancelled), box
    _one_sentence(str(err))

    cache = H.cache_dir()
    partials = list(cache.glob("models--acme--moon-tiny/blobs/*.incomplete"))
    assert len(partials) == 1
    kept = partials[0].stat().st_size
    assert 0 < kept < (TINY / BIG).stat().st_size
    assert _snapshots(cache, REPO) == []  # nothing a loader could mistake for a model
    state = H.local_state(REPO)
    assert state is not None and not state.complete and state.partial_bytes >= kept

    fake.rate = None
    fake.requests.clear()
    events.clear()
    path = H.download(REPO, progress=events.append)
    assert (path / BIG).read_bytes() == (TINY / BIG).read_bytes()
    (get,) = _resolve_gets(fake, BIG)
    assert get.headers.get("range") == f"bytes={kept}-"
    assert [e.done for e in events] == sorted(e.done for e in events)
    assert not list(cache.glob("models--acme--moon-tiny/blobs/*.incomplete"))


def test_cancel_while_the_connection_is_stalled_is_immediate(fake: FakeHub) -> None:
    fake.stall_at[BIG] = 300_000  # the server goes silent there
    token = H.CancelToken()
    events: list[H.Progress] = []
    t, box = _run_in_thread(H.download, REPO, progress=events.append, cancel=token)
    deadline = time.monotonic() + 10
    while not fake.served("GET", BIG) or not any(e.file == BIG for e in events):
        assert time.monotonic() < deadline, box
        time.sleep(0.02)
    time.sleep(0.3)
    t0 = time.monotonic()
    token.cancel()
    t.join(5)
    assert not t.is_alive() and time.monotonic() - t0 < 2.0
    assert isinstance(box.get("error"), H.DownloadCancelled), box
    assert _snapshots(H.cache_dir(), REPO) == []


def test_dropped_connection_resumes_within_the_same_download(fake: FakeHub) -> None:
    fake.drop_at[BIG] = 1_000_000
    path = H.download(REPO)
    assert _sha(path / BIG) == _sha(TINY / BIG)
    ranges = [r.headers.get("range") for r in _resolve_gets(fake, BIG)]
    assert ranges[0] is None and ranges[1] == "bytes=1000000-"


def test_network_gone_mid_file_then_resume_later(fake: FakeHub) -> None:
    fake.drop_at[BIG] = 1_200_000
    fake.down_after_drop = True
    with pytest.raises(H.HubUnreachableError) as exc:
        H.download(REPO)
    _one_sentence(str(exc.value))
    assert "resumes" in str(exc.value)
    (part,) = H.cache_dir().glob("models--acme--moon-tiny/blobs/*.incomplete")
    assert part.stat().st_size == 1_200_000
    assert _snapshots(H.cache_dir(), REPO) == []
    fake.down = False
    fake.requests.clear()
    path = H.download(REPO)
    assert _sha(path / BIG) == _sha(TINY / BIG)
    assert _resolve_gets(fake, BIG)[0].headers.get("range") == "bytes=1200000-"


def test_hub_unreachable(fake: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    fake.down = True
    with pytest.raises(H.HubUnreachableError) as exc:
        H.download(REPO)
    _one_sentence(str(exc.value))
    assert fake.url in str(exc.value)


def test_gated_repo_needs_a_token_with_access(fake: FakeHub, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fake.add_folder("acme/gated", TINY, gated=True)
    with pytest.raises(H.GatedModelError) as exc:
        H.download("acme/gated")
    msg = str(exc.value)
    _one_sentence(msg)
    assert "gated" in msg and "token" in msg and "terms" in msg
    assert fake.served("HEAD", "acme/gated")[-1].headers.get("authorization") is None

    with pytest.raises(H.GatedModelError) as exc:
        H.download("acme/gated", token="hf_no_access_secret")
    msg = str(exc.value)
    _one_sentence(msg)
    assert "no access" in msg and "hf_no_access_secret" not in msg

    path = H.download("acme/gated", token="hf_good_token")
    assert (path / BIG).read_bytes() == (TINY / BIG).read_bytes()
    assert fake.served("HEAD", "acme/gated")[-1].headers.get("authorization") == "Bearer hf_good_token"
    for secret in ("hf_good_token", "hf_no_access_secret"):
        assert secret not in caplog.text
    assert _snapshots(H.cache_dir(), "acme/gated") == [path]


def test_saved_token_is_used(fake: FakeHub) -> None:
    fake.add_folder("acme/gated", TINY, gated=True)
    H.save_token("hf_good_token")
    assert H.download("acme/gated").is_dir()


def test_token_stays_on_the_hub_when_the_file_is_on_a_cdn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    block_network(monkeypatch)
    with FakeHub(cdn=True) as hub:
        hub_env(monkeypatch, hub, tmp_path / "hf")
        hub.add_folder("acme/gated", TINY, gated=True)
        path = H.download("acme/gated", token="hf_good_token")
        assert _sha(path / BIG) == _sha(TINY / BIG)
        (cdn_get,) = hub.served("GET", "/cdn/")
        assert "authorization" not in cdn_get.headers


def test_not_found(fake: FakeHub) -> None:
    with pytest.raises(H.ModelNotFoundError) as exc:
        H.download("acme/nothing-here")
    _one_sentence(str(exc.value))
    assert "acme/nothing-here" in str(exc.value) and "not found" in str(exc.value)
    assert not (H.cache_dir() / "models--acme--nothing-here").exists()
    with pytest.raises(H.ModelNotFoundError) as exc:
        H.download(REPO, revision="0" * 40, pin_fallback=False)
    assert "revision" in str(exc.value)
    with pytest.raises(H.ModelNotFoundError):
        H.download(REPO, allow_patterns=["*.onnx"])


def test_a_pinned_revision_gone_from_the_hub_falls_back_to_the_newest(fake: FakeHub, caplog) -> None:
    path = H.download(REPO, revision="0" * 40)
    assert path.name == fake.repos[REPO].commit
    assert "is not on the hub" in caplog.text


def test_not_enough_disk_space(fake: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    real = shutil.disk_usage
    monkeypatch.setattr(H.shutil, "disk_usage", lambda p: usage(10**9, 10**9 - 10**6, 10**6))
    with pytest.raises(H.DiskSpaceError) as exc:
        H.download(REPO)
    msg = str(exc.value)
    _one_sentence(msg)
    assert "Not enough free disk space" in msg and "1.0 MB" in msg
    assert not _resolve_gets(fake) and _snapshots(H.cache_dir(), REPO) == []
    monkeypatch.setattr(H.shutil, "disk_usage", real)
    assert H.download(REPO).is_dir()


def test_disk_filling_up_during_the_download(fake: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    real_open = open

    class Full(io.RawIOBase):
        def __init__(self, f):
            self.f, self.n = f, 0

        def write(self, b):
            if self.n + len(b) > 500_000:
                raise OSError(errno.ENOSPC, "No space left on device")
            self.n += len(b)
            return self.f.write(b)

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

    def fake_open(path, mode="r", *a, **kw):
        f = real_open(path, mode, *a, **kw)
        return Full(f) if str(path).endswith(".incomplete") else f

    monkeypatch.setattr(H, "open", fake_open, raising=False)
    with pytest.raises(H.DiskSpaceError) as exc:
        H.download(REPO)
    _one_sentence(str(exc.value))
    assert "filled up" in str(exc.value)
    assert _snapshots(H.cache_dir(), REPO) == []
    monkeypatch.undo()


def test_offline_mode(fake: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    path = H.download(REPO)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    fake.requests.clear()
    assert H.download(REPO) == path
    assert H.fetch_model(REPO) == path
    assert fake.requests == []
    with pytest.raises(H.OfflineError) as exc:
        H.download("acme/moon-small")
    msg = str(exc.value)
    _one_sentence(msg)
    assert "HF_HUB_OFFLINE" in msg and "acme/moon-small" in msg
    with pytest.raises(H.OfflineError):
        H.plan_download("acme/moon-small")
    with pytest.raises(ModelError):
        H.fetch_model("acme/moon-small")
    assert fake.requests == []
    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert H.download("acme/moon-small").is_dir()


def test_delete(fake: FakeHub) -> None:
    path = H.download(REPO)
    size = H.local_state(REPO).size_on_disk
    assert H.delete_model(REPO) == size
    assert not path.exists() and H.local_state(REPO) is None
    # A partial download is deleted too.
    fake.drop_at[BIG] = 800_000
    fake.down_after_drop = True
    with pytest.raises(H.HubUnreachableError):
        H.download(REPO)
    state = H.local_state(REPO)
    assert state is not None and state.partial_bytes >= 800_000 and not state.complete
    assert H.delete_model(REPO) >= 800_000
    assert H.scan_models() == {}


def test_unusable_download_is_removed_with_the_loader_sentence(fake: FakeHub) -> None:
    files = {p.name: p.read_bytes() for p in TINY.iterdir() if p.is_file()}
    fake.add_repo("acme/bert", {**files, "config.json": b'{"model_type": "bert"}'})
    with pytest.raises(ModelError) as exc:
        H.download("acme/bert")
    _one_sentence(str(exc.value))
    assert "Unsupported model type 'bert'" in str(exc.value)
    assert _snapshots(H.cache_dir(), "acme/bert") == []
    state = H.local_state("acme/bert")
    assert state is None or not state.complete

    truncated = {**files, BIG: files[BIG][: len(files[BIG]) // 2]}
    fake.add_repo("acme/truncated", truncated)
    with pytest.raises(ModelError) as exc:
        H.download("acme/truncated")
    assert "safetensors" in str(exc.value) or "truncated" in str(exc.value)
    assert _snapshots(H.cache_dir(), "acme/truncated") == []

    with pytest.raises(ModelError) as exc:
        H.download(REPO, required=["tekken.json"])
    assert "tekken.json" in str(exc.value)
    assert _snapshots(H.cache_dir(), REPO) == []


def test_check_folder(tmp_path: Path) -> None:
    assert H.check_folder(TINY, full=True) == ("moonshine_streaming", "hf")
    with pytest.raises(ModelError) as exc:
        H.check_folder(tmp_path, full=True)
    _one_sentence(str(exc.value))
    assert "No model found" in str(exc.value)


# -- the CLI path ------------------------------------------------------------------------------------------------


def test_fetch_model_uses_the_catalog_and_then_works_without_the_hub(fake: FakeHub) -> None:
    from engine import load_model
    from engine.loader import resolve_source

    entry = load_catalog().find("UsefulSensors/moonshine-streaming-tiny")
    files = {p.name: p.read_bytes() for p in TINY.iterdir() if p.is_file()}
    fake.add_repo(entry.repo_id, {**files, "model.onnx": b"x" * 1000, "README.md": b"# card"},
                  commit=entry.revision)
    path = resolve_source(entry.repo_id)  # the loader's own hub path
    assert path.name == entry.revision
    assert sorted(p.name for p in path.iterdir()) == sorted(entry.allow_patterns)
    assert all(entry.revision in r.path for r in fake.served("HEAD"))
    fake.stop()  # no hub any more: the complete copy is used as is
    model = load_model(entry.repo_id, backend="numpy")
    assert model is not None


def test_fetch_model_falls_back_to_the_renamed_org(fake: FakeHub) -> None:
    entry = load_catalog().find("UsefulSensors/moonshine-streaming-small")
    fake.add_folder("moonshine-ai/moonshine-streaming-small", SMALL, commit=entry.revision)
    path = H.fetch_model("UsefulSensors/moonshine-streaming-small")
    assert "models--moonshine-ai--moonshine-streaming-small" in str(path)
    state = H.local_state(entry.repo_ids, entry.revision, entry.required_files)
    assert state.complete and state.repo_id == "moonshine-ai/moonshine-streaming-small"


def test_fetch_model_progress_on_stderr(fake: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self):
            return True

    err = Tty()
    monkeypatch.setattr(sys, "stderr", err)
    H.fetch_model(REPO)
    out = err.getvalue()
    assert REPO in out and "100%" in out and "MB" in out

    plain = io.StringIO()
    monkeypatch.setattr(sys, "stderr", plain)
    H.fetch_model("acme/moon-small")
    assert plain.getvalue().startswith("Downloading acme/moon-small (")


def test_cli_downloads_a_missing_model(fake: FakeHub, capsys: pytest.CaptureFixture) -> None:
    from engine.cli import main

    code = main([str(FIXTURES / "audio" / "speech.wav"), "--model", REPO, "--backend", "numpy", "--format", "txt"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert f"Downloading {REPO}" in captured.err
    assert H.local_state(REPO).complete
