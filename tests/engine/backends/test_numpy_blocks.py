"""Float32 decoder blocks cut by heads / hidden units (numpy_blocks): each equals the uncut block computed in
float64, leaves no copy of its matrices, writes the caches a step needs, and gives the same bits whether the
twin takes its second half or not (and when the twin fails)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from engine import load_model
from engine.backends import cpu_twin
from engine.backends.base import Backend
from engine.backends.numpy_backend import NumpyBackend
from engine.backends.numpy_blocks import SplitAttention, SplitMlp, product, rotate, step_layout
from engine.backends.numpy_stack import SplitStack

rng = np.random.default_rng(11)
twin_only = pytest.mark.skipif(not cpu_twin.enabled(), reason="the twin runs on Linux x86-64 with 2+ CPUs only")


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def rope64(x, cos, sin):
    """Interleaved RoPE in float64: pairs (x[2i], x[2i+1]) for i < F rotated, the rest kept."""
    y = x.astype(np.float64).copy()
    f = cos.shape[-1]
    a, b = x[..., 0 : 2 * f : 2].astype(np.float64), x[..., 1 : 2 * f : 2].astype(np.float64)
    y[..., 0 : 2 * f : 2] = a * cos - b * sin
    y[..., 1 : 2 * f : 2] = a * sin + b * cos
    return y


def attend64(q, k, v, mask=None):
    g = q.shape[0] // k.shape[0]
    k, v = np.repeat(k, g, axis=0).astype(np.float64), np.repeat(v, g, axis=0).astype(np.float64)
    s = np.einsum("htd,hkd->htk", q.astype(np.float64), k) / np.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("htk,hkd->htd", p / p.sum(-1, keepdims=True), v)


def self_block64(h, w_qkv, w_o, heads, kv_heads, hd, start, cos, sin, k_cache, v_cache):
    """The uncut self-attention block; writes its K/V rows into the (float64) caches."""
    n = h.shape[0]
    qkv = (h.astype(np.float64) @ w_qkv.T.astype(np.float64)).reshape(n, heads + 2 * kv_heads, hd).transpose(1, 0, 2)
    q, k = rope64(qkv[:heads], cos, sin), rope64(qkv[heads : heads + kv_heads], cos, sin)
    k_cache[:, start : start + n], v_cache[:, start : start + n] = k, qkv[heads + kv_heads :]
    mask = np.tri(n, start + n, start, dtype=bool)
    a = attend64(q, k_cache[:, : start + n], v_cache[:, : start + n], mask)
    return a.transpose(1, 0, 2).reshape(n, -1) @ w_o.T.astype(np.float64)


def close(got, want, tol=2e-5):
    np.testing.assert_allclose(got, want, atol=tol * max(1.0, np.abs(want).max()), rtol=0)


def rotation(n, f):
    ang = rng.uniform(-3, 3, (n, f))
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def self_case(B, heads=8, kv_heads=8, hd=40, d=320, cap=16, twin=True):
    w_qkv, w_o = r((heads + 2 * kv_heads) * hd, d) * 0.05, r(d, heads * hd) * 0.05
    block = B.prepare_attention_block(
        B.prepare_linear(w_qkv), B.prepare_linear(w_o), heads, kv_heads, hd, hd**-0.5, True
    )
    assert isinstance(block, SplitAttention)
    if not twin:
        block.twin = None
    return block, w_qkv, w_o, B.kv_zeros((kv_heads, cap, hd)), B.kv_zeros((kv_heads, cap, hd))


@pytest.mark.parametrize("heads,kv_heads", [(8, 8), (8, 2)])
def test_self_attention_block_equals_the_uncut_block_step_after_step(heads, kv_heads):
    """Prefill of 3 rows (causal), then steps of 1-2 rows and a long one: outputs and every cache row as the
    float64 block."""
    B = NumpyBackend()
    B.twin.failed = True
    hd, d, cap = 40, 320, 48
    block, w_qkv, w_o, kc, vc = self_case(B, heads, kv_heads, hd, d, cap, twin=False)
    k64, v64 = np.zeros((kv_heads, cap, hd)), np.zeros((kv_heads, cap, hd))
    start = 0
    for n in (3, 1, 1, 2, 36):  # the last more rows than the twin takes: the halves over cpu_pool's threads
        h = r(n, d)
        cos, sin = rotation(n, 16)  # partial rotary: 32 of 40 channels
        y, kc, vc = B.self_attention_block(h, block, kc, vc, start, cos, sin)
        close(y, self_block64(h, w_qkv, w_o, heads, kv_heads, hd, start, cos, sin, k64, v64))
        start += n
    close(kc, k64)
    close(vc, v64)


def test_cross_attention_block_equals_the_uncut_block_with_and_without_a_mask():
    B = NumpyBackend()
    B.twin.failed = True
    heads, hd, d, t = 8, 40, 320, 500
    w_q, w_o = r(heads * hd, d) * 0.05, r(d, heads * hd) * 0.05
    block = B.prepare_attention_block(B.prepare_linear(w_q), B.prepare_linear(w_o), heads, heads, hd, hd**-0.5)
    k, v = r(heads, t, hd), r(heads, t, hd)
    h = r(2, d)
    q = (h.astype(np.float64) @ w_q.T).reshape(2, heads, hd).transpose(1, 0, 2)
    mask = np.ones((2, t), bool)
    mask[1, 300:] = False
    for m in (None, mask):
        want = attend64(q, k, v, m).transpose(1, 0, 2).reshape(2, -1) @ w_o.T.astype(np.float64)
        close(B.cross_attention_block(h, block, k, v, m), want)


@pytest.mark.parametrize("rows", [1, 5, 40])
def test_split_mlp_equals_the_uncut_block(rows):
    B = NumpyBackend()
    B.twin.failed = True
    f, d = 640, 320
    w1, b1, w2, b2 = r(2 * f, d) * 0.05, r(2 * f), r(d, f) * 0.05, r(d)
    mlp = B.prepare_gated_mlp(B.prepare_linear(w1), b1, B.prepare_linear(w2), b2)
    assert isinstance(mlp[0], SplitMlp) and mlp[0] is mlp[2] and mlp[1] is mlp[3] is None
    x = r(rows, d)
    u = x.astype(np.float64) @ w1.T + b1
    want = (u[:, f:] / (1 + np.exp(-u[:, f:])) * u[:, :f]) @ w2.T.astype(np.float64) + b2
    close(B.gated_mlp(x, *mlp), want)


def test_blocks_reuse_their_matrices_memory():
    """No copy stays: each half is a view of the matrices it was given (rearranged in place)."""
    B = NumpyBackend()
    w_qkv, w_o = B.prepare_linear(r(24 * 40, 320)), B.prepare_linear(r(320, 320))
    block = B.prepare_attention_block(w_qkv, w_o, 8, 8, 40, 0.1, True)
    assert all(np.shares_memory(p, w_qkv) for p in block._in) and all(np.shares_memory(p, w_o) for p in block._out)
    up, down = B.prepare_linear(r(1280, 320)), B.prepare_linear(r(320, 640))
    mlp = B.prepare_gated_mlp(up, None, down, None)[0]
    assert all(np.shares_memory(p, up) for p in mlp._up) and all(np.shares_memory(p, down) for p in mlp._down)


def test_halves_with_more_outputs_than_inputs_are_stored_transposed():
    """A step reads such a half as its transpose (``step_layout``: an AMD EPYC, Zen 2, ran Moonshine's one-row MLP
    up and head halves 1.5-1.7x faster so), written over the same memory with the same values."""
    w = r(1280, 320)
    kept = w.copy()
    t = step_layout(w)
    assert t.flags.f_contiguous and not t.flags.c_contiguous and np.shares_memory(t, w)
    assert np.array_equal(t, kept) and t.shape == kept.shape
    square, wide = r(320, 320), r(320, 640)
    assert step_layout(square) is square and step_layout(wide) is wide
    x = r(3, 320)
    close(product(t, x), x.astype(np.float64) @ kept.T.astype(np.float64))
    B = NumpyBackend()
    block = B.prepare_attention_block(
        B.prepare_linear(r(24 * 40, 320)), B.prepare_linear(r(320, 320)), 8, 8, 40, 0.1, True
    )
    assert all(p.flags.f_contiguous for p in block._in) and all(p.flags.f_contiguous for p in block._out)  # 320 x 160
    mlp = B.prepare_gated_mlp(B.prepare_linear(r(1280, 320)), None, B.prepare_linear(r(320, 640)), None)[0]
    assert all(p.flags.f_contiguous for p in mlp._up) and all(p.flags.c_contiguous for p in mlp._down)


def test_blocks_that_cannot_be_cut_are_refused_and_left_unchanged():
    B = NumpyBackend()
    w_qkv, w_o = B.prepare_linear(r(21 * 40, 320)), B.prepare_linear(r(320, 280))
    kept = w_qkv.copy(), w_o.copy()
    assert B.prepare_attention_block(w_qkv, w_o, 7, 7, 40, 0.1, True) is None  # odd head count
    assert B.prepare_attention_block(w_qkv, w_o, 7, 7, 40, 0.1, False) is None  # and not interleaved RoPE
    odd_qkv, odd_o = B.prepare_linear(r(24 * 39, 320)), B.prepare_linear(r(320, 8 * 39))
    assert B.prepare_attention_block(odd_qkv, odd_o, 8, 8, 39, 0.1, True) is None  # RoPE pairs need an even size
    read_only = B.prepare_linear(r(320, 320))
    read_only.flags.writeable = False
    assert B.prepare_attention_block(B.prepare_linear(r(320, 320)), read_only, 8, 8, 40, 0.1) is None
    assert np.array_equal(w_qkv, kept[0]) and np.array_equal(w_o, kept[1])
    up, down = B.prepare_linear(r(2 * 641, 320)), B.prepare_linear(r(320, 641))  # odd middle width
    assert B.prepare_gated_mlp(up, None, down, None) == (up, None, down, None)
    assert Backend.prepare_attention_block(B, w_qkv, w_o, 8, 8, 40, 0.1, True) is None  # other backends: none


def test_rotate_is_interleaved_rope():
    x = r(6, 3, 40)[:, :, :]
    cos, sin = rotation(3, 16)
    rot = (cos + 1j * sin).astype(np.complex64)
    close(rotate(x, rot), rope64(x, cos, sin), 1e-6)
    close(rotate(x.transpose(1, 0, 2)[:, :, :].swapaxes(0, 1), rot), rope64(x, cos, sin), 1e-6)  # any strides


@twin_only
@pytest.mark.parametrize("rows", [1, 3])
def test_blocks_go_half_to_the_twin_with_identical_results(B, rows):
    """Self-attention (its caches in the arena, written by both processes), cross-attention and the MLP: the
    twin computes the second halves, and every output and cache row equals the caller's own."""
    block, _, _, kc, vc = self_case(B)
    cross = B.prepare_attention_block(B.prepare_linear(r(320, 320)), B.prepare_linear(r(320, 320)), 8, 8, 40, 0.15)
    mlp = B.prepare_gated_mlp(B.prepare_linear(r(1280, 320)), r(1280), B.prepare_linear(r(320, 640)), r(320))
    xk, xv = B.kv_zeros((8, 500, 40)), B.kv_zeros((8, 500, 40))
    xk[...], xv[...] = r(8, 500, 40), r(8, 500, 40)
    h, (cos, sin) = r(rows, 320), rotation(rows, 16)

    def run():
        kc[...], vc[...] = 0, 0
        y, _, _ = B.self_attention_block(h, block, kc, vc, 2, cos, sin)
        return y, kc.copy(), vc.copy(), B.cross_attention_block(h, cross, xk, xv), B.gated_mlp(h, *mlp)

    run()  # the first use starts the twin; until it takes jobs, the caller goes alone
    assert B.twin.wait_ready(10)  # under a loaded CI it was not ready for any of the three blocks: served 0
    before = B.twin.served()
    with_twin = run()
    assert B.twin.served() == before + 3 and B.twin.pid
    B.twin.failed = True
    alone = run()
    for a, b in zip(with_twin, alone):
        assert np.array_equal(a, b)
    assert np.abs(with_twin[1][:, 2 : 2 + rows]).min() > 0  # both halves' heads written


