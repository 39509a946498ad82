"""Quantization on load, for every family: affine 4/6/8-bit matrices (``Backend.quantize``, MLX layout),
cached as a safetensors file next to nothing the user owns (platformdirs user cache, keyed by every
checkpoint file (all shards of a sharded checkpoint: path, size, mtime, ctime, inode and a digest of 16 slices
of its bytes, so that another version with the same size and mtime, as archives with fixed times give, is not
taken for it), the bit width, the group size, the layout version, the family's list of matrices and the
backend), so the next start loads the converted matrices directly instead of converting again. A copy is
written under a temporary name, flushed to disk and renamed; beside it a small JSON file lists its checkpoint
files and the copy's CRC-32, so that ``sweep`` can delete the copies whose checkpoint changed or went (a model
updated or deleted: a copy of Voxtral is gigabytes) and a copy damaged since (a lost write, a bad disk) is
converted again instead of computing with what it holds (CRC-32 over the copy at each load: ~4 GB/s, 0.6 s for
Voxtral at 4 bits). No cache (a read-only or full disk) is only slower. Written by hand: no library caches
derived arrays keyed by their sources' state.

A family names its matrices as ``(canonical name, owner object, attribute)`` targets; each target's float
matrix is replaced by ``Backend.prepare_linear`` of its quantized form, in groups of 64 columns. Where 64 does
not divide the width, the backend chooses (``Backend.quantize``): NumPy pads the last group with zero columns
when that costs little or nothing else fits (``QuantizedWeight.cols``, saved as ``<name>.cols``: Moonshine
small's 620 and 2480-wide encoder matrices), else it takes groups of 32 or 16; MLX never pads and takes groups of
32 only (its products refuse 16: ``Backend.multiplies``); a matrix no group fits stays in float. A family may ask for
other group sizes per matrix (Moonshine tiny's attention output projections: groups of 32, whole groups in each half
of the heads). Each backend has its own copy (the widths they group differently, e.g. 80 columns: NumPy in groups of
16, MLX padded to 32, would otherwise make a backend's results depend on which one converted first).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import time
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..backends import QuantizedWeight
from ..errors import LivecapError
from ..weights import TensorStore, read_header

GROUP = 64
GROUPS = (GROUP, 32, 16)


# 2: padded widths (QuantizedWeight.cols), which a version 1 reader would take for wider matrices; 3: MLX pads too
# (its layout-2 copies kept such matrices float for good, and NumPy's are converted again once, a few seconds);
# 4: a copy per backend, checkpoints known by their ctime, inode and sampled bytes too, the copy's CRC-32 beside it
LAYOUT = 4
SLICES, SLICE = 16, 64 * 1024  # the checkpoint's bytes sampled for its key: 1 MB read per file


Weights = Path | Sequence[Path]  # a checkpoint's file, or all its shards


def cache_dir() -> Path:
    """The folder of the quantized copies."""
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("livecap")) / "quantized"


def _sources(weights: Weights, layout: int = LAYOUT) -> list[tuple]:
    """``(resolved path, size, mtime in ns[, ctime in ns, inode, digest of its sampled bytes])`` of each checkpoint
    file, in path order (the last three from layout 4 on)."""
    files = [weights] if isinstance(weights, (str, Path)) else list(weights)
    out = []
    for f in sorted({Path(f).resolve() for f in files}):
        st = f.stat()
        known = (str(f), st.st_size, st.st_mtime_ns)
        out.append(known + (st.st_ctime_ns, st.st_ino, _sampled(f, st.st_size)) if layout >= 4 else known)
    return out


def _sampled(path: Path, size: int) -> str:
    """A digest of ``SLICES`` slices of the file spread from its start to its end (all of a small file)."""
    h = hashlib.sha1()
    with open(path, "rb") as f:
        for i in range(SLICES):
            f.seek(max(0, size - SLICE) * i // (SLICES - 1))
            h.update(f.read(SLICE))
    return h.hexdigest()[:16]


def cache_path(weights: Weights, bits: int, tag: str = "", layout: int = LAYOUT, backend: str = "numpy") -> Path:
    """Where ``backend``'s quantized copy of the checkpoint ``weights`` (its file, or all its shards) at ``bits``
    lives (``tag`` tells target lists apart; ``layout``: an older version's place, to delete it)."""
    sources = _sources(weights, layout)
    key = "+".join("|".join(str(v) for v in s) for s in sources) + f"|{bits}|{GROUP}|{tag}"
    if layout > 1:
        key += f"|{layout}"
    if layout >= 4:
        key += f"|{backend}"
    digest = hashlib.sha1(key.encode()).hexdigest()
    return cache_dir() / f"{digest[:20]}.safetensors"


STALE_TEMP_S = 24 * 3600  # a temporary copy this old belongs to a process that died while writing it


def sweep(folder: Path | None = None) -> int:
    """Delete the quantized copies whose checkpoint files changed or are gone (they can never be used again),
    and temporary copies of processes that no longer run or older than ``STALE_TEMP_S``; returns the bytes
    freed. Copies without their list of files (written before it existed) are kept. Never raises."""
    folder = cache_dir() if folder is None else folder
    freed = 0
    with contextlib.suppress(OSError):
        for f in folder.iterdir():
            try:
                if f.name.endswith(".tmp.safetensors"):
                    stale = time.time() - f.stat().st_mtime > STALE_TEMP_S or not _writer_runs(f)
                    doomed = [f] if stale else []
                elif f.suffix == ".json":
                    doomed = [f.with_suffix(".safetensors"), f] if not _current(f) else []
                else:
                    continue
                for d in doomed:
                    size = d.stat().st_size if d.exists() else 0
                    d.unlink(missing_ok=True)
                    freed += size
            except OSError:
                continue
    return freed


def _writer_runs(tmp: Path) -> bool:
    """Whether the process that writes temporary copy ``tmp`` (``<key>.<pid>.tmp.safetensors``) still runs (a
    process killed while writing leaves its copy)."""
    import psutil

    pid = tmp.name.split(".")[1]
    return not pid.isdigit() or psutil.pid_exists(int(pid))


def _current(sidecar: Path) -> bool:
    """Whether the checkpoint files a copy's JSON lists are all there as they were."""
    try:
        listed = [tuple(s) for s in json.loads(sidecar.read_text(encoding="utf-8"))["sources"]]
    except (OSError, ValueError, KeyError, TypeError):
        return False  # unreadable: the copy cannot be checked, and is rebuilt when it is wanted again
    try:
        return listed == [tuple(s) for s in _sources([Path(s[0]) for s in listed])]
    except OSError:  # a file is gone
        return False


def _crc(path: Path) -> int:
    """The CRC-32 of a file's bytes."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return zlib.crc32(m)


def _intact(path: Path) -> bool:
    """Whether the copy ``path`` holds the bytes that were written (its JSON's CRC-32)."""
    try:
        return json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))["crc32"] == _crc(path)
    except (OSError, ValueError, KeyError, TypeError):
        return False  # no JSON (a process stopped between the two writes), or a damaged one: converted again


