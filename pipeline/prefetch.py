"""Run an iterator ahead in a background thread, a bounded number of items ahead.

Decoding (ffmpeg's pipe, numpy thumbnails) then overlaps with the GPU's work
instead of waiting for it; memory stays bounded by ``depth`` items.
"""

from __future__ import annotations

import queue
import threading
from typing import Iterator, TypeVar

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
