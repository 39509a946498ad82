"""Pure pieces of a layer that the backend may compile (``Backend.compile``: ``mx.compile`` on a GPU).

A piece is ``fn(weights: dict, *arrays) -> arrays`` and is called as ``piece(layer, *arrays)``; the layer's
fields named in ``fields`` are its weights. Where the backend compiles, the weights go in as inputs
(quantized ones as their three arrays), so one compiled graph per weight layout and input shape serves
every layer; elsewhere the function runs as written.
"""

from __future__ import annotations

from .base import Backend
from .quant import QuantizedWeight


class LayerPiece:
    """``piece(layer, *arrays)`` runs ``fn({field: layer.field}, *arrays)``, compiled where the backend does."""

    def __init__(self, B: Backend, fn, fields: tuple[str, ...]):
        self.B, self.fn, self.fields = B, fn, fields
        self.compiled: dict = {}

    def __call__(self, layer, *args):
        W = {f: getattr(layer, f) for f in self.fields}
        if not self.B.compiles:
            return self.fn(W, *args)
        sig, leaves = [], []
        for f, w in W.items():
            if isinstance(w, QuantizedWeight):
                sig.append((f, w.group_size, w.bits, w.cols))
                leaves += [w.w, w.scales, w.biases]
            else:
                sig.append((f, None if w is None else 0, None, 0))
                leaves += [] if w is None else [w]
        sig = tuple(sig)
        run = self.compiled.get(sig)
        if run is None:
            run = self.compiled[sig] = self.B.compile(lambda leaves, *a: self.fn(_unflatten(sig, leaves), *a))
        return run(leaves, *args)


def _unflatten(sig, leaves) -> dict:
    W, i = {}, 0
    for f, group, bits, cols in sig:
        if group is None:
            W[f] = None
        elif bits is None:
            W[f], i = leaves[i], i + 1
        else:
            W[f], i = QuantizedWeight(leaves[i], leaves[i + 1], leaves[i + 2], group, bits, cols), i + 3
    return W
