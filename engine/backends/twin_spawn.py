"""The CPU twin as a started process, where there is no safe fork (Windows, macOS) or ``LIVECAP_CPU_TWIN=spawn`` asks
for one.

Why: ``cpu_twin`` forks its helper, which then sees the weights, the blocks and the programs at the same addresses.
Windows has no fork, and macOS's is unsafe in a process that has used its system frameworks (Qt, Core Audio); without
the twin a decoder step runs on one core: there livecap's float32 step fell behind ONNX Runtime's
(benchmarks/RESULTS.md, round 16). A started process sees nothing of this one, so what it
computes with must lie in memory it can map by name: the weight matrices (``heap.Arena``'s blocks), the twin's K/V
arena and its control block are ``Segment``s, and the registered objects go over pickled with every array in a
segment as a reference to it (``dumps``), never as a copy. The child then runs ``cpu_twin``'s own loop.

Written by hand, and why: ``multiprocessing`` would import the caller's main module again in the child
(``engine.children``), and its ``shared_memory`` has every process that attaches a segment unlink it when that
process exits (Python < 3.13); a mapping another process can open is what ``mmap`` and ``os.memfd_create`` give
(on macOS, POSIX shared memory unlinked as soon as it is open: a descriptor like a memfd's, which no name reaches and
nothing leaks when a process dies).

Contract:
- ``Segment(nbytes)``: zero-filled shared memory (a memfd on Linux, unlinked POSIX shared memory on other POSIX
  systems, a named section on Windows; OSError where there is none); ``Segment(handle=...)`` maps the same memory in
  a started child.
- ``dumps(obj, segments, skip)``: ``obj`` pickled, each array lying whole in one of ``segments`` as a reference to
  it and each instance of ``skip`` as None; ValueError when the child could not rebuild it as it is (an ONNX
  Runtime session, a closure, an array of ``COPY_LIMIT`` bytes or more outside the segments, which would be
  copied).
- ``start(payload, segments)``: the child process (``twin_child``), handed ``payload`` (a pickled dict) and the
  segments; what it reads after that on its standard input wakes it (end of file: this process is gone).
"""

from __future__ import annotations

import io
import itertools
import json
import mmap
import os
import pickle
import secrets
import subprocess
import sys
import weakref

import numpy as np

from .. import children

FLAG = "--livecap-cpu-twin"  # argv[1] of a frozen app run as a started twin (packaging/livecap_main.py)
HEADER_END = b"\n"  # the line on the child's standard input that says where the payload is ends here
COPY_LIMIT = 1 << 20  # an array this large outside the segments is a weight that was not placed: refused
_tags = itertools.count()
MEMFD = hasattr(os, "memfd_create")  # Linux; elsewhere on POSIX (and in tests that set it False): shm_open
_attached: list[Segment] = []  # in a started child: the segments, in the parent's order


class Segment:
    """Shared memory that a started process maps too (``handle``); ``array`` views all of it as bytes. It is
    unmapped and its descriptor closed once this object and every array over it are gone."""

    def __init__(self, nbytes: int = 0, handle: tuple | None = None):
        if handle is not None:
            kind, ref, nbytes = handle
            self.buf = mmap.mmap(-1, nbytes, tagname=ref) if kind == "tag" else mmap.mmap(ref, nbytes)
            self.handle, self.fd = tuple(handle), None
        elif sys.platform == "win32":
            tag = f"livecap-twin-{os.getpid()}-{next(_tags)}-{secrets.token_hex(4)}"
            self.buf = mmap.mmap(-1, nbytes, tagname=tag)  # a section in the paging file, named
            self.handle, self.fd = ("tag", tag, nbytes), None
        elif os.name == "posix":
            fd = _anonymous_fd()
            try:
                os.ftruncate(fd, nbytes)
                self.buf = mmap.mmap(fd, nbytes)  # MAP_SHARED: the child's mapping of the same fd sees it
            except OSError:
                os.close(fd)
                raise
            self.handle, self.fd = ("fd", fd, nbytes), fd
            self._closer = weakref.finalize(self, os.close, fd)
        else:
            raise OSError("no named shared memory on this platform")
        self.size = nbytes
        self.base = np.frombuffer(self.buf, np.uint8).ctypes.data

    @property
    def array(self) -> np.ndarray:
        """All of it as a uint8 array (which keeps the mapping alive)."""
        return np.frombuffer(self.buf, np.uint8)

    def close(self) -> None:
        """Give up this process's mapping (where no array uses it any more) and descriptor now."""
        try:
            self.buf.close()
        except BufferError:  # an array still uses it: the mapping goes with the array
            pass
        if self.fd is not None:
            self._closer()
            self.fd = None


