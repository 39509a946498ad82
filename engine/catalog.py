"""The model catalog: the models livecap knows by name (``resources/catalog.json``) and a recommendation
for this machine.

``load_catalog()`` reads the data; ``CatalogEntry.from_dict`` ignores keys it does not know, so newer data
loads in older builds. ``recommend(Machine.current())`` picks an entry with a one-sentence reason;
``chip_fit(entry, chip)`` says whether a Voxtral precision keeps up in real time on an Apple chip, from the
memory bandwidth the precision needs per 80 ms step (notes/voxtral_realtime.md 6.2).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import re
import subprocess
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from .errors import ModelError
from .memory import total_memory

GB = 1_000_000_000
GIB = 1 << 30

# A precision keeps up with headroom when it needs at most this share of the chip's peak bandwidth, and is
# marginal up to MARGINAL (measured Metal runs reach 60-73 % of peak: notes/voxtral_realtime.md 6.2).
FITS, MARGINAL = 0.5, 0.75
# Conservative bandwidth (GB/s) by tier for chips the catalog's table does not list (a newer generation).
_TIER_FALLBACK = {"": 100, "Pro": 150, "Max": 300, "Ultra": 800}


def catalog_path() -> Path:
    """``resources/catalog.json``: next to the packages in a checkout, under ``sys._MEIPASS`` when frozen."""
    frozen = getattr(sys, "_MEIPASS", None)
    if frozen:
        candidate = Path(frozen) / "resources" / "catalog.json"
        if candidate.is_file():
            return candidate
    return Path(__file__).resolve().parents[1] / "resources" / "catalog.json"


def _fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


@dataclass(frozen=True)
class CatalogEntry:
    """One downloadable model. Sizes in bytes; ``revision`` is a full commit hash or None (newest)."""

    key: str
    repo_id: str
    name: str
    family: str
    aliases: tuple[str, ...] = ()
    revision: str | None = None
    revision_note: str = ""
    layout: str = ""
    precision: str = ""
    params: str = ""
    download_bytes: int = 0
    memory_bytes: int = 0
    languages: tuple[str, ...] = ()
    license: str = ""
    gated: bool = False
    gated_note: str = ""
    allow_patterns: tuple[str, ...] = ()
    required_files: tuple[str, ...] = ()
    backends: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    bandwidth_gbs: float | None = None
    description: str = ""

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CatalogEntry:
        """Build from one JSON object; unknown keys are ignored, lists become tuples."""
        if not isinstance(d, dict):
            raise ModelError("A model catalog entry is not a JSON object.")
        known = {k: v for k, v in d.items() if k in _fields(cls)}
        for k in ("aliases", "languages", "allow_patterns", "required_files"):
            if k in known:
                known[k] = tuple(known[k] or ())
        if known.get("backends") is None:
            known.pop("backends", None)
        try:
            entry = cls(**known)
        except TypeError as e:
            raise ModelError(f"A model catalog entry is incomplete ({e}).") from e
        if entry.revision is not None and not re.fullmatch(r"[0-9a-f]{40}", entry.revision):
            raise ModelError(f"The catalog revision for {entry.repo_id} is not a full commit hash.")
        return entry

    @property
    def repo_ids(self) -> tuple[str, ...]:
        """The main id and its aliases (the same repo under a renamed org)."""
        return (self.repo_id, *self.aliases)

    def matches(self, repo_id: str) -> bool:
        """Whether ``repo_id`` names this entry (case-insensitive, aliases included)."""
        return repo_id.strip().lower() in {r.lower() for r in self.repo_ids}


@dataclass(frozen=True)
class Catalog:
    entries: tuple[CatalogEntry, ...]
    apple_bandwidth_gbs: dict[str, float] = field(default_factory=dict)

    def __iter__(self):
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def find(self, repo_id: str) -> CatalogEntry | None:
        """The entry for ``repo_id`` (or one of its aliases), else None."""
        return next((e for e in self.entries if e.matches(repo_id)), None)

    def by_key(self, key: str) -> CatalogEntry:
        for e in self.entries:
            if e.key == key:
                return e
        raise KeyError(key)

    def chip_bandwidth(self, chip: str | None) -> float | None:
        """Peak memory bandwidth in GB/s of an Apple chip named like ``"Apple M2 Pro"``, else None."""
        if not chip:
            return None
        m = re.search(r"\bM(\d+)(?:\s+(Pro|Max|Ultra))?\b", chip)
        if not m:
            return None
        name = f"M{m.group(1)}" + (f" {m.group(2)}" if m.group(2) else "")
        if name in self.apple_bandwidth_gbs:
            return float(self.apple_bandwidth_gbs[name])
        return float(_TIER_FALLBACK[m.group(2) or ""])


def parse_catalog(data: dict[str, Any]) -> Catalog:
    if not isinstance(data, dict) or not isinstance(data.get("models"), list):
        raise ModelError("The model catalog has no list of models.")
    entries = tuple(CatalogEntry.from_dict(d) for d in data["models"])
    bw = data.get("apple_bandwidth_gbs") or {}
    return Catalog(entries, {str(k): float(v) for k, v in bw.items()})


@lru_cache(maxsize=4)
def _load(path: str, mtime: float) -> Catalog:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise ModelError(f"The model catalog {path} cannot be read ({e.strerror or e}).") from e
    except ValueError as e:
        raise ModelError(f"The model catalog {path} is not valid JSON.") from e
    return parse_catalog(data)


def load_catalog(path: str | os.PathLike | None = None) -> Catalog:
    """The catalog from ``path`` (default ``catalog_path()``); ModelError with one sentence when unreadable."""
    p = Path(path) if path is not None else catalog_path()
    try:
        mtime = p.stat().st_mtime
    except OSError as e:
        raise ModelError(f"The model catalog {p} is missing.") from e
    return _load(str(p), mtime)


def find_entry(repo_id: str) -> CatalogEntry | None:
    """The catalog entry for ``repo_id``, or None (also when the catalog itself cannot be read)."""
    try:
        return load_catalog().find(repo_id)
    except ModelError:
        return None


# ---------------------------------------------------------------------------------------------------------
# Machine and recommendation


@dataclass(frozen=True)
class Machine:
    """What the recommendation looks at: memory, Apple Silicon or not, CPU cores, the chip name if known."""

    ram_bytes: int
    apple_silicon: bool
    cpu_count: int = 4
    chip: str | None = None

    @classmethod
    def current(cls) -> Machine:
        apple = sys.platform == "darwin" and platform.machine() == "arm64"
        return cls(
            ram_bytes=_ram_bytes(),
            apple_silicon=apple,
            cpu_count=os.cpu_count() or 1,
            chip=_apple_chip() if apple else None,
        )

    def describe(self) -> str:
        """``"16 GB memory, Apple M2"`` / ``"8 GB memory, 4 CPU cores"``."""
        mem = f"{self.ram_bytes / GIB:.0f} GB memory"
        if self.apple_silicon:
            return f"{mem}, {self.chip or 'Apple Silicon'}"
        return f"{mem}, {self.cpu_count} CPU cores"


def _ram_bytes() -> int:
    return total_memory() or 8 * GIB  # unknown: assume a common size rather than fail


def _apple_chip() -> str | None:
    try:
        out = subprocess.run(
            ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=2
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out or None


@dataclass(frozen=True)
class Recommendation:
    entry: CatalogEntry
    reason: str


def recommend(machine: Machine | None = None, catalog: Catalog | None = None) -> Recommendation:
    """The catalog entry that suits ``machine`` best, with a one-sentence reason.

    Apple Silicon with 16 GB or more: Voxtral 4-bit (13 languages, real time on every M chip). Other Apple
    Silicon: Moonshine medium. Without Apple Silicon (NumPy on the CPU): Moonshine medium on 8+ cores and
    16 GB, tiny under 4 GB, else small.
    """
    machine = machine or Machine.current()
    catalog = catalog or load_catalog()
    gb = machine.ram_bytes / GIB

    def pick(key: str) -> CatalogEntry:
        return catalog.by_key(key)

    if machine.apple_silicon:
        if gb >= 15.5:
            e = pick("voxtral-4bit-mlx")
            return Recommendation(
                e,
                f"With {gb:.0f} GB on Apple Silicon, Voxtral 4-bit fits in memory (about "
                f"{e.memory_bytes / GB:.1f} GB), keeps up in real time on every M chip and "
                f"understands {len(e.languages)} languages.",
            )
        e = pick("moonshine-streaming-medium")
        return Recommendation(
            e,
            f"With {gb:.0f} GB, Voxtral would leave too little memory, so Moonshine medium "
            "(English only) is the most accurate model that stays light on this Mac.",
        )
    if gb < 3.5:
        e = pick("moonshine-streaming-tiny")
        return Recommendation(
            e,
            f"With only {gb:.1f} GB of memory and no Apple GPU, Moonshine tiny (English "
            "only) is the model that stays real time here.",
        )
    if machine.cpu_count >= 8 and gb >= 15.5:
        e = pick("moonshine-streaming-medium")
        return Recommendation(
            e,
            f"Without an Apple GPU the models run on the CPU, and with {machine.cpu_count} "
            "cores Moonshine medium (English only) is accurate and still real time.",
        )
    e = pick("moonshine-streaming-small")
    return Recommendation(
        e,
        f"Without an Apple GPU the models run on the CPU ({machine.cpu_count} cores), where "
        "Moonshine small (English only) is the best balance of accuracy and speed; Voxtral "
        "needs an Apple Silicon GPU to keep up.",
    )


def chip_fit(entry: CatalogEntry, chip: str | None, catalog: Catalog | None = None) -> str | None:
    """``"real time"``, ``"marginal"`` or ``"too slow"`` for a Voxtral entry on an Apple ``chip``; None when
    the entry has no bandwidth figure or the chip is unknown."""
    if entry.bandwidth_gbs is None:
        return None
    catalog = catalog or load_catalog()
    bw = catalog.chip_bandwidth(chip)
    if not bw:
        return None
    share = entry.bandwidth_gbs / bw
    if share <= FITS:
        return "real time"
    if share <= MARGINAL:
        return "marginal"
    return "too slow"
