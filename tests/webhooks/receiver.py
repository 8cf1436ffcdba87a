"""A real HTTP receiver on loopback for webhook tests: a thread running http.server.

It records every request (headers and body), answers with a status the test sets, can be taken
down and brought back on the same port, and can hold requests until released (a worker killed
mid-delivery). Deduplication by `webhook-id` is what a correct receiver does with them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook


@dataclass(frozen=True)
class Received:
    """One request as the receiver got it."""

    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]

    def verified(self, secret: str) -> Any:
        """The payload, after Standard Webhooks' own verification (raises if it fails)."""
        return Webhook(secret).verify(self.body, self.headers)


class Receiver:
    """An HTTP server on 127.0.0.1 in a thread."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.status = 200
        self.port = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.holding = threading.Event()  # set: requests wait for `release`
        self.held = threading.Event()  # set once a request is waiting
        self._release = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                receiver.received.append(
                    Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                if receiver.holding.is_set():
                    receiver.held.set()
                    receiver._release.wait(timeout=60)
                self.send_response(receiver.status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Take the receiver down: connections to its port are refused until `start`."""
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def release(self) -> None:
        """Answer the held requests; later ones are answered at once."""
        self.holding.clear()
        self._release.set()

    def ids(self) -> list[str]:
        return [request.webhook_id for request in self.received]
