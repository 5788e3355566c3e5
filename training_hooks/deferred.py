"""CPU tensors: reduce a step on a background thread, from a copy of its inputs.

On a GPU, ``log_step``'s reductions are queued on the device and the caller goes on. On the CPU
there is no queue: every tensor op runs on the calling thread, so a recorder that reduces
(B, T) tensors there blocks the training loop for as long as the reductions take. This module
gives the CPU the GPU's shape:

1. the caller runs every check (bad input raises at ``log_step``, before anything is recorded),
   copies the step's inputs into a reused snapshot slot (``StepInputs.snapshot``: one memory pass
   per (B, T) input) and enqueues the step;
2. one background thread runs the same ``reduce_step`` on the copy and hands the record to the
   sinks, in step order.

It never makes the caller wait: when every slot is still being reduced (the thread fell behind),
the caller computes that step itself, as without this module, and the record still reaches the
sinks after the queued ones. Memory is bounded by ``slots`` copies of one step's inputs. The copy
is what makes this safe: the caller may overwrite its tensors as soon as ``log_step`` returns.
"""

from __future__ import annotations

import collections
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch

from .compute import StepRecord
from .priority import idle_thread


class SnapshotSlot:
    """Reused buffers holding one step's copied tensors (one flat buffer per input name)."""

    def __init__(self) -> None:
        self._bufs: dict[str, torch.Tensor] = {}

    def copy(self, name: str, x: torch.Tensor) -> torch.Tensor:
        """A contiguous copy of ``x`` (detached) in this slot's buffer for ``name``."""
        x = x.detach()
        n = x.numel()
        buf = self._bufs.get(name)
        if buf is None or buf.numel() < n or buf.dtype != x.dtype or buf.device != x.device:
            grow = buf is not None and buf.dtype == x.dtype and buf.device == x.device
            size = (
                max(n, buf.numel() * 5 // 4) if buf is not None and grow else n
            )  # T varies from step to step
            buf = self._bufs[name] = torch.empty(size, dtype=x.dtype, device=x.device)
        out = buf[:n].view(x.shape)
        out.copy_(x)
        return out


Job = Callable[[dict], StepRecord]


class DeferredCompute:
    """A FIFO of steps reduced on one daemon thread; see the module docstring.

    ``forward(record)`` hands a finished record to the sinks (called on this thread, or on the
    caller's when nothing is queued). ``on_fault(sink, kind, message)`` reports a step that
    failed to reduce (it is dropped; training goes on).

    The thread runs its torch ops on itself only (one intra-op thread) and at the lowest CPU
    priority (``training_hooks.priority.idle_thread``): it reduces on idle CPU, takes at most one
    core, and loses every contended core to the training loop. When the loop keeps every core busy the thread falls
    behind, the slots stay taken and the caller reduces the next steps itself, as without the
    thread.
    """

    name = "compute"

    def __init__(
        self,
        forward: Callable[[StepRecord], None],
        on_fault: Callable[[str, str, str], None],
        *,
        slots: int = 2,
    ):
        self._forward = forward
        self._on_fault = on_fault
        self._free: collections.deque[SnapshotSlot] = collections.deque(
            SnapshotSlot() for _ in range(max(1, slots))
        )
        self._jobs: collections.deque = collections.deque()
        self._cv = threading.Condition()
        self._pending = 0  # queued or running jobs
        self._closed = False
        self.cpu_s: float | None = None  # the thread's CPU seconds, once it has ended
        self.computed = 0  # steps reduced on the thread
        self._thread = threading.Thread(target=self._run, name="gspo-dash-compute", daemon=True)
        self._thread.start()

    # -- caller side
    @property
    def pending(self) -> int:
        return self._pending

    def acquire(self) -> SnapshotSlot | None:
        """A free slot, or None when every slot is queued (then compute on the caller)."""
        if self._closed or not self._thread.is_alive():
            return None
        try:
            return self._free.popleft()  # (deque pops are atomic)
        except IndexError:
            return None

    def release(self, slot: SnapshotSlot) -> None:
        self._free.append(slot)

    def submit(self, job: Job, slot: SnapshotSlot) -> None:
        """Queue ``job(workspace) -> StepRecord``, which reads ``slot``'s copies."""
        with self._cv:
            self._jobs.append((job, slot))
            self._pending += 1
            self._cv.notify()

    def put(self, record: StepRecord) -> None:
        """Forward a record computed on the caller: directly if nothing is queued, else after
        the queued steps (so the sinks see steps in order)."""
        with self._cv:
            if self._pending == 0 or not self._thread.is_alive():
                forward_now = True
            else:
                forward_now = False
                self._jobs.append((record, None))
                self._pending += 1
                self._cv.notify()
        if forward_now:
            self._forward(record)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every queued step reached the sinks (up to ``timeout`` s). True if so."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while self._pending and self._thread.is_alive():
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cv.wait(remaining)
            return self._pending == 0

    def close(self, timeout: float | None = 60.0) -> bool:
        """Finish the queued steps and stop the thread (up to ``timeout`` s). True if done."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._on_fault(
                self.name, "hung", f"steps still being reduced after {timeout} s; abandoned"
            )
            return False
        return True

    # -- the thread
    def _run(self) -> None:
        try:
            idle_thread()
            _serial_torch_ops()
            workspace: dict[str, Any] = {}  # gspo_metrics' scratch buffers, this thread's own
            while True:
                with self._cv:
                    while not self._jobs and not self._closed:
                        self._cv.wait()
                    if not self._jobs:
                        return
                    job, slot = self._jobs.popleft()
                try:
                    record = job if slot is None else job(workspace)
                    self.computed += slot is not None
                    self._forward(record)
                except BaseException as e:  # noqa: BLE001 -- never kill the thread
                    detail = "".join(traceback.format_exception_only(type(e), e)).strip()
                    self._on_fault(self.name, "compute", detail)
                finally:
                    if slot is not None:
                        self.release(slot)
                    with self._cv:
                        self._pending -= 1
                        self._cv.notify_all()
        finally:
            self.cpu_s = time.thread_time()


def _serial_torch_ops() -> None:
    """One intra-op thread for torch ops called from this thread, and only this one.

    ``torch.set_num_threads(1)`` would do it, but it also changes the default that every thread
    started later initialises itself with. With torch's OpenMP backend the thread count is
    OpenMP's per-thread ``nthreads-var``, so ``omp_set_num_threads(1)`` called here (after torch
    initialised this thread's count) changes this thread alone. Without OpenMP (or the symbol),
    the thread keeps torch's default.
    """
    try:
        torch.get_num_threads()  # torch sets this thread's OpenMP count on first use: do it now
        if "OpenMP" not in torch.__config__.parallel_info():
            return
        import ctypes

        ctypes.CDLL(None).omp_set_num_threads(1)  # libgomp/libiomp, loaded by torch
    except (AttributeError, OSError):
        pass
