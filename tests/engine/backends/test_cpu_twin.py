"""The CPU twin (a forked helper process for few-row products): results bit-identical with or without it, and
every way it can go wrong (killed, stopped, stale, parent gone) ends in a right result and no stray process."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from engine.backends import cpu_pool, cpu_twin, numpy_attention, numpy_backend
from engine.backends.numpy_backend import NumpyBackend
from engine.backends.quant import dequantize
from tests.helpers import alive, decoder_steps, voxtral_speech_stream

pytestmark = pytest.mark.skipif(not cpu_twin.enabled(), reason="the twin runs on Linux x86-64 with 2+ CPUs only")
REPO = Path(__file__).resolve().parents[3]
rng = np.random.default_rng(7)


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def products(B, ws, x):
    return [B.linear(x[:, : w.shape[1]], w) for w in ws]


@pytest.mark.parametrize("rows", [1, 3, 12, 32])
def test_results_are_bit_identical_with_and_without_the_twin(B, rows):
    shapes = [(1536, 512), (512, 512), (4096, 512), (512, 2048), (9000, 512), (300, 200)]  # cut in halves, in 4
    ws = [B.prepare_linear(r(*s)) for s in shapes]  # chunks (>= 8 MB) and, the last, whole on the caller
    x = r(rows, 2048)
    with_twin = products(B, ws, x)
    served = B.twin.served()
    assert served == 5 and alive(B.twin.pid)  # every product but the small one went half to the twin
    B.twin.failed = True  # the caller alone, as on a platform without a twin
    alone = products(B, ws, x)
    for got, ref, w in zip(with_twin, alone, ws):
        assert np.array_equal(got, ref)
        exact = x[:, : w.shape[1]].astype(np.float64) @ w.astype(np.float64).T
        np.testing.assert_allclose(got, exact, atol=2e-5 * max(1.0, np.abs(exact).max()), rtol=0)


def kill_and_compute(B, w, x, first) -> int:
    """Kill the twin, compute once (the caller alone after the deadline); the killed twin's pid."""
    pid = B.twin.pid
    assert pid and alive(pid)
    os.kill(pid, signal.SIGKILL)
    assert np.array_equal(B.linear(x, w), first) and B.twin.pid == 0
    return pid


def test_a_killed_twin_costs_one_deadline_and_the_caller_goes_on_alone_until_a_new_one_starts(B, monkeypatch):
    """A twin that stopped answering once (a busy moment, a stall) is not the model's last: before, one miss left
    every later step on one core for as long as the model stayed loaded (seen on a noisy VM: 13.8 -> 15 ms)."""
    monkeypatch.setattr(cpu_twin, "RETRY_S", (0.3, 0.3))
    w = B.prepare_linear(r(2048, 512))
    x = r(1, 512)
    first = B.linear(x, w)
    for _ in cpu_twin.RETRY_S:
        pid = B.twin.pid
        assert pid and alive(pid)
        os.kill(pid, signal.SIGKILL)
        t0 = time.monotonic()
        again = B.linear(x, w)
        assert time.monotonic() - t0 < 1.0
        assert np.array_equal(again, first)
        assert not B.twin.failed and B.twin.pid == 0 and not alive(pid)
        assert np.array_equal(B.linear(x, w), first) and B.twin.pid == 0  # alone for RETRY_S
        time.sleep(0.35)
        assert np.array_equal(B.linear(x, w), first) and B.twin.pid not in (0, pid)  # then a new twin
        assert B.twin.wait_ready(5) and B.twin.served() >= 0
        served = B.twin.served()
        assert np.array_equal(B.linear(x, w), first) and B.twin.served() == served + 1
    pid = kill_and_compute(B, w, x, first)  # once more than RETRY_S: the last wait again (before, alone for good)
    assert not B.twin.failed
    time.sleep(0.35)
    assert np.array_equal(B.linear(x, w), first) and B.twin.pid not in (0, pid)


