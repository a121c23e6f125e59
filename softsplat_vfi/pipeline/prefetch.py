"""Run an iterator ahead in a background thread (``prefetch``), or a consumer behind in one (``WriteBehind``).

Decoding (ffmpeg's pipe, numpy thumbnails, the scene test) then runs ahead of the GPU's work, and writing (the
frames' bytes to the encoder, segments closed) behind it, instead of either waiting for the other: the thread that
calls the network only calls the network. Memory stays bounded by ``depth`` items each side; errors in either
thread reach the caller's.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable, Generic, Iterator, Optional, TypeVar

T = TypeVar("T")

_DONE = object()


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def prefetch(items: Iterator[T], depth: int = 4) -> Iterator[T]:
    """Yield what ``items`` yields, computed up to ``depth`` items ahead in another thread.

    An exception in the producer is re-raised in the consumer; closing the returned
    generator early stops the producer and closes ``items``.
    """
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")
    slots: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                slots.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(item):
                    break
            else:
                put(_DONE)
        except BaseException as exc:  # handed to the consumer, which re-raises it
            put(_Failure(exc))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    worker = threading.Thread(target=produce, name="prefetch", daemon=True)
    worker.start()
    try:
        while True:
            item = slots.get()
            if item is _DONE:
                return
            if isinstance(item, _Failure):
                raise item.exc
            yield item
    finally:
        stop.set()
        worker.join()


class WriteBehind(Generic[T]):
    """``consume(item)`` for every item ``put``, in another thread, with at most ``depth`` items waiting.

    With one thread (the default) items are consumed in order; with ``threads`` > 1 that many take items as they come
    (for consumers whose items are independent, such as image files, and whose work releases the GIL). The
    consumer's exception is raised in the caller at the next ``put``, ``check``, ``drain`` or ``finish``; after one the
    threads take no more items. ``finish`` waits for every item given; ``stop`` (for the caller's own failure or an
    interrupt) too, unless interrupted again, when the items still waiting are dropped. Either way the consumer's
    threads have ended when they return, so what they used can be cleaned up by the caller.
    """

    def __init__(self, consume: Callable[[T], None], depth: int = 4, name: str = "write-behind",
                 threads: int = 1) -> None:
        if depth < 1 or threads < 1:
            raise ValueError(f"depth and threads must each be at least 1, got {depth} and {threads}")
        self._consume = consume
        self._slots: queue.Queue = queue.Queue(maxsize=depth)
        self._failure: Optional[BaseException] = None  # the first consumer exception
        self._dropping = False
        self._workers = [threading.Thread(target=self._run, name=name, daemon=True) for _ in range(threads)]
        for worker in self._workers:
            worker.start()

    def _run(self) -> None:
        while True:
            item = self._slots.get()
            if item is _DONE:
                return
            try:
                if not self._dropping and self._failure is None:
                    self._consume(item)
            except BaseException as exc:  # handed to the caller, which re-raises it
                if self._failure is None:
                    self._failure = exc
                return
            finally:
                self._slots.task_done()

    def _alive(self) -> bool:
        return self._failure is None and any(worker.is_alive() for worker in self._workers)

    def _hand(self, item: object) -> bool:
        """Queue ``item`` (blocking while the queue is full); False if the consumer has failed or ended."""
        while self._alive():
            try:
                self._slots.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def put(self, item: T) -> None:
        """Give the consumer ``item``; raises the consumer's exception if it failed."""
        if self._failure is None and self._hand(item):
            return
        if self._failure is not None:
            raise self._failure
        raise RuntimeError("the write-behind thread has ended: put after finish or stop")

    def check(self) -> None:
        """Raise the consumer's exception if it has failed, without waiting for anything."""
        if self._failure is not None:
            raise self._failure

    def drain(self) -> None:
        """Wait until every item given so far is consumed; raises the consumer's exception if it failed."""
        with self._slots.all_tasks_done:
            while self._slots.unfinished_tasks and self._alive():
                self._slots.all_tasks_done.wait(0.05)
        if self._failure is not None:
            raise self._failure

    def _end(self) -> None:
        """One end marker per thread (the threads still running take them), then wait for them all."""
        for worker in self._workers:
            while worker.is_alive():
                try:
                    self._slots.put(_DONE, timeout=0.05)
                    break
                except queue.Full:
                    continue
        for worker in self._workers:
            worker.join()

    def finish(self) -> None:
        """Wait until every item given is consumed; raises the consumer's exception if it failed."""
        self._end()
        if self._failure is not None:
            raise self._failure

    def stop(self) -> None:
        """As ``finish``, for a caller that failed itself: the consumer's own exception is not raised (the caller's
        is the one to report). Interrupted while waiting, the items still waiting are dropped, the consumer's
        current ones are finished, and the interrupt raised."""
        try:
            self._end()
        except KeyboardInterrupt:
            self._dropping = True
            self._end()
            raise
