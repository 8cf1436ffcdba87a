"""Billing fixtures: a real localstripe server on loopback, and settings that point at it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from django.conf import LazySettings

SERVER = Path(__file__).with_name("localstripe_server.py")
API_KEY = "sk_test_cardhour"
WEBHOOK_SECRET = "whsec_cardhour_test"


class LocalStripe:
    """Reads back what our code did at Stripe, over HTTP, and arms the server's faults."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {API_KEY}"

    def get(self, path: str, **params: Any) -> Any:
        """GET a Stripe API path (e.g. /v1/invoices) and return the decoded JSON."""
        response = self.session.get(self.url + path, params=params, timeout=10)
        response.raise_for_status()
        return response.json()

    def reset(self) -> None:
        """Forget every object, idempotency key and fault."""
        self.session.post(self.url + "/_config/reset", timeout=10).raise_for_status()

    def fault(self, path: str, *, mode: str = "before", skip: int = 0, times: int = 1) -> None:
        """Fail matching POSTs: `before` doing anything, or `after` (a lost response)."""
        body: dict[str, Any] = {
            "method": "POST",
            "path": path,
            "mode": mode,
            "skip": skip,
            "times": times,
        }
        self.session.post(self.url + "/_config/faults", json=body, timeout=10).raise_for_status()


@pytest.fixture(scope="session")
def localstripe_url() -> Iterator[str]:
    """A localstripe server (extended, see localstripe_server.py) in its own process."""
    process = subprocess.Popen(
        [sys.executable, str(SERVER)], stdout=subprocess.PIPE, text=True, cwd=SERVER.parent
    )
    assert process.stdout is not None
    port = process.stdout.readline().strip()  # the server prints its port once it is bound
    if not port.isdigit():
        process.kill()
        raise RuntimeError(f"localstripe did not start (exit {process.poll()})")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture
def local_stripe(localstripe_url: str, settings: LazySettings) -> LocalStripe:
    """An empty Stripe for this test, and settings that turn the integration on against it."""
    settings.STRIPE_API_KEY = API_KEY
    settings.STRIPE_API_BASE = localstripe_url
    settings.STRIPE_WEBHOOK_SECRET = WEBHOOK_SECRET
    server = LocalStripe(localstripe_url)
    server.reset()
    return server
