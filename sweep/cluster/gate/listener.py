"""Where the MLflow gate listens, and what keeps it answering its own clients under a flood of
others: a header timeout, a connection cap within the process's file limit, and a log of one line
per event.

- **Header timeout**: a connection that has not sent a whole request head ``header_timeout``
  seconds after it opened (or after its last answer) is closed. aiohttp's keep-alive timer does
  this: it starts when a connection opens and closes it while no complete request has arrived.
- **Connection cap**: at most ``max_connections`` connections are open at once, well inside the
  file limit (each connection is a file descriptor, and an authenticated one may hold two more:
  the upstream connection and a spooled body). At the cap a new connection takes the place of the
  oldest one that has not shown the token yet (a half-sent request, an idle stranger); a client
  that has shown it keeps its connection. When every open connection is such a client, the new
  one gets 503 and is closed.
- **Accept burst**: asyncio accepts up to the listen backlog (``ACCEPT_BURST``) connections each
  time the loop wakes, and the stranger a new connection displaces is closed three wake-ups after
  the accept (the accept, aiohttp's transport, ``connection_made``; the close runs before the
  next burst is accepted). A flood therefore holds up to ``ACCEPT_TICKS * ACCEPT_BURST``
  descriptors beyond the cap; ``RESERVED_FILES`` keeps them free. (With asyncio's default backlog
  of 100 that was 300: 400 half-sent requests once ran a 300-file gate out of descriptors.)
- **One line per event**: every log record is one line, an exception as ``Type: message``; an
  accept that fails for lack of descriptors anyway (asyncio logs each failed accept of a burst,
  then retries after a second) is counted, and logged as the other events are: the 1st, 10th,
  100th, then every 1,000th (``count_accept_failures``).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import weakref
from dataclasses import dataclass
from typing import Any

from aiohttp import web

#: the transports of the connections that showed the token (the gate's handler adds them)
TRUSTED: web.AppKey[weakref.WeakSet[Any]] = web.AppKey("trusted", weakref.WeakSet)
#: seconds a connection may take to send a request head (and may stay idle between requests)
HEADER_TIMEOUT_S = 15.0
#: connections accepted at most each time the loop wakes (the listen backlog, asyncio's accept loop)
ACCEPT_BURST = 32
#: accept bursts whose descriptors are open beyond the cap at once (see the module)
ACCEPT_TICKS = 3
#: upstream connections the gate opens at most (aiohttp's pool; further requests wait for one)
UPSTREAM_CONNECTIONS = 100
#: descriptors kept apart from client connections: the accept bursts in flight (96), the upstream
#: connections (100), and the process's own (the listening socket, logs, Python's, spooled bodies)
RESERVED_FILES = 256
#: the most client connections, whatever the file limit
MAX_CONNECTIONS = 10_000


def raise_file_limit() -> int:
    """The soft limit on open files raised to the hard one (a process may); the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = MAX_CONNECTIONS * 4 if hard == resource.RLIM_INFINITY else hard
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


def connection_cap() -> int:
    """The connection cap for this process's file limit: a third of what is left after
    ``RESERVED_FILES`` (a client's socket, its upstream one and a spooled body), at least 16."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(16, min(MAX_CONNECTIONS, (soft - RESERVED_FILES) // 3))


class OneLineFormatter(logging.Formatter):
    """Every record on one line: the time, the logger, the message and ``(Type: message)`` of its exception."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(name)s %(levelname)s %(message)s")

    def formatException(self, ei: Any) -> str:
        return f"({ei[0].__name__}: {ei[1]})"

    def formatStack(self, stack_info: str) -> str:
        return ""

    def format(self, record: logging.LogRecord) -> str:
        return " ".join(part for part in super().format(record).split("\n") if part)


def log_in_one_line() -> None:
    """The process's log (stderr): every record one line (``OneLineFormatter``), warnings and up."""
    handler = logging.StreamHandler()
    handler.setFormatter(OneLineFormatter())
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)


