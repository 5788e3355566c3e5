"""What every sink is, and the thread that drives one: ``Sink``, ``NullSink``, ``SinkWorker``.

A ``Sink`` buffers in ``write`` (cheap), persists in ``flush`` (slow: disk, network) and finishes
in ``close``. A ``SinkWorker`` owns one sink and one daemon thread: it materialises records (waits
for the device-to-host copy), calls ``write``, flushes when the sink asks (``should_flush``) or
every ``flush_interval_s``, and turns every exception into a reported fault instead of a crash.
Nothing a sink does can block or kill the training thread: ``put`` never waits (a full queue drops
the record and reports it), and ``close`` gives up on a hung sink after a bounded wait. A sink that
cannot go on (its server is gone) raises ``SinkFailed``: the worker reports it (kind ``failed``),
stops the sink (``abort``), drops its records from then on, and ``close`` does not wait for it.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..compute import StepRecord

log = logging.getLogger("training_hooks")

FaultCallback = Callable[[str, str, str], None]  # (sink name, kind, message)


class SinkFailed(Exception):
    """Raised by a sink that cannot go on (e.g. its tracking server no longer answers): it is off
    for the rest of the run, reported once as a ``failed`` fault (``open`` when raised by
    ``open``), and its worker neither feeds nor waits for it again."""


@runtime_checkable
class Sink(Protocol):
    """What a ``SinkWorker`` drives. Every method runs on the sink's own thread."""

    @property
    def name(self) -> str:
        """The sink's name in faults and timings (a class constant in the sinks here)."""

    def open(self) -> None:
        """Acquire resources (create folders, connect). An exception disables the sink."""

    def write(self, record: StepRecord) -> None:
        """Buffer one materialised record. Must be cheap."""

    def should_flush(self) -> bool:
        """True when the buffer is big enough to persist now."""

    def flush(self) -> None:
        """Persist the buffer. On failure raise and keep the buffer: it is retried later."""

    def close(self, status: str) -> None:
        """Flush and release; ``status`` is the run's final status.

        A sink may also define ``abort()``: called (from another thread) when the sink is
        abandoned because it did not finish in time.
        """


class NullSink:
    """A sink that records nothing (the loop never branches on "is tracking on")."""

    name = "null"

    def open(self) -> None:
        pass

    def write(self, record: StepRecord) -> None:
        pass

    def should_flush(self) -> bool:
        return False

    def flush(self) -> None:
        pass

    def close(self, status: str) -> None:
        pass


# ----------------------------------------------------------------------------- worker

_FLUSH, _CLOSE = "flush", "close"


@dataclass(frozen=True)
class _Command:
    """A request from the training thread, queued behind the records before it (never dropped)."""

    kind: str  # _FLUSH or _CLOSE
    arg: Any  # _FLUSH: the threading.Event to set when done; _CLOSE: the run's final status


