"""Tenant isolation, proven route by route (the "Prove it holds" matrix).

For every route under /api/v1/, found by walking the URL resolver:

- an object route (a URL id, or a query naming an object): tenant B's read and write keys get 404
  (a write with a read key: the 403 insufficient_scope any id gets) for tenant A's object, the
  same answer as for an id that does not exist, and nothing in the database changes;
- a list: neither tenant's list, on any page or as CSV, holds the other's object;
- a create whose body can name an object: naming A's object gets B what a missing one would;
- every GET a customer key can make carries no provider economics, and the economics routes
  answer a customer key with 403/404.

tests/isolation_fixtures.py says how to build each route's object; a route it does not know
fails test_every_api_route_is_in_the_matrix (and its own cases) with a message naming it.
"""

from __future__ import annotations

import csv
import io
from typing import Any
from urllib.parse import urlencode

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.models import Organization
from tests.isolation_fixtures import (
    CUSTOMER,
    PUBLIC_ROUTES,
    TENANT_RESOURCES,
    Built,
    Public,
    Resource,
    Route,
    World,
    api_routes,
    economics_keys,
    is_economics_name,
    row_counts,
)

pytestmark = pytest.mark.django_db

ROUTES = api_routes()
SCOPES = ("read", "write")
PAGE_SIZE = 3  # small, so that a list of a few rows already spans several cursor pages
ECONOMICS_ROUTE_KEYS = {"asset", "unit-economics", "capacity-signal"}


def _cases() -> dict[str, list[Any]]:
    """One case per (route, method), sorted into the checks that apply to it."""
    cases: dict[str, list[Any]] = {"object": [], "list": [], "reference": [], "economics": []}
    for route in ROUTES:
        resource = TENANT_RESOURCES.get(route.key)
        for method, handler in route.handlers:
            case = pytest.param(route, method, id=f"{route.name}-{method.upper()}")
            if method == "get":
                cases["economics"].append(case)
            if route.key in PUBLIC_ROUTES:
                continue
            if route.kwargs or (resource is not None and handler in resource.queries):
                cases["object"].append(case)
            elif method == "get" and handler == "list":
                cases["list"].append(case)
            elif resource is not None and handler in resource.no_reference:
                continue
            elif method != "get":
                cases["reference"].append(case)
            else:  # a GET without an object in its URL and no declared query: fails as unknown
                cases["object"].append(case)
    return cases


CASES = _cases()


@pytest.fixture
def world(
    provider: Organization,
    customer: Organization,
    other_provider: Organization,
    other_customer: Organization,
) -> World:
    return World(
        provider=provider,
        customer=customer,
        other_provider=other_provider,
        other_customer=other_customer,
    )


# ------------------------------------------------------------------ helpers


def _unknown(route: Route) -> str:
    return (
        f"Route {route} is not in the tenant-isolation matrix. Add TENANT_RESOURCES"
        f"[{route.key!r}] to tests/isolation_fixtures.py (a builder that creates one object "
        f"tenant A owns and returns its URL kwargs {list(route.kwargs)}, and the organization "
        f"kinds that own it), or PUBLIC_ROUTES[{route.key!r}] with the reason the route has "
        "no tenant-owned objects."
    )


def _resource(route: Route) -> Resource:
    resource = TENANT_RESOURCES.get(route.key)
    if resource is None:
        pytest.fail(_unknown(route))
    return resource


def _url(route: Route, kwargs: dict[str, Any]) -> str:
    absent = [name for name in route.kwargs if name not in kwargs]
    if absent:
        pytest.fail(f"{route}: the builder returns no URL kwargs {absent} (it gave {kwargs}).")
    return reverse(route.name, kwargs={name: kwargs[name] for name in route.kwargs})


def _with_query(url: str, params: dict[str, Any]) -> str:
    return f"{url}?{urlencode(params, doseq=True)}" if params else url


def _send(client: APIClient, method: str, url: str, body: Any = None) -> Any:
    if method == "get":
        return client.get(url)
    return getattr(client, method)(url, body, format="json")


