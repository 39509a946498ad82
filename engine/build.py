"""Build a model from a local folder: its family and on-disk dialect (``engine.formats.detect``), the options
checked against the backend, the family's model constructed. No downloads here (``engine.loader`` resolves hub
ids first), so the installer can validate a downloaded folder with it.
"""

from __future__ import annotations

from pathlib import Path

from .backends import Backend, get_backend
from .errors import UsageError
from .formats import detect
from .models.checks import check_config

DTYPES = ("float32", "float16", "bfloat16")


def check_options(backend: str, dtype: str | None, quantize: int | None) -> Backend:
    """The backend called ``backend``, once ``dtype`` and ``quantize`` are known to suit it (UsageError)."""
    if dtype is not None and dtype not in DTYPES:
        raise UsageError(f"Unknown dtype '{dtype}'; choose one of {', '.join(DTYPES)}.")
    if quantize is not None and quantize not in (4, 6, 8):
        raise UsageError("--quantize takes 4, 6 or 8 bits.")
    B = get_backend(backend)
    if B.name == "numpy" and dtype not in (None, "float32"):
        raise UsageError(f"The NumPy backend computes in float32 only; use --backend mlx for {dtype}.")
    if B.name == "numpy" and quantize is not None and (quantize not in (4, 8) or not getattr(B, "kernels", False)):
        raise UsageError(
            "The NumPy backend quantizes to 8 or 4 bits, with onnxruntime installed."
            if quantize == 6 or getattr(B, "kernels", False)
            else "Quantizing on the NumPy backend needs onnxruntime (pip install onnxruntime)."
        )
    return B


def build_model(folder: Path, B: Backend, dtype: str | None = None, quantize: int | None = None, **options):
    """The model in the local ``folder`` on backend ``B`` (options as for ``engine.load_model``)."""
    family, dialect, cfg = detect(folder)
    check_config(cfg, f"The {'params' if dialect == 'mistral' else 'config'}.json in {folder}")
    if family == "moonshine_streaming":
        from .models import moonshine

        return moonshine.load(folder, cfg, B, dtype, quantize=quantize, **options)
    from .models import voxtral

    return voxtral.load(folder, cfg, dialect, B, dtype, quantize=quantize, **options)
