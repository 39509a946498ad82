"""The shared arena of attention K/V (``cpu_twin``'s): zeros, blocks that come back zeroed, a full arena that
falls back to ordinary memory, and a forked process that reads what the parent writes after the fork."""

from __future__ import annotations

import gc
import io
import os
import threading

import numpy as np
import pytest

from engine.backends import cpu_twin
from engine.backends.numpy_backend import NumpyBackend
from engine.backends.shared_arena import GIVE_BACK_BYTES, PAGE, SharedArena


def test_buffers_are_zero_and_a_released_block_comes_back_zeroed():
    arena = SharedArena(64 * PAGE)
    a = arena.zeros((8, 100, 64))
    assert a.shape == (8, 100, 64) and a.dtype == np.float32 and not a.any()
    view = a[:, :50]
    assert arena.locate(view) == arena.locate(a) == 0 and arena.locate(a[1]) == 100 * 64 * 4
    a[...] = 3.0
    del a
    gc.collect()
    assert view.sum() == 8 * 50 * 64 * 3.0  # a view keeps its block
    del view
    gc.collect()
    b = arena.zeros((8, 100, 64))
    assert arena.locate(b) == 0 and not b.any()


def test_a_block_released_while_held_is_not_given_out_again_until_unhold():
    """A twin late with its job may still write into a cache the caller has dropped meanwhile (``cpu_twin``): such
    a block must not come back as "zeros" to the next owner until the twin has finished or is gone."""
    arena = SharedArena(4 * PAGE)
    a = arena.zeros((PAGE // 4,))
    arena.hold()
    del a
    gc.collect()
    b = arena.zeros((PAGE // 4,))
    assert arena.locate(b) == PAGE  # not the held block
    arena.zeros((PAGE // 4,))
    stray = arena.view(0, (PAGE // 4,), (4,))
    stray[:] = 5.0  # the late twin's write into the dropped block
    assert arena.zeros((PAGE // 4,)) is not None and arena.zeros((PAGE // 4,)) is None  # full: the held one stays out
    arena.unhold()
    c = arena.zeros((PAGE // 4,))
    assert arena.locate(c) == 0 and not c.any()  # zeroed when it came back


def shared_kb() -> int:
    """This process's resident shared memory (kB; Linux)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("RssShmem:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux")
def test_a_large_released_block_gives_its_pages_back_and_reads_zeros_again():
    """A long KV ring is mostly unwritten in a short session: zeroing it on release would make every page
    resident; its pages go back to the system instead."""
    arena = SharedArena(2 * GIVE_BACK_BYTES)
    a = arena.zeros((GIVE_BACK_BYTES // 4,))
    before = shared_kb()
    a[:] = 1.0
    assert shared_kb() - before >= 0.9 * GIVE_BACK_BYTES / 1024
    del a
    gc.collect()
    assert shared_kb() - before <= 0.1 * GIVE_BACK_BYTES / 1024
    b = arena.zeros((GIVE_BACK_BYTES // 4,))
    assert arena.locate(b) == 0 and not b.any()


def test_a_full_arena_gives_none_and_the_backend_ordinary_memory():
    arena = SharedArena(4 * PAGE)
    keep = [arena.zeros((PAGE // 4,)) for _ in range(4)]
    assert arena.zeros((1,)) is None
    assert arena.locate(np.zeros(4, np.float32)) is None and arena.locate(keep[0].astype(np.float64)) is None
    B = NumpyBackend()
    B.twin.arena = arena
    buf = B.kv_zeros((2, 3, 4))
    assert buf.shape == (2, 3, 4) and not buf.any() and arena.locate(buf) is None
    del keep[1]
    gc.collect()
    assert arena.locate(B.kv_zeros((PAGE // 4,))) == PAGE  # the freed block, whole pages


def test_blocks_coalesce_so_a_large_buffer_fits_after_small_ones_go():
    arena = SharedArena(8 * PAGE)
    small = [arena.zeros((PAGE // 4,)) for _ in range(8)]
    del small[2:6]
    gc.collect()
    assert arena.locate(arena.zeros((PAGE,))) == 2 * PAGE  # four freed pages in one block


def test_an_array_collected_while_the_arena_is_locked_does_not_deadlock():
    """The garbage collector may free an arena array inside ``zeros`` (which holds the lock): the release must
    not wait for that lock; the block is free again at the next allocation."""
    arena = SharedArena(4 * PAGE)
    a = arena.zeros((PAGE // 4,))
    a[...] = 5.0
    cycle = [a]
    cycle.append(cycle)  # only the cycle collector frees it
    del a, cycle

    def collect_under_the_lock():
        with arena._lock:
            gc.collect()

    t = threading.Thread(target=collect_under_the_lock, daemon=True)
    t.start()
    t.join(5)
    assert not t.is_alive()
    b = arena.zeros((PAGE // 4,))
    assert arena.locate(b) == 0 and not b.any()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_process_reads_what_the_parent_writes_after_the_fork():
    arena = SharedArena(4 * PAGE)
    a = arena.zeros((16,))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.read(r, 1)
        os._exit(0 if arena.view(arena.locate(a), (16,), (4,)).sum() == 16 * 7 else 1)
    a[...] = 7.0
    os.write(w, b"x")
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def test_without_a_twin_there_is_no_arena(monkeypatch):
    monkeypatch.setenv("LIVECAP_CPU_TWIN", "0")
    t = cpu_twin.Twin()
    assert t.arena is None


def test_the_arena_takes_a_quarter_of_the_memory_at_most_and_the_smallest_size_under_strict_overcommit(monkeypatch):
    real_open = open

    def system(mode: str, gib: int):
        monkeypatch.setattr(
            "builtins.open",
            lambda path, *a, **k: io.StringIO(mode + "\n") if "overcommit" in str(path) else real_open(path, *a, **k),
        )
        monkeypatch.setattr(os, "sysconf", lambda name: 4096 if name == "SC_PAGE_SIZE" else gib * (1 << 30) // 4096)
        return cpu_twin.arena_sizes()

    assert system("0", 32) == (4 << 30, 1 << 30, 256 << 20)
    assert system("1", 8) == (1 << 30, 256 << 20)  # a 4 GB arena would be half of it
    assert system("0", 2) == (256 << 20,)
    assert system("2", 64) == (256 << 20,)  # the whole mapping would be charged at once
