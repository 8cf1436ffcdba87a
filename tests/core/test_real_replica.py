"""Lists and reports against a real streaming hot standby (DATABASE_REPLICA_URL).

CI starts a throwaway primary and a standby that streams from it (scripts/replica_pair.sh) and
runs this file against the pair; without DATABASE_REPLICA_URL these tests are skipped, and
tests/core/test_read_replica.py covers the routing with a second connection (TEST MIRROR).
The standby lags the primary by a little, so each test waits until it has replayed the
primary's WAL (a log position, never a time) before it reads.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.test.utils import CaptureQueriesContext

from accounts.models import Organization
from tests.billing.invoice_factories import make_issued_invoice

REPLICA = "replica"

if not settings.DATABASE_REPLICA_URL and os.environ.get("CARDHOUR_REQUIRE_REPLICA"):
    raise RuntimeError("CARDHOUR_REQUIRE_REPLICA is set but DATABASE_REPLICA_URL is not.")

pytestmark = [
    pytest.mark.skipif(
        not settings.DATABASE_REPLICA_URL,
        reason="no DATABASE_REPLICA_URL: no real streaming replica to read from (CI starts one"
        " with scripts/replica_pair.sh; the routing is tested on a mirror in"
        " test_read_replica.py)",
    ),
    pytest.mark.django_db(
        transaction=True, serialized_rollback=True, databases=[DEFAULT_DB_ALIAS, REPLICA]
    ),
]


def replica_caught_up() -> None:
    """Wait until the standby has replayed everything the primary has written so far."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()::text")
        [position] = cursor.fetchone()
    for _ in range(600):
        with connections[REPLICA].cursor() as cursor:
            cursor.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [position])
            [replayed] = cursor.fetchone()
        if replayed:
            return
        time.sleep(0.05)
    raise AssertionError(f"the standby did not replay up to {position}")


def tables_read(captured: CaptureQueriesContext, table: str) -> int:
    return sum(f'"{table}"' in query["sql"] for query in captured.captured_queries)


def test_the_replica_is_a_hot_standby_of_the_primary() -> None:
    with connections[REPLICA].cursor() as cursor:
        cursor.execute("SELECT pg_is_in_recovery(), current_database()")
        in_recovery, database = cursor.fetchone()
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT pg_is_in_recovery(), current_database()")
        primary_in_recovery, primary_database = cursor.fetchone()
    assert (in_recovery, primary_in_recovery) == (True, False)
    assert database == primary_database
    assert settings.DATABASE_READ_REPLICA == REPLICA


def test_the_invoice_list_is_read_from_the_standby(
    provider: Any, customer: Any, client_for: Any
) -> None:
    invoice = make_issued_invoice(provider, customer)
    client = client_for(customer, "read")
    replica_caught_up()
    with (
        CaptureQueriesContext(connections[DEFAULT_DB_ALIAS]) as primary,
        CaptureQueriesContext(connections[REPLICA]) as replica,
    ):
        body = client.get("/api/v1/invoices/").json()
    assert [row["number"] for row in body["results"]] == [invoice.number]
    assert tables_read(replica, "billing_invoice") and not tables_read(primary, "billing_invoice")


def test_after_a_write_the_writer_reads_from_the_primary(
    provider: Any, customer: Any, client_for: Any
) -> None:
    make_issued_invoice(provider, customer)
    client = client_for(customer)
    assert client.post("/api/v1/api-keys/", {"name": "ci", "scope": "read"}).status_code == 201
    with CaptureQueriesContext(connections[REPLICA]) as replica:
        assert len(client.get("/api/v1/invoices/").json()["results"]) == 1
        assert client.get("/api/v1/api-keys/").status_code == 200
    assert replica.captured_queries == []


def test_the_standby_refuses_writes(customer: Any) -> None:
    replica_caught_up()
    with pytest.raises(DatabaseError, match="read-only transaction"):
        Organization.objects.using(REPLICA).filter(pk=customer.pk).update(name="nope")
    assert Organization.objects.get(pk=customer.pk).name == customer.name
