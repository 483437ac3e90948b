"""An MLflow server stand-in for tests: answers every request with one JSON body and keeps what it
saw (path and Authorization header), on a thread of its own."""

from __future__ import annotations

import http.server
import json
import threading
from typing import Any


class StandInMlflow:
    """``with StandInMlflow(body) as s``: ``s.port``; ``s.seen`` lists ``(path, authorization)``."""

    def __init__(self, body: dict[str, Any]):
        payload, seen = json.dumps(body).encode(), []
        self.seen: list[tuple[str, str]] = seen

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                seen.append((self.path, self.headers.get("Authorization", "")))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _answer

            def log_message(self, *args) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]

    def __enter__(self) -> StandInMlflow:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