def _json(response: Any) -> Any:
    if response.get("Content-Type", "").startswith("application/json") and response.content:
        return response.json()
    return None


def _verdict(response: Any) -> tuple[int, Any, tuple[str, ...]]:
    """Status, error code and per-event reasons: what B learns from an answer."""
    body = _json(response)
    if not isinstance(body, dict):
        return response.status_code, None, ()
    results = body.get("results")
    reasons = tuple(
        str((row.get("reason") or {}).get("code"))
        for row in (results if isinstance(results, list) else [])
        if isinstance(row, dict)
    )
    return response.status_code, body.get("code"), reasons


def _offers_csv(route: Route) -> bool:
    renderers = getattr(route.view, "renderer_classes", ())
    return any(getattr(renderer, "format", None) == "csv" for renderer in renderers)


def _counts_diff(before: dict[str, int], after: dict[str, int]) -> dict[str, tuple[int, int]]:
    return {name: (count, after[name]) for name, count in before.items() if after[name] != count}


def _shown(response: Any) -> str:
    return f"{response.status_code} {response.content[:400]!r}"


def _object_requests(
    route: Route, resource: Resource, handler: str, built: Built, method: str
) -> list[tuple[str, str]]:
    """(URL for A's object, URL for a missing one) pairs: one per declared query, and each
    also as a CSV download where the route offers one."""
    if not route.kwargs and handler not in resource.queries:
        pytest.fail(
            f"{route}: {handler} names no object in its URL. Declare queries[{handler!r}] on "
            f"TENANT_RESOURCES[{route.key!r}] (query strings naming tenant A's object)."
        )
    missing = built.missing()
    ours = resource.queries[handler](built) if handler in resource.queries else [{}]
    gone = resource.queries[handler](missing) if handler in resource.queries else [{}]
    url, missing_url = _url(route, built.kwargs), _url(route, missing.kwargs)
    formats: list[dict[str, str]] = [{}]
    if method == "get" and _offers_csv(route):
        formats.append({"format": "csv"})
    return [
        (_with_query(url, {**query, **fmt}), _with_query(missing_url, {**missing_query, **fmt}))
        for query, missing_query in zip(ours, gone, strict=True)
        for fmt in formats
    ]


def _body(resource: Resource, handler: str, built: Built) -> Any:
    make = resource.bodies.get(handler)
    if make is None and handler == "update":
        make = resource.bodies.get("partial_update")
    return make(built) if make is not None else None


def _listed_ids(client: APIClient, route: Route, resource: Resource, as_csv: bool) -> set[Any]:
    """Every id the list shows the client: all cursor pages, or the whole CSV download."""
    url = reverse(route.name)
    params = dict(resource.list_params)
    if as_csv:
        response = client.get(_with_query(url, {**params, "format": "csv"}))
        assert response.status_code == 200, f"{route} as CSV: {_shown(response)}"
        rows = csv.DictReader(io.StringIO(response.content.decode()))
        return {int(row["id"]) for row in rows}
    ids: set[Any] = set()
    next_url: str | None = _with_query(url, {**params, "page_size": PAGE_SIZE})
    pages = 0
    while next_url:
        response = client.get(next_url)
        assert response.status_code == 200, f"{route} page {pages + 1}: {_shown(response)}"
        body = response.json()
        rows = body["results"] if isinstance(body, dict) else body
        ids |= {row["id"] for row in rows}
        next_url = body.get("next") if isinstance(body, dict) else None
        pages += 1
        assert pages <= 200, f"{route}: the cursor never ends"
    return ids


# ------------------------------------------------------------------ the matrix


