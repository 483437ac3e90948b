"""The cluster's MLflow server behind the cluster's token: ``mjp cluster mlflow-gate``.

On ``cluster.yaml``'s head the MLflow server listens on 127.0.0.1 only, and this gate listens on
the head's private address (port 5000) in front of it: a request passes when it carries
``Authorization: Bearer <token>``, where the token is the cluster's Ray token (the file
``~/.ray/auth_token`` every node holds). MLflow's client sends that header when
``MLFLOW_TRACKING_TOKEN`` is set, which every node exports from the same file; anything else in
the VPC gets 401 and reads or writes no run (any bad credential: missing, wrong, twice, not UTF-8).
Requests and answers are streamed both ways in bounded memory (the proxied artifacts are
checkpoints of hundreds of MB), each request with the ``Content-Length`` it came with: MLflow's
server reads a chunked request as an empty body, so a request that came chunked is spooled to an
unlinked temporary file (memory: one chunk; nothing left on disk however the gate ends), up to
``CHUNKED_LIMIT`` bytes (413 beyond; 507 when the disk is full), and passed on with its length.
How it listens (a header timeout, a connection cap within the file limit, one log line per
event) is ``gate/listener.py``'s. The UI is reached through the SSH tunnel to the server's own
loopback port (docs/cluster-aws.md), where the SSH login is the authentication,
or through the gate from a browser (``browser_login``): a page asks for the token once and
leaves a cookie in its place.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from sweep.cluster.gate.listener import (
    TRUSTED,
    UPSTREAM_CONNECTIONS,
    count_accept_failures,
    log_in_one_line,
    open_gate,
    raise_file_limit,
)
from trainables.errors import ConfigError

#: the largest chunked request body passed on (spooled to disk first: MLflow's server needs a
#: length); a body with a Content-Length is streamed through at any size
CHUNKED_LIMIT = 8 * 2**30
#: the gate's session with the MLflow server
SESSION: web.AppKey[aiohttp.ClientSession] = web.AppKey("session", aiohttp.ClientSession)


#: hop-by-hop headers a proxy does not pass on (RFC 9110, 7.6.1), and what aiohttp sets itself
#: (an answer's length is set from the upstream answer; a request's is passed on, see ``forward``)
_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


def read_token(path: str | Path) -> str:
    """The token in ``path`` (Ray's token file), refused in one line when missing, empty or readable by others."""
    path = Path(path).expanduser()
    try:
        mode, token = path.stat().st_mode & 0o077, path.read_text().strip()
    except OSError as err:
        raise ConfigError(
            f"the gate's token file {path} cannot be read ({err.strerror}); `ray get-auth-token --generate` makes it"
        ) from None
    if mode:
        raise ConfigError(
            f"the token file {path} is readable by other users (mode {path.stat().st_mode & 0o777:o}); allowed: only you (chmod 600 {path})"
        )
    if not token:
        raise ConfigError(f"the token file {path} is empty; `ray get-auth-token --generate` makes one")
    return token


def authorised(raw_headers: Any, expected: bytes) -> bool:
    """Whether the request's raw headers hold exactly one ``Authorization`` and it is ``expected``
    (compared as bytes in constant time: a header that is not UTF-8 is a wrong one, not an error)."""
    given = [value for name, value in raw_headers if name.lower() == b"authorization"]
    return len(given) == 1 and hmac.compare_digest(given[0], expected)


class _TooLarge(Exception):
    pass


async def spool(body: Any, limit: int) -> Any:
    """A chunked request's body (``body``, aiohttp's stream) in an unlinked temporary file, read
    back from its start; ``_TooLarge`` past ``limit`` bytes, ``OSError`` when the disk is full.
    Memory stays at one chunk; the file leaves nothing behind, however the gate ends."""
    import tempfile

    out = tempfile.TemporaryFile()  # noqa: SIM115 (handed to the caller, who closes it)
    try:
        size = 0
        async for chunk in body.iter_any():
            size += len(chunk)
            if size > limit:
                raise _TooLarge
            await asyncio.to_thread(out.write, chunk)
        await asyncio.to_thread(out.flush)
        out.seek(0)
        return out
    except BaseException:
        out.close()
        raise


def gate_app(upstream: str, token: str, *, chunked_limit: int = CHUNKED_LIMIT) -> Any:
    """The aiohttp application: every request with the token goes to ``upstream``, the rest gets
    401. A chunked body past ``chunked_limit`` bytes gets 413; ``app[TRUSTED]`` holds the
    transports of the connections that showed the token (``gate/listener.py`` keeps them open)."""
    import weakref

    expected = f"Bearer {token}".encode()
    upstream = upstream.rstrip("/")
    log = logging.getLogger("mjp.gate")

    async def forward(request: web.Request) -> web.StreamResponse:
        if not authorised(request.raw_headers, expected):
            return web.Response(status=401, text="the cluster's token is required (MLFLOW_TRACKING_TOKEN)\n")
        if request.transport is not None:  # None once the client has gone
            request.app[TRUSTED].add(request.transport)
        session: aiohttp.ClientSession = request.app[SESSION]
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP and k.lower() != "authorization"}
        body: Any = None
        if request.content_length is not None:  # streamed on with its length (aiohttp sends no chunks then)
            headers["Content-Length"] = str(request.content_length)
            body = request.content if request.content_length else b""
        elif request.body_exists:  # chunked in: MLflow's server would read it as empty; spooled, then sent with its length
            try:
                body = await spool(request.content, chunked_limit)
            except _TooLarge:
                log.warning("%s %s: a chunked body over %d bytes refused (413)", request.method, request.rel_url.path, chunked_limit)
                return web.Response(status=413, text=f"a chunked body is passed on up to {chunked_limit} bytes; send a Content-Length\n")
            except OSError as err:
                log.warning("%s %s: a chunked body could not be spooled (%s)", request.method, request.rel_url.path, err)
                return web.Response(status=507, text=f"the gate could not hold the chunked body: {err.strerror}\n")
            headers["Content-Length"] = str(os.fstat(body.fileno()).st_size)
        try:
            return await _pass_on(request, session, upstream + request.rel_url.path_qs, headers, body)
        except (TimeoutError, aiohttp.ClientConnectorError) as err:
            log.warning("%s %s: the MLflow server at %s does not answer (%s)", request.method, request.rel_url.path, upstream, err)
            return web.Response(status=502, text="the MLflow server behind the gate does not answer\n")
        finally:
            if hasattr(body, "close"):
                body.close()

    async def open_session(app: web.Application) -> Any:
        connector = aiohttp.TCPConnector(limit=UPSTREAM_CONNECTIONS)
        app[SESSION] = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None, sock_connect=30))
        yield
        await app[SESSION].close()

    app = web.Application(middlewares=[browser_login(token)])
    app[TRUSTED] = weakref.WeakSet()
    app.cleanup_ctx.append(open_session)
    app.router.add_route("*", "/{tail:.*}", forward)
    return app