def _anonymous_fd() -> int:
    """A descriptor of new, empty shared memory that no name reaches (closed on exec; ``start`` passes it on)."""
    if MEMFD:
        return os.memfd_create("livecap-twin", os.MFD_CLOEXEC)
    try:
        import _posixshmem  # multiprocessing.shared_memory's own binding of shm_open / shm_unlink
    except ImportError:
        raise OSError("no shared memory on this platform") from None
    for _ in range(8):
        name = f"/livecap-{os.getpid()}-{secrets.token_hex(4)}"  # macOS: at most 31 characters
        try:
            fd = _posixshmem.shm_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600)
        except FileExistsError:
            continue
        _posixshmem.shm_unlink(name)
        return fd
    raise OSError("no free name for shared memory")


def _view(i: int, offset: int, shape: tuple, strides: tuple, dtype: str) -> np.ndarray:
    """An array over segment ``i`` of a started child (what ``dumps`` wrote for an array in a segment)."""
    return np.ndarray(shape, np.dtype(dtype), buffer=_attached[i].buf, offset=offset, strides=strides)


def _none():
    return None


def _where(a: np.ndarray, segments: list[Segment]):
    """``(index, offset)`` of the segment that holds all of ``a``, or None."""
    if not a.size or min(a.strides, default=1) < 0:
        return None
    first = a.__array_interface__["data"][0]
    end = first + sum((n - 1) * s for n, s in zip(a.shape, a.strides)) + a.itemsize
    for i, seg in enumerate(segments):
        if seg.base <= first and end <= seg.base + seg.size:
            return i, first - seg.base
    return None


class _Pickler(pickle.Pickler):
    def __init__(self, file, segments: list[Segment], skip: tuple):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.segments, self.skip = segments, skip

    def reducer_override(self, obj):
        if isinstance(obj, np.ndarray):
            where = _where(obj, self.segments)
            if where is not None:
                return _view, (*where, obj.shape, obj.strides, obj.dtype.str)
            if obj.nbytes >= COPY_LIMIT:
                raise ValueError("An array of weights lies outside the shared memory.")
            return NotImplemented
        if self.skip and isinstance(obj, self.skip):
            return _none, ()
        return NotImplemented


def dumps(obj, segments: list[Segment], skip: tuple = ()) -> bytes:
    """``obj`` pickled for a started child (see the module's contract)."""
    out = io.BytesIO()
    try:
        _Pickler(out, segments, skip).dump(obj)
    except (pickle.PicklingError, TypeError, AttributeError) as e:  # sessions, locks, local functions
        raise ValueError(f"{type(obj).__name__} cannot go to a started twin: {e}") from None
    return out.getvalue()


def start(payload: bytes, segments: list[Segment]) -> tuple[subprocess.Popen, Segment]:
    """Start the child over ``segments`` with ``payload``; returns it and the segment that holds the payload
    (keep it until the child is ready). OSError when it cannot start."""
    box = Segment(max(1, len(payload)))
    box.array[: len(payload)] = np.frombuffer(payload, np.uint8)
    fds = [s.fd for s in (*segments, box) if s.fd is not None]
    env = children.environment()
    env["LIVECAP_CPU_TWIN"] = "0"  # the child never starts a twin of its own
    proc = subprocess.Popen(
        children.command("engine.backends.twin_child", FLAG),
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=env,
        creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0),  # Windows: no console window for it
        **({"pass_fds": fds} if os.name == "posix" else {}),
    )
    header = json.dumps({"box": box.handle, "size": len(payload), "segments": [s.handle for s in segments]})
    try:
        os.write(proc.stdin.fileno(), header.encode() + HEADER_END)
    except OSError:
        proc.kill()
        proc.wait()
        box.close()
        raise
    return proc, box
