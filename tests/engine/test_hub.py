"""engine.hub and engine.install against a fake hub on loopback (tests/fakehub.py) with the real huggingface_hub
client, which runs in the download child process (engine.hub_worker).

HF_HOME points into tmp_path and HF_ENDPOINT at the fake hub; any other network access fails the test (the child
process can only reach what the fake hub serves: its endpoint is the fake hub's).
"""

from __future__ import annotations

import errno
import hashlib
import io
import logging
import os
import re
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

from engine import hub as H
from engine import install as I
from engine.catalog import load_catalog
from engine.errors import ModelError
from tests.conftest import FIXTURES
from tests.fakehub import FakeHub, block_network, hub_env, padded

TINY = FIXTURES / "models" / "moon_tiny_like"
SMALL = FIXTURES / "models" / "moon_small_like"
REPO = "acme/moon-tiny"
BIG = "model.safetensors"
STEP = 10 * 1024 * 1024  # huggingface_hub writes a download to disk in steps of this size
BIG_DATA = padded((TINY / BIG).read_bytes(), 22_000_000)  # ~26 MB: more than two write steps


def tiny_files(**replace: bytes) -> dict[str, bytes]:
    return {**{p.name: p.read_bytes() for p in TINY.iterdir() if p.is_file()}, **replace}


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    block_network(monkeypatch)
    with FakeHub() as hub:
        hub_env(monkeypatch, hub, tmp_path / "hf")
        hub.add_folder(REPO, TINY)
        hub.add_folder("acme/moon-small", SMALL)
        hub.add_repo("acme/moon-big", tiny_files(**{BIG: BIG_DATA}))
        yield hub


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _snapshots(cache: Path, repo: str) -> list[Path]:
    """Snapshot folders that hold a model marker (config.json or params.json): what a loader would try."""
    d = cache / ("models--" + repo.replace("/", "--")) / "snapshots"
    return (
        sorted(p for p in d.iterdir() if (p / "config.json").exists() or (p / "params.json").exists())
        if d.is_dir()
        else []
    )


def _kept(repo: str) -> list[Path]:
    d = H.partial_dir(repo)
    return sorted(d.iterdir()) if d.is_dir() else []


def _one_sentence(msg: str) -> None:
    assert "\n" not in msg and msg.endswith(".") and len(msg) < 300, msg


def _resolve_gets(hub: FakeHub, name: str = "") -> list:
    return [
        r
        for r in hub.requests
        if r.method == "GET" and ("/resolve/" in r.path or "/cdn/" in r.path) and r.path.endswith(name)
    ]


# -- environment -------------------------------------------------------------------------------------------


def test_environment_is_read_at_call_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (
        "HF_HOME",
        "HF_HUB_CACHE",
        "HUGGINGFACE_HUB_CACHE",
        "HF_ENDPOINT",
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HF_TOKEN_PATH",
    ):
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
    assert H.timeout_s() == H.DEFAULT_TIMEOUT_S
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "3")
    assert H.timeout_s() == 3.0


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
    fake.rate = 8_000_000  # ~0.5 s for the weights: several reports within the file
    events: list[H.Progress] = []
    path = I.install_model(REPO, progress=events.append)
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
    assert len({e.done for e in events if e.file == BIG}) >= 3  # within-file progress, not only file boundaries
    assert any(e.speed > 0 and e.eta is not None for e in events)
    assert events[-1].file == "config.json"  # the file that makes the folder a model comes last

    state = I.local_state(REPO)
    assert state is not None and state.complete and state.path == path and state.size_on_disk == total
    assert I.check_files(path) == ("moonshine_streaming", "hf")
    # The standard HF cache layout, written by huggingface_hub itself: other tools find the files.
    from huggingface_hub import scan_cache_dir, try_to_load_from_cache

    assert try_to_load_from_cache(REPO, BIG, cache_dir=H.cache_dir()) == str(path / BIG)
    info = scan_cache_dir(H.cache_dir())
    (repo,) = info.repos
    assert repo.repo_id == REPO and repo.size_on_disk == total and not info.warnings
    assert not _kept(REPO)

    # A second download asks the hub for the file list only.
    fake.requests.clear()
    assert I.install_model(REPO) == path
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