async def _pass_on(request: Any, session: Any, url: str, headers: dict[str, str], body: Any) -> Any:
    """``request`` sent on to ``url`` and its answer streamed back."""
    async with session.request(request.method, url, headers=headers, data=body, allow_redirects=False, auto_decompress=False) as answer:
        response = web.StreamResponse(status=answer.status, headers={k: v for k, v in answer.headers.items() if k.lower() not in _HOP})
        if answer.content_length is not None:
            response.content_length = answer.content_length
        await response.prepare(request)
        async for chunk in answer.content.iter_chunked(1 << 16):
            await response.write(chunk)
        await response.write_eof()
        return response


def serve(host: str, port: int, upstream: str, token_file: str) -> None:
    """Run the gate until the process is stopped (SIGTERM or SIGINT): the file limit raised to
    the hard one, the log one line a record, the header timeout and the connection cap of
    ``gate/listener.py``."""
    import signal

    app = gate_app(upstream, read_token(token_file))
    raise_file_limit()
    log_in_one_line()

    async def run() -> None:
        count_accept_failures(asyncio.get_running_loop())
        gate = await open_gate(app, host, port)
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(signum, stop.set)
        try:
            await stop.wait()
        finally:
            await gate.close()

    asyncio.run(run())


#: the browser's cookie, the login form's path, and the page a browser gets without either
LOGIN_COOKIE, LOGIN_PATH = "mjp_gate", "/mjp-gate/login"
_LOGIN_PAGE = """<!doctype html><title>MLflow behind the cluster's gate</title>
<form method="post" action="{path}" onsubmit="this.next.value = location.pathname + location.search + location.hash">
<p>{message}</p><p>The cluster's token (<code>cat SESSION/auth_token</code> on the twin, <code>~/.ray/auth_token</code> on AWS):
<input type="password" name="token" autofocus> <input type="hidden" name="next" value="/"> <button>open MLflow</button></p></form>
"""


def browser_login(token: str) -> Any:
    """The gate's door for a browser, which cannot send a bearer token: a page that opens without
    one is answered with a form (401) that takes the token once (POST, never in a URL) and sets a
    cookie (HttpOnly, SameSite=Strict, for this browser session) holding an HMAC of the token, not
    the token (Ray's too); a request with that cookie passes as if it carried the token, the
    cookie removed before it goes on. Everything else reaches the gate's handler unchanged."""
    from aiohttp import web
    from multidict import CIMultiDict

    cookie = hmac.new(token.encode(), b"mjp-gate browser login", "sha256").hexdigest()

    def page(message: str) -> web.Response:
        return web.Response(status=401, content_type="text/html", text=_LOGIN_PAGE.format(path=LOGIN_PATH, message=message))

    @web.middleware
    async def door(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path == LOGIN_PATH and request.method == "POST":
            form = await request.post()
            if not hmac.compare_digest(str(form.get("token", "")).strip().encode(), token.encode()):
                return page("That is not the cluster's token.")
            target = str(form.get("next", "/"))
            if not target.startswith("/") or target.startswith(("//", "/\\")) or any(c < " " for c in target):
                target = "/"  # only a page of this gate: never a redirect elsewhere
            answer = web.HTTPSeeOther(target)
            answer.set_cookie(LOGIN_COOKIE, cookie, httponly=True, samesite="Strict", path="/")
            return answer
        if hmac.compare_digest(request.cookies.get(LOGIN_COOKIE, "").encode(), cookie.encode()):
            headers = CIMultiDict(request.headers)
            headers["Authorization"] = f"Bearer {token}"
            others = "; ".join(f"{k}={v}" for k, v in request.cookies.items() if k != LOGIN_COOKIE)
            headers.popall("Cookie", None)
            if others:
                headers["Cookie"] = others
            return await handler(request.clone(headers=headers))
        if request.method == "GET" and "Authorization" not in request.headers and "text/html" in request.headers.get("Accept", ""):
            return page("MLflow's UI is behind the cluster's gate.")
        return await handler(request)

    return door
