"""The cluster's MLflow server behind the cluster's token: ``mjp cluster mlflow-gate``.

On ``cluster.yaml``'s head the MLflow server listens on 127.0.0.1 only, and this gate listens on
the head's private address (port 5000) in front of it: a request passes when it carries
``Authorization: Bearer <token>``, where the token is the cluster's Ray token (the file
``~/.ray/auth_token`` every node holds). MLflow's client sends that header when
``MLFLOW_TRACKING_TOKEN`` is set, which every node exports from the same file; anything else in
the VPC gets 401 and reads or writes no run. Requests and answers are streamed both ways (the
proxied artifacts are checkpoints of hundreds of MB), each request with the ``Content-Length`` it
came with: MLflow's server reads a chunked request as an empty body, so a request that came chunked
is read in full first and passed on with its length. The UI is reached through the SSH tunnel to
the server's own loopback port (docs/cluster-aws.md), where the SSH login is the authentication,
or through the gate from a browser (``browser_login``): a page asks for the token once and
leaves a cookie in its place.
"""

from __future__ import annotations

import hmac
from pathlib import Path
from typing import Any

from trainables.errors import ConfigError

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


def gate_app(upstream: str, token: str) -> Any:
    """The aiohttp application: every request with the token goes to ``upstream``, the rest gets 401."""
    import aiohttp
    from aiohttp import web

    expected = f"Bearer {token}".encode()
    upstream = upstream.rstrip("/")

    async def forward(request: web.Request) -> web.StreamResponse:
        given = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, expected):
            return web.Response(status=401, text="the cluster's token is required (MLFLOW_TRACKING_TOKEN)\n")
        session: aiohttp.ClientSession = request.app["session"]
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP and k.lower() != "authorization"}
        body: Any = None
        if request.content_length is not None:  # streamed on with its length (aiohttp sends no chunks then)
            headers["Content-Length"] = str(request.content_length)
            body = request.content if request.content_length else b""
        elif request.body_exists:  # chunked in: MLflow's server would read it as empty
            body = await request.read()
        async with session.request(
            request.method, upstream + request.rel_url.path_qs, headers=headers, data=body, allow_redirects=False, auto_decompress=False
        ) as answer:
            response = web.StreamResponse(status=answer.status, headers={k: v for k, v in answer.headers.items() if k.lower() not in _HOP})
            if answer.content_length is not None:
                response.content_length = answer.content_length
            await response.prepare(request)
            async for chunk in answer.content.iter_chunked(1 << 16):
                await response.write(chunk)
            await response.write_eof()
            return response

    async def open_session(app: web.Application) -> Any:
        app["session"] = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=30))
        yield
        await app["session"].close()

    app = web.Application(client_max_size=0, middlewares=[browser_login(token)])
    app.cleanup_ctx.append(open_session)
    app.router.add_route("*", "/{tail:.*}", forward)
    return app


def serve(host: str, port: int, upstream: str, token_file: str) -> None:
    """Run the gate until the process is stopped."""
    from aiohttp import web

    web.run_app(gate_app(upstream, read_token(token_file)), host=host, port=port, print=None, access_log=None)


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
