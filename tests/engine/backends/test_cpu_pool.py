"""cpu_pool: the busy check that keeps products on the calling thread beside a busy process."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from engine.backends import cpu_pool

BURN = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end: pass\n"


@pytest.fixture
def burner():
    """Another process that keeps one CPU busy (half of this 2-CPU machine) for the test."""
    proc = subprocess.Popen([sys.executable, "-c", BURN])
    time.sleep(0.3)  # started and spinning
    yield proc
    proc.kill()
    proc.wait()


def settle(c: cpu_pool.Contention, seconds: float = 0.6) -> bool:
    """The busy check after at least one whole sample taken while the burner spins."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        c.busy()
        time.sleep(0.02)
    return c.busy()


@pytest.mark.skipif(cpu_pool.SYSTEM_CPUS > 8, reason="one busy CPU is too small a share of this many to cross the line")
def test_a_process_that_keeps_a_cpu_busy_is_seen(burner):
    c = cpu_pool.Contention(busy_share=0.5 / cpu_pool.SYSTEM_CPUS, sample_s=0.2)
    assert settle(c)
    assert c.other_share >= 0.8 / cpu_pool.SYSTEM_CPUS  # one CPU's worth, less what the sampling misses


def test_a_twin_of_ours_does_not_count_as_another_process(burner):
    """The same spinning process, counted as ours (as a cpu_twin is): other processes' share drops by its share.
    Both counts are taken over the same windows: measured one after the other, a parallel test worker that started
    meanwhile made the second count as high as the first (a fresh-clone CI run failed so)."""
    plain, ours = cpu_pool.Contention(sample_s=0.0), cpu_pool.Contention(sample_s=0.0)
    ours.also_ours(burner.pid)
    burned = psutil.Process(burner.pid)
    for counted in (True, False):
        plain.busy(), ours.busy()  # the window starts (ours: with the burner's time so far as a start, too)
        began, cpu = time.monotonic(), sum(burned.cpu_times()[:2])
        time.sleep(0.5)
        plain.busy(), ours.busy()
        share = (sum(burned.cpu_times()[:2]) - cpu) / ((time.monotonic() - began) * cpu_pool.SYSTEM_CPUS)
        assert share > 0.2 / cpu_pool.SYSTEM_CPUS  # it ran
        expected = share if counted else 0.0
        assert plain.other_share - ours.other_share == pytest.approx(expected, abs=0.1 / cpu_pool.SYSTEM_CPUS)
        ours.also_ours(burner.pid, False)


def test_a_twin_that_died_or_never_was_is_ignored():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    c = cpu_pool.Contention()
    c.also_ours(proc.pid)
    c.also_ours(2**22 + 12345)  # above Linux's largest pid: no such process
    proc.kill()
    proc.wait()
    sample = c._sample()  # the dead twin's time is no longer read
    assert sample is not None and sample[2] >= 0


def test_without_the_systems_cpu_times_never_busy(monkeypatch):
    def denied():
        raise psutil.AccessDenied()

    monkeypatch.setattr(psutil, "cpu_times", denied)
    c = cpu_pool.Contention(busy_share=-1.0, sample_s=0.0)  # would be busy at any load
    assert not c.busy()


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2, reason="needs two CPUs and affinity masks"
)
def test_products_are_cut_for_the_cpus_this_process_may_use():
    """Under ``taskset -c 0`` (or a container's cpuset) on a 2-CPU machine, products were cut in two and a CPU twin
    started for a CPU the process could not run on (``os.cpu_count()`` counts the machine's)."""
    code = "from engine.backends import cpu_pool as p, cpu_twin as t; print(p.CPUS, p.SYSTEM_CPUS, t.enabled())"
    one = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}),
    )
    assert one.stdout.split() == ["1", str(os.cpu_count()), "False"], one.stderr
    assert cpu_pool.CPUS == len(os.sched_getaffinity(0))