def _group(bits: int, w, scales) -> int:
    """The group size of a cached matrix, from its shapes: ``in / scale columns``."""
    return (w.shape[1] * 32 // bits) // scales.shape[1]


def _convert(B, n: str, owner, attr: str, bits: int, groups: dict[str, tuple[int, ...]] | None):
    """Quantize target ``n`` (``owner.attr``) in the first group size that ``B`` takes; None where none fits (the
    matrix stays float)."""
    w = getattr(owner, attr)
    for g in (groups or {}).get(n, GROUPS):  # both backends pad the first where that adds at most an eighth
        try:
            q = B.quantize(w, g, bits)
            if not B.multiplies(q):  # a quantizer that accepts what its products refuse (MLX is lazy)
                continue
            setattr(owner, attr, B.prepare_linear(q))
            return q
        except (ValueError, RuntimeError, LivecapError):
            pass  # this group size is not supported here: try the next
    return None


def quantize_targets(
    B,
    targets: list[tuple[str, object, str]],
    bits: int,
    weights_file: Weights | None = None,
    tag: str = "",
    groups: dict[str, tuple[int, ...]] | None = None,
) -> bool:
    """Quantize the float matrices ``targets`` in place on backend ``B``; True when a cached copy was used.
    ``weights_file``: the checkpoint's file or all its shards (None: no cache). ``groups``: the group sizes to try
    for some targets (by name) instead of ``GROUPS``; a family that gives them must tell the cached copies apart
    by ``tag``."""
    targets = [t for t in targets if not B.quantized(getattr(t[1], t[2]))]  # stored quantized: kept as they are
    path = cache_path(weights_file, bits, tag, backend=B.name) if weights_file is not None else None
    if path is not None and path.is_file() and _intact(path):
        try:
            store = TensorStore(read_header(path), path.name)
            if all(f"{n}.scales" in store or f"{n}.float" in store for n, _, _ in targets):
                loaded = []
                for n, owner, attr in targets:
                    if f"{n}.float" in store:
                        loaded.append(None)
                        continue
                    w, s, b = (B.load(store, f"{n}.{k}") for k in ("weight", "scales", "biases"))
                    q = QuantizedWeight(w, s, b, _group(bits, w, s), bits)
                    if f"{n}.cols" in store:  # padded to whole groups
                        q.cols = int(store.raw(f"{n}.cols")[0])
                    if q.shape != tuple(getattr(owner, attr).shape):
                        raise ValueError(f"The cached {n} does not fit its matrix.")
                    if not B.multiplies(q):
                        raise ValueError(f"The cached {n} is in a layout this backend does not multiply.")
                    loaded.append(q)
                for (_, owner, attr), q in zip(targets, loaded):
                    if q is not None:
                        setattr(owner, attr, B.prepare_linear(q))
                return True
        except Exception:  # noqa: BLE001  (whatever a copy that reads wrong raises: it is converted again below)
            pass
    saved = {}
    for n, owner, attr in targets:
        q = _convert(B, n, owner, attr, bits, groups)
        if q is None:
            saved[f"{n}.float"] = B.asarray(np.zeros(1, np.float32))  # stays float (so the cache is complete)
        else:
            saved.update({f"{n}.weight": q.w, f"{n}.scales": q.scales, f"{n}.biases": q.biases})
            if q.padded:
                saved[f"{n}.cols"] = B.asarray(np.array([q.cols], np.int64))  # integers stay integers
    if path is not None and saved:
        _save(B, path, saved, weights_file)
        for old in range(1, LAYOUT):  # the copies this one replaces
            with contextlib.suppress(OSError):
                discard(cache_path(weights_file, bits, tag, layout=old))
        sweep(path.parent)  # the copies of this checkpoint before it changed, of models deleted since
    return False


def discard(path: Path) -> None:
    """Delete the copy ``path`` and its list of files (a list left alone names current files: ``sweep`` keeps it)."""
    path.unlink(missing_ok=True)
    path.with_suffix(".json").unlink(missing_ok=True)


def _save(B, path: Path, saved: dict, weights: Weights) -> None:
    """Write the copy (temporary name, flushed, renamed) and its list of checkpoint files and CRC-32; nothing
    when that fails (no cache is only slower; a part-written copy must not stay: a full disk, a read-only folder,
    a stop)."""
    tmp = path.with_suffix(f".{os.getpid()}.tmp.safetensors")  # per process: two may convert the same model
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        B.save_tensors(tmp, saved)
        with open(tmp, "rb") as f:  # on disk before the rename: a power cut must not leave a zero-filled copy
            os.fsync(f.fileno())
        listing = json.dumps({"sources": _sources(weights), "crc32": _crc(tmp)})
        os.replace(tmp, path)
        path.with_suffix(".json").write_text(listing, encoding="utf-8")
    except (OSError, RuntimeError, LivecapError):
        pass  # no cache: only slower
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)  # gone where it was renamed
