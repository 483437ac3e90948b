"""Overlap the input work of batch n+1 with training on batch n: a prefetch thread with its own
CUDA stream, handing each result over with an event the consumer's stream waits on.

On CUDA the thread issues ``work`` (decode + augment) on a side stream, records an event after it
and queues ``(tensors, event)``; the consumer makes its current stream wait on the event (a device
side wait: the host does not block) and ``record_stream``s the tensors, so the caching allocator
does not hand their memory back to the side stream while training still reads them. On the CPU
there is no stream and no event; the same thread and queue run, so the tests exercise this code.
An error in the thread is raised in the consumer; a consumer that stops early stops the thread.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from typing import Any, TypeVar

import torch

_END = object()
#: what ``work`` returns for one item: a tuple of tensors
Tensors = TypeVar("Tensors", bound=tuple[torch.Tensor, ...])


def _put(q: queue.Queue, item: Any, stop: threading.Event) -> bool:
    """Put ``item`` unless ``stop`` is set first; whether it was put."""
    while not stop.is_set():
        try:
            q.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


def prefetched(source: Iterable[Any], work: Callable[[Any], Tensors], device: torch.device, depth: int = 2) -> Iterator[Tensors]:
    """``work(item)`` for each item of ``source``, computed up to ``depth`` items ahead in a thread
    (on its own CUDA stream when ``device`` is CUDA); yields the tensors in ``source``'s order,
    ready to use on the consumer's current stream."""
    if depth < 1:
        raise ValueError(f"prefetch depth {depth} must be at least 1")
    device = torch.device(device)
    stream = torch.cuda.Stream(device) if device.type == "cuda" else None
    handoff: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            with torch.cuda.stream(stream) if stream is not None else nullcontext():
                for item in source:
                    out = work(item)
                    event = None
                    if stream is not None:
                        event = torch.cuda.Event()
                        event.record(stream)
                    if not _put(handoff, (out, event), stop):
                        return
        except BaseException as err:  # handed to the consumer, raised there
            _put(handoff, err, stop)
            return
        _put(handoff, _END, stop)

    thread = threading.Thread(target=produce, name="mjp-device-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            got = handoff.get()
            if got is _END:
                return
            if isinstance(got, BaseException):
                raise got
            out, event = got
            if event is not None:
                current = torch.cuda.current_stream(device)
                current.wait_event(event)
                for tensor in out:
                    tensor.record_stream(current)
            yield out
    finally:
        stop.set()
        thread.join()
