"""The MLflow gate under what a stranger or a large upload does to it, on loopback in front of an
aiohttp upstream that records what reached it: a chunked upload is passed on whole, with its
length, in bounded memory (the gate's peak RSS is measured) or refused with 413 past the limit; a
half-sent request head is closed after the header timeout; a flood of half-sent requests past the
file limit leaves an authenticated client answered at once and the log without a traceback
(the descriptors such a flood holds, and the log's lines: test_gate_accepts.py); any bad
credential (not UTF-8, twice) is 401."""

from __future__ import annotations

import asyncio
import hashlib
import os
import resource
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from sweep.cluster.gate.listener import open_gate
from sweep.cluster.gate.mlflow_gate import gate_app
from sweep.cluster.ports import free_port
from sweep.cluster.twin_mlflow import wait_http
from sweep.study.names import PROJECT_DIR

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MIB = 2**20


class Upstream:
    """An aiohttp server on a loop of its own thread that reads every body and answers its size
    and SHA-256; ``seen`` lists each request's Content-Length and Transfer-Encoding headers and size."""

    def __init__(self) -> None:
        from aiohttp import web

        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.seen: list[tuple[str | None, str | None, int]] = []

        async def record(request: web.Request) -> web.Response:
            size, digest = 0, hashlib.sha256()
            async for chunk in request.content.iter_any():
                size += len(chunk)
                digest.update(chunk)
            self.seen.append((request.headers.get("Content-Length"), request.headers.get("Transfer-Encoding"), size))
            return web.json_response({"bytes": size, "sha256": digest.hexdigest()})

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", record)
        self.runner = web.AppRunner(app)
        self.run(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.run(site.start())
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    def close(self) -> None:
        self.run(self.runner.cleanup())
        self.loop.call_soon_threadsafe(self.loop.stop)


@pytest.fixture
def upstream():
    server = Upstream()
    yield server
    server.close()


@pytest.fixture
def gate_with(upstream):
    """``gate_with(**options)``: the gate in this process (on the upstream's loop) with
    ``open_gate``'s and ``gate_app``'s options; its URL."""
    opened = []

    def start(chunked_limit: int = 8 * 2**30, **listen) -> str:
        gate = upstream.run(open_gate(gate_app(upstream.url, TOKEN, chunked_limit=chunked_limit), "127.0.0.1", 0, **listen))
        opened.append(gate)
        return f"http://127.0.0.1:{gate.port}"

    yield start
    for gate in opened:
        upstream.run(gate.close())


def gate_process(tmp_path: Path, upstream: Upstream, files: int | None = None) -> tuple[subprocess.Popen, str, Path]:
    """``mjp cluster mlflow-gate`` as cluster.yaml's head runs it (with at most ``files`` open
    files when given); the process, its URL and its log."""
    token, log = tmp_path / "auth_token", tmp_path / "gate.log"
    token.write_text(TOKEN)
    token.chmod(0o600)
    port = free_port()
    command = [sys.executable, "-m", "sweep.cli", "cluster", "mlflow-gate", "--listen", f"127.0.0.1:{port}"]
    command += ["--upstream", upstream.url, "--token-file", str(token)]
    limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))) if files else None
    with open(log, "w") as out:
        gate = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=PROJECT_DIR, preexec_fn=limit)
    wait_http(f"http://127.0.0.1:{port}/health", "the gate", 120, log, gate)
    return gate, f"http://127.0.0.1:{port}", log


class Blocks:
    """``count`` times ``block`` as a file with a length: what requests sends with a Content-Length."""

    def __init__(self, block: bytes, count: int):
        self.block, self.size, self.sent = block, len(block) * count, 0

    def __len__(self) -> int:
        return self.size

    def read(self, n: int = -1) -> bytes:
        n = self.size - self.sent if n < 0 else min(n, self.size - self.sent)
        start = self.sent % len(self.block)
        chunk = (self.block[start:] + self.block)[:n] if n > len(self.block) - start else self.block[start : start + n]
        self.sent += len(chunk)
        return chunk


