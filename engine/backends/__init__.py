"""Compute backends: ``get_backend("auto" | "numpy" | "mlx")``.

``auto`` picks MLX where it has a GPU (Metal on Apple Silicon, or CUDA) and NumPy elsewhere: on a CPU,
NumPy/OpenBLAS is far faster than MLX's CPU backend, which serves only to test the MLX code.
"""

from __future__ import annotations

from functools import cache

from ..errors import BackendError
from .base import Backend, window_mask
from .pieces import LayerPiece
from .quant import QuantizedWeight, load_affine

__all__ = [
    "Backend",
    "LayerPiece",
    "QuantizedWeight",
    "get_backend",
    "load_affine",
    "mlx_available",
    "window_mask",
    "BACKENDS",
]

BACKENDS = ("auto", "numpy", "mlx")


def mlx_available() -> bool:
    """Whether the ``mlx`` package imports here."""
    try:
        import mlx.core  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure means "not available"
        return False
    return True


@cache
def get_backend(name: str = "auto") -> Backend:
    """The backend called ``name``; raises BackendError when it cannot run here."""
    if name not in BACKENDS:
        raise BackendError(f"Unknown backend '{name}'; choose one of auto, numpy, mlx.")
    if name == "auto":
        if mlx_available():
            from .mlx_backend import has_gpu

            if has_gpu():
                name = "mlx"
        name = "numpy" if name == "auto" else name
    if name == "mlx":
        if not mlx_available():
            raise BackendError("The MLX backend is not installed here; use --backend numpy.")
        from .mlx_backend import MlxBackend

        return MlxBackend()
    from .numpy_backend import NumpyBackend

    return NumpyBackend()
