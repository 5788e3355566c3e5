"""The lowest CPU priority, for the recorder's background work (the reduction thread of
``training_hooks.deferred``, the MLflow child process of ``training_hooks.sinks.mlflow``).

Why: when cores are short, training must win them and the recorder lag. On Linux that is
SCHED_IDLE, which the scheduler preempts as soon as any normal thread wants the core; at nice 19
a woken training thread can wait a scheduler tick or more for the core, and a training step that
waits on its slowest thread stalls with it. Where SCHED_IDLE is missing: nice 19; where neither
exists, the normal priority.

Imports nothing but ``os`` and ``threading``: the MLflow child calls ``idle_process`` before it
imports anything else.
"""

from __future__ import annotations

import os
import threading


def idle_process() -> None:
    """The lowest CPU priority for this whole process (SCHED_IDLE, else nice 19)."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        return
    except (AttributeError, OSError):
        pass
    try:
        os.nice(19)
    except (AttributeError, OSError):
        pass


def idle_thread() -> None:
    """The lowest CPU priority for the calling thread only (Linux schedules threads, so one
    thread's policy is its own): SCHED_IDLE, else nice 19. Elsewhere (no per-thread priority)
    the thread keeps the normal priority."""
    if not hasattr(threading, "get_native_id") or os.uname().sysname != "Linux":
        return
    tid = threading.get_native_id()
    try:
        os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        try:
            os.setpriority(os.PRIO_PROCESS, tid, 19)
        except (AttributeError, OSError):
            pass


def normal_process(pid: int) -> None:
    """Give process ``pid`` (one of ours at ``idle_process``) the normal policy back, at the nice
    value it inherited: for when the caller waits on it, so its work is no longer background.
    Where that is not allowed or not supported, nothing changes."""
    try:
        os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
    except (AttributeError, OSError):
        pass
