"""The CPU twin as a started process (Windows has no fork, macOS no safe one; ``LIVECAP_CPU_TWIN=spawn`` makes one on
Linux too): what
it is given goes over as references to shared memory, its results are bit-identical to the caller's own, and
every way it can go wrong (not picklable, dead at start, killed, parent gone) ends in a right result."""

from __future__ import annotations

import os
import pickle
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from engine.backends import cpu_pool, cpu_twin, numpy_attention, numpy_backend, ort_kernels, twin_spawn
from engine.backends.numpy_backend import NumpyBackend
from tests.helpers import alive, decoder_steps, voxtral_speech_stream

REPO = Path(__file__).resolve().parents[3]
rng = np.random.default_rng(11)
started = pytest.mark.skipif(
    not sys.platform.startswith("linux") or cpu_twin.start_method() is None,
    reason="a started twin is tested on Linux x86-64 with 2+ CPUs (as Windows runs it)",
)


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.fixture
def S(monkeypatch):
    """A NumPy backend whose twin is a started process, used whatever the load; stopped afterwards."""
    monkeypatch.setenv("LIVECAP_CPU_TWIN", "spawn")
    monkeypatch.setattr(cpu_pool.contention, "busy", lambda: False)
    backend = NumpyBackend()
    yield backend
    backend.twin.stop()


def test_the_start_method_follows_the_platform_and_the_setting(monkeypatch):
    monkeypatch.setattr(cpu_pool, "CPUS", 2)
    monkeypatch.setattr(cpu_twin.platform, "machine", lambda: "x86_64")
    for plat, setting, method in [
        ("linux", "1", "fork"),
        ("linux", "spawn", "spawn"),
        ("win32", "1", "spawn"),
        ("darwin", "1", "spawn"),  # macOS on Intel: forking after its frameworks ran is unsafe
        ("win32", "0", None),
    ]:
        monkeypatch.setattr(cpu_twin.sys, "platform", plat)
        monkeypatch.setenv("LIVECAP_CPU_TWIN", setting)
        assert cpu_twin.start_method() == method, (plat, setting)
    monkeypatch.setattr(cpu_twin.platform, "machine", lambda: "arm64")  # no x86 store order: no twin
    assert cpu_twin.start_method() is None


