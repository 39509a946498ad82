"""Quantization on load, for every family: affine 4/6/8-bit matrices (``Backend.quantize``, MLX layout),
cached as a safetensors file next to nothing the user owns (platformdirs user cache, keyed by the
checkpoint file's path, size and mtime, the bit width, the group size and the family's list of matrices),
so the next start loads the converted matrices directly instead of converting again.

A family names its matrices as ``(canonical name, owner object, attribute)`` targets; each target's float
matrix is replaced by ``Backend.prepare_linear`` of its quantized form. Matrices whose input width is not a
whole number of groups stay in float.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ..backends.base import QuantizedWeight
from ..errors import LivecapError
from ..weights import TensorStore, read_header

GROUP = 64


def cache_path(weights_file: Path, bits: int, tag: str = "") -> Path:
    """Where the quantized copy of ``weights_file`` at ``bits`` lives (``tag`` tells target lists apart)."""
    from platformdirs import user_cache_dir

    st = weights_file.stat()
    key = f"{weights_file.resolve()}|{st.st_size}|{st.st_mtime_ns}|{bits}|{GROUP}|{tag}"
    digest = hashlib.sha1(key.encode()).hexdigest()
    return Path(user_cache_dir("livecap")) / "quantized" / f"{digest[:20]}.safetensors"


def quantize_targets(B, targets: list[tuple[str, object, str]], bits: int, weights_file: Path | None = None,
                     tag: str = "") -> bool:
    """Quantize the float matrices ``targets`` in place on backend ``B``; True when a cached copy was used."""
    targets = [t for t in targets if not isinstance(getattr(t[1], t[2]), QuantizedWeight)
               and getattr(t[1], t[2]).shape[-1] % GROUP == 0]
    path = cache_path(weights_file, bits, tag) if weights_file is not None else None
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
    if path is not None and saved:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp.safetensors")
            B.save_tensors(tmp, saved)
            os.replace(tmp, path)
        except OSError:
            pass  # no cache is only slower
    return False
