"""Lists and reports read from the read replica; writes and reads that must see them stay on the
primary (core.db_routing, core.api.replica).

In tests the `replica` alias is a second, real connection to the test database (TEST MIRROR of
`default`), so these tests commit their data (transactional) and the replica's connection sees
it. Each test turns routing on with DATABASE_READ_REPLICA="replica" and counts the queries each
connection ran. tests/core/test_real_replica.py runs against a real streaming standby in CI.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import URLPattern, URLResolver, get_resolver

from accounts.models import Organization
from billing.models import Invoice
from billing.tasks import reconcile_ledger
from core.db_routing import replica_reads
from tests.billing.invoice_factories import make_issued_invoice

REPLICA = "replica"
TRANSACTIONAL = pytest.mark.django_db(
    transaction=True, serialized_rollback=True, databases=[DEFAULT_DB_ALIAS, REPLICA]
)
# The GET handlers that read from the replica; docs/scaling.md lists the same endpoints.
REPLICA_ENDPOINTS = {
    "/api/v1/assets",
    "/api/v1/capacity-signals",
    "/api/v1/cost-reports",
    "/api/v1/credit-notes",
    "/api/v1/invoices",
    "/api/v1/ledger-entries",
    "/api/v1/resale-economics",
    "/api/v1/unit-economics",
    "/api/v1/usage/rollups",
}


@pytest.fixture
def routed(settings: Any) -> None:
    """This deployment has a read replica."""
    settings.DATABASE_READ_REPLICA = REPLICA


class Queries:
    """The SQL each connection ran inside the block."""

    def __init__(self) -> None:
        self.primary = CaptureQueriesContext(connections[DEFAULT_DB_ALIAS])
        self.replica = CaptureQueriesContext(connections[REPLICA])

    def __enter__(self) -> Queries:
        self.primary.__enter__()
        self.replica.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.replica.__exit__(*exc)
        self.primary.__exit__(*exc)

    @staticmethod
    def touching(captured: CaptureQueriesContext, table: str) -> list[str]:
        return [query["sql"] for query in captured.captured_queries if f'"{table}"' in query["sql"]]


def test_the_replica_alias_is_a_second_connection_mirroring_the_test_database() -> None:
    replica = connections[REPLICA]
    assert replica is not connections[DEFAULT_DB_ALIAS]
    assert replica.settings_dict["TEST"]["MIRROR"] == DEFAULT_DB_ALIAS


@TRANSACTIONAL
def test_the_invoice_list_reads_from_the_replica_and_sees_committed_rows(
    routed: None, provider: Any, customer: Any, client_for: Any
) -> None:
    invoice = make_issued_invoice(provider, customer)
    client = client_for(customer, "read")
    with Queries() as queries:
        body = client.get("/api/v1/invoices/").json()
    assert [row["id"] for row in body["results"]] == [invoice.pk]
    # The page, its lines and their events from the replica; only the API key from the primary.
    assert queries.touching(queries.replica, "billing_invoice")
    assert queries.touching(queries.replica, "billing_invoiceline")
    assert not queries.touching(queries.primary, "billing_invoice")
    assert not queries.touching(queries.primary, "billing_invoiceline")
    assert queries.touching(queries.primary, "accounts_apikey")


@TRANSACTIONAL
def test_when_the_replica_is_down_the_list_answers_from_the_primary(
    routed: None, provider: Any, customer: Any, client_for: Any, monkeypatch: Any
) -> None:
    invoice = make_issued_invoice(provider, customer)
    replica = connections[REPLICA]
    replica.close()
    monkeypatch.setitem(replica.settings_dict, "PORT", "1")  # nothing listens there
    try:
        with CaptureQueriesContext(connections[DEFAULT_DB_ALIAS]) as primary:
            answer = client_for(customer, "read").get("/api/v1/invoices/")
    finally:
        replica.close()
    assert answer.status_code == 200
    assert [row["id"] for row in answer.json()["results"]] == [invoice.pk]
    assert Queries.touching(primary, "billing_invoice")


@TRANSACTIONAL
def test_an_invoice_read_by_id_stays_on_the_primary(
    routed: None, provider: Any, customer: Any, client_for: Any
) -> None:
    invoice = make_issued_invoice(provider, customer)
    with Queries() as queries:
        answer = client_for(customer).get(f"/api/v1/invoices/{invoice.pk}/")
    assert answer.status_code == 200
    assert queries.replica.captured_queries == []


@TRANSACTIONAL
def test_reports_read_from_the_replica(
    routed: None, provider: Any, customer: Any, client_for: Any
) -> None:
    invoice = make_issued_invoice(provider, customer)
    with Queries() as queries:
        report = client_for(customer).get(
            "/api/v1/cost-reports/", {"group_by": "contract", "invoice": invoice.pk}
        )
        assets = client_for(provider).get("/api/v1/assets/")
    assert report.status_code == 200 and report.json()["totals"][0]["invoices"] == 1
    assert assets.status_code == 200 and assets.json()["results"]
    assert queries.touching(queries.replica, "billing_invoiceline")
    assert queries.touching(queries.replica, "inventory_node")
    assert not queries.touching(queries.primary, "billing_invoiceline")
    assert not queries.touching(queries.primary, "inventory_node")


@TRANSACTIONAL
def test_after_a_write_the_organization_reads_its_lists_from_the_primary(
    routed: None, provider: Any, customer: Any, client_for: Any
) -> None:
    make_issued_invoice(provider, customer)
    client = client_for(customer)
    created = client.post("/api/v1/api-keys/", {"name": "ci", "scope": "read"})
    assert created.status_code == 201
    with Queries() as queries:
        assert len(client.get("/api/v1/invoices/").json()["results"]) == 1
        # The pin is the writer's: the provider, who wrote nothing, still reads the replica.
        assert len(client_for(provider).get("/api/v1/invoices/").json()["results"]) == 1
    assert len(queries.touching(queries.primary, "billing_invoice")) == 1
    assert len(queries.touching(queries.replica, "billing_invoice")) == 1


@TRANSACTIONAL
def test_the_pin_ends_after_its_window(
    routed: None, settings: Any, provider: Any, customer: Any, client_for: Any
) -> None:
    settings.DATABASE_REPLICA_PIN_SECONDS = -1  # the cache stores nothing: the window is over
    make_issued_invoice(provider, customer)
    client = client_for(customer)
    assert client.post("/api/v1/api-keys/", {"name": "ci", "scope": "read"}).status_code == 201
    with Queries() as queries:
        client.get("/api/v1/invoices/")
    assert queries.touching(queries.replica, "billing_invoice")


@TRANSACTIONAL
def test_without_a_replica_every_query_goes_to_the_primary(
    provider: Any, customer: Any, client_for: Any
) -> None:
    make_issued_invoice(provider, customer)
    with Queries() as queries:
        assert len(client_for(customer).get("/api/v1/invoices/").json()["results"]) == 1
    assert queries.replica.captured_queries == []
    assert queries.touching(queries.primary, "billing_invoice")


@TRANSACTIONAL
def test_a_write_inside_a_replica_scope_goes_to_the_primary_and_later_reads_follow_it(
    routed: None, customer: Any
) -> None:
    with Queries() as queries, replica_reads(principal="org:acme-ai") as alias:
        assert alias == REPLICA
        assert Organization.objects.get(pk=customer.pk).name == "Acme AI"
        Organization.objects.filter(pk=customer.pk).update(name="Acme AI Labs")
        assert Organization.objects.get(pk=customer.pk).name == "Acme AI Labs"
    [replica_read] = queries.touching(queries.replica, "accounts_organization")
    assert replica_read.startswith("SELECT")
    primary = queries.touching(queries.primary, "accounts_organization")
    assert [sql.split()[0] for sql in primary] == ["UPDATE", "SELECT"]


@TRANSACTIONAL
def test_reads_inside_a_transaction_stay_on_the_primary(
    routed: None, provider: Any, customer: Any
) -> None:
    invoice = make_issued_invoice(provider, customer)
    with (
        Queries() as queries,
        transaction.atomic(),
        replica_reads(principal="org:acme-ai") as alias,
    ):
        assert alias == DEFAULT_DB_ALIAS
        Invoice.objects.get(pk=invoice.pk)
    assert queries.replica.captured_queries == []


@TRANSACTIONAL
def test_celery_tasks_read_and_write_on_the_primary(
    routed: None, provider: Any, customer: Any
) -> None:
    make_issued_invoice(provider, customer)
    with Queries() as queries:
        reconcile_ledger.apply().get()
    assert queries.replica.captured_queries == []
    assert queries.primary.captured_queries


def _routes(resolver: URLResolver, prefix: str = "/") -> dict[str, Any]:
    """Every routed view by its URL (regex characters and format suffixes left out)."""
    found: dict[str, Any] = {}
    for pattern in resolver.url_patterns:
        route = prefix + str(pattern.pattern).strip("^$").replace("/?", "/").replace("\\", "")
        if isinstance(pattern, URLResolver):
            found.update(_routes(pattern, route))
        elif isinstance(pattern, URLPattern) and "<format>" not in route:
            found[route.rstrip("/")] = pattern.callback
    return found


def test_exactly_the_documented_endpoints_read_from_the_replica() -> None:
    replica_routes = set()
    for route, view in _routes(get_resolver()).items():
        view_class = getattr(view, "cls", None)
        method = (getattr(view, "actions", None) or {}).get("get", "get")
        if getattr(getattr(view_class, method, None), "reads_from_replica", False):
            replica_routes.add(route)
    assert replica_routes == REPLICA_ENDPOINTS