@twin_only
def test_a_block_over_private_memory_is_the_callers(B):
    block, _, _, kc, vc = self_case(B)
    h, (cos, sin) = r(1, 320), rotation(1, 16)
    ref = B.self_attention_block(h, block, kc, vc, 0, cos, sin)[0]  # forks the twin
    served = B.twin.served()
    pk, pv = np.zeros_like(kc), np.zeros_like(vc)
    got = B.self_attention_block(h, block, pk, pv, 0, cos, sin)[0]
    assert B.twin.served() == served and np.array_equal(got, ref) and np.array_equal(pk, kc)


@twin_only
def test_a_killed_twin_during_a_block_leaves_the_caller_computing_both_halves(B):
    block, _, _, kc, vc = self_case(B)
    h, (cos, sin) = r(1, 320), rotation(1, 16)
    first = B.self_attention_block(h, block, kc, vc, 0, cos, sin)[0]
    os.kill(B.twin.pid, signal.SIGKILL)
    kc[...] = 0
    again = B.self_attention_block(h, block, kc, vc, 0, cos, sin)[0]
    assert B.twin.pid == 0 and np.array_equal(again, first) and np.abs(kc[:, 0]).min() > 0


FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "models" / "moon_tiny_like"


def fixture_logits(m, audio: np.ndarray) -> np.ndarray:
    """A model's logits over a prefill of three tokens and three single steps after it."""
    enc, valid = m.encode(audio)
    xkv, cache = m.cross_kv(m.memory(enc)), m.new_self_cache(12)
    out = [m.decode([m.cfg.decoder_start_token_id, 5, 9], 0, cache, xkv, valid, all_logits=True)]
    out += [m.decode([tok], 3 + i, cache, xkv, valid)[None] for i, tok in enumerate([11, 7, 3])]
    return np.concatenate(out)


