"""Run the fused kernel on torch's own OpenMP threads (``GOMP_parallel``), when torch has them.

Why: right after an op, torch's intra-op worker threads keep spinning for a while before they
sleep (OpenMP's default wait policy), so on a machine whose cores torch uses, a thread pool of
our own gets no core for the kernel's other half: it waits behind the spinning workers, and the
split runs no faster than one thread. Handing the rows to the team those workers belong to puts
them to work at once. Each member of the team reduces a contiguous block of rows (rows are
independent, so the numbers are the same however they are split).

``team()`` returns None when this cannot be done safely: torch's parallel backend is not
OpenMP, no OpenMP runtime (``libgomp``, ``libiomp5``, ``libomp``, which all export
``GOMP_parallel``) is found among the libraries torch loaded, or more than one is. The caller
then splits rows over its own threads.
"""

from __future__ import annotations

import ctypes
import os
import re
import threading
from collections.abc import Callable

import numpy as np
import torch
from numba import carray, cfunc, types
from numba.core import cgutils
from numba.extending import intrinsic

_ARRAYS = ("lp", "old", "mask", "adv", "ref", "ent", "smp", "flags", "thr", "out")
# The job vector: the address of each array (``_ARRAYS``), then B, T, K, the advantages' width
# and the (rows, columns) of ref, ent and smp ((1, 1) stand-ins when absent).
B_SLOT, T_SLOT, K_SLOT, ADV_T_SLOT, OPT_SLOT = range(len(_ARRAYS), len(_ARRAYS) + 5)
JOB_LEN = OPT_SLOT + 6
_OMP_FILE = re.compile(r"\s(/\S*/lib(?:gomp|iomp5|omp)[^/\s]*\.(?:so|dylib)[^/\s]*)$")


@intrinsic
def _voidptr(typingctx, address):
    """An int64 address as a ``void *`` (for ``carray``)."""

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], cgutils.voidptr_t)

    return types.voidptr(types.int64), codegen


def _omp_library() -> str | None:
    """The one OpenMP runtime mapped into this process, from torch's own folder if it has one;
    None if torch does not run its ops on OpenMP, or if no single runtime is found (no
    ``/proc/self/maps``: not Linux)."""
    if "OpenMP" not in torch.__config__.parallel_info().split("backend:")[-1].split("\n")[0]:
        return None
    try:
        with open("/proc/self/maps") as f:
            found = {m.group(1) for line in f if (m := _OMP_FILE.search(line.rstrip("\n")))}
    except OSError:
        return None
    torch_dir = os.path.dirname(torch.__file__)
    own = {p for p in found if os.path.realpath(p).startswith(os.path.realpath(torch_dir))}
    candidates = own or found
    return next(iter(candidates)) if len(candidates) == 1 else None


def _make_job(kernel: Callable, nb, thread_num: Callable, num_threads: Callable):
    """The ``void job(void *)`` C function each team member runs: it rebuilds the kernel's
    arrays (float type ``nb``) from the job vector and reduces its block of rows."""

    def job(data):  # pragma: no cover (numba compiles it)
        j = carray(data, (JOB_LEN,), np.int64)
        B, T, K, o = j[B_SLOT], j[T_SLOT], j[K_SLOT], OPT_SLOT
        member = thread_num()
        size = num_threads()
        kernel(
            carray(_voidptr(j[0]), (B, T), nb),
            carray(_voidptr(j[1]), (B, T), nb),
            carray(_voidptr(j[2]), (B, T), np.uint8),
            carray(_voidptr(j[3]), (B, j[ADV_T_SLOT]), nb),
            carray(_voidptr(j[4]), (j[o], j[o + 1]), nb),
            carray(_voidptr(j[5]), (j[o + 2], j[o + 3]), nb),
            carray(_voidptr(j[6]), (j[o + 4], j[o + 5]), nb),
            carray(_voidptr(j[7]), (4,), np.int64),
            carray(_voidptr(j[8]), (4,), np.float64),
            carray(_voidptr(j[9]), (K, B), np.float64),
            B * member // size,
            B * (member + 1) // size,
        )

    return job


class Team:
    """torch's OpenMP team, ready to run the kernel: ``run`` splits the rows over its members;
    ``prepare`` compiles the C function for a dtype (about 0.6 s, once per process)."""

    def __init__(self, kernel: Callable, lib: ctypes.CDLL):
        self._kernel = kernel
        self._parallel = lib.GOMP_parallel
        self._parallel.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint)
        self._parallel.restype = None
        self._thread_num, self._num_threads = lib.omp_get_thread_num, lib.omp_get_num_threads
        for fn in (self._thread_num, self._num_threads):
            fn.argtypes, fn.restype = (), ctypes.c_int
        self._jobs: dict[np.dtype, int] = {}  # dtype -> the compiled job's address
        self._compiling: set[np.dtype] = set()
        self._lock = threading.Lock()

    def prepare(self, dtype) -> None:
        """Compile the job for ``dtype`` (float32 or float64) now, if not done yet."""
        dtype = np.dtype(dtype)
        with self._lock:
            if dtype in self._jobs:
                return
            make = _make_job(self._kernel, dtype.type, self._thread_num, self._num_threads)
            self._jobs[dtype] = cfunc(types.void(types.voidptr))(make).address

    def run(self, args: tuple, threads: int) -> bool:
        """The kernel over every row of ``args`` (as ``diagnostics_kernel`` takes them, without
        b0 and b1), split over up to ``threads`` members. False, with nothing done, while the
        job for the inputs' dtype is not compiled yet: its compilation is started on a
        background thread, so no caller ever waits for it."""
        lp, adv, out = args[0], args[3], args[9]
        address = self._jobs.get(lp.dtype)
        if address is None:
            with self._lock:
                start = lp.dtype not in self._compiling
                self._compiling.add(lp.dtype)
            if start:
                threading.Thread(
                    target=self.prepare, args=(lp.dtype,), name="gspo-omp-job", daemon=True
                ).start()
            return False
        B, T = lp.shape
        job = np.array(
            [a.ctypes.data for a in args]
            + [B, T, out.shape[0], adv.shape[1]]
            + [n for opt in args[4:7] for n in opt.shape],
            dtype=np.int64,
        )
        # ctypes releases the GIL for the call; every member runs compiled code only
        self._parallel(address, job.ctypes.data, int(threads), 0)
        return True


_team: list = []  # [(Team or None, pid)] once decided
_lock = threading.Lock()


def team(kernel: Callable) -> Team | None:
    """torch's OpenMP team for ``kernel`` (``diagnostics_kernel``), or None (see the module
    docstring), and None in a forked child of the process that found it (an OpenMP runtime is
    not fork-safe)."""
    if not _team:
        with _lock:
            if not _team:
                _team.append((_find(kernel), os.getpid()))
    found, pid = _team[0]
    return found if pid == os.getpid() else None


def _find(kernel: Callable) -> Team | None:
    path = _omp_library()
    if path is None:
        return None
    try:
        return Team(kernel, ctypes.CDLL(path))  # (already loaded: the handle torch uses)
    except (OSError, AttributeError):  # (no such library, or no GOMP_parallel in it)
        return None