def test_every_api_route_is_in_the_matrix() -> None:
    problems = []
    for route in ROUTES:
        if route.key in PUBLIC_ROUTES:
            if route.key in TENANT_RESOURCES:
                problems.append(f"{route}: both in TENANT_RESOURCES and PUBLIC_ROUTES.")
            continue
        resource = TENANT_RESOURCES.get(route.key)
        if resource is None:
            problems.append(_unknown(route))
            continue
        for method, handler in route.handlers:
            if route.kwargs or handler in resource.queries:
                continue
            if method == "get" and handler == "list":
                continue
            if method != "get" and (
                handler in resource.references or handler in resource.no_reference
            ):
                continue
            problems.append(
                f"{route}: {method.upper()} ({handler}) has no object in its URL. Declare on "
                f"TENANT_RESOURCES[{route.key!r}] queries[{handler!r}] (query strings naming "
                f"tenant A's object), references[{handler!r}] (bodies naming it) or "
                f"no_reference[{handler!r}] (why its body cannot name another tenant's object)."
            )
    routed = {route.key for route in ROUTES}
    stale = sorted((set(TENANT_RESOURCES) | set(PUBLIC_ROUTES)) - routed)
    if stale:
        problems.append(f"Registered for the matrix but no longer routed: {stale}.")
    missing_economics = sorted(ECONOMICS_ROUTE_KEYS - routed)
    if missing_economics:
        problems.append(f"The economics routes {missing_economics} are not routed.")
    assert not problems, "\n".join(problems)


def test_the_economics_routes_are_marked_provider_only() -> None:
    routed = {route.key for route in ROUTES}
    for key in sorted(ECONOMICS_ROUTE_KEYS & routed):
        resource = TENANT_RESOURCES.get(key)
        assert resource is not None, f"{key} has no TENANT_RESOURCES entry"
        assert resource.economics, f"{key} must be marked economics=True (customers get 403/404)"


@pytest.mark.parametrize(("route", "method"), CASES["object"])
def test_another_tenant_gets_404_for_the_object_and_changes_nothing(
    route: Route, method: str, world: World, client_for: Any
) -> None:
    resource = _resource(route)
    handler = route.handler(method)
    builders = [resource.build]
    if method != "get" and resource.public_build is not None:
        builders.append(resource.public_build)  # everyone reads it; only its owner changes it
    for kind, build in ((kind, build) for kind in resource.owners for build in builders):
        built = build(world, kind)
        requests = _object_requests(route, resource, handler, built, method)
        body = _body(resource, handler, built)
        if method == "get":  # the object is there: its owner reads it
            for url, _ in requests:
                own = client_for(world.owner[kind], "read").get(url)
                assert own.status_code == 200, f"{kind} A GET {url}: {_shown(own)}"
        intruder = world.other[kind]
        clients = {scope: client_for(intruder, scope) for scope in SCOPES}
        rows, counts = built.rows(), row_counts()
        for scope, client in clients.items():
            for url, missing_url in requests:
                theirs = _send(client, method, url, body)
                nothing = _send(client, method, missing_url, body)
                who = f"{kind} B ({intruder.slug}, {scope} key) {method.upper()} {url}"
                assert theirs.status_code < 500, f"{who}: {_shown(theirs)}"
                allowed = {404} if method == "get" else {403, 404}
                assert theirs.status_code in allowed, f"{who}: {_shown(theirs)}"
                assert _verdict(theirs) == _verdict(nothing), (
                    f"{who}: answers {_verdict(theirs)} for A's object but {_verdict(nothing)} "
                    f"for a missing one ({missing_url}), which tells B that it exists"
                )
        assert built.rows() == rows, f"{route} {method.upper()} by {kind} B changed A's object"
        assert row_counts() == counts, (
            f"{route} {method.upper()} by {kind} B changed row counts: "
            f"{_counts_diff(counts, row_counts())}"
        )


@pytest.mark.parametrize(("route", "method"), CASES["list"])
def test_neither_tenants_list_shows_the_others_object(
    route: Route, method: str, world: World, client_for: Any
) -> None:
    resource = _resource(route)
    mirror = world.mirrored()
    formats = (False, True) if _offers_csv(route) else (False,)
    for kind in resource.owners:
        ours, theirs = resource.build(world, kind), resource.build(mirror, kind)
        for tenant, own, other in ((world, ours, theirs), (mirror, theirs, ours)):
            for scope in SCOPES:
                client = client_for(tenant.owner[kind], scope)
                for as_csv in formats:
                    ids = _listed_ids(client, route, resource, as_csv)
                    who = f"{route} for {tenant.owner[kind].slug} ({scope} key, csv={as_csv})"
                    assert own.obj.pk in ids, f"{who}: its own object {own.obj.pk} is missing"
                    assert other.obj.pk not in ids, f"{who}: shows the other tenant's {other.obj}"


