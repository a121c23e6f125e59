"""pipeline.prefetch: order, errors and early stops of the background reader."""

import threading
import time

import pytest

from softsplat_vfi.pipeline.prefetch import prefetch


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


def test_write_behind_keeps_order_and_runs_in_another_thread():
    from softsplat_vfi.pipeline.prefetch import WriteBehind

    seen, threads = [], set()

    def consume(i):
        time.sleep(0.002)
        seen.append(i)
        threads.add(threading.get_ident())

    behind = WriteBehind(consume, depth=2)
    for i in range(30):
        behind.put(i)
        assert i - len(seen) <= 2 + 1  # depth waiting, one in hand
    behind.finish()
    assert seen == list(range(30)) and threads and threading.get_ident() not in threads


def test_write_behind_raises_the_consumers_error_in_the_caller():
    from softsplat_vfi.pipeline.prefetch import WriteBehind

    def consume(i):
        if i == 3:
            raise OSError("disk gone")

    behind = WriteBehind(consume, depth=2)
    with pytest.raises(OSError, match="disk gone"):
        for i in range(100):
            behind.put(i)
    assert i < 3 + 2 + 2
    with pytest.raises(OSError, match="disk gone"):
        behind.finish()
    behind.stop()  # (said once: stop leaves it to the caller)
    failing = WriteBehind(consume)
    for i in range(4):
        failing.put(i)
    with pytest.raises(OSError, match="disk gone"):
        failing.finish()


def test_write_behind_stop_writes_what_was_given_unless_interrupted_again(monkeypatch):
    from softsplat_vfi.pipeline.prefetch import WriteBehind

    seen = []
    behind = WriteBehind(lambda i: (time.sleep(0.01), seen.append(i)), depth=4)
    for i in range(6):
        behind.put(i)
    behind.stop()
    assert seen == list(range(6))
    # a second Ctrl-C while waiting: the rest is dropped, the item in hand finished, the interrupt raised
    seen.clear()
    started, release = threading.Event(), threading.Event()
    slow = WriteBehind(lambda i: (started.set(), release.wait(5), seen.append(i)), depth=4)
    for i in range(3):
        slow.put(i)
    assert started.wait(5)  # item 0 in hand
    real_join, joins = threading.Thread.join, []

    def interrupted_join(self, timeout=None):
        if self is not slow._workers[0]:  # (another thread's, a generator finalised meanwhile)
            return real_join(self, timeout)
        joins.append(1)
        if len(joins) == 1:
            raise KeyboardInterrupt
        release.set()  # item 0 finishes once the rest is dropped
        return real_join(self, timeout)

    monkeypatch.setattr(threading.Thread, "join", interrupted_join)
    with pytest.raises(KeyboardInterrupt):
        slow.stop()
    monkeypatch.undo()
    assert seen == [0]


def test_write_behind_drain_waits_for_what_was_given():
    from softsplat_vfi.pipeline.prefetch import WriteBehind

    seen = []
    behind = WriteBehind(lambda i: (time.sleep(0.01), seen.append(i)), depth=4)
    for i in range(4):
        behind.put(i)
    behind.drain()
    assert seen == [0, 1, 2, 3]
    behind.put(4)
    behind.finish()
    assert seen == [0, 1, 2, 3, 4]

    def failing(i):
        raise OSError("disk gone")

    broken = WriteBehind(failing)
    broken.put(0)
    with pytest.raises(OSError, match="disk gone"):
        broken.drain()


def test_write_behind_check_raises_a_failure_without_waiting():
    from softsplat_vfi.pipeline.prefetch import WriteBehind

    release = threading.Event()
    busy = WriteBehind(lambda i: release.wait(5), depth=1)
    busy.put(0)
    started = time.monotonic()
    busy.check()  # (item 0 still in hand: nothing to raise, and no wait for it)
    assert time.monotonic() - started < 1
    release.set()
    busy.finish()

    def failing(i):
        raise OSError("disk gone")

    broken = WriteBehind(failing)
    broken.put(0)
    broken._workers[0].join(5)  # (the consumer has failed and ended)
    with pytest.raises(OSError, match="disk gone"):
        broken.check()


def test_write_behind_with_several_threads_consumes_everything_and_reports_a_failure():
    """``threads`` > 1: every item is consumed once, by several threads at a time; a consumer's failure reaches the
    caller and the threads take no more items; ``stop`` waits for what was given."""
    from softsplat_vfi.pipeline.prefetch import WriteBehind

    seen, names, lock = [], set(), threading.Lock()
    running, most = [0], [0]

    def consume(i):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            names.add(threading.current_thread().name)
        time.sleep(0.02)
        with lock:
            running[0] -= 1
            seen.append(i)

    behind = WriteBehind(consume, depth=8, name="images", threads=3)
    for i in range(30):
        behind.put(i)
    behind.finish()
    assert sorted(seen) == list(range(30)) and most[0] > 1 and names == {"images"}
    seen.clear()
    stopped = WriteBehind(consume, depth=8, threads=3)
    for i in range(12):
        stopped.put(i)
    stopped.stop()
    assert sorted(seen) == list(range(12))

    def failing(i):
        time.sleep(0.01)
        if i == 5:
            raise OSError("disk gone")

    broken = WriteBehind(failing, depth=2, threads=2)
    given = []
    with pytest.raises(OSError, match="disk gone"):
        for i in range(200):
            broken.put(i)
            given.append(i)
    assert len(given) < 50  # the failure stopped the caller within a few items, not at the end
    with pytest.raises(ValueError, match="threads"):
        WriteBehind(consume, threads=0)