def peak_rss(pid: int) -> int:
    """The process's peak resident memory so far (``VmHWM``), in bytes."""
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def answer_to(port: int, head: bytes) -> bytes:
    """The status line the gate answers ``head`` (a raw request) with."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(head)
        return s.makefile("rb").readline().strip()


@pytest.mark.slow
def test_a_large_chunked_upload_passes_whole_with_its_length_in_bounded_memory(tmp_path, upstream):
    """An authenticated chunked upload of 160 MiB (the gate once read it whole: 1.48 GB of RSS for
    500 MB), then one of 160 MiB with its Content-Length."""
    import requests

    gate, url, _ = gate_process(tmp_path, upstream)
    try:
        block = os.urandom(MIB)
        requests.get(url + "/health", headers=AUTH, timeout=30).raise_for_status()  # the gate warm
        before = peak_rss(gate.pid)
        answer = requests.post(url + "/api/2.0/mlflow-artifacts/artifacts/x", data=(block for _ in range(160)), headers=AUTH, timeout=300)
        sized = requests.put(url + "/api/2.0/mlflow-artifacts/artifacts/y", data=Blocks(block, 160), headers=AUTH, timeout=300)
        grown = peak_rss(gate.pid) - before
    finally:
        gate.terminate()
        gate.wait(30)
    assert answer.status_code == 200, answer.text
    assert answer.json() == sized.json() == {"bytes": 160 * MIB, "sha256": hashlib.sha256(block * 160).hexdigest()}
    assert upstream.seen[-2:] == [(str(160 * MIB), None, 160 * MIB)] * 2  # sent on with their length, not chunked
    print(f"peak RSS growth for two 160 MiB uploads, one chunked: {grown / MIB:.1f} MiB")
    assert grown < 32 * MIB, f"the gate's peak RSS grew by {grown / MIB:.0f} MiB for 160 MiB uploads"
    assert gate.returncode == 0  # SIGTERM ends it cleanly


def test_a_chunked_body_past_the_limit_is_413_and_nothing_reaches_the_server(gate_with, upstream):
    import requests

    url = gate_with(chunked_limit=MIB)
    block = b"x" * 65536
    answer = requests.post(url + "/api/2.0/mlflow/runs/log-batch", data=(block for _ in range(40)), headers=AUTH, timeout=60)
    assert answer.status_code == 413 and "Content-Length" in answer.text
    assert upstream.seen == []
    small = requests.post(url + "/api/2.0/mlflow/runs/log-batch", data=(block for _ in range(4)), headers=AUTH, timeout=60)
    assert small.json()["bytes"] == 4 * 65536 and upstream.seen == [(str(4 * 65536), None, 4 * 65536)]


def test_a_half_sent_request_head_is_closed_after_the_header_timeout(gate_with):
    url = gate_with(header_timeout=0.5)
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"GET /api/2.0/mlflow/experiments/search HTTP/1.1\r\nHost: gate\r\n")  # and never the rest
        assert s.recv(1) == b""  # the gate closed it (within the 30 s this socket waits)


@pytest.mark.parametrize(
    "authorization",
    [b"Authorization: Bearer \xff\xfe\r\n", b"Authorization: Bearer s3cret-token\r\nAuthorization: Bearer other\r\n", b""],
    ids=["not-utf-8", "twice", "none"],
)
def test_any_bad_credential_is_401(gate_with, upstream, authorization):
    """A header that is not UTF-8 was a 500 with a traceback."""
    port = int(gate_with().rsplit(":", 1)[1])
    head = b"GET /api/2.0/mlflow/experiments/search HTTP/1.1\r\nHost: gate\r\n" + authorization + b"Connection: close\r\n\r\n"
    assert answer_to(port, head) == b"HTTP/1.1 401 Unauthorized"
    assert upstream.seen == []


def test_at_the_cap_an_authenticated_client_keeps_its_connection_and_a_new_one_gets_503(gate_with):
    import http.client

    port = int(gate_with(max_connections=1).rsplit(":", 1)[1])
    kept = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    kept.request("GET", "/health", headers=AUTH)
    assert kept.getresponse().read() and kept.sock is not None  # kept alive, and authenticated
    assert answer_to(port, b"GET /health HTTP/1.1\r\nHost: gate\r\n\r\n") == b"HTTP/1.1 503 Service Unavailable"
    kept.request("GET", "/health", headers=AUTH)
    assert kept.getresponse().status == 200
    kept.close()


@pytest.mark.slow
def test_a_flood_of_half_sent_requests_past_the_file_limit_leaves_the_token_answered(tmp_path, upstream):
    """400 half-sent requests against a gate with 300 files (the gate once stopped every
    authenticated client for 40 s, and logged 133 MB of "Too many open files" tracebacks)."""
    import requests

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1000:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    gate, url, log = gate_process(tmp_path, upstream, files=300)
    port, strangers = int(url.rsplit(":", 1)[1]), []
    try:
        for _ in range(400):
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=30)
                s.sendall(b"POST /api/2.0/mlflow/runs/create HTTP/1.1\r\nHost: gate\r\n")
            except OSError:
                break  # the gate no longer accepts (it did not: the count below says)
            strangers.append(s)
        answer = requests.get(url + "/api/2.0/mlflow/experiments/search", headers=AUTH, timeout=20)
    finally:
        for s in strangers:
            s.close()
        gate.terminate()
        gate.wait(30)
    assert len(strangers) == 400
    assert answer.status_code == 200
    text = log.read_text()
    assert "Traceback" not in text and len(text.splitlines()) <= 10, text[:2000]
    assert "no descriptor free" not in text, text[:2000]  # the cap and the accept bursts fit in 300 files


def test_an_mlflow_server_that_does_not_answer_is_a_502_and_one_log_line(upstream, caplog):
    """It was a 500 and a traceback per request."""
    import requests

    gate = upstream.run(open_gate(gate_app(f"http://127.0.0.1:{free_port()}", TOKEN), "127.0.0.1", 0))
    try:
        answer = requests.get(f"http://127.0.0.1:{gate.port}/api/2.0/mlflow/experiments/search", headers=AUTH, timeout=60)
    finally:
        upstream.run(gate.close())
    assert answer.status_code == 502 and "does not answer" in answer.text
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []
    assert any("does not answer" in r.getMessage() for r in caplog.records)