@pytest.mark.parametrize(("route", "method"), CASES["reference"])
def test_another_tenant_cannot_name_the_object_in_a_create(
    route: Route, method: str, world: World, client_for: Any
) -> None:
    resource = _resource(route)
    handler = route.handler(method)
    if handler not in resource.references:
        pytest.fail(
            f"{route}: {method.upper()} ({handler}) creates without an object in its URL. "
            f"Declare references[{handler!r}] (bodies naming tenant A's object) or "
            f"no_reference[{handler!r}] on TENANT_RESOURCES[{route.key!r}]."
        )
    url = _url(route, {})
    for kind in resource.owners:
        built = resource.build(world, kind)
        bodies = resource.references[handler](built)
        missing_bodies = resource.references[handler](built.missing())
        intruder = world.other[kind]
        clients = {scope: client_for(intruder, scope) for scope in SCOPES}
        rows = built.rows()
        for scope, client in clients.items():
            for body, missing_body in zip(bodies, missing_bodies, strict=True):
                theirs = _send(client, method, url, body)
                nothing = _send(client, method, url, missing_body)
                who = f"{kind} B ({intruder.slug}, {scope} key) {method.upper()} {url} {body}"
                assert theirs.status_code < 500, f"{who}: {_shown(theirs)}"
                assert _verdict(theirs) == _verdict(nothing), (
                    f"{who}: answers {_shown(theirs)} naming A's object but "
                    f"{_shown(nothing)} naming a missing one"
                )
        assert built.rows() == rows, f"{route} {method.upper()} by {kind} B changed A's rows"


@pytest.mark.parametrize(("route", "method"), CASES["economics"])
def test_a_customer_key_never_receives_provider_economics(
    route: Route, method: str, world: World, client_for: Any
) -> None:
    handler = route.handler(method)
    spec: Public | Resource = PUBLIC_ROUTES.get(route.key) or _resource(route)
    built: Built | None
    queries: list[dict[str, Any]]
    if isinstance(spec, Public):
        built = spec.build(world) if spec.build is not None else None
        queries = [spec.params[handler]()] if handler in spec.params else [{}]
        provider_only = must_read = False
    else:
        kind = CUSTOMER if CUSTOMER in spec.owners else spec.owners[0]
        built = (spec.public_build or spec.build)(world, kind)
        queries = [dict(spec.list_params)]
        if handler in spec.queries:
            queries = spec.queries[handler](built)
        provider_only = spec.economics
        must_read = spec.customer_reads and handler in ("list", "retrieve")
    url = _url(route, built.kwargs if built is not None else {})
    client = client_for(world.customer, "read")
    formats: list[dict[str, str]] = [{}, {"format": "csv"}] if _offers_csv(route) else [{}]
    for query in queries:
        for fmt in formats:
            target = _with_query(url, {**query, **fmt})
            response = client.get(target)
            who = f"customer {world.customer.slug} GET {target}"
            if provider_only:
                assert response.status_code in (403, 404), f"{who}: {_shown(response)}"
                continue
            assert response.status_code < 500, f"{who}: {_shown(response)}"
            body = _json(response)
            if must_read and not fmt:
                assert response.status_code == 200, f"{who}: {_shown(response)}"
                if handler == "list" and not route.kwargs and built is not None:
                    rows = body["results"] if isinstance(body, dict) else body
                    shown = {row["id"] for row in rows}
                    assert built.obj.pk in shown, f"{who}: the scan never saw {built.obj}"
            if body is not None:
                assert not economics_keys(body), f"{who}: {economics_keys(body)}"
            elif response.get("Content-Type", "").startswith("text/csv"):
                header = next(csv.reader(io.StringIO(response.content.decode())), [])
                leaked = [name for name in header if is_economics_name(name)]
                assert not leaked, f"{who}: CSV columns {leaked}"
