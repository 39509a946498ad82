"""A decoder's blocks as one stack run in lockstep with the twin (numpy_stack, cpu_twin.Channel): the same bits
as the blocks one by one, one twin job per step, and the caller finishing alone when the twin dies or stops
mid-step, when its own half raises, or when it stops posting."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from engine.backends import cpu_twin
from engine.backends.base import Backend
from engine.backends.numpy_blocks import SplitAttention
from engine.backends.numpy_stack import SplitStack
from engine.backends.ort_blocks import QuantSplitAttention
from engine.backends.ort_kernels import GatedMlp
from engine.backends.quant import dequantize

rng = np.random.default_rng(12)
twin_only = pytest.mark.skipif(not cpu_twin.enabled(), reason="the twin runs on Linux x86-64 with 2+ CPUs only")
D, HEADS, KV_HEADS, HD, T = 320, 8, 4, 40, 300


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def decoder(B, layers=2, bits=None, heads=HEADS, kv_heads=KV_HEADS, hd=HD):
    """Random blocks of a small pre-norm decoder, its stack, and arrays (self caches, cross K/V) per layer; with
    ``bits``, 8/4-bit weights in groups of 64 (the gated MLP holding its norm, as a model gets it)."""
    blocks, sublayers, arrays = [], [], []

    def lin(*shape):
        w = r(*shape) * 0.05
        return B.prepare_linear(w if bits is None else B.quantize(w, 64, bits))

    for _ in range(layers):
        norms = [1 + 0.1 * r(D) for _ in range(3)]
        own = B.prepare_attention_block(
            lin((heads + 2 * kv_heads) * hd, D), lin(D, heads * hd), heads, kv_heads, hd, hd**-0.5, True, norms[0]
        )
        cross = B.prepare_attention_block(
            lin(heads * hd, D), lin(D, heads * hd), heads, kv_heads, hd, 0.15, None, norms[1]
        )
        mlp = B.prepare_gated_mlp(lin(2560, D), r(2560) * 0.1, lin(D, 1280), r(D) * 0.1, norms[2], 1e-5)
        blocks.append((own, cross, mlp, norms))
        sublayers += [(norms[0], own), (norms[1], cross), (norms[2], mlp[0])]
        xk, xv = B.kv_zeros((kv_heads, T, hd)), B.kv_zeros((kv_heads, T, hd))
        xk[...], xv[...] = r(kv_heads, T, hd), r(kv_heads, T, hd)
        arrays += [B.kv_zeros((kv_heads, 48, hd)), B.kv_zeros((kv_heads, 48, hd)), xk, xv]
    stack = B.prepare_block_stack(sublayers, 1e-5)
    assert isinstance(stack, SplitStack)
    return blocks, stack, arrays


def one_by_one(B, blocks, arrays, x, start, cos, sin, mask=None):
    """The blocks through the backend's separate block ops (the path the stack must equal bit for bit)."""
    for j, (own, cross, mlp, (n1, n2, n3)) in enumerate(blocks):
        kc, vc, xk, xv = arrays[4 * j : 4 * j + 4]
        x = x + B.self_attention_block(x, own, kc, vc, start, cos, sin, norm=n1, eps=1e-5)[0]
        x = x + B.cross_attention_block(x, cross, xk, xv, mask, norm=n2, eps=1e-5)
        x = x + B.gated_mlp(x, *mlp, norm=n3, eps=1e-5)
    return x