def test_the_waits_grow_for_twins_that_miss_soon_and_start_over_after_one_that_answered_long(B, monkeypatch):
    """A live session on a noisy 2-vCPU VM missed 3 times in ~2 min, and the fourth miss left every later step
    on one CPU for the rest of the process: sporadic misses in a long session no longer add up."""
    monkeypatch.setattr(cpu_twin, "RETRY_S", (0.3, 30.0))
    monkeypatch.setattr(cpu_twin, "FORGIVE_S", 1.0)
    w = B.prepare_linear(r(2048, 512))
    x = r(1, 512)
    first = B.linear(x, w)
    time.sleep(1.1)  # this twin answered for FORGIVE_S
    old = kill_and_compute(B, w, x, first)
    time.sleep(0.35)
    assert np.array_equal(B.linear(x, w), first) and B.twin.pid not in (0, old)  # the first wait
    time.sleep(1.1)
    old = kill_and_compute(B, w, x, first)  # again after FORGIVE_S: the first wait again, not the second
    time.sleep(0.35)
    assert np.array_equal(B.linear(x, w), first) and B.twin.pid not in (0, old)
    kill_and_compute(B, w, x, first)  # this one missed at once: the second wait
    time.sleep(0.35)
    assert np.array_equal(B.linear(x, w), first) and B.twin.pid == 0 and not B.twin.failed


