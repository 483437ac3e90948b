"""The MLflow gate under a flood of connections, without a clock: the descriptors it holds (its
loop stepped one wake-up at a time, the kernel's accept queue full before each: at most the cap
and three accept bursts), and its log (failed accepts counted into a few lines, every record one
line)."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import resource
import select
import socket
import sys

from sweep.cluster.gate.listener import ACCEPT_BURST, ACCEPT_TICKS, OneLineFormatter, count_accept_failures, open_gate
from sweep.cluster.gate.mlflow_gate import gate_app

TOKEN = "s3cret-token"


def test_a_flood_holds_at_most_the_cap_and_three_accept_bursts_of_descriptors():
    """The gate's loop stepped one wake-up at a time (``stop`` then ``run_forever``), the kernel's
    accept queue filled again before each: the worst a flood can do, without racing a clock. With
    asyncio's default backlog of 100 this held 300 descriptors beyond the cap (a 300-file gate ran
    out in CI); each wake-up accepts at most ``ACCEPT_BURST``, and three bursts are in flight."""

    def one_wake_up() -> None:
        loop.call_soon(loop.stop)
        loop.run_forever()

    def fill_the_accept_queue() -> None:
        while True:  # a loopback handshake completes inside connect() while the queue has room
            client = socket.socket()
            client.setblocking(False)
            client.connect_ex(("127.0.0.1", gate.port))
            connected = select.poll()
            connected.register(client, select.POLLOUT)
            if not connected.poll(0):
                client.close()  # the queue is full: the kernel dropped its SYN
                return
            clients.append(client)

    def open_files() -> int:
        return len(os.listdir("/proc/self/fd"))

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2000:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    loop, clients, held = asyncio.new_event_loop(), [], []
    gate = loop.run_until_complete(open_gate(gate_app("http://127.0.0.1:9", TOKEN), "127.0.0.1", 0, max_connections=4))
    try:
        for _ in range(3):
            one_wake_up()
        before = open_files()
        for _ in range(10):
            fill_the_accept_queue()
            one_wake_up()
            held.append(open_files() - before - len(clients))
    finally:
        for client in clients:
            client.close()
        for _ in range(5):
            one_wake_up()
        loop.run_until_complete(gate.close())
        loop.close()
    assert len(clients) >= 10 * ACCEPT_BURST  # every wake-up found a full queue
    assert max(held) == 4 + ACCEPT_TICKS * ACCEPT_BURST, held


def test_failed_accepts_are_logged_on_the_1st_10th_100th_and_every_1000th(caplog):
    """asyncio logs each failed accept of a burst, and retries every second while descriptors
    stay short; the gate counts them. Any other loop error still reaches asyncio's own log."""
    loop = asyncio.new_event_loop()
    count_accept_failures(loop)
    short = {"message": "socket.accept() out of system resource", "exception": OSError(24, "Too many open files")}
    with caplog.at_level("WARNING"):
        for _ in range(2000):
            loop.call_exception_handler(short)
        loop.call_exception_handler({"message": "something else broke"})
    loop.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "mjp.gate"]
    assert [int(re.search(r"(\d+) failed accepts", line)[1]) for line in lines] == [1, 10, 100, 1000, 2000]
    assert (
        lines[0]
        == "no descriptor free to accept a connection ([Errno 24] Too many open files): 1 failed accepts so far, retried after a second"
    )
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == ["something else broke"]


def test_a_record_with_a_traceback_is_logged_in_one_line():
    """What asyncio logs when accept() finds no free descriptor (once a 40-line traceback a second)."""
    try:
        raise OSError(24, "Too many open files")
    except OSError:
        record = logging.getLogger("asyncio").makeRecord(
            "asyncio",
            logging.ERROR,
            __file__,
            1,
            "socket.accept() out of system resource",
            (),
            sys.exc_info(),
            sinfo="Stack (most recent call last):\n  x",
        )
    line = OneLineFormatter().format(record)
    assert "\n" not in line and line.endswith("socket.accept() out of system resource (OSError: [Errno 24] Too many open files)")