class SinkWorker:
    """Runs one sink on a daemon thread; see the module docstring.

    Records wait in a bounded FIFO and the thread handles them in bursts: it wakes when a flush
    is due (every ``flush_interval_s``), when half the queue is full, or for a ``flush``/``close``
    command, then writes every waiting record and flushes if the sink asks. One wake-up per
    interval instead of one per step costs the training process less CPU (and fewer GIL hand-offs
    and cold caches); Parquet still flushes at least every ``flush_interval_s``.
    """

    def __init__(
        self,
        sink: Sink,
        *,
        flush_interval_s: float = 5.0,
        queue_size: int = 1000,
        on_fault: FaultCallback | None = None,
    ):
        self.sink = sink
        self.name = getattr(sink, "name", type(sink).__name__)
        self.flush_interval_s = float(flush_interval_s)
        self.on_fault = on_fault
        self.disabled = False
        self.dropped = 0
        self.busy_since: float | None = None
        self._maxsize = max(1, int(queue_size))
        self._wake_at = max(1, self._maxsize // 2)
        self._items: collections.deque = collections.deque()  # records and commands, FIFO
        self._wake = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name=f"gspo-dash-{self.name}", daemon=True
        )
        self._closed = False
        self._started = False

    def start(self) -> SinkWorker:
        self._started = True
        self._thread.start()
        return self

    # -- caller side (training thread): never blocks
    def put(self, record: StepRecord) -> None:
        if self.disabled or self._closed:
            return
        n = len(self._items)  # (deque append/popleft/len are atomic: no lock needed)
        if n >= self._maxsize:
            self.dropped += 1
            if self.dropped == 1:
                self._fault(
                    "queue_full", "the sink fell behind; dropping steps until it catches up"
                )
            return
        self._items.append(record)
        if n + 1 >= self._wake_at:
            self._wake.set()

    def _command(self, item: _Command) -> None:
        self._items.append(item)  # never dropped, even when the queue is full
        self._wake.set()

    def flush(self, timeout: float | None = None) -> bool:
        """Ask the sink to flush now; wait up to ``timeout`` s (None: forever). True if done."""
        done = threading.Event()
        if self.disabled or self._closed or not self._started:
            return True
        self._command(_Command(_FLUSH, done))
        return done.wait(timeout)

    def close(self, status: str, timeout: float | None = 60.0) -> bool:
        """Flush, close the sink and join; gives up after ``timeout`` s. True if it finished."""
        if self._closed:
            return not self._thread.is_alive()
        self._closed = True
        if not self._started:
            return True
        self._command(_Command(_CLOSE, status))
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._abort()
            busy = self.busy_since
            how = f" (busy for {time.monotonic() - busy:.1f} s)" if busy is not None else ""
            self._fault(
                "hung", f"did not finish within {timeout} s{how}; abandoned, its thread is a daemon"
            )
            return False
        return True

    # -- the sink's thread
    def _fault(self, kind: str, message: str) -> None:
        if self.on_fault is not None:
            try:
                self.on_fault(self.name, kind, message)
                return
            except Exception:  # noqa: BLE001 -- the fault reporter must not kill the worker
                pass
        log.warning("gspo-dash %s sink: %s: %s", self.name, kind, message)

    def _call(self, kind: str, fn: Callable, *args: Any) -> bool:
        """Run one sink call; False if it raised (reported). ``SinkFailed`` also turns the sink
        off: ``disabled``, ``abort()`` called, and the loop drains from then on."""
        self.busy_since = time.monotonic()
        try:
            fn(*args)
            return True
        except SinkFailed as e:
            self.disabled = True
            self._fault(kind if kind == "open" else "failed", str(e))
            self._abort()
            return False
        except BaseException as e:  # noqa: BLE001 -- a sink must never kill the worker
            detail = "".join(traceback.format_exception_only(type(e), e)).strip()
            self._fault(kind, detail)
            return False
        finally:
            self.busy_since = None

    def _abort(self) -> None:
        abort = getattr(self.sink, "abort", None)
        if callable(abort):  # e.g. stop the MLflow child process
            try:
                abort()
            except Exception:  # noqa: BLE001
                pass

    def _write(self, record: StepRecord) -> None:
        self.sink.write(record.materialize())

    def _loop(self) -> None:
        if not self._call("open", self.sink.open):
            self.disabled = True
        next_flush = time.monotonic() + self.flush_interval_s
        while not self.disabled:  # SinkFailed: answer what waits, then drain until close
            self._wake.wait(max(0.0, next_flush - time.monotonic()))
            self._wake.clear()  # (anything added after this is seen by the loop below)
            while self._items and not self.disabled:
                item = self._items.popleft()
                if not isinstance(item, _Command):  # a StepRecord
                    flush = self._call("write", self._write, item) and self.sink.should_flush()
                elif item.kind == _CLOSE:
                    self._call("close", self.sink.close, item.arg)
                    return
                if isinstance(item, _Command) or flush:  # a _FLUSH, or the sink asks
                    self._call("flush", self.sink.flush)
                    next_flush = time.monotonic() + self.flush_interval_s
                if isinstance(item, _Command):
                    item.arg.set()
            if not self.disabled and time.monotonic() >= next_flush:
                self._call("flush", self.sink.flush)
                next_flush = time.monotonic() + self.flush_interval_s
        self._drain()

    def _drain(self) -> None:
        """A disabled sink: consume and discard until close, so flush/close callers return."""
        while True:
            while self._items:
                item = self._items.popleft()
                if isinstance(item, _Command) and item.kind == _FLUSH:
                    item.arg.set()
                elif isinstance(item, _Command) and item.kind == _CLOSE:
                    return
            self._wake.wait()
            self._wake.clear()