def rotation(n, hd=HD):
    ang = rng.uniform(-3, 3, (n, hd // 2))
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def caches(arrays):
    return [a.copy() for a in arrays[0::4] + arrays[1::4]]


def clear(arrays):
    for a in arrays[0::4] + arrays[1::4]:
        a[...] = 0


QUANT = dict(heads=4, kv_heads=2, hd=64)  # halves of 128 output columns: two whole groups of 64


@pytest.mark.parametrize("rows,masked", [(1, False), (3, True), (36, False)])
@pytest.mark.parametrize("twin", [True, False])
@pytest.mark.parametrize("bits", [None, 8])
def test_a_stack_gives_the_bits_of_its_blocks_one_by_one(B, rows, masked, twin, bits):
    """Outputs and every cache row, for a step, a prefill with a cross mask, and a long prefill (its halves over
    cpu_pool's threads), with the twin taking half of each block or not; float32 and 8-bit blocks."""
    if twin and not cpu_twin.enabled():
        pytest.skip("the twin runs on Linux x86-64 with 2+ CPUs only")
    B.twin.failed = not twin
    shape = QUANT if bits else {}
    blocks, stack, arrays = decoder(B, bits=bits, **shape)
    if bits:  # 8-bit blocks hold their norms (in their graphs), float32 ones leave them to the stack
        assert isinstance(blocks[0][0], QuantSplitAttention) and isinstance(blocks[0][2][0], GatedMlp)
    assert all((b.norm is n) == bool(bits) for (own, cross, _, (n, m, _)) in blocks for b, n in ((own, n), (cross, m)))
    x, (cos, sin) = r(rows, D), rotation(rows, shape.get("hd", HD))
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
    assert B.twin.pid == 0 and len(swaps) == 6  # the exchanges after the kill went nowhere: the caller computed alone
    assert np.array_equal(got, want)
    for a, b in zip(got_caches, want_caches):
        assert np.array_equal(a, b)


@twin_only
def test_a_twin_stopped_mid_step_is_left_to_finish_its_side_and_serves_the_next_step(B, monkeypatch):
    """Stopped for a while (a VM's steal time) mid-step, the twin is no longer killed at the deadline: the caller
    finishes the step alone; the twin, continued, finishes its side (writing the same cache rows) and serves the
    next step."""
    blocks, stack, arrays = decoder(B)
    x, (cos, sin) = r(1, D), rotation(1)
    want, want_caches = step(B, stack, arrays, x, cos, sin)
    pid, served = B.twin.pid, B.twin.served()
    swap, swaps = cpu_twin.Channel.swap, []

    def swap_then_stop(channel, share):
        swaps.append(1)
        if len(swaps) == 3:  # after two exchanges: in the middle of the first layer's MLP
            os.kill(pid, signal.SIGSTOP)
        return swap(channel, share)

    monkeypatch.setattr(cpu_twin.Channel, "swap", swap_then_stop)
    got, got_caches = step(B, stack, arrays, x, cos, sin)
    monkeypatch.setattr(cpu_twin.Channel, "swap", swap)
    assert np.array_equal(got, want) and len(swaps) == 6
    for a, b in zip(got_caches, want_caches):
        assert np.array_equal(a, b)
    # still stopped: the caller alone at the next position (a step that wrote position 0 again would wait for the
    # late job first: test_a_late_twin_writes_no_row_a_new_pass_has_written_since)
    x1, (cos1, sin1) = r(1, D), rotation(1)
    want1 = one_by_one(B, blocks, [a.copy() for a in arrays], x1, 1, cos1, sin1)
    assert np.array_equal(B.block_stack(x1, stack, arrays, 1, cos1, sin1), want1)
    assert B.twin.pid == pid and B.twin.served() == served
    os.kill(pid, signal.SIGCONT)
    deadline = time.monotonic() + 5
    while B.twin.served() == served and time.monotonic() < deadline:
        time.sleep(0.005)
    assert B.twin.served() == served + 1  # it gave its side up at its next exchange
    for a, b in zip(caches(arrays), want_caches):
        assert np.array_equal(a[:, :1], b[:, :1])  # what it wrote late were the same rows
    again, again_caches = step(B, stack, arrays, x, cos, sin)
    assert np.array_equal(again, want) and B.twin.pid == pid and B.twin.served() == served + 2
    for a, b in zip(again_caches, want_caches):
        assert np.array_equal(a, b)


def stop_before_own_rows(monkeypatch, flag):
    """In the twin (forked after this), its half of a self-attention stops the process first once ``flag`` exists:
    continued, it writes that step's cache rows late."""
    parent, run_half = os.getpid(), SplitAttention.run_half

    def stopping(block, i, inputs, arrays, ints):
        if os.getpid() != parent and block.interleaved is not None and flag.exists():
            flag.unlink()
            os.kill(os.getpid(), signal.SIGSTOP)
        return run_half(block, i, inputs, arrays, ints)

    monkeypatch.setattr(SplitAttention, "run_half", stopping)


def wait_done(twin, served):
    deadline = time.monotonic() + 5
    while twin.pid and twin.served() == served and time.monotonic() < deadline:
        time.sleep(0.005)


@twin_only
def test_a_late_twin_writes_no_row_a_new_pass_has_written_since(B, monkeypatch, tmp_path):
    """A twin stopped before writing its cache rows of position 0 is late; a new pass over the same caches
    (another input: the next partial's decode of a growing segment) writes position 0 again before the twin goes
    on. Its old rows must not land over the new ones: the new pass waits for the late job (up to LATE_S)."""
    flag = tmp_path / "stop"
    stop_before_own_rows(monkeypatch, flag)
    blocks, stack, arrays = decoder(B)
    x, x2, (cos, sin) = r(1, D), r(1, D), rotation(1)
    want, want_caches = step(B, stack, arrays, x2, cos, sin)  # forks the twin (with the stop in it)
    pid, served = B.twin.pid, B.twin.served()
    flag.touch()
    step(B, stack, arrays, x, cos, sin)  # the twin stops itself before its first rows: the caller finishes alone
    assert not flag.exists() and B.twin.pid == pid and B.twin.served() == served
    resumed = threading.Timer(0.3, os.kill, (pid, signal.SIGCONT))
    resumed.start()
    got, _ = step(B, stack, arrays, x2, cos, sin)
    resumed.join()
    wait_done(B.twin, served)
    assert np.array_equal(got, want)
    for a, b in zip(caches(arrays), want_caches):
        assert np.array_equal(a, b)  # no row of x's step is left
    assert B.twin.pid == pid  # it finished its job within LATE_S and serves on
    again, _ = step(B, stack, arrays, x2, cos, sin)
    assert np.array_equal(again, want) and B.twin.served() > served


@twin_only
def test_a_late_twins_block_writes_no_row_a_new_pass_has_written_since(B, monkeypatch, tmp_path):
    """The same for a self-attention block run on its own (a decoder whose blocks make no stack)."""
    flag = tmp_path / "stop"
    stop_before_own_rows(monkeypatch, flag)
    (own, _, _, (n1, _, _)), *_ = decoder(B, layers=1)[0]
    k, v = B.kv_zeros((KV_HEADS, 48, HD)), B.kv_zeros((KV_HEADS, 48, HD))
    h, h2, (cos, sin) = r(1, D), r(1, D), rotation(1)

    def run(x):
        k[...], v[...] = 0, 0
        return B.self_attention_block(x, own, k, v, 0, cos, sin, norm=n1, eps=1e-5)[0], k.copy(), v.copy()

    want, want_k, want_v = run(h2)  # forks the twin
    pid, served = B.twin.pid, B.twin.served()
    flag.touch()
    run(h)  # late
    resumed = threading.Timer(0.3, os.kill, (pid, signal.SIGCONT))
    resumed.start()
    got = B.self_attention_block(h2, own, k, v, 0, cos, sin, norm=n1, eps=1e-5)[0]
    resumed.join()
    wait_done(B.twin, served)
    assert np.array_equal(got, want) and np.array_equal(k, want_k) and np.array_equal(v, want_v)


@twin_only
def test_a_late_twin_does_not_hold_up_the_rows_after_its_own(B, monkeypatch, tmp_path):
    """The same decode's next step (position 1) writes no row the late job may write: it goes on alone at once."""
    flag = tmp_path / "stop"
    stop_before_own_rows(monkeypatch, flag)
    blocks, stack, arrays = decoder(B)
    x, (cos, sin) = r(2, D), rotation(2)
    step(B, stack, arrays, x[:1], cos[:1], sin[:1])  # forks the twin
    want = one_by_one(B, blocks, [a.copy() for a in arrays], x[1:], 1, cos[1:], sin[1:])
    pid = B.twin.pid
    flag.touch()
    B.block_stack(x[:1], stack, arrays, 0, cos[:1], sin[:1])  # late at position 0
    t = time.monotonic()
    try:
        got = B.block_stack(x[1:], stack, arrays, 1, cos[1:], sin[1:])
        took = time.monotonic() - t
    finally:
        os.kill(pid, signal.SIGCONT)
    assert took < 0.2 and B.twin.pid == pid  # not waited for (LATE_S) nor killed
    assert np.array_equal(got, want)


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


def block64(x, w_in, w_out, heads, kv_heads, hd, cache=None, start=0, cos=None, sin=None, kv=None):
    """An uncut attention block in float64 (a self-attention with ``cos``/``sin`` and a zero cache, a
    cross-attention over ``kv``)."""
    n, x64 = x.shape[0], x.astype(np.float64)
    p = (x64 @ w_in.T.astype(np.float64)).reshape(n, -1, hd).transpose(1, 0, 2)
    if cos is None:
        q, (k, v), mask = p, kv, None
    else:
        f = cos.shape[-1]

        def rope(y):
            out = y.copy()
            a, b = y[..., 0 : 2 * f : 2], y[..., 1 : 2 * f : 2]
            out[..., 0 : 2 * f : 2], out[..., 1 : 2 * f : 2] = a * cos - b * sin, a * sin + b * cos
            return out

        q, k, v = rope(p[:heads]), rope(p[heads : heads + kv_heads]), p[heads + kv_heads :]
        mask = np.tri(n, start + n, start, dtype=bool)
        k = np.concatenate([np.zeros((kv_heads, start, hd)), k], axis=1)
        v = np.concatenate([np.zeros((kv_heads, start, hd)), v], axis=1)
    g = heads // kv_heads
    k, v = np.repeat(k, g, axis=0).astype(np.float64), np.repeat(v, g, axis=0).astype(np.float64)
    sc = np.einsum("htd,hkd->htk", q, k) / np.sqrt(hd)
    if mask is not None:
        sc = np.where(mask, sc, -np.inf)
    e = np.exp(sc - sc.max(-1, keepdims=True))
    a = np.einsum("htk,hkd->htd", e / e.sum(-1, keepdims=True), v)
    return a.transpose(1, 0, 2).reshape(n, -1) @ w_out.T.astype(np.float64)


@pytest.mark.parametrize("bits", [8, 4])
def test_quantized_attention_blocks_compute_the_dequantized_block(B, bits):
    """Each half's rows and column groups are the right ones: the 8/4-bit blocks against the uncut block of the
    dequantized weights in float64, within what the kernels' int8 activations cost."""
    heads, kv_heads, hd = QUANT["heads"], QUANT["kv_heads"], QUANT["hd"]
    qs = [B.quantize(r(*shape) * 0.05, 64, bits) for shape in [((heads + 2 * kv_heads) * hd, D), (D, heads * hd)]]
    qs += [B.quantize(r(*shape) * 0.05, 64, bits) for shape in [(heads * hd, D), (D, heads * hd)]]
    norm = 1 + 0.1 * r(D)
    own = B.prepare_attention_block(*map(B.prepare_linear, qs[:2]), heads, kv_heads, hd, hd**-0.5, True, norm)
    cross = B.prepare_attention_block(*map(B.prepare_linear, qs[2:]), heads, kv_heads, hd, hd**-0.5)
    assert isinstance(own, QuantSplitAttention) and isinstance(cross, QuantSplitAttention)
    w = [dequantize(q) for q in qs]
    x, (cos, sin) = r(3, D), rotation(3, hd)
    kc, vc = B.kv_zeros((kv_heads, 8, hd)), B.kv_zeros((kv_heads, 8, hd))
    got = B.self_attention_block(x, own, kc, vc, 2, cos, sin, norm=norm, eps=1e-5)[0]  # the norm in its graphs
    x64 = x.astype(np.float64) - x.mean(-1, keepdims=True)
    normed = (x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-5) * norm).astype(np.float32)
    want = block64(normed, w[0], w[1], heads, kv_heads, hd, start=2, cos=cos, sin=sin)
    np.testing.assert_allclose(got, want, atol=0.03 * np.abs(want).max())
    xk, xv = r(kv_heads, T, hd), r(kv_heads, T, hd)
    got = B.cross_attention_block(x, cross, B.kv_zeros((kv_heads, T, hd)) + xk, B.kv_zeros((kv_heads, T, hd)) + xv)
    want = block64(x, w[2], w[3], heads, kv_heads, hd, kv=(xk, xv))
    np.testing.assert_allclose(got, want, atol=0.03 * np.abs(want).max())


def test_a_block_holding_its_norm_refuses_another(B):
    heads, kv_heads, hd = QUANT["heads"], QUANT["kv_heads"], QUANT["hd"]
    w_in, w_out = B.quantize(r(heads * hd, D), 64, 8), B.quantize(r(D, heads * hd), 64, 8)
    norm = np.ones(D, np.float32)
    block = B.prepare_attention_block(
        B.prepare_linear(w_in), B.prepare_linear(w_out), heads, kv_heads, hd, 0.1, None, norm
    )
    xk = B.kv_zeros((kv_heads, T, hd))
    with pytest.raises(ValueError, match="another norm"):
        B.cross_attention_block(r(1, D), block, xk, xk, norm=norm * 2)
    with pytest.raises(ValueError, match="its sublayer's"):
        SplitStack([(norm * 2, block)], lambda x, w, b: x, 1e-5)


def test_quantized_blocks_whose_halves_are_no_whole_groups_stay_separate_ops(B):
    """Moonshine tiny's 8 heads of 40: a half's 160 output columns are 2.5 groups of 64."""
    w_in, w_out = B.quantize(r(960, 320), 64, 8), B.quantize(r(320, 320), 64, 8)
    assert B.prepare_attention_block(B.prepare_linear(w_in), B.prepare_linear(w_out), 8, 8, 40, 0.1, True) is None
