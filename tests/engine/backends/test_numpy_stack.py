"""A decoder's blocks as one stack run in lockstep with the twin (numpy_stack, cpu_twin.Channel): the same bits
as the blocks one by one, one twin job per step, and the caller finishing alone when the twin dies mid-step,
when its own half raises, or when it stops posting."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

from engine.backends import cpu_twin
from engine.backends.base import Backend
from engine.backends.numpy_stack import SplitStack

rng = np.random.default_rng(12)
twin_only = pytest.mark.skipif(not cpu_twin.enabled(), reason="the twin runs on Linux x86-64 with 2+ CPUs only")
D, HEADS, KV_HEADS, HD, T = 320, 8, 4, 40, 300


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def decoder(B, layers=2):
    """Random blocks of a small pre-norm decoder, its stack, and arrays (self caches, cross K/V) per layer."""
    blocks, sublayers, arrays = [], [], []
    for _ in range(layers):
        own = B.prepare_attention_block(
            B.prepare_linear(r((HEADS + 2 * KV_HEADS) * HD, D) * 0.05),
            B.prepare_linear(r(D, HEADS * HD) * 0.05),
            HEADS,
            KV_HEADS,
            HD,
            HD**-0.5,
            True,
        )
        cross = B.prepare_attention_block(
            B.prepare_linear(r(HEADS * HD, D) * 0.05),
            B.prepare_linear(r(D, HEADS * HD) * 0.05),
            HEADS,
            KV_HEADS,
            HD,
            0.15,
        )
        mlp = B.prepare_gated_mlp(
            B.prepare_linear(r(2560, D) * 0.05), r(2560) * 0.1, B.prepare_linear(r(D, 1280) * 0.05), r(D) * 0.1
        )
        norms = [1 + 0.1 * r(D) for _ in range(3)]
        blocks.append((own, cross, mlp, norms))
        sublayers += [(norms[0], own), (norms[1], cross), (norms[2], mlp[0])]
        xk, xv = B.kv_zeros((KV_HEADS, T, HD)), B.kv_zeros((KV_HEADS, T, HD))
        xk[...], xv[...] = r(KV_HEADS, T, HD), r(KV_HEADS, T, HD)
        arrays += [B.kv_zeros((KV_HEADS, 48, HD)), B.kv_zeros((KV_HEADS, 48, HD)), xk, xv]
    stack = B.prepare_block_stack(sublayers, 1e-5)
    assert isinstance(stack, SplitStack)
    return blocks, stack, arrays


def one_by_one(B, blocks, arrays, x, start, cos, sin, mask=None):
    """The blocks through the backend's separate block ops (the path the stack must equal bit for bit)."""
    for j, (own, cross, mlp, (n1, n2, n3)) in enumerate(blocks):
        kc, vc, xk, xv = arrays[4 * j : 4 * j + 4]
        x = x + B.self_attention_block(B._normed(x, n1, 1e-5, "float32"), own, kc, vc, start, cos, sin)[0]
        x = x + B.cross_attention_block(B._normed(x, n2, 1e-5, "float32"), cross, xk, xv, mask)
        x = x + B.gated_mlp(x, *mlp, norm=n3, eps=1e-5)
    return x