def test_a_model_decodes_as_with_its_separate_ops(monkeypatch):
    """Moonshine's decoder on the fixture: every float32 layer takes the blocks, run as one stack, and its logits
    over a prefill and single steps equal those of the separate ops (the path MLX and quantized weights take)."""
    audio = r(16000) * 0.1
    m = load_model(FIXTURE, backend="numpy")
    assert all(layer.blocks is not None and isinstance(layer.fc1, SplitMlp) for layer in m.dec_layers)
    assert isinstance(m.stack, SplitStack)  # and run as one stack
    got = fixture_logits(m, audio)
    monkeypatch.setattr(NumpyBackend, "prepare_attention_block", Backend.prepare_attention_block)
    monkeypatch.setattr(NumpyBackend, "prepare_gated_mlp", Backend.prepare_gated_mlp)
    plain = load_model(FIXTURE, backend="numpy")
    assert all(layer.blocks is None for layer in plain.dec_layers) and plain.stack is None
    want = fixture_logits(plain, audio)
    close(got, want, 1e-5)
    assert np.array_equal(got.argmax(-1), want.argmax(-1))


def test_a_model_without_a_stack_runs_its_blocks_one_by_one_to_the_same_bits(monkeypatch):
    """Where a backend cuts the blocks but gives no stack for them, the decoder calls the block ops layer by layer."""
    audio = r(16000) * 0.1
    stacked = load_model(FIXTURE, backend="numpy")
    monkeypatch.setattr(NumpyBackend, "prepare_block_stack", Backend.prepare_block_stack)
    blocks = load_model(FIXTURE, backend="numpy")
    assert isinstance(stacked.stack, SplitStack) and blocks.stack is None and blocks.dec_layers[0].blocks is not None
    assert np.array_equal(fixture_logits(stacked, audio), fixture_logits(blocks, audio))


@twin_only
def test_the_twin_keeps_no_finished_decoders_caches_alive(B):
    """The layouts it remembers per block must not hold the caches (their arena blocks go back when freed)."""
    import gc
    import weakref

    block, _, _, kc, vc = self_case(B)
    h, (cos, sin) = r(1, 320), rotation(1, 16)
    served = B.twin.served()
    B.self_attention_block(h, block, kc, vc, 0, cos, sin)
    B.self_attention_block(h, block, kc, vc, 1, cos, sin)
    assert B.twin.served() == served + 2
    gone = weakref.ref(kc)
    del kc, vc
    gc.collect()
    assert gone() is None
