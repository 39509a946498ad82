"""Quantization on load (``Backend.quantize``; MLX today): affine 4/6/8-bit, group 64, of every large matmul
(encoder and decoder projections, the projector and the tied embedding/head); norms, convs and the ada MLP
stay in float.

The converted tensors are cached (platformdirs user cache, keyed by the checkpoint file's path, size and
mtime, and the bit width), so the next start loads them directly instead of converting again.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ...backends import QuantizedWeight
from ...errors import LivecapError
from ...weights import TensorStore, read_header

GROUP = 64
_MATS = ("wq", "wk", "wv", "wo", "w1", "w2", "w3")


def _targets(model):
    """(canonical name, owner object, attribute) of every matrix that gets quantized."""
    out = [("proj1", model, "proj1"), ("proj2", model, "proj2"), ("tok", model, "tok_emb")]
    for i, L in enumerate(model.enc):
        out += [(f"enc.{i}.{a}", L, a) for a in _MATS]
    for i, L in enumerate(model.dec):
        out += [(f"dec.{i}.{a}", L, a) for a in _MATS]
    return out


def cache_path(weights_file: Path, bits: int) -> Path:
    """Where the quantized copy of ``weights_file`` at ``bits`` lives."""
    from platformdirs import user_cache_dir

    st = weights_file.stat()
    key = hashlib.sha1(f"{weights_file.resolve()}|{st.st_size}|{st.st_mtime_ns}|{bits}|{GROUP}".encode()).hexdigest()
    return Path(user_cache_dir("livecap")) / "quantized" / f"{key[:20]}.safetensors"


def quantize_model(model, bits: int, weights_file: Path | None = None) -> bool:
    """Quantize ``model``'s matrices in place; returns True when a cached copy was used."""
    B = model.B
    targets = [t for t in _targets(model) if not isinstance(getattr(t[1], t[2]), QuantizedWeight)
               and getattr(t[1], t[2]).shape[-1] % GROUP == 0]
    path = cache_path(weights_file, bits) if weights_file is not None else None
    if path is not None and path.is_file():
        try:
            store = TensorStore(read_header(path), path.name)
            if all(f"{n}.scales" in store for n, _, _ in targets):
                loaded = [QuantizedWeight(*(B.load(store, f"{n}.{k}") for k in ("weight", "scales", "biases")),
                                          GROUP, bits) for n, _, _ in targets]
                for (_, owner, attr), q in zip(targets, loaded):
                    setattr(owner, attr, B.prepare_linear(q))
                return True
        except (OSError, ValueError, RuntimeError, LivecapError):
            pass  # a damaged cache is rebuilt below
    saved = {}
    for n, owner, attr in targets:
        q = B.quantize(getattr(owner, attr), GROUP, bits)
        setattr(owner, attr, B.prepare_linear(q))
        saved.update({f"{n}.weight": q.w, f"{n}.scales": q.scales, f"{n}.biases": q.biases})
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp.safetensors")
            B.save_tensors(tmp, saved)
            os.replace(tmp, path)
        except OSError:
            pass  # no cache is only slower
    return False