def rotation(n):
    ang = rng.uniform(-3, 3, (n, HD // 2))
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def caches(arrays):
    return [a.copy() for a in arrays[0::4] + arrays[1::4]]


def clear(arrays):
    for a in arrays[0::4] + arrays[1::4]:
        a[...] = 0


@pytest.mark.parametrize("rows,masked", [(1, False), (3, True), (36, False)])
@pytest.mark.parametrize("twin", [True, False])
def test_a_stack_gives_the_bits_of_its_blocks_one_by_one(B, rows, masked, twin):
    """Outputs and every cache row, for a step, a prefill with a cross mask, and a long prefill (its halves over
    cpu_pool's threads), with the twin taking half of each block or not."""
    if twin and not cpu_twin.enabled():
        pytest.skip("the twin runs on Linux x86-64 with 2+ CPUs only")
    B.twin.failed = not twin
    blocks, stack, arrays = decoder(B)
    x, (cos, sin) = r(rows, D), rotation(rows)
    mask = (rng.uniform(size=(rows, T)) > 0.3) if masked else None
    start = 2
    want = one_by_one(B, blocks, arrays, x, start, cos, sin, mask)
    want_caches = caches(arrays)
    clear(arrays)
    served = B.twin.served()
    got = B.block_stack(x, stack, arrays, start, cos, sin, mask)
    assert np.array_equal(got, want)
    for a, b in zip(caches(arrays), want_caches):
        assert np.array_equal(a, b)
    assert np.abs(arrays[0][:, start : start + rows]).min() > 0  # both halves' heads written
    if twin and rows <= cpu_twin.MAX_ROWS:
        assert B.twin.served() == served + 1  # the whole step was one job for the twin


def test_other_backends_have_no_stacks():
    assert Backend.prepare_block_stack(None, [], 1e-5) is None
    with pytest.raises(NotImplementedError):
        Backend.block_stack(None, None, None, [], 0, None, None)


def test_a_stack_takes_blocks_cut_in_halves_only(B):
    assert B.prepare_block_stack([(np.ones(D, np.float32), B.prepare_linear(r(D, D)))], 1e-5) is None


def step(B, stack, arrays, x, cos, sin):
    clear(arrays)
    return B.block_stack(x, stack, arrays, 0, cos, sin), caches(arrays)


@twin_only
def test_a_twin_killed_mid_step_leaves_the_caller_finishing_it(B, monkeypatch):
    blocks, stack, arrays = decoder(B)
    x, (cos, sin) = r(1, D), rotation(1)
    want, want_caches = step(B, stack, arrays, x, cos, sin)
    swap, swaps = cpu_twin.Channel.swap, []

    def swap_then_kill(channel, share):
        swaps.append(1)
        if len(swaps) == 3:  # after two exchanges: in the middle of the first layer's MLP
            os.kill(B.twin.pid, signal.SIGKILL)
        return swap(channel, share)

    monkeypatch.setattr(cpu_twin.Channel, "swap", swap_then_kill)
    got, got_caches = step(B, stack, arrays, x, cos, sin)
    assert B.twin.failed and len(swaps) == 6  # the exchanges after the kill went nowhere: the caller computed alone
    assert np.array_equal(got, want)
    for a, b in zip(got_caches, want_caches):
        assert np.array_equal(a, b)


@twin_only
def test_an_error_in_the_callers_half_stops_the_twins_side_too(B, monkeypatch):
    """The caller's exception goes up; the twin gives its side up and serves the next step as before."""
    blocks, stack, arrays = decoder(B)
    x, (cos, sin) = r(1, D), rotation(1)
    want, _ = step(B, stack, arrays, x, cos, sin)  # forks the twin over the stack
    pid, mlp = B.twin.pid, blocks[1][2][0]
    run_chunk = type(mlp).run_chunk

    def broken(i, x):
        raise RuntimeError("broken half")

    monkeypatch.setattr(mlp, "run_chunk", broken)  # in this process only: the twin forked before
    with pytest.raises(RuntimeError, match="broken half"):
        step(B, stack, arrays, x, cos, sin)
    monkeypatch.setattr(mlp, "run_chunk", run_chunk.__get__(mlp))
    served = B.twin.served()
    again, _ = step(B, stack, arrays, x, cos, sin)
    assert np.array_equal(again, want)
    assert B.twin.pid == pid and not B.twin.failed and B.twin.served() == served + 1


@twin_only
def test_the_twin_gives_up_a_program_whose_caller_stops_posting(B, monkeypatch):
    monkeypatch.setattr(cpu_twin, "ABANDON_S", 0.05)  # before the twin forks: its copy waits that long
    blocks, stack, arrays = decoder(B)
    x, (cos, sin) = r(1, D), rotation(1)
    want, _ = step(B, stack, arrays, x, cos, sin)
    pid = B.twin.pid
    channel = B.twin.submit_program(stack, [x, B._rotation(cos, sin)], arrays, [1, 0])
    assert channel is not None
    time.sleep(0.2)  # the caller never posts: the twin waits ABANDON_S for its first share, then gives up
    t = time.monotonic()
    channel.close()
    assert time.monotonic() - t < 0.05 and channel.open  # it had finished (given up) already
    again, _ = step(B, stack, arrays, x, cos, sin)
    assert np.array_equal(again, want) and B.twin.pid == pid and not B.twin.failed
