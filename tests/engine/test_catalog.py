"""The model catalog data (resources/catalog.json) and the per-machine recommendation."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from engine.catalog import (
    GIB,
    Catalog,
    CatalogEntry,
    Machine,
    catalog_path,
    chip_fit,
    find_entry,
    load_catalog,
    parse_catalog,
    recommend,
)
from engine.errors import ModelError


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def test_catalog_lists_the_real_models(catalog: Catalog) -> None:
    ids = {e.repo_id for e in catalog}
    assert ids == {
        "mistralai/Voxtral-Mini-4B-Realtime-2602",
        "mlx-community/Voxtral-Mini-4B-Realtime-2602-4bit",
        "mlx-community/Voxtral-Mini-4B-Realtime-2602-fp16",
        "UsefulSensors/moonshine-streaming-tiny",
        "UsefulSensors/moonshine-streaming-small",
        "UsefulSensors/moonshine-streaming-medium",
    }
    assert len({e.key for e in catalog}) == len(catalog)
    for e in catalog:
        assert e.name and e.description and e.license and e.languages and e.allow_patterns
        assert e.download_bytes > 0 and e.memory_bytes > e.download_bytes * 0.9
        assert e.family in ("voxtral_realtime", "moonshine_streaming")
        assert set(e.backends) == {"mlx", "numpy"}
        # a pin is a full hash and says where it comes from; no pin says so too
        assert e.revision is None or re.fullmatch(r"[0-9a-f]{40}", e.revision)
        assert e.revision_note
        if e.revision is None:
            assert "no commit hash" in e.revision_note
        for name in e.required_files:
            assert any(Path(name).match(p) for p in e.allow_patterns), (e.key, name)


def test_official_voxtral_downloads_only_what_the_engine_reads(catalog: Catalog) -> None:
    e = catalog.find("mistralai/Voxtral-Mini-4B-Realtime-2602")
    assert e.gated and "token" in e.gated_note
    assert set(e.allow_patterns) == {"consolidated.safetensors", "params.json", "tekken.json"}
    assert 8.8e9 < e.download_bytes < 9.0e9
    assert e.languages == ("ar", "de", "en", "es", "fr", "hi", "it", "nl", "pt", "zh", "ja", "ko", "ru")
    assert e.license == "Apache-2.0"


def test_moonshine_aliases_and_case(catalog: Catalog) -> None:
    for size in ("tiny", "small", "medium"):
        e = catalog.find(f"moonshine-ai/moonshine-streaming-{size}")
        assert e is not None and e.repo_id == f"UsefulSensors/moonshine-streaming-{size}"
        assert catalog.find(f"usefulsensors/MOONSHINE-streaming-{size}") is e
        assert e.languages == ("en",) and e.license == "MIT"
        assert set(e.required_files) == {"config.json", "model.safetensors", "tokenizer.json"}
    assert catalog.find("someone/else") is None
    assert find_entry("moonshine-ai/moonshine-streaming-tiny").key == "moonshine-streaming-tiny"


def test_from_dict_ignores_unknown_keys_and_checks_revisions() -> None:
    d = {
        "key": "k",
        "repo_id": "a/b",
        "name": "N",
        "family": "moonshine_streaming",
        "future_field": 1,
        "aliases": ["c/d"],
        "revision": None,
    }
    e = CatalogEntry.from_dict(d)
    assert e.aliases == ("c/d",) and e.matches("C/D") and e.revision is None
    with pytest.raises(ModelError, match="full commit hash"):
        CatalogEntry.from_dict({**d, "revision": "2769294"})
    with pytest.raises(ModelError, match="incomplete"):
        CatalogEntry.from_dict({"key": "k"})
    with pytest.raises(ModelError):
        parse_catalog({"models": "nope"})


def test_load_catalog_errors_are_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="missing"):
        load_catalog(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ModelError, match="not valid JSON"):
        load_catalog(bad)
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"models": [{"key": "k", "repo_id": "a/b", "name": "N", "family": "x"}]}))
    assert len(load_catalog(good)) == 1
    assert catalog_path().is_file()


@pytest.mark.parametrize(
    ("machine", "key"),
    [
        (Machine(32 * GIB, True, 10, "Apple M2 Pro"), "voxtral-4bit-mlx"),
        (Machine(16 * GIB, True, 8, "Apple M1"), "voxtral-4bit-mlx"),
        (Machine(8 * GIB, True, 8, "Apple M1"), "moonshine-streaming-medium"),
        (Machine(64 * GIB, False, 16), "moonshine-streaming-medium"),
        (Machine(16 * GIB, False, 4), "moonshine-streaming-small"),
        (Machine(8 * GIB, False, 2), "moonshine-streaming-small"),
        (Machine(2 * GIB, False, 2), "moonshine-streaming-tiny"),
    ],
)
def test_recommend(machine: Machine, key: str, catalog: Catalog) -> None:
    r = recommend(machine, catalog)
    assert r.entry.key == key
    assert r.reason.endswith(".") and r.reason.count(". ") == 0 and "\n" not in r.reason


def test_recommend_for_this_machine() -> None:
    m = Machine.current()
    assert m.ram_bytes > 0 and m.cpu_count >= 1
    assert recommend().entry in load_catalog().entries
    assert "GB memory" in m.describe()


def test_precision_fits_the_bandwidth_table(catalog: Catalog) -> None:
    four = catalog.by_key("voxtral-4bit-mlx")
    bf16 = catalog.by_key("voxtral-bf16-official")
    fp16 = catalog.by_key("voxtral-fp16-mlx")
    # notes/voxtral_realtime.md 6.2: bf16 not real time on base M chips; 4-bit fits everywhere.
    for chip in ("Apple M1", "Apple M2", "Apple M3", "Apple M4"):
        assert chip_fit(bf16, chip, catalog) == "too slow"
        assert chip_fit(four, chip, catalog) == "real time"
    assert chip_fit(fp16, "Apple M4 Pro", catalog) == "real time"
    assert chip_fit(fp16, "Apple M3 Max", catalog) in ("real time", "marginal")
    assert chip_fit(four, "Apple M5", catalog) == "real time"  # unlisted generation: tier fallback
    assert chip_fit(four, None, catalog) is None
    assert chip_fit(catalog.by_key("moonshine-streaming-tiny"), "Apple M1", catalog) is None
    table = {chip: chip_fit(four, chip, catalog) for chip in catalog.apple_bandwidth_gbs}
    assert set(table.values()) == {"real time"} and "M1" in table
    assert catalog.chip_bandwidth("Apple M2 Max") == 400
