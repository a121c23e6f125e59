"""pipeline.prefetch: order, errors and early stops of the background reader."""

import threading
import time

import pytest

from pipeline.prefetch import prefetch


def test_prefetch_keeps_order_and_bounds_lookahead():
    produced = []

    def items():
        for i in range(20):
            produced.append(i)
            yield i

    seen = []
    for i in prefetch(items(), depth=3):
        time.sleep(0.005)
        # the producer never runs more than depth (+1 in hand) items ahead of the consumer
        assert len(produced) - len(seen) <= 5
        seen.append(i)
    assert seen == list(range(20))


def test_prefetch_reraises_producer_errors():
    def items():
        yield 1
        raise OSError("disk gone")

    got = []
    with pytest.raises(OSError, match="disk gone"):
        for i in prefetch(items()):
            got.append(i)
    assert got == [1]


def test_prefetch_closed_early_stops_and_closes_the_source():
    closed = threading.Event()

    def items():
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed.set()

    gen = prefetch(items(), depth=2)
    assert [next(gen) for _ in range(3)] == [0, 1, 2]
    gen.close()
    assert closed.wait(2.0)


def test_prefetch_rejects_zero_depth():
    with pytest.raises(ValueError, match="depth"):
        list(prefetch(iter([1]), depth=0))