def _wait_for(events: list, predicate, t: threading.Thread, box: dict, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not any(predicate(e) for e in list(events)):
        assert time.monotonic() < deadline and t.is_alive(), box
        time.sleep(0.02)


def test_cancel_mid_file_then_resume_fetches_only_the_rest(fake: FakeHub) -> None:
    fake.rate = 6_000_000  # bytes/s: the 26 MB weight file takes ~4 s
    token = H.CancelToken()
    events: list[H.Progress] = []
    t, box = _run_in_thread(I.install_model, "acme/moon-big", progress=events.append, cancel=token)
    _wait_for(events, lambda e: e.file == BIG and e.done > STEP + 3_000_000, t, box)
    t0 = time.monotonic()
    token.cancel()
    t.join(5)
    cancel_s = time.monotonic() - t0
    assert not t.is_alive() and cancel_s < 2.0, cancel_s
    err = box.get("error")
    assert isinstance(err, H.DownloadCancelled), box
    _one_sentence(str(err))

    (part,) = _kept("acme/moon-big")
    kept = part.stat().st_size
    assert kept >= STEP and kept < len(BIG_DATA)  # everything but the last write step is kept
    assert part.read_bytes() == BIG_DATA[:kept]
    assert _snapshots(H.cache_dir(), "acme/moon-big") == []  # nothing a loader could mistake for a model
    state = I.local_state("acme/moon-big")
    assert state is not None and not state.complete and state.partial_bytes >= kept
    # The library removes its temporary file on the interrupt; one left by a run that ended first (killed, or
    # slower than the stop's grace under load) is only a second name of the kept part: no extra disk.
    blobs = H.cache_dir() / "models--acme--moon-big" / "blobs"
    assert all(p.stat().st_ino == part.stat().st_ino for p in blobs.glob("*.incomplete"))
    # Such a leftover (as a killed run leaves it) goes when the next run resumes from the part: no disk leak.
    etag = part.name
    os.link(part, blobs / f"{etag}.0badc0de.incomplete")

    fake.rate = None
    fake.requests.clear()
    fake.body_bytes.clear()
    events.clear()
    path = I.install_model("acme/moon-big", progress=events.append)
    assert (path / BIG).read_bytes() == BIG_DATA
    (get,) = _resolve_gets(fake, BIG)
    assert get.headers.get("range") == f"bytes={kept}-"
    assert fake.body_bytes[BIG] == len(BIG_DATA) - kept  # the second call fetched only the rest
    dones = [e.done for e in events]
    assert dones == sorted(dones) and dones[-1] == events[-1].total
    assert not _kept("acme/moon-big")
    assert not list(H.cache_dir().glob("models--acme--moon-big/blobs/*.incomplete"))


def test_cancel_while_the_connection_is_stalled_is_immediate(fake: FakeHub) -> None:
    fake.stall_at[BIG] = STEP + 1_000_000  # the server goes silent there
    token = H.CancelToken()
    events: list[H.Progress] = []
    t, box = _run_in_thread(I.install_model, "acme/moon-big", progress=events.append, cancel=token)
    _wait_for(events, lambda e: e.file == BIG and e.done >= STEP, t, box)
    time.sleep(0.3)
    t0 = time.monotonic()
    token.cancel()
    t.join(5)
    assert not t.is_alive() and time.monotonic() - t0 < 2.0
    assert isinstance(box.get("error"), H.DownloadCancelled), box
    assert _snapshots(H.cache_dir(), "acme/moon-big") == []
    assert _kept("acme/moon-big")[0].stat().st_size >= STEP


def test_a_stalled_transfer_fails_with_one_sentence(fake: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(H, "STALL_LIMIT_S", 2.0)
    fake.stall_at[BIG] = STEP + 1_000_000
    t0 = time.monotonic()
    with pytest.raises(H.HubUnreachableError) as exc:
        I.install_model("acme/moon-big")
    assert time.monotonic() - t0 < 10
    _one_sentence(str(exc.value))
    assert "sent nothing for 2 s" in str(exc.value) and "resumes" in str(exc.value)
    fake.release.set()
    time.sleep(0.5)  # the stalled connection's handler writes into the closed socket once, then ends
    fake.body_bytes.clear()
    kept = _kept("acme/moon-big")[0].stat().st_size
    assert I.install_model("acme/moon-big").is_dir()
    assert fake.body_bytes[BIG] == len(BIG_DATA) - kept


def test_a_silent_hub_fails_within_the_timeout(fake: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "1")
    fake.silent = True
    t0 = time.monotonic()
    with pytest.raises(H.HubUnreachableError) as exc:
        I.install_model(REPO)
    assert time.monotonic() - t0 < 5
    _one_sentence(str(exc.value))
    assert "did not answer within 1 s" in str(exc.value) and fake.url in str(exc.value)


def test_dropped_connection_resumes_within_the_same_download(fake: FakeHub) -> None:
    fake.drop_at[BIG] = STEP + 2_000_000
    path = I.install_model("acme/moon-big")
    assert (path / BIG).read_bytes() == BIG_DATA
    ranges = [r.headers.get("range") for r in _resolve_gets(fake, BIG)]
    assert ranges[0] is None and ranges[1] == f"bytes={STEP}-"
    assert fake.body_bytes[BIG] == len(BIG_DATA) + 2_000_000  # only what was not yet on disk came again


def test_network_gone_mid_file_then_resume_later(fake: FakeHub) -> None:
    fake.drop_at[BIG] = STEP + 1_200_000
    fake.down_after_drop = True
    with pytest.raises(H.HubUnreachableError) as exc:
        I.install_model("acme/moon-big")
    _one_sentence(str(exc.value))
    assert "resumes" in str(exc.value)
    (part,) = _kept("acme/moon-big")
    assert part.stat().st_size == STEP
    assert _snapshots(H.cache_dir(), "acme/moon-big") == []
    fake.down = False
    fake.requests.clear()
    fake.body_bytes.clear()
    path = I.install_model("acme/moon-big")
    assert (path / BIG).read_bytes() == BIG_DATA
    assert _resolve_gets(fake, BIG)[0].headers.get("range") == f"bytes={STEP}-"
    assert fake.body_bytes[BIG] == len(BIG_DATA) - STEP


def test_hub_unreachable(fake: FakeHub) -> None:
    fake.down = True
    with pytest.raises(H.HubUnreachableError) as exc:
        I.install_model(REPO)
    _one_sentence(str(exc.value))
    assert fake.url in str(exc.value)


def test_gated_repo_needs_a_token_with_access(fake: FakeHub, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fake.add_folder("acme/gated", TINY, gated=True)
    with pytest.raises(H.GatedModelError) as exc:
        I.install_model("acme/gated")
    msg = str(exc.value)
    _one_sentence(msg)
    assert "gated" in msg and "token" in msg and "terms" in msg
    assert fake.served("HEAD", "acme/gated")[-1].headers.get("authorization") is None

    with pytest.raises(H.GatedModelError) as exc:
        I.install_model("acme/gated", token="hf_no_access_secret")
    msg = str(exc.value)
    _one_sentence(msg)
    assert "no access" in msg and "hf_no_access_secret" not in msg

    path = I.install_model("acme/gated", token="hf_good_token")
    assert (path / BIG).read_bytes() == (TINY / BIG).read_bytes()
    assert fake.served("HEAD", "acme/gated")[-1].headers.get("authorization") == "Bearer hf_good_token"
    for secret in ("hf_good_token", "hf_no_access_secret"):
        assert secret not in caplog.text
    assert _snapshots(H.cache_dir(), "acme/gated") == [path]


def test_saved_token_is_used(fake: FakeHub) -> None:
    fake.add_folder("acme/gated", TINY, gated=True)
    H.save_token("hf_good_token")
    assert I.install_model("acme/gated").is_dir()


def test_token_stays_on_the_hub_when_the_file_is_on_a_cdn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    block_network(monkeypatch)
    with FakeHub(cdn=True) as hub:
        hub_env(monkeypatch, hub, tmp_path / "hf")
        hub.add_folder("acme/gated", TINY, gated=True)
        path = I.install_model("acme/gated", token="hf_good_token")
        assert _sha(path / BIG) == _sha(TINY / BIG)
        (cdn_get,) = hub.served("GET", "/cdn/")
        assert "authorization" not in cdn_get.headers


def test_resume_through_a_cdn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    block_network(monkeypatch)
    with FakeHub(cdn=True) as hub:
        hub_env(monkeypatch, hub, tmp_path / "hf")
        hub.add_repo("acme/moon-big", tiny_files(**{BIG: BIG_DATA}))
        hub.drop_at[BIG] = STEP + 500_000
        hub.down_after_drop = True
        with pytest.raises(H.HubUnreachableError):
            I.install_model("acme/moon-big")
        hub.down = False
        hub.requests.clear()
        hub.body_bytes.clear()
        path = I.install_model("acme/moon-big")
        assert (path / BIG).read_bytes() == BIG_DATA
        (cdn_get,) = hub.served("GET", "/cdn/")
        assert cdn_get.headers.get("range") == f"bytes={STEP}-"
        assert hub.body_bytes[BIG] == len(BIG_DATA) - STEP


def test_not_found(fake: FakeHub) -> None:
    with pytest.raises(H.ModelNotFoundError) as exc:
        I.install_model("acme/nothing-here")
    _one_sentence(str(exc.value))
    assert "acme/nothing-here" in str(exc.value) and "not found" in str(exc.value)
    assert not (H.cache_dir() / "models--acme--nothing-here").exists()
    with pytest.raises(H.ModelNotFoundError) as exc:
        I.install_model(REPO, revision="0" * 40, pin_fallback=False)
    assert "revision" in str(exc.value)
    with pytest.raises(H.ModelNotFoundError):
        I.install_model(REPO, allow_patterns=["*.onnx"])


def test_a_pinned_revision_gone_from_the_hub_falls_back_to_the_default_branch(fake: FakeHub, caplog) -> None:
    path = I.install_model(REPO, revision="0" * 40)
    assert path.name == fake.repos[REPO].commit
    assert "is not on the hub; downloading its default branch instead" in caplog.text
    assert any(r.path.endswith(f"/revision/{'0' * 40}") for r in fake.served("GET", "/api/models/"))


def test_not_enough_disk_space(fake: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    real = shutil.disk_usage
    monkeypatch.setattr(H.shutil, "disk_usage", lambda p: usage(10**9, 10**9 - 10**6, 10**6))
    with pytest.raises(H.DiskSpaceError) as exc:
        I.install_model(REPO)
    msg = str(exc.value)
    _one_sentence(msg)
    assert "Not enough free disk space" in msg and "1.0 MB" in msg
    # it adds up: a 22 MB download with 31 MB free read "it needs 22.2 MB more, but only 31.5 MB is free"
    units = {"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9}
    sizes = [float(n) * units[u] for n, u in re.findall(r"([0-9.]+) (B|kB|KB|MB|GB)\b", msg)]
    total, download, spare, free, short = sizes
    assert abs(total - download - spare) < 0.002 * total and free == 1e6 and abs(short - (total - free)) < 1e5
    assert not _resolve_gets(fake) and not fake.served("HEAD") and _snapshots(H.cache_dir(), REPO) == []
    assert not (H.cache_dir() / "models--acme--moon-tiny").exists()  # nothing written
    monkeypatch.setattr(H.shutil, "disk_usage", real)
    assert I.install_model(REPO).is_dir()


def test_a_full_disk_is_one_sentence() -> None:
    err = H.translate(OSError(errno.ENOSPC, "No space left on device"), REPO, token_sent=False)
    assert isinstance(err, H.DiskSpaceError) and "filled up" in str(err)
    _one_sentence(str(err))


def test_offline_mode(fake: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    path = I.install_model(REPO)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    fake.requests.clear()
    assert I.install_model(REPO) == path
    assert I.fetch_model(REPO) == path
    assert fake.requests == []
    with pytest.raises(H.OfflineError) as exc:
        I.install_model("acme/moon-small")
    msg = str(exc.value)
    _one_sentence(msg)
    assert "HF_HUB_OFFLINE" in msg and "acme/moon-small" in msg
    with pytest.raises(H.OfflineError):
        H.plan_download("acme/moon-small")
    with pytest.raises(ModelError):
        I.fetch_model("acme/moon-small")
    assert fake.requests == []
    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert I.install_model("acme/moon-small").is_dir()


def test_delete(fake: FakeHub) -> None:
    path = I.install_model(REPO)
    size = I.local_state(REPO).size_on_disk
    assert H.delete_model(REPO) == size
    assert not path.exists() and I.local_state(REPO) is None


def test_deleting_a_model_deletes_its_8_bit_copy(
    fake: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 8/4-bit copy made from a model stayed in the cache after the model was deleted (a Voxtral copy is
    gigabytes): it goes with the model, and counts in the space freed."""
    pytest.importorskip("onnxruntime")
    from engine import load_model

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = I.install_model(REPO)
    load_model(path, backend="numpy", quantize=8)
    (copy,) = list((tmp_path / "cache").rglob("*.safetensors"))
    size = I.local_state(REPO).size_on_disk + copy.stat().st_size
    assert H.delete_model(REPO) >= size
    assert not copy.exists()
    # A partial download is deleted too.
    fake.drop_at[BIG] = STEP + 800_000
    fake.down_after_drop = True
    with pytest.raises(H.HubUnreachableError):
        I.install_model("acme/moon-big")
    state = I.local_state("acme/moon-big")
    assert state is not None and state.partial_bytes >= STEP and not state.complete
    assert H.delete_model("acme/moon-big") >= STEP
    assert H.scan_models() == {} and not _kept("acme/moon-big")


def test_unusable_download_is_removed_with_the_loader_sentence(fake: FakeHub) -> None:
    files = tiny_files()
    fake.add_repo("acme/bert", {**files, "config.json": b'{"model_type": "bert"}'})
    with pytest.raises(ModelError) as exc:
        I.install_model("acme/bert")
    _one_sentence(str(exc.value))
    assert "Unsupported model type 'bert'" in str(exc.value)
    assert _snapshots(H.cache_dir(), "acme/bert") == []
    state = I.local_state("acme/bert")
    assert state is None or not state.complete

    truncated = {**files, BIG: files[BIG][: len(files[BIG]) // 2]}
    fake.add_repo("acme/truncated", truncated)
    with pytest.raises(ModelError) as exc:
        I.install_model("acme/truncated")
    assert "safetensors" in str(exc.value) or "truncated" in str(exc.value)
    assert _snapshots(H.cache_dir(), "acme/truncated") == []

    with pytest.raises(ModelError) as exc:
        I.install_model(REPO, required=["tekken.json"])
    assert "tekken.json" in str(exc.value)
    assert _snapshots(H.cache_dir(), REPO) == []


def test_check_folder(tmp_path: Path) -> None:
    from engine.loader import check_folder

    assert check_folder(TINY, full=True) == ("moonshine_streaming", "hf")
    with pytest.raises(ModelError) as exc:
        check_folder(tmp_path, full=True)
    _one_sentence(str(exc.value))
    assert "No model found" in str(exc.value)


# -- layering and the library's public API ----------------------------------------------------------------------


def _imports(module: str) -> set[str]:
    import ast

    tree = ast.parse((Path(__file__).resolve().parents[2] / "engine" / f"{module}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found.update([node.module] if node.module else [a.name for a in node.names])
    return found


def test_the_layers_import_downwards_only() -> None:
    assert _imports("formats") <= {"errors"}
    assert not _imports("hub") & {"install", "loader", "catalog", "formats"}
    assert _imports("hub_worker") <= {"hub", "formats"}
    assert "loader" not in _imports("install")
    assert "install" in _imports("loader")


def test_no_code_reaches_into_huggingface_hub_internals() -> None:
    import re

    root = Path(__file__).resolve().parents[2]
    bad = re.compile(
        r"huggingface_hub\.(constants|utils\._|_|file_download)|huggingface_hub\.utils import _|"
        r"constants\.HF_|\.extensions\[\"network_stream|blobs/.*\.incomplete\""
    )
    offenders = [
        f"{p.relative_to(root)}:{i}"
        for folder in ("engine", "app", "packaging")
        for p in (root / folder).rglob("*.py")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if bad.search(line)
    ]
    assert offenders == []


def test_the_frozen_entry_point_runs_the_download_worker(fake: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PyInstaller bundle starts itself with the worker flag (packaging/livecap_main.py); here the entry point
    script stands in for the bundle's executable."""
    from engine.hub import WORKER_FLAG

    root = Path(__file__).resolve().parents[2]
    entry = root / "packaging" / "livecap_main.py"
    assert f'["{WORKER_FLAG}"]' in entry.read_text()
    monkeypatch.setattr(H, "_worker_command", lambda: [sys.executable, str(entry), WORKER_FLAG])
    path = I.install_model(REPO)
    assert (path / BIG).read_bytes() == (TINY / BIG).read_bytes()


# -- the CLI path ------------------------------------------------------------------------------------------------


def test_fetch_model_uses_the_catalog_and_then_works_without_the_hub(fake: FakeHub) -> None:
    from engine import load_model
    from engine.loader import resolve_source

    entry = load_catalog().find("UsefulSensors/moonshine-streaming-tiny")
    fake.add_repo(
        entry.repo_id, tiny_files(**{"model.onnx": b"x" * 1000, "README.md": b"# card"}), commit=entry.revision
    )
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
    path = I.fetch_model("UsefulSensors/moonshine-streaming-small")
    assert "models--moonshine-ai--moonshine-streaming-small" in str(path)
    state = I.local_state(entry.repo_ids, entry.revision, entry.required_files)
    assert state.complete and state.repo_id == "moonshine-ai/moonshine-streaming-small"


def test_fetch_model_progress_on_stderr(fake: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self):
            return True

    err = Tty()
    monkeypatch.setattr(sys, "stderr", err)
    I.fetch_model(REPO)
    out = err.getvalue()
    assert REPO in out and "100%" in out and "MB" in out

    plain = io.StringIO()
    monkeypatch.setattr(sys, "stderr", plain)
    I.fetch_model("acme/moon-small")
    assert plain.getvalue().startswith("Downloading acme/moon-small (")


def test_cli_downloads_a_missing_model(fake: FakeHub, capsys: pytest.CaptureFixture) -> None:
    from engine.cli import main

    code = main([str(FIXTURES / "audio" / "speech.wav"), "--model", REPO, "--backend", "numpy", "--format", "txt"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert f"Downloading {REPO}" in captured.err
    assert I.local_state(REPO).complete


def test_progress_held_back_by_the_throttle_is_sent_when_the_network_goes_quiet() -> None:
    # The last count before a stall used to wait for a next message that never came: the UI showed stale bytes.
    plan = H.Plan("acme/x", "main", "c" * 40, (H.RemoteFile("w.safetensors", 1000, "e"),), total=1000, have=0)
    seen: list[H.Progress] = []
    meter = H._Meter(plan, seen.append)
    meter.start_file(1, "w.safetensors", 0)
    meter.bytes(400, 400)  # within the throttle interval of the start: held back
    assert seen[-1].done == 0
    meter.flush()  # too early still: nothing new
    assert seen[-1].done == 0
    time.sleep(H.PROGRESS_INTERVAL_S + 0.02)
    meter.flush()
    assert seen[-1].done == 400
    n = len(seen)
    meter.flush()  # nothing pending any more
    assert len(seen) == n


def test_progress_never_goes_back_when_a_file_starts_over() -> None:
    """A dropped connection made huggingface_hub fetch the file again from its start: the bar went from 6.0 MB back
    to 98.6 kB (first-run QA), which looks like a failure. The count holds until the new try passes it; the speed
    still counts what arrives."""
    plan = H.Plan("acme/x", "main", "c" * 40, (H.RemoteFile("w.safetensors", 1000, "e"),), total=1000, have=0)
    seen: list[H.Progress] = []
    meter = H._Meter(plan, seen.append)
    meter.start_file(1, "w.safetensors", 0)
    for current, network in ((600, 600), (10, 610), (300, 900), (700, 1300)):
        time.sleep(H.PROGRESS_INTERVAL_S + 0.01)
        meter.bytes(current, network)
    assert [p.done for p in seen[1:]] == [600, 600, 600, 700]


# -- QA: a retry after a resume, the parent going away, the agent lookup -----------------------------------------


def test_a_drop_after_a_resume_leaves_no_second_name_of_the_finished_file(fake: FakeHub) -> None:
    """QA: cancel mid-file, resume while the hub drops the connection once (huggingface_hub retries by itself and
    finishes): the model showed twice its size, also after a restart. The retry kept the library's file a second
    time while the part was already a name of it; renaming one name of a file onto another does nothing, so
    ``<sha>.link`` outlived the download (a second name of the blob) and counted as partial bytes."""
    fake.rate = 6_000_000
    token = H.CancelToken()
    events: list[H.Progress] = []
    t, box = _run_in_thread(I.install_model, "acme/moon-big", progress=events.append, cancel=token)
    _wait_for(events, lambda e: e.file == BIG and e.done > STEP + 3_000_000, t, box)
    token.cancel()
    t.join(5)
    assert isinstance(box.get("error"), H.DownloadCancelled), box
    fake.rate = None
    fake.requests.clear()
    fake.drop_at[BIG] = STEP + 8_000_000  # ~18 MB, past the replayed part
    path = I.install_model("acme/moon-big")
    assert (path / BIG).read_bytes() == BIG_DATA
    assert len(_resolve_gets(fake, BIG)) == 2  # the drop happened, and huggingface_hub's own retry finished
    assert not _kept("acme/moon-big")
    assert (path / BIG).resolve().stat().st_nlink == 1
    total = sum(len(d) for d in tiny_files(**{BIG: BIG_DATA}).values() if d)
    state = I.local_state("acme/moon-big")
    assert state is not None and state.complete and state.partial_bytes == 0
    assert H.kept_bytes("acme/moon-big") == state.size_on_disk <= total


def test_a_leftover_second_name_of_a_finished_file_is_not_counted_and_goes(fake: FakeHub) -> None:
    """What an earlier livecap left (the test above): ``.livecap-partial/<sha>.link``, a second name of the
    finished blob. It holds nothing to resume from: the scan neither counts it nor keeps it."""
    path = I.install_model(REPO)
    blob = (path / BIG).resolve()
    partial = H.partial_dir(REPO)
    partial.mkdir(exist_ok=True)
    os.link(blob, partial / f"{blob.name}.link")
    os.link(blob, partial / blob.name)  # a part left at the moment its file was finished
    state = I.local_state(REPO)
    assert state is not None and state.complete and state.partial_bytes == 0
    assert H.kept_bytes(REPO) == state.size_on_disk
    assert not _kept(REPO) and blob.stat().st_nlink == 1


def test_a_kept_part_and_its_second_name_count_once(fake: FakeHub) -> None:
    """A part and a second name of it (a run ended between making the name and moving it into place) are one file
    on disk: counted once."""
    partial = H.partial_dir("acme/moon-big")
    partial.mkdir(parents=True)
    part = partial / ("a" * 64)
    part.write_bytes(b"x" * 1000)
    os.link(part, partial / f"{part.name}.link")
    (H.cache_dir() / "models--acme--moon-big" / "blobs").mkdir()
    (H.cache_dir() / "models--acme--moon-big" / "snapshots").mkdir()
    (H.cache_dir() / "models--acme--moon-big" / "refs").mkdir()
    assert H.kept_bytes("acme/moon-big") == 1000


def test_the_report_thread_ends_quietly_when_the_parent_has_gone() -> None:
    """QA: quitting during a download printed ``Exception in thread livecap-report: ... BrokenPipeError`` from the
    child. The report thread ends quietly; the main thread's next message still fails, so the child stops."""
    from engine import hub_worker as W

    class GonePipe(io.StringIO):
        def write(self, s: str) -> int:
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    reporter = W.Reporter(GonePipe())
    reporter.position = 1000  # a count not yet reported: the thread sends it
    failures: list = []
    hook = threading.excepthook
    threading.excepthook = failures.append
    try:
        t = threading.Thread(target=reporter.tick, daemon=True)
        t.start()
        t.join(3)
    finally:
        threading.excepthook = hook
    assert not t.is_alive() and failures == []
    with pytest.raises(BrokenPipeError):
        reporter.send("bytes", 1000, 1000)


def test_a_child_whose_parent_has_gone_ends_without_a_traceback(fake: FakeHub) -> None:
    """The child of a parent that went (the app quit during a download, its end of the pipe closed): it ends, and
    prints no traceback."""
    import json
    import subprocess

    fake.rate = 4_000_000
    plan = H.plan_download("acme/moon-big")
    job = {
        "env": {"HF_HUB_DISABLE_TELEMETRY": "1"},
        "repo_id": plan.repo_id,
        "revision": plan.revision,
        "commit": plan.commit,
        "endpoint": H.endpoint(),
        "cache_dir": str(H.cache_dir()),
        "token": False,
        "partial_dir": str(H.partial_dir(plan.repo_id)),
        "files": [[f.name, f.size, f.etag] for f in plan.files],
    }
    proc = subprocess.Popen(
        H._worker_command(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=H._worker_env(),
        text=True,
    )
    try:
        proc.stdin.write(json.dumps(job) + "\n")
        proc.stdin.close()
        for line in proc.stdout:
            kind, *rest = json.loads(line)
            if kind == "bytes" and rest[0] > 2_000_000:
                break
        proc.stdout.close()  # the parent is gone
        err = proc.stderr.read()
        assert proc.wait(30) == 0
    finally:
        proc.kill()
    assert "Traceback" not in err and "Exception" not in err, err


def test_a_download_does_not_ask_the_hub_for_its_agent_list(fake: FakeHub, tmp_path: Path) -> None:
    """QA: a download made the hub log ``GET /api/agent-harnesses`` (huggingface_hub's check whether an AI agent
    runs it, for its user-agent header). livecap goes online only for the model asked for; that check is part of
    what ``HF_HUB_DISABLE_TELEMETRY`` turns off. A process of its own, so huggingface_hub reads the environment
    afresh: no telemetry switch set by the user."""
    import subprocess

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HF_HUB_DISABLE_TELEMETRY", "DISABLE_TELEMETRY", "DO_NOT_TRACK")
    }
    code = "from engine import install; install.install_model('acme/moon-tiny')"
    subprocess.run(
        [sys.executable, "-c", code], env=env, check=True, cwd=Path(__file__).resolve().parents[2], timeout=120
    )
    assert _resolve_gets(fake, BIG)  # it downloaded
    assert not fake.served(contains="agent"), [r.path for r in fake.requests]
