"""The model catalog's repos on the fake hub (tests/fakehub.py), for the model dialog and the welcome: Moonshine
tiny and small from the fixture models at the catalog's pinned revisions, the official Voxtral as a gated repo,
and a custom repo."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from tests.conftest import FIXTURES
from tests.fakehub import FakeHub, padded

TINY = FIXTURES / "models" / "moon_tiny_like"
SMALL = FIXTURES / "models" / "moon_small_like"
# The small model's weights, made bigger than huggingface_hub's 10 MB write step so a cancel keeps some of them.
SMALL_WEIGHTS = padded((SMALL / "model.safetensors").read_bytes(), 20_000_000)


def fixture_files(folder: Path) -> dict[str, bytes]:
    """Every file of the fixture model ``folder``, by name."""
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def fake_mistral_files() -> dict[str, bytes]:
    """A Mistral-native layout that passes the structural check (one tiny tensor), for the gated repo."""
    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    weights = struct.pack("<Q", len(header)) + header + b"\0" * 8
    return {
        "consolidated.safetensors": weights,
        "params.json": b'{"dim": 8}',
        "tekken.json": b"{}",
        "model.safetensors": b"not downloaded",
        "README.md": b"# card",
    }


def serve_catalog(hub: FakeHub) -> None:
    """Moonshine tiny and small at the catalog's pinned revisions, the official Voxtral as a gated repo."""
    from engine.catalog import load_catalog

    cat = load_catalog()
    tiny, small = cat.by_key("moonshine-streaming-tiny"), cat.by_key("moonshine-streaming-small")
    vox = cat.by_key("voxtral-bf16-official")
    hub.add_repo(tiny.repo_id, fixture_files(TINY), commit=tiny.revision)
    hub.add_repo(small.repo_id, {**fixture_files(SMALL), "model.safetensors": SMALL_WEIGHTS}, commit=small.revision)
    hub.add_repo(vox.repo_id, fake_mistral_files(), commit=vox.revision, gated=True)
    hub.add_repo("acme/custom-moon", fixture_files(TINY))


def catalog_entry(key: str):
    """The catalog's entry called ``key``."""
    from engine.catalog import load_catalog

    return load_catalog().by_key(key)
