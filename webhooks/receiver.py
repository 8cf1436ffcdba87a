"""A Standard Webhooks receiver on loopback, for `seed_demo` only: an HTTP server in a thread on
127.0.0.1 and an ephemeral port that verifies each delivery's signature with the endpoint's
secret (the `standardwebhooks` library, as a customer's receiver would) and answers 204, or 400
when the signature does not verify. It records the ids it accepted. Nothing else starts it; it
never listens on anything but loopback.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

PATH = "/cardhour-webhooks"


class LoopbackReceiver:
    """Start with `with LoopbackReceiver() as receiver:`; set `secret` before deliveries come."""

    def __init__(self) -> None:
        self.secret = ""
        self.accepted: list[str] = []
        self.refused = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start the receiver first"
        return f"http://127.0.0.1:{self._server.server_address[1]}{PATH}"

    def __enter__(self) -> LoopbackReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {key.lower(): value for key, value in self.headers.items()}
                try:
                    Webhook(receiver.secret).verify(body, headers)
                except WebhookVerificationError:
                    receiver.refused += 1
                    status = 400
                else:
                    receiver.accepted.append(headers["webhook-id"])
                    status = 204
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