@started
def test_arrays_in_shared_memory_go_over_as_references_and_the_rest_by_value_or_not_at_all(monkeypatch):
    seg = twin_spawn.Segment(1 << 22)
    w = seg.array[4096 : 4096 + 4 * 64 * 32].view(np.float32).reshape(64, 32)
    w[...] = r(64, 32)
    small = r(8)
    data = twin_spawn.dumps({"w": w[:, 16:], "small": small, "twin": cpu_twin.Twin()}, [seg], (cpu_twin.Twin,))
    assert len(data) < 2000  # the matrix is not in it
    monkeypatch.setattr(twin_spawn, "_attached", [twin_spawn.Segment(handle=seg.handle)])  # as a child maps it
    back = pickle.loads(data)
    assert np.array_equal(back["w"], w[:, 16:]) and np.array_equal(back["small"], small) and back["twin"] is None
    w[0, 16] = 42.0  # the same memory, not a copy
    assert back["w"][0, 0] == 42.0
    with pytest.raises(ValueError):
        twin_spawn.dumps(np.zeros(twin_spawn.COPY_LIMIT // 4, np.float32), [seg])  # a weight left outside
    with pytest.raises(ValueError):
        twin_spawn.dumps(lambda x: x, [seg])


@started
def test_weights_dropped_give_their_shared_memory_back(S):
    """Matrices placed and then replaced (a model converted to 8 bits on load) must not stay in shared memory."""
    w = S.prepare_linear(r(1024, 512))
    block = next(iter(S.twin._weight_segments.values()))
    assert twin_spawn._where(w, [block]) is not None  # the matrix lies in the twin's weight memory
    big = S.prepare_linear(r(4200, 1024))  # 17 MB: a segment of its own
    assert len(S.twin._weight_segments) == 2
    del big
    assert len(S.twin._weight_segments) == 1
    del w
    S.arena._block = None  # the arena's current block goes with its last matrix
    assert not S.twin._weight_segments


@started
@pytest.mark.parametrize("rows", [1, 3])
def test_products_on_a_started_twin_are_bit_identical_to_the_callers(S, rows):
    assert S.twin.method == "spawn"
    ws = [S.prepare_linear(r(n, k)) for n, k in [(1024, 512), (3072, 1024)]]
    x = r(rows, 1024)
    assert S.twin.wait_ready(30)
    before = S.twin.served()
    with_twin = [S.linear(x[:, : w.shape[1]], w) for w in ws]
    assert S.twin.served() == before + 2
    assert S.twin._box is None  # the payload's shared memory went once the twin was ready
    S.twin.failed = True
    alone = [S.linear(x[:, : w.shape[1]], w) for w in ws]
    for a, b in zip(with_twin, alone):
        assert np.array_equal(a, b)


@started
def test_without_memfd_posix_shared_memory_serves_the_same_and_leaves_no_name(monkeypatch):
    """macOS has no memfd: its segments are shm_open'd and unlinked at once (forced here on Linux)."""
    monkeypatch.setattr(twin_spawn, "MEMFD", False)
    names = set(Path("/dev/shm").iterdir())
    seg = twin_spawn.Segment(1 << 16)
    other = twin_spawn.Segment(handle=seg.handle)  # as a started child maps it
    seg.array[:4] = [1, 2, 3, 4]
    assert list(other.array[:4]) == [1, 2, 3, 4] and set(Path("/dev/shm").iterdir()) == names
    assert os.readlink(f"/proc/self/fd/{seg.fd}").startswith("/dev/shm/livecap-")  # not a memfd
    monkeypatch.setenv("LIVECAP_CPU_TWIN", "spawn")
    monkeypatch.setattr(cpu_pool.contention, "busy", lambda: False)
    S = NumpyBackend()
    try:
        w = S.prepare_linear(r(3072, 1024))
        x = r(1, 1024)
        assert S.twin.wait_ready(30) and S.twin._arena_segment.handle[0] == "fd"
        before = S.twin.served()
        with_twin = S.linear(x, w)
        assert S.twin.served() == before + 1
        S.twin.failed = True
        assert np.array_equal(with_twin, S.linear(x, w))
    finally:
        S.twin.stop()
    assert set(Path("/dev/shm").iterdir()) == names


@started
def test_attention_over_the_shared_arena_goes_half_to_a_started_twin(S):
    w = S.prepare_linear(r(1024, 512))  # the twin starts over this matrix, before the K/V exist
    assert S.twin.wait_ready(30) and w is not None
    k, v = S.kv_zeros((8, 600, 64)), S.kv_zeros((8, 600, 64))
    k[:, :500], v[:, :500] = r(8, 500, 64), r(8, 500, 64)  # written after the twin started
    q = r(8, 1, 64)
    before = S.twin.served()
    with_twin = S.attention(q, k[:, :500], v[:, :500], 0.125)
    assert S.twin.served() == before + 1
    S.twin.failed = True
    assert np.array_equal(with_twin, S.attention(q, k[:, :500], v[:, :500], 0.125))


@started
@pytest.mark.parametrize("quantize", [None, 8])
def test_a_model_gives_the_same_logits_with_a_started_twin_and_without(S, monkeypatch, tmp_path, quantize):
    """Moonshine's decoder steps on the fixture (one stack program per step) with every matrix known to the twin,
    float32 and 8-bit (fused MLPs and attention blocks on ONNX Runtime, rebuilt by the twin)."""
    from engine import build, load_model

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # the 8-bit copy is made here, not in the user cache
    monkeypatch.setattr(build, "get_backend", lambda name: S)
    monkeypatch.setattr(numpy_backend, "TWIN_BYTES", 0)
    monkeypatch.setattr(numpy_attention, "TWIN_BYTES", 0)
    m = load_model(REPO / "tests" / "fixtures" / "models" / "moon_tiny_like", backend="numpy", quantize=quantize)
    enc, valid = m.encode(r(16000) * 0.1)

    def steps():
        return decoder_steps(m, enc, valid)

    assert S.twin.wait_ready(30) and not S.twin._absent  # every object went over
    before = S.twin.served()
    with_twin = steps()
    assert S.twin.served() >= before + 5  # a program per step at least
    S.twin.failed = True
    alone = steps()
    for a, b in zip(with_twin, alone):
        assert np.array_equal(a, b)


@started
@pytest.mark.parametrize("bits", [8, 4])
def test_quantized_products_go_half_to_a_started_twin_with_identical_results(S, bits):
    """8/4-bit products run on ONNX Runtime sessions: the twin rebuilds them from the weights in shared memory."""
    w = S.prepare_linear(S.quantize(r(2048, 512), 64, bits))
    x = r(1, 512)
    assert S.twin.wait_ready(30) and not S.twin._absent
    before = S.twin.served()
    y = S.linear(x, w)
    assert S.twin.served() == before + 1
    S.twin.failed = True
    assert np.array_equal(y, S.linear(x, w))


@started
def test_what_cannot_go_over_stays_the_callers_with_identical_results(S):
    """An 8-bit product without its ``QuantizedWeight`` (nothing to rebuild it from) is computed by the caller."""
    q = S.quantize(r(2048, 512), 64, 8)
    k = S._with_twin(ort_kernels.NBitsLinear(np.asarray(q.w), q.scales, q.biases, 64, 8))
    f = S.prepare_linear(r(1024, 512))
    x = r(1, 512)
    assert S.twin.wait_ready(30) and S.twin._absent
    before = S.twin.served()
    y = k(x)
    S.linear(x, f)
    assert S.twin.served() == before + 1  # the float32 product only
    S.twin.failed = True
    assert np.array_equal(y, k(x))


@started
def test_a_started_twin_that_dies_is_given_up_and_the_caller_goes_on_alone_until_a_new_one_starts(S, monkeypatch):
    monkeypatch.setattr(cpu_twin, "RETRY_S", (0.3,))
    w = S.prepare_linear(r(2048, 512))
    x = r(1, 512)
    assert S.twin.wait_ready(30)
    dead = S.twin.pid
    S.twin._proc.kill()
    S.twin._proc.wait()
    t = time.monotonic()
    y = S.linear(x, w)
    assert time.monotonic() - t < 1.0 and not S.twin.pid
    assert np.array_equal(y, (w @ x.T).T)
    time.sleep(0.35)
    assert S.twin.wait_ready(30) and S.twin.pid not in (0, dead)  # started again over the same shared memory
    served = S.twin.served()
    assert np.array_equal(S.linear(x, w), y) and S.twin.served() == served + 1


@started
def test_a_twin_that_never_starts_is_given_up(S, monkeypatch):
    monkeypatch.setattr(twin_spawn.children, "command", lambda module, flag: [sys.executable, "-c", "pass"])
    w = S.prepare_linear(r(1024, 512))
    x = r(1, 512)
    assert not S.twin.wait_ready(5)
    assert S.twin.failed
    assert np.array_equal(S.linear(x, w), (w @ x.T).T)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_backend_that_goes_away_takes_its_twin_with_it(monkeypatch, method):
    if cpu_twin.start_method() is None or not sys.platform.startswith("linux"):
        pytest.skip("a twin runs here on Linux x86-64 with 2+ CPUs")
    import gc

    monkeypatch.setenv("LIVECAP_CPU_TWIN", "spawn" if method == "spawn" else "1")
    monkeypatch.setattr(cpu_pool.contention, "busy", lambda: False)
    backend = NumpyBackend()
    w = backend.prepare_linear(r(1024, 512))
    assert backend.twin.wait_ready(30)
    pid = backend.twin.pid
    assert alive(pid)
    del backend, w
    gc.collect()
    end = time.monotonic() + 5
    while alive(pid) and time.monotonic() < end:
        time.sleep(0.01)
    assert not alive(pid)


@started
def test_voxtral_streams_the_reference_ids_with_a_started_twin(S, monkeypatch):
    """Voxtral's KV rings in the started twin's arena, its attentions (masked once a ring wraps) half on the twin:
    the reference's ids, as without the twin."""
    from engine import build, load_model

    monkeypatch.setattr(build, "get_backend", lambda name: S)
    monkeypatch.setattr(numpy_backend, "TWIN_BYTES", 0)  # the fixture's matrices are small: known to the twin
    monkeypatch.setattr(numpy_attention, "TWIN_BYTES", 0)
    m = load_model(REPO / "tests" / "fixtures" / "models" / "vox_tiny_hf", backend="numpy")
    assert S.twin.wait_ready(30) and not S.twin._absent
    before = S.twin.served()
    s, reference = voxtral_speech_stream(m)
    assert S.twin.served() > before + 100 and all(S.twin.arena.locate(a) is not None for a in s.dec_ring.k)
    S.twin.failed = True
    assert s.tokens == voxtral_speech_stream(m)[0].tokens == reference
