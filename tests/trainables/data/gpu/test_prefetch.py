"""The prefetch thread of ``data.decode: gpu`` (on the CPU: the same thread and queue, no stream)."""

import threading

import pytest
import torch

from trainables.data.gpu.prefetch import prefetched

CPU = torch.device("cpu")


def test_results_come_in_order_and_are_computed_off_the_consumer_s_thread():
    threads = set()

    def work(i):
        threads.add(threading.get_ident())
        return torch.full((2,), i), torch.tensor([i * i])

    out = list(prefetched(range(7), work, CPU, depth=2))
    assert [int(x[0]) for x, _ in out] == list(range(7)) and [int(y) for _, y in out] == [i * i for i in range(7)]
    assert threads and threading.get_ident() not in threads


def test_the_thread_works_ahead_of_the_consumer_by_at_most_depth_items():
    """While the consumer holds item 0, the thread finishes items 1..depth (+1 in hand) and waits."""
    done = []
    ahead = threading.Semaphore(0)

    def work(i):
        done.append(i)
        ahead.release()
        return (torch.tensor(i),)

    it = prefetched(range(10), work, CPU, depth=2)
    assert int(next(it)[0]) == 0
    for _ in range(4):  # item 0 (taken), 1 and 2 (queued), 3 (computed, waiting for room)
        assert ahead.acquire(timeout=60)
    assert done == [0, 1, 2, 3]  # and not item 4: the thread waits for room before computing it
    assert [int(x[0]) for x in it] == list(range(1, 10))


def test_an_error_in_the_thread_is_raised_in_the_consumer():
    def work(i):
        if i == 3:
            raise ValueError("bad batch 3")
        return (torch.tensor(i),)

    got = []
    with pytest.raises(ValueError, match="bad batch 3"):
        for (x,) in prefetched(range(6), work, CPU):
            got.append(int(x))
    assert got == [0, 1, 2]


def test_a_consumer_that_stops_early_stops_the_thread():
    before = {t.ident for t in threading.enumerate()}
    it = prefetched(iter(range(1000)), lambda i: (torch.tensor(i),), CPU, depth=2)
    next(it)
    it.close()
    assert not [t for t in threading.enumerate() if t.ident not in before and t.name == "mjp-device-prefetch"]


def test_depth_must_be_positive():
    with pytest.raises(ValueError, match="prefetch depth 0 must be at least 1"):
        next(prefetched(range(3), lambda i: (torch.tensor(i),), CPU, depth=0))
