"""A pre-norm decoder's residual sublayers, each cut in two halves, run by this process and the twin in lockstep.

Why: cut one by one (``numpy_blocks``), every block of a decoder step is a hand-off to ``cpu_twin``: the caller
norms the input, copies it over, computes its half, waits for the twin's and adds the two, while the twin
waits for the next block; ~20 us of each ~60-140 us block went to that on Moonshine tiny (profiled). Here
both processes run the whole stack (tensor parallelism over two processes): each norms the same ``x``,
computes its half of the block, posts its share and takes the other's (``cpu_twin.Channel.swap``), adds
them, and goes on to the next sublayer. One hand-off per step instead of one per block; between blocks
only a share of ``[rows, width]`` floats crosses.

Contract:
- ``x <- x + block(layer_norm(x, norm))`` for each sublayer in order, the block's output being its
  ``combine(share 0, share 1)`` of its two halves' shares (``run_half`` or ``run_chunk``): the same arithmetic as
  calling the blocks one by one (tested bit for bit).
- Both processes compute the same ``x`` bit for bit (same code, same inputs, same order), so results do not
  depend on the twin; without it, or when it stops answering mid-step, this process computes both halves.
- ``run`` runs NumPy calls and ONNX Runtime sessions made before the twin forks only (it runs in the twin too):
  the norm is resolved when the stack is built, the 8/4-bit blocks' graphs when they are.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from . import cpu_twin
from .numpy_blocks import SplitAttention, SplitMlp, halves_on_threads
from .ort_kernels import GatedMlp


class SplitStack:
    """Residual sublayers ``(norm weight, block)``: an attention block cut by heads (``SplitAttention``, a self- or
    a cross-attention, or its 8/4-bit form ``ort_blocks.QuantSplitAttention``) or an MLP cut by hidden units
    (``SplitMlp``, ``ort_kernels.GatedMlp``, whose graphs may hold the norm: then it must be the sublayer's, with
    ``eps``); ``layer_norm(x, weight, block)`` the norm the other sublayers apply first (float32 in and out)."""

    twin = None  # a cpu_twin.Twin that knows this stack (set by the backend), or None

    def __init__(self, sublayers: list[tuple[np.ndarray, object]], layer_norm: Callable, eps: float):
        for norm, block in sublayers:
            if not isinstance(block, (SplitAttention, SplitMlp, GatedMlp)):
                raise ValueError("A stack runs blocks cut in halves only.")
            if getattr(block, "norm", None) is not None and (block.norm is not norm or block.eps != eps):
                raise ValueError("A block's own norm must be its sublayer's.")
        self.sublayers, self.layer_norm = sublayers, layer_norm
        width = sublayers[0][1].shape[0]
        self.shape = (width, width)  # what cpu_twin asks of what it runs

    def __call__(self, x: np.ndarray, arrays: list, start: int, rot: np.ndarray, mask=None) -> np.ndarray:
        """``x [rows, width]`` (float32) after every sublayer. ``arrays``: each attention's K and V in order (a
        self-attention's caches, written at ``start``); ``rot``: the rows' rotation (``cos + i sin`` as float32
        pairs); ``mask``: the cross-attentions' ``[rows, keys]`` (> 0 = may attend) or None."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        inputs = [x, rot] + ([np.asarray(mask, np.float32)] if mask is not None else [])
        ints = [x.shape[0], start]
        twin = self.twin
        if twin is not None:
            twin.settle(arrays, ints)  # a late twin job writing rows this step writes again finishes first
        channel = twin.submit_program(self, inputs, arrays, ints) if twin is not None else None
        try:
            x = self.run(0, inputs, arrays, ints, channel)
        except BaseException:
            if channel is not None:
                channel.close(aborted=True)
            raise
        if channel is not None:
            channel.close()
        return x

    def run(self, side: int, inputs: list, arrays: list, ints: list, channel=None) -> np.ndarray:
        """One side's run of the stack (``side`` 0: the caller, which computes the twin's halves itself where
        ``channel`` is None or closes; 1: the twin), returning ``x`` after the last sublayer."""
        n, start = ints
        x, rot = inputs[0].reshape(n, -1), inputs[1]
        mask = inputs[2:]  # the cross-attentions' mask, where there is one
        kv = iter(arrays)
        for norm, block in self.sublayers:
            h = x if getattr(block, "norm", None) is not None else self.layer_norm(x, norm, block)  # or in its graphs
            if not isinstance(block, SplitAttention):
                half = partial(block.run_chunk, x=h)
            elif block.interleaved is not None:
                half = partial(block.run_half, inputs=[h, rot], arrays=[next(kv), next(kv)], ints=[n, start])
            else:
                half = partial(block.run_half, inputs=[h, *mask], arrays=[next(kv), next(kv)], ints=[n])
            if side:
                mine = half(1)
                shares = channel.swap(mine), mine
            else:
                shares = _shares(half, channel, n)
            x = x + block.combine(*shares)
        return x


def _shares(half: Callable, channel, rows: int) -> tuple:
    """The caller's ``(share 0, share 1)``: the twin's share through ``channel``, or, without it (or when it stops
    answering), computed here too: over ``cpu_pool``'s threads for many rows (a long prefill)."""
    if channel is None and rows > cpu_twin.MAX_ROWS:
        return halves_on_threads(half)
    mine = half(0)
    theirs = channel.swap(mine) if channel is not None else None
    return mine, (half(1) if theirs is None else theirs)