class _Counted(asyncio.Protocol):
    """aiohttp's protocol for one connection, counted by ``_Cap`` from the moment it opens to the
    moment it closes (asyncio's calls passed on as they come)."""

    def __init__(self, inner: Any, cap: _Cap):
        self.inner, self.cap = inner, cap
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        if self.cap.admit(self):
            self.inner.connection_made(transport)
        else:
            self.inner = None
            transport.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.cap.open.pop(self, None)
        if self.inner is not None:
            self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.inner is not None:
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else None

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()


class _Cap:
    """The connection cap (see the module): the open connections, oldest first, and the transports
    that showed the token (``trusted``, filled by the gate's handler)."""

    def __init__(self, server: Any, limit: int, trusted: weakref.WeakSet[Any]):
        self.server, self.limit, self.trusted = server, limit, trusted
        self.open: dict[_Counted, None] = {}
        self.log = logging.getLogger("mjp.gate")
        self.evicted = self.refused = 0

    def __call__(self) -> asyncio.Protocol:
        return _Counted(self.server(), self)

    def admit(self, new: _Counted) -> bool:
        """Whether ``new`` may stay open: below the cap, or in place of the oldest stranger."""
        if len(self.open) >= self.limit:
            stranger = next((c for c in self.open if c.transport not in self.trusted), None)
            if stranger is None:
                self.refused += 1
                if _worth_a_line(self.refused):
                    self.log.warning("%d connections, every one authenticated: %d new ones got 503 so far", len(self.open), self.refused)
                return False
            del self.open[stranger]
            stranger.transport.close()
            self.evicted += 1
            if _worth_a_line(self.evicted):
                self.log.warning("at the cap of %d connections: %d without the token closed for new ones so far", self.limit, self.evicted)
        self.open[new] = None
        return True


def count_accept_failures(loop: asyncio.AbstractEventLoop) -> None:
    """Log asyncio's "socket.accept() out of system resource" on ``loop`` as the cap's events are
    logged (one line for the 1st, 10th, 100th, then every 1,000th, with the count so far) instead of
    once per failed accept; every other error goes to the loop's default handler as before."""
    log, failed = logging.getLogger("mjp.gate"), 0

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        nonlocal failed
        if context.get("message") != "socket.accept() out of system resource":
            loop.default_exception_handler(context)
            return
        failed += 1
        if _worth_a_line(failed):
            exc = context.get("exception")
            log.warning("no descriptor free to accept a connection (%s): %d failed accepts so far, retried after a second", exc, failed)

    loop.set_exception_handler(handle)


def _worth_a_line(count: int) -> bool:
    """Whether the ``count``-th event of a kind is logged: the 1st, 10th, 100th, then every 1,000th."""
    return count in (1, 10, 100) or count % 1000 == 0


@dataclass
class OpenGate:
    """A listening gate: its port, and ``close()`` (stops listening, ends its connections, closes its session)."""

    port: int
    runner: Any
    listener: asyncio.AbstractServer

    async def close(self) -> None:
        self.listener.close()
        await self.runner.cleanup()


async def open_gate(
    app: Any, host: str, port: int, *, header_timeout: float = HEADER_TIMEOUT_S, max_connections: int | None = None
) -> OpenGate:
    """Listen on ``host:port`` (0: any free port) with ``app`` (``gate_app``) behind the header
    timeout and the connection cap (default ``connection_cap()``)."""
    runner = web.AppRunner(app, keepalive_timeout=header_timeout, access_log=None, handle_signals=False)
    await runner.setup()
    factory = _Cap(runner.server, max_connections or connection_cap(), app[TRUSTED])
    listener = await asyncio.get_running_loop().create_server(factory, host, port, reuse_address=True, backlog=ACCEPT_BURST)
    return OpenGate(listener.sockets[0].getsockname()[1], runner, listener)
