"""A live server on loopback with the demo data, for the schema fuzz tests.

The fuzz tests talk HTTP to a real server thread, so they cannot run inside pytest-django's
per-test transaction. The module-scoped `fuzz_server` seeds the demo data once, serves it on
127.0.0.1, and afterwards empties the database and restores what migrations had put there (what
`serialized_rollback` does), so the tests that run after it see the usual database.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests
from django.contrib.staticfiles.handlers import StaticFilesHandler
from django.core.management import call_command
from django.core.servers.basehttp import WSGIServer
from django.db import connection
from django.test.testcases import LiveServerThread, QuietWSGIRequestHandler

from accounts.demo import DEMO_KEYS
from accounts.models import ApiKey
from accounts.services import api_key_create, hash_api_key
from accounts.throttling import ApiKeyRateThrottle

ROLES = {
    "provider": "demo-provider",
    "customer": "demo-customer",
    "operator": "cardhour-ops",
}

# (collection path, "id" or "slug") -> values the demo organizations see in that list.
KNOWN_IDS: dict[tuple[str, str], list[Any]] = {}
# The fuzzer must not revoke the demo keys it sends: their ids -> a spare key of the same
# organization that a revoke hits instead.
SPARE_KEYS: dict[int, int] = {}


@dataclass(frozen=True)
class FuzzServer:
    """The live server's address."""

    base_url: str


def key_header(role: str) -> dict[str, str]:
    """The Authorization header with the demo key of `role`."""
    return {"Authorization": f"Api-Key {DEMO_KEYS[ROLES[role]]}"}


class _SingleThreadedServer(LiveServerThread):
    """A live server that answers one request at a time on one database connection.

    The fuzzer sends one request after another; a thread per request would open a new
    PostgreSQL connection for each of thousands of requests.
    """

    def _create_server(self, connections_override: Any = None) -> WSGIServer:
        return WSGIServer(
            (self.host, self.port), QuietWSGIRequestHandler, allow_reuse_address=False
        )


@pytest.fixture(scope="module")
def fuzz_server(django_db_setup: None, django_db_blocker: Any) -> Iterator[FuzzServer]:
    """Seed the demo data, serve it on 127.0.0.1, and put the database back afterwards."""
    monkeypatch = pytest.MonkeyPatch()
    # The fuzzer sends thousands of requests per key and the throttle is not what it tests (429
    # is documented on every operation, and throttling has its own tests).
    monkeypatch.setattr(ApiKeyRateThrottle, "rate", "1000000/min", raising=False)
    with django_db_blocker.unblock():
        snapshot = connection.creation.serialize_db_to_string()
        call_command("seed_demo", stdout=io.StringIO())
        for slug in ROLES.values():
            demo_key = ApiKey.objects.get(key_hash=hash_api_key(DEMO_KEYS[slug]))
            spare = api_key_create(organization=demo_key.organization, name="fuzz spare")
            SPARE_KEYS[demo_key.pk] = spare.api_key.pk
        connection.close()
        thread = _SingleThreadedServer("127.0.0.1", StaticFilesHandler, port=0)
        thread.daemon = True
        thread.start()
        thread.is_ready.wait()
        if thread.error:
            raise thread.error
        server = FuzzServer(base_url=f"http://127.0.0.1:{thread.port}")
        try:
            KNOWN_IDS.update(_collect_known_ids(server.base_url))
            yield server
        finally:
            KNOWN_IDS.clear()
            SPARE_KEYS.clear()
            thread.terminate()
            monkeypatch.undo()
            # Without restarting the id sequences, as TransactionTestCase flushes: the restored
            # rows keep their ids, and a sequence set back to 1 would hand those ids out again.
            call_command(
                "flush",
                interactive=False,
                verbosity=0,
                inhibit_post_migrate=True,
                reset_sequences=False,
            )
            connection.creation.deserialize_db_from_string(snapshot)


def spare_the_demo_keys(case: Any) -> None:
    """Point a revoke of one of the demo keys the fuzzer sends at a spare key instead."""
    if case.operation.path == "/api/v1/api-keys/{id}/revoke/":
        key_id = str(case.path_parameters.get("id"))
        if key_id.isdigit() and int(key_id) in SPARE_KEYS:
            case.path_parameters["id"] = SPARE_KEYS[int(key_id)]


def _collect_known_ids(base_url: str) -> dict[tuple[str, str], list[Any]]:
    """For every collection, the ids and slugs the three demo organizations see in its list."""
    paths = requests.get(f"{base_url}/api/schema/?format=json", timeout=30).json()["paths"]
    known: dict[tuple[str, str], list[Any]] = {}
    for path, operations in paths.items():
        if "{" in path or "get" not in operations:
            continue
        for role in ROLES:
            response = requests.get(
                f"{base_url}{path}", headers=key_header(role), params={"page_size": 20}, timeout=30
            )
            if response.status_code != 200:
                continue
            body = response.json()
            rows = body.get("results") if isinstance(body, dict) else body
            for row in rows if isinstance(rows, list) else []:
                for name in ("id", "slug"):
                    values = known.setdefault((path, name), [])
                    if isinstance(row, dict) and name in row and row[name] not in values:
                        values.append(row[name])
    return known