def until(check, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


def test_a_stopped_twin_costs_one_deadline_and_serves_again_once_it_has_finished(B):
    """A twin whose CPU is taken away for a while (on a 2-vCPU VM each miss came with ~100 ms of the hypervisor's
    steal time on the twin's vCPU) was killed at the deadline, and a second miss within FORGIVE_S left every step
    on one CPU for 30 s (small 11.4 -> 19 ms per token). Now it is left to finish its late job and serves again."""
    w = B.prepare_linear(r(2048, 512))
    x = r(2, 512)
    first = B.linear(x, w)
    pid, served = B.twin.pid, B.twin.served()
    os.kill(pid, signal.SIGSTOP)
    t0 = time.monotonic()
    again = B.linear(x, w)
    waited = time.monotonic() - t0
    assert cpu_twin.DEADLINE_S <= waited < 1.0
    assert np.array_equal(again, first)
    t0 = time.monotonic()
    assert np.array_equal(B.linear(x, w), first)  # while it is late: the caller alone, without a second wait
    assert time.monotonic() - t0 < cpu_twin.DEADLINE_S
    assert B.twin.pid == pid and alive(pid) and B.twin.served() == served
    os.kill(pid, signal.SIGCONT)
    assert until(lambda: B.twin.served() == served + 1)  # it finished the late job
    assert np.array_equal(B.linear(x, w), first)
    assert B.twin.pid == pid and B.twin.served() == served + 2 and not B.twin.failed


def test_a_twin_still_late_after_late_s_is_killed(B, monkeypatch):
    monkeypatch.setattr(cpu_twin, "LATE_S", 0.2)
    w = B.prepare_linear(r(2048, 512))
    x = r(2, 512)
    first = B.linear(x, w)
    pid = B.twin.pid
    os.kill(pid, signal.SIGSTOP)
    assert np.array_equal(B.linear(x, w), first) and B.twin.pid == pid
    time.sleep(0.25)
    assert np.array_equal(B.linear(x, w), first)
    assert B.twin.pid == 0 and not alive(pid) and not B.twin.failed  # killed; a new one after RETRY_S


def test_arena_blocks_released_while_the_twin_is_late_are_not_given_out_until_it_has_finished(B):
    """The late job may still write a cache row into an array the caller has dropped meanwhile: that block must
    not come back as zeros to a new cache before the twin has finished (or is gone)."""
    w = B.prepare_linear(r(2048, 512))
    x = r(1, 512)
    B.linear(x, w)
    k = B.kv_zeros((4, 100, 64))
    at, pid, served = B.twin.arena.locate(k), B.twin.pid, B.twin.served()
    os.kill(pid, signal.SIGSTOP)
    B.linear(x, w)  # late
    del k
    gc.collect()
    k = B.kv_zeros((4, 100, 64))
    assert B.twin.arena.locate(k) != at
    os.kill(pid, signal.SIGCONT)
    assert until(lambda: B.twin.served() == served + 1)  # it finished the late job
    B.linear(x, w)  # the twin is taken again: the held blocks go back
    assert B.twin.served() == served + 2
    del k
    gc.collect()
    assert B.twin.arena.locate(B.kv_zeros((4, 100, 64))) == at


def test_a_new_matrix_retires_the_twin_and_the_next_product_forks_one_that_knows_it(B):
    w1 = B.prepare_linear(r(1024, 512))
    x = r(1, 512)
    B.linear(x, w1)
    old = B.twin.pid
    w2 = B.prepare_linear(r(1024, 512))  # a second model's weights, say
    y2 = B.linear(x, w2)
    assert B.twin.pid not in (0, old) and not alive(old)
    assert B.twin.served() == 1  # the new twin computed half of w2's product
    np.testing.assert_allclose(y2, x.astype(np.float64) @ w2.astype(np.float64).T, atol=1e-4, rtol=0)


def test_an_unknown_matrix_is_computed_by_the_caller(B):
    w = B.prepare_linear(r(1024, 512))
    x = r(1, 512)
    B.linear(x, w)
    served = B.twin.served()
    loose = r(1024, 512)  # never prepared: the twin does not have it
    np.testing.assert_allclose(B.linear(x, loose), x.astype(np.float64) @ loose.T, atol=1e-4, rtol=0)
    assert B.twin.served() == served


def test_the_twin_parks_when_idle_and_wakes_for_the_next_product(B):
    w = B.prepare_linear(r(1024, 512))
    x = r(1, 512)
    first = B.linear(x, w)
    time.sleep(20 * cpu_twin.SPIN_S)
    assert B.twin._ctrl[cpu_twin.STATE] == cpu_twin.PARKED
    assert np.array_equal(B.linear(x, w), first) and not B.twin.failed
    assert B.twin.served() == 2


def test_the_twin_counts_as_this_process_for_the_busy_check(B):
    w = B.prepare_linear(r(1024, 512))
    x = r(1, 512)
    B.linear(x, w)
    end = time.monotonic() + 0.3
    while time.monotonic() < end:  # the twin spins between these products
        B.linear(x, w)
    ours = cpu_pool.contention._sample()[2]
    t = os.times()
    assert ours - (t.user + t.system + t.children_user + t.children_system) >= 0.05  # the twin's CPU time


@pytest.mark.parametrize("how", ["exit", "kill"])
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_the_twin_ends_with_its_process(tmp_path, how, method):
    """Forked or started (``twin_spawn``, as on Windows): the twin sees its pipe end and leaves."""
    script = (
        "import os, sys, time\n"
        "import numpy as np\n"
        "from engine.backends import cpu_pool\n"
        "from engine.backends.numpy_backend import NumpyBackend\n"
        "cpu_pool.contention.busy = lambda: False\n"
        "B = NumpyBackend()\n"
        "w = B.prepare_linear(np.ones((1024, 512), np.float32))\n"
        "B.linear(np.ones((1, 512), np.float32), w)\n"
        "assert B.twin.wait_ready(30)\n"  # a started twin takes ~0.3 s; a forked one is ready at once
        "print(B.twin.pid, flush=True)\n"
        "sys.stdin.readline()\n"  # the test looks at the twin, then says go (or kills this process)
    )
    env = dict(os.environ, LIVECAP_CPU_TWIN="spawn" if method == "spawn" else "1")
    proc = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    pid = int(proc.stdout.readline())
    assert alive(pid)
    if how == "kill":
        proc.kill()
    else:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    proc.wait(30)
    end = time.monotonic() + 5
    while alive(pid) and time.monotonic() < end:
        time.sleep(0.01)
    assert not alive(pid)


def test_a_model_gives_the_same_logits_with_and_without_the_twin(monkeypatch):
    """Moonshine's decoder steps on the fixture, every matrix cut in halves and known to the twin."""
    from engine import load_model

    monkeypatch.setattr(cpu_pool.contention, "busy", lambda: False)
    monkeypatch.setattr(numpy_backend, "TWIN_BYTES", 0)
    monkeypatch.setattr(numpy_attention, "TWIN_BYTES", 0)  # and every cross-attention's heads halved
    m = load_model(REPO / "tests" / "fixtures" / "models" / "moon_tiny_like", backend="numpy")
    B = m.B
    audio = r(16000) * 0.1
    enc, valid = m.encode(audio)

    def steps():
        return decoder_steps(m, enc, valid)

    B.twin.failed = False
    pid, before = B.twin.pid, B.twin.served()  # the backend is shared: a twin of an earlier test may still run
    with_twin = steps()
    assert B.twin.pid and B.twin.served() > (before if B.twin.pid == pid else 0)  # (this model's forks a new one)
    B.twin.failed = True
    try:
        alone = steps()
    finally:
        B.twin.failed = not cpu_twin.enabled()
        B.twin.stop()
    for a, b in zip(with_twin, alone):
        assert np.array_equal(B.to_numpy(a), B.to_numpy(b))


def cross_kv(B, heads, frames, cap, d):
    """K/V as a decoder's cross-attention memory: ``kv_zeros`` buffers of ``cap`` frames, ``frames`` written
    (after the twin forked, as a live segment writes them), and the views a step reads."""
    k, v = B.kv_zeros((heads, cap, d)), B.kv_zeros((heads, cap, d))
    k[:, :frames], v[:, :frames] = r(heads, frames, d), r(heads, frames, d)
    return k[:, :frames], v[:, :frames]


@pytest.mark.parametrize("rows", [1, 3])
def test_attention_over_shared_kv_goes_half_to_the_twin_with_identical_results(B, rows):
    B.linear(r(1, 512), B.prepare_linear(r(1024, 512)))  # the twin forks over this product, before the K/V exist
    pid = B.twin.pid
    k, v = cross_kv(B, 8, 500, 760, 64)
    assert B.twin.arena.locate(k) is not None
    q = r(8, rows, 64)
    before = B.twin.served()
    with_twin = B.attention(q, k, v, 0.125)
    assert B.twin.served() == before + 1 and B.twin.pid == pid
    B.twin.failed = True
    alone = B.attention(q, k, v, 0.125)
    assert np.array_equal(with_twin, alone)
    s = np.einsum("htd,hkd->htk", q.astype(np.float64), k.astype(np.float64)) * 0.125
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = np.einsum("htk,hkd->htd", p / p.sum(-1, keepdims=True), v.astype(np.float64))
    np.testing.assert_allclose(with_twin, ref, atol=1e-5, rtol=0)


def test_attention_over_private_memory_is_the_callers(B):
    B.linear(r(1, 512), B.prepare_linear(r(1024, 512)))
    k, v = cross_kv(B, 8, 500, 500, 64)
    q = r(8, 1, 64)
    served = B.twin.served()
    private = B.attention(q, k.copy(), v.copy(), 0.125)
    assert B.twin.served() == served
    assert np.array_equal(private, B.attention(q, k, v, 0.125))


@pytest.mark.parametrize("heads,kv_heads,rows", [(8, 8, 4), (32, 8, 1), (8, 8, 1)])
def test_a_masked_attention_over_shared_kv_goes_half_to_the_twin_with_identical_results(B, heads, kv_heads, rows):
    """A KV ring that has wrapped (Voxtral's encoder after 15 s, its decoder after 11 min): every query sees a
    window of the slots, given as a mask; grouped-query heads fold their queries into rows first."""
    B.linear(r(1, 512), B.prepare_linear(r(1024, 512)))
    k, v = cross_kv(B, kv_heads, 500, 500, 64)
    q = r(heads, rows, 64)
    mask = np.ones((rows, 500), bool)
    for i in range(rows):
        mask[i, 100 + 30 * i : 160 + 30 * i] = False  # another window per query
    served = B.twin.served()
    with_twin = B.attention(q, k, v, 0.125, mask)
    assert B.twin.served() == served + 1
    B.twin.failed = True
    assert np.array_equal(with_twin, B.attention(q, k, v, 0.125, mask))
    g = heads // kv_heads
    kk, vv = np.repeat(k, g, axis=0).astype(np.float64), np.repeat(v, g, axis=0).astype(np.float64)
    s = np.einsum("htd,hkd->htk", q.astype(np.float64), kk) * 0.125
    s = np.where(mask, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = np.einsum("htk,hkd->htd", p / p.sum(-1, keepdims=True), vv)
    np.testing.assert_allclose(with_twin, ref, atol=1e-5, rtol=0)


def test_a_stopped_twin_during_attention_leaves_every_head_to_the_caller_until_it_has_finished(B):
    B.linear(r(1, 512), B.prepare_linear(r(1024, 512)))
    k, v = cross_kv(B, 8, 500, 500, 64)
    q = r(8, 1, 64)
    first = B.attention(q, k, v, 0.125)
    pid, served = B.twin.pid, B.twin.served()
    os.kill(pid, signal.SIGSTOP)
    t0 = time.monotonic()
    again = B.attention(q, k, v, 0.125)
    assert cpu_twin.DEADLINE_S <= time.monotonic() - t0 < 1.0
    assert np.array_equal(again, first) and np.array_equal(B.attention(q, k, v, 0.125), first)
    assert B.twin.pid == pid and B.twin.served() == served
    os.kill(pid, signal.SIGCONT)
    assert until(lambda: B.twin.served() == served + 1)
    assert np.array_equal(B.attention(q, k, v, 0.125), first) and B.twin.served() == served + 2


@pytest.mark.parametrize("bits", [8, 4])
def test_quantized_products_go_half_to_the_twin_with_identical_results(B, bits):
    ws = [B.prepare_linear(B.quantize(r(*s), 64, bits)) for s in [(4096, 512), (20000, 512), (512, 1024)]]
    assert [len(w.bounds) - 1 for w in ws] == [
        2,
        4 if bits == 8 else 2,
        2 if bits == 8 else 1,
    ]  # 8 MB: chunks; 512 KB: halves
    for rows in (1, 4):
        x = r(rows, 2048)
        before = B.twin.served()
        with_twin = products(B, ws, x)
        assert B.twin.served() - before == (3 if bits == 8 else 2)
        B.twin.failed = True
        alone = products(B, ws, x)
        B.twin.failed = False
        for a, b in zip(with_twin, alone):
            assert np.array_equal(a, b)


@pytest.mark.parametrize("bits", [None, 8, 4])
def test_on_more_cpus_the_twin_takes_one_cpus_share_of_a_large_product_and_the_rest_spreads(B, monkeypatch, bits):
    """On 8 CPUs a large matrix is cut in 16 ranges: the twin takes 2 (one core's share), the caller's 14 go over
    ``cpu_pool`` at most 7 at once (the eighth core is the twin's), so the product uses every core, not two; the
    results are the same bits as without the twin. (On two CPUs the twin takes half: the tests above.)"""
    from engine.backends import ort_kernels

    monkeypatch.setattr(cpu_pool, "CPUS", 8)
    monkeypatch.setattr(numpy_backend, "CHUNKS", 16)
    monkeypatch.setattr(ort_kernels, "CHUNKS", 16)
    spread, handed = [], []
    pool_run, submit = cpu_pool.run, cpu_twin.Twin.submit

    def spy_run(jobs, width=None):
        spread.append((len(jobs), width))
        pool_run(jobs, width)

    def spy_submit(self, w, x, edges, step=0):
        ticket = submit(self, w, x, edges, step)
        handed.append(list(edges) if ticket is not None else None)
        return ticket

    monkeypatch.setattr(cpu_pool, "run", spy_run)
    monkeypatch.setattr(cpu_twin.Twin, "submit", spy_submit)
    w = r(4096, 1024)  # 16 MB as float32; 8 / 4-bit: 4.3 / 2.3 MB, cut alike when asked to be
    if bits is not None:
        monkeypatch.setattr(ort_kernels, "SPLIT_BYTES", 1 << 20)
        w = B.quantize(w, 64, bits)
    W = B.prepare_linear(w)
    x = r(3, 1024)
    with_twin = B.linear(x, W)
    if bits is None:
        assert handed == [[4096 * 14 // 16, 4096 * 15 // 16, 4096]]  # the last two of 16 row ranges
    else:
        assert len(W.bounds) == 17 and handed == [[14, 16]]
    assert spread == [(14, 7)]
    B.twin.failed = True
    assert np.array_equal(with_twin, B.linear(x, W))


def test_pool_width_bounds_the_threads_and_runs_every_job_once(monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(7)  # as on 8 CPUs
    monkeypatch.setattr(cpu_pool, "helpers", lambda: pool)
    monkeypatch.setattr(cpu_pool.contention, "busy", lambda: False)
    done, threads, lock = [], set(), threading.Lock()

    def job(i):
        def run():
            time.sleep(0.01)
            with lock:
                done.append(i)
                threads.add(threading.get_ident())

        return run

    try:
        cpu_pool.run([job(i) for i in range(14)], width=3)
        assert sorted(done) == list(range(14)) and len(threads) <= 3
        done.clear(), threads.clear()
        cpu_pool.run([job(i) for i in range(14)])
        assert sorted(done) == list(range(14)) and len(threads) > 3  # without a width: every helper
    finally:
        pool.shutdown()


def test_matmulnbits_results_do_not_depend_on_the_row_cut(monkeypatch):
    """Why the quantized cut may depend on the platform (whether a twin exists): every output column alike."""
    from engine.backends import ort_kernels

    B = NumpyBackend()
    B.twin.failed = True
    # 620 rows (Moonshine small's encoder): halves of 310 columns changed the last two of each (a kernel tile
    # is wider), so chunks start at multiples of ALIGN; (620, 2480) in groups of 16 is its quantized fc2
    for (out_dim, in_dim), group in (((1536, 512), 64), ((620, 2480), 16), ((620, 512), 64)):
        for bits in (8, 4):
            q = B.quantize(r(out_dim, in_dim), group, bits)
            monkeypatch.setattr(ort_kernels, "SPLIT_BYTES", 1)
            cut = B.prepare_linear(q)
            monkeypatch.setattr(ort_kernels, "SPLIT_BYTES", 1 << 40)
            monkeypatch.setattr(ort_kernels, "HALF_BYTES", 1)
            monkeypatch.setattr(cpu_twin, "enabled", lambda: True)
            halves = B.prepare_linear(q)
            monkeypatch.setattr(ort_kernels, "HALF_BYTES", 1 << 40)
            whole = B.prepare_linear(q)
            assert len(cut.bounds) == ort_kernels.CHUNKS + 1 and len(halves.bounds) == 3 and len(whole.bounds) == 2
            assert all(b % ort_kernels.ALIGN == 0 for b in cut.bounds[:-1] + halves.bounds[:-1])
            for rows in (1, 3, 12, 200):
                x = r(rows, in_dim)
                assert np.array_equal(cut(x), whole(x)) and np.array_equal(halves(x), whole(x))


def test_a_matrix_too_narrow_for_aligned_chunks_gets_no_empty_one(monkeypatch):
    from engine.backends import ort_kernels

    B = NumpyBackend()
    B.twin.failed = True
    monkeypatch.setattr(ort_kernels, "HALF_BYTES", 1)
    monkeypatch.setattr(cpu_twin, "enabled", lambda: True)
    q = B.quantize(r(48, 512), 64, 8)
    lin = B.prepare_linear(q)  # two halves would both start at 0
    assert lin.bounds == [0, 48]
    x = r(2, 512)
    deq = dequantize(q).astype(np.float64)
    bound = 1.2 * np.abs(x).max(axis=1, keepdims=True) / 254 * np.abs(deq).sum(axis=1)[None, :] + 1e-5
    assert (np.abs(lin(x) - x.astype(np.float64) @ deq.T) <= bound).all()


def test_no_signal_handler_of_the_parent_runs_in_the_twin(tmp_path):
    """A SIGTERM to the twin ends it; the parent's Python handler (which here writes a file) does not run there."""
    mark = tmp_path / "handler-ran"
    script = (
        "import signal, sys\n"
        "import numpy as np\n"
        "from engine.backends import cpu_pool\n"
        "from engine.backends.numpy_backend import NumpyBackend\n"
        f"signal.signal(signal.SIGTERM, lambda *_: open({str(mark)!r}, 'w').close())\n"
        "cpu_pool.contention.busy = lambda: False\n"
        "B = NumpyBackend()\n"
        "w = B.prepare_linear(np.ones((1024, 512), np.float32))\n"
        "B.linear(np.ones((1, 512), np.float32), w)\n"
        "print(B.twin.pid, flush=True)\n"
        "sys.stdin.readline()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    pid = int(proc.stdout.readline())
    os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + 5
    while alive(pid) and time.monotonic() < end:
        time.sleep(0.01)
    proc.communicate("go\n", timeout=30)
    assert not alive(pid) and not mark.exists()


def test_a_fork_that_fails_leaves_the_caller_computing_alone(B, monkeypatch):
    def no_fork():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(cpu_twin.os, "fork", no_fork)
    w = B.prepare_linear(r(1024, 512))
    x = r(1, 512)
    fds = len(os.listdir("/proc/self/fd"))
    y = B.linear(x, w)
    np.testing.assert_allclose(y, x.astype(np.float64) @ w.astype(np.float64).T, atol=1e-4, rtol=0)
    assert B.twin.failed and B.twin.pid == 0
    assert len(os.listdir("/proc/self/fd")) == fds  # the pipe was closed again


def test_a_product_longer_than_the_deadline_is_not_taken_for_a_hang(B, monkeypatch):
    """The wait scales with the caller's own half: with a 0.1 ms deadline, 32-row products over 64 MB (a few ms a
    side) still go half to the twin."""
    monkeypatch.setattr(cpu_twin, "DEADLINE_S", 0.0001)
    w = B.prepare_linear(r(8000, 2048))
    x = r(32, 2048)
    for _ in range(5):
        y = B.linear(x, w)
    assert not B.twin.failed and B.twin.served() == 5
    np.testing.assert_allclose(y, x.astype(np.float64) @ w.astype(np.float64).T, atol=2e-3, rtol=0)


@pytest.mark.parametrize("bits", [8, 4])
def test_a_fused_gated_mlp_goes_half_to_the_twin_with_identical_results(B, bits):
    f, d = 2048, 512  # Moonshine small's decoder MLP
    up_gate, down = B.prepare_linear(B.quantize(r(2 * f, d), 64, bits)), B.prepare_linear(B.quantize(r(d, f), 64, bits))
    mlp = B.prepare_gated_mlp(up_gate, r(2 * f), down, r(d))
    assert type(mlp[0]).__name__ == "GatedMlp"
    for rows in (1, 5):
        x = r(rows, d)
        before = B.twin.served()
        with_twin = B.gated_mlp(x, *mlp)
        assert B.twin.served() - before == 1
        B.twin.failed = True
        alone = B.gated_mlp(x, *mlp)
        B.twin.failed = False
        assert np.array_equal(with_twin, alone)


@pytest.mark.parametrize("bits", [8, 4])
def test_products_and_mlps_fused_with_their_norm_go_half_to_the_twin_with_identical_results(B, bits):
    """Each chunk's graph computes the layer norm itself: the twin's half is the same as the caller's would be."""
    d, f = 512, 2048
    norm = r(d)
    qkv = B.prepare_norm_linear(norm, 1e-5, B.prepare_linear(B.quantize(r(3072, d), 64, bits)))
    up_gate, down = B.prepare_linear(B.quantize(r(2 * f, d), 64, bits)), B.prepare_linear(B.quantize(r(d, f), 64, bits))
    mlp = B.prepare_gated_mlp(up_gate, r(2 * f), down, r(d), norm, 1e-5)
    assert len(qkv.bounds) == 3 and qkv.norm is norm and mlp[0].norm is norm  # two chunks, the norm in both
    x = r(1, d)
    before = B.twin.served()
    with_twin = B.norm_linear(x, norm, 1e-5, qkv, "float32"), B.gated_mlp(x, *mlp, norm=norm)
    assert B.twin.served() - before == 2
    B.twin.failed = True
    alone = B.norm_linear(x, norm, 1e-5, qkv, "float32"), B.gated_mlp(x, *mlp, norm=norm)
    B.twin.failed = False
    assert all(np.array_equal(a, b) for a, b in zip(with_twin, alone))


def test_voxtral_streams_the_reference_ids_with_half_of_each_attention_on_the_twin(monkeypatch):
    """Voxtral's KV rings lie in the twin's shared memory at their full capacity from the start; every attention
    over them (masked once a ring has wrapped: windows of 16 and 24 here) goes half to the twin, and the
    session streams the reference's ids, as without the twin."""
    from engine import load_model

    monkeypatch.setattr(cpu_pool.contention, "busy", lambda: False)
    monkeypatch.setattr(numpy_backend, "TWIN_BYTES", 0)  # the fixture's matrices are small: known to the twin
    monkeypatch.setattr(numpy_attention, "TWIN_BYTES", 0)
    handed = []
    submit = cpu_twin.Twin.submit_attention

    def spy(self, q, k, v, scale, h0, mask=None):
        ticket = submit(self, q, k, v, scale, h0, mask)
        handed.append((ticket is not None, mask is not None, q.shape[1]))
        return ticket

    monkeypatch.setattr(cpu_twin.Twin, "submit_attention", spy)
    m = load_model(REPO / "tests" / "fixtures" / "models" / "vox_tiny_hf", backend="numpy")
    B = m.B
    B.twin.failed = False
    try:
        s, reference = voxtral_speech_stream(m)
        rings = [s.enc_ring, s.dec_ring]
        assert all(r.cap == r.max_capacity for r in rings)
        assert all(B.twin.arena.locate(a) is not None for r in rings for a in r.k + r.v)
        steps = [(taken, masked) for taken, masked, rows in handed if rows <= cpu_twin.MAX_ROWS]  # not a prefill
        assert len(steps) > 100 and all(taken for taken, _ in steps) and any(masked for _, masked in steps)
        B.twin.failed = True
        alone, _ = voxtral_speech_stream(m)
    finally:
        B.twin.failed = not cpu_twin.enabled()
        B.twin.stop()
    assert s.tokens == alone.tokens == reference
