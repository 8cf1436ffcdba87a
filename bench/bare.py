"""Bare Django views for bench/load.py: the endpoints' SQL without DRF, serializers or services.

Mounted only by bench/settings_load.py (ROOT_URLCONF = "bench.bare"), in front of the project's
own routes; config.urls never sees them. Each view goes through the same Django middleware as
the API, runs the SQL the endpoint runs and returns the rows as JSON, so that
`endpoint throughput / bare throughput` says what the API layer costs on top of its SQL:

- capacity: the SELECT statements captured from GET /api/v1/capacity/ for one of the sampled
  queries (`?i=`), replayed as they were (bench/load.py writes them to BENCH_BARE_PLAN);
- leases: POST /api/v1/leases/ written out by hand, statement for statement (authentication,
  the Idempotency-Key record, the visible offer and its named nodes, the index fixing in force,
  the admission checks (a spent blocking budget, a triggered funds policy), the pool, the
  free-GPU statement of leasing.services.allocation unlocked then locked SKIP LOCKED with the
  same choice of GPUs — and, when too few are free, the look-up of expired holds in the way —,
  the contract put in force with its history rows and events, the lease with its history row
  and webhook events, the allocations, the answer read back and stored on the key), without
  validation;
- usage events: POST /api/v1/usage/events/ written out by hand (authentication, the contract
  reads and share lock, the batch row, the staging table, binary COPY, the same
  INSERT ... ON CONFLICT ... RETURNING, the batch counts), without validation.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, connection, transaction
from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from billing.services.budgets import ANY_SPENT_BLOCKING_BUDGET_SQL
from billing.services.funds_policy import ANY_STOPPING_POLICY_SQL
from billing.services.ingest_sql import (
    CLEAR_STAGING_SQL,
    COPY_SQL,
    CREATE_STAGING_SQL,
    INSERT_SQL,
    STAGING_TYPES,
)
from contracts.models import Contract
from core.idempotency import request_fingerprint
from leasing.locks import GPUS_SKIP_LOCKED
from leasing.services.allocation import MAX_PLACEMENT_ATTEMPTS, free_gpus_statement, gpus_choose

# ------------------------------------------------------------------ SQL

AUTH_SQL = """
SELECT k.id, k.key_hash, k.revoked_at, k.expires_at, k.scope, o.id, o.is_customer, o.is_provider
FROM accounts_apikey k JOIN accounts_organization o ON o.id = k.organization_id
WHERE k.prefix = %s ORDER BY k.created_at DESC LIMIT 1"""

IDEMPOTENCY_INSERT_SQL = """
INSERT INTO core_idempotencyrecord (scope, key, method, path, fingerprint, created_at)
VALUES (%s, %s, 'POST', %s, %s, %s) ON CONFLICT (scope, key) DO NOTHING"""
IDEMPOTENCY_LOCK_SQL = """
SELECT id, fingerprint, status_code, response_body FROM core_idempotencyrecord
WHERE key = %s AND scope = %s FOR UPDATE"""
IDEMPOTENCY_ANSWER_SQL = """
UPDATE core_idempotencyrecord SET status_code = %s, response_body = %s::jsonb WHERE id = %s"""

# The offer with its named nodes' ids in one statement, as leasing.selectors.visibility
# .offer_visible reads it.
OFFER_SQL = """
SELECT o.id, o.provider_id, o.site_id, o.gpu_model_id, o.price_per_gpu_hour, o.currency,
       o.status, o.available_from, o.available_until, o.min_term_hours, m.slug, p.name,
       ARRAY(SELECT x.node_id FROM leasing_offer_nodes x WHERE x.offer_id = o.id ORDER BY 1)
FROM leasing_offer o
JOIN accounts_organization p ON p.id = o.provider_id
JOIN inventory_site s ON s.id = o.site_id
JOIN inventory_gpumodel m ON m.id = o.gpu_model_id
WHERE o.id = %s AND (o.status = 'published' OR o.provider_id = %s)
LIMIT 1"""
# leasing.locks.expired_holds_lock in a placement's way: only when too few GPUs are free.
EXPIRED_HOLDS_SQL = """
SELECT h.id FROM leasing_hold h
WHERE h.status = 'active' AND h.expires_at <= %s AND h.id IN (
  SELECT a.hold_id FROM leasing_allocation a
  WHERE a.node_id = ANY(%s) AND a.hold_id IS NOT NULL AND a.released_at IS NULL
    AND a.period && tstzrange(%s, %s, '[)'))
ORDER BY h.id FOR NO KEY UPDATE SKIP LOCKED"""
POOL_NODES_SQL = """
SELECT n.id FROM inventory_node n
JOIN inventory_site s ON s.id = n.site_id
JOIN accounts_organization o ON o.id = s.organization_id
WHERE n.gpu_model_id = %s AND n.site_id = %s ORDER BY o.name, s.name, n.hostname"""
MARKET_SQL = """
SELECT f.rate FROM inventory_indexfixing f
JOIN inventory_gpumodel m ON m.id = f.gpu_model_id
WHERE f.currency = %s AND m.slug = %s AND f.term = 'on_demand' AND f.status = 'fixed'
  AND f.day <= %s ORDER BY f.day DESC LIMIT 1"""
NEXTVAL_SQL = "SELECT nextval('contracts_contract_number_seq')"
CONTRACT_INSERT_SQL = """
INSERT INTO contracts_contract (number, version, lessor_id, lessee_id, term_start, term_end,
  currency, billing_period, billing_anchor_day, pricing_basis, leased_model_slug,
  base_rate_per_gpu_hour, rate_per_million_input_tokens, rate_per_million_output_tokens,
  reference_market_rate, committed_gpus, committed_tokens_per_s, status, end_reason, ended_at,
  billing_start, exit_party, exit_effective_at, provider_insolvency_flagged, created_at,
  updated_at)
VALUES (%s, 1, %s, %s, %s, %s, %s, 'monthly', 1, 'card_hour', %s, %s, NULL, NULL, NULL, %s, NULL,
  'draft', '', NULL, NULL, '', NULL, false, %s, %s)
RETURNING id"""
_CONTRACT_COLUMNS = ", ".join(str(field.column) for field in Contract._meta.concrete_fields)
# django-simple-history's row: the contract's columns as they are now, plus who/when/what.
HISTORY_SQL = f"""
INSERT INTO contracts_historicalcontract ({_CONTRACT_COLUMNS}, history_date,
  history_change_reason, history_type, history_user_id)
SELECT {_CONTRACT_COLUMNS}, %s, NULL, %s, NULL FROM contracts_contract WHERE id = %s
RETURNING history_id"""
CLAUSES_SQL = """
SELECT c.id, c.contract_id, c.kind, c.params, c.created_at FROM contracts_clause c
JOIN contracts_contract k ON k.id = c.contract_id
WHERE c.contract_id = ANY(%s) ORDER BY k.id DESC, c.kind"""
EVENT_INSERT_SQL = """
INSERT INTO contracts_contractevent (contract_id, kind, effective_at, created_at, actor,
  from_status, to_status, amount, currency, rate, explanation, inputs, dedupe_key)
VALUES (%s, %s, %s, %s, %s, %s, %s, NULL, '', NULL, %s, %s::jsonb, NULL) RETURNING id"""
CONTRACT_ACTIVE_SQL = """
UPDATE contracts_contract SET status = 'active', billing_start = %s, updated_at = %s
WHERE id = %s"""
LEASE_INSERT_SQL = """
INSERT INTO leasing_lease (customer_id, offer_id, contract_id, hold_id, gpu_count, start, "end",
  pricing_mode, term_months, price_per_gpu_hour, currency, status, placement, workload, ended_at,
  created_at, updated_at, tags)
VALUES (%s, %s, %s, NULL, %s, %s, %s, 'on_demand', NULL, %s, %s, 'active', %s, 'unspecified',
  NULL, %s, %s, '{}')
RETURNING id"""
# The lease's first history row and its webhook event for customer and provider (one INSERT), as
# leasing.services.history.lease_event_record writes them.
LEASE_EVENT_INSERT_SQL = """
INSERT INTO leasing_leaseevent (lease_id, hold_id, kind, effective_at, created_at, actor,
  from_status, to_status, explanation, inputs)
VALUES (%s, NULL, 'created', %s, %s, %s, '', 'active', %s, %s::jsonb) RETURNING id"""
OUTBOX_INSERT_SQL = """
INSERT INTO core_outboxevent (event_id, organization_id, type, payload, occurred_at, created_at,
  dispatched_at)
SELECT gen_random_uuid(), organization, 'lease.created', %s::jsonb, %s, %s, NULL
FROM unnest(%s::bigint[]) AS recipients(organization)
RETURNING id"""
ALLOCATIONS_INSERT_SQL = """
INSERT INTO leasing_allocation (gpu_id, node_id, lease_id, hold_id, period, preemptible,
  released_at, ended_reason, replaces_id, created_at)
SELECT gpu, node, %s, NULL, tstzrange(%s, %s, '[)'), false, NULL, '', NULL, %s
FROM unnest(%s::bigint[], %s::bigint[]) AS chosen(gpu, node)
RETURNING id"""
LEASE_READ_SQL = """
SELECT l.id, c.number, l.contract_id, c.status, cu.slug, p.slug, l.offer_id, m.slug, l.hold_id,
       l.gpu_count, l.start, l."end", l.pricing_mode, l.term_months, l.price_per_gpu_hour,
       l.currency, l.status, l.placement, l.workload, l.ended_at, l.created_at
FROM leasing_lease l
JOIN contracts_contract c ON c.id = l.contract_id
JOIN accounts_organization cu ON cu.id = l.customer_id
JOIN leasing_offer o ON o.id = l.offer_id
JOIN accounts_organization p ON p.id = o.provider_id
JOIN inventory_gpumodel m ON m.id = o.gpu_model_id
WHERE l.id = %s"""
ALLOCATIONS_READ_SQL = """
SELECT a.id, a.gpu_id, g.index, n.hostname, lower(a.period), upper(a.period), a.preemptible,
       a.released_at, a.ended_reason, a.replaces_id
FROM leasing_allocation a
JOIN inventory_gpu g ON g.id = a.gpu_id
JOIN inventory_node n ON n.id = g.node_id
WHERE a.lease_id = %s ORDER BY g.node_id, g.index"""

USAGE_CONTRACTS_SQL = """
SELECT id FROM contracts_contract WHERE lessor_id = %s AND id = ANY(%s) ORDER BY id DESC"""
USAGE_SHARE_SQL = "SELECT id FROM contracts_contract WHERE id = ANY(%s) ORDER BY id FOR SHARE"
USAGE_INVOICED_SQL = """
SELECT contract_id, max(period_end) FROM billing_invoice
WHERE contract_id = ANY(%s) AND status IN ('sent', 'uncollectible', 'finalized', 'paid')
GROUP BY 1"""
USAGE_CONTRACT_ROWS_SQL = (
    "SELECT * FROM contracts_contract WHERE lessor_id = %s AND id = ANY(%s) ORDER BY id DESC"
)
BATCH_INSERT_SQL = """
INSERT INTO billing_usagebatch (provider_id, received_at, event_count, accepted_count,
  duplicate_count, rejected_count, late_count)
VALUES (%s, %s, %s, 0, 0, 0, 0) RETURNING id"""
BATCH_COUNTS_SQL = """
UPDATE billing_usagebatch SET accepted_count = %s, duplicate_count = %s, rejected_count = 0,
  late_count = 0 WHERE id = %s"""


# ------------------------------------------------------------------ helpers


class _RowEncoder(DjangoJSONEncoder):
    """Decimals, dates and anything else a row holds (ranges: their text)."""

    def default(self, o: Any) -> Any:
        try:
            return super().default(o)
        except TypeError:
            return str(o)


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> HttpResponse:
    return HttpResponse(
        json.dumps(data, cls=_RowEncoder),
        status=status,
        content_type="application/json",
        headers=headers,
    )


def _rows(cursor: Any, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    cursor.execute(statement, params)
    return list(cursor.fetchall()) if cursor.description else []


def _caller(cursor: Any, request: HttpRequest) -> tuple[int, bool, bool] | None:
    """(organization id, is customer, is provider) of a valid API key, else None."""
    kind, _, raw_key = request.headers.get("Authorization", "").partition(" ")
    parts = raw_key.split("_", 2)
    if kind.lower() != "api-key" or len(parts) != 3:
        return None
    found = _rows(cursor, AUTH_SQL, [parts[1]])
    if not found:
        return None
    _id, key_hash, revoked_at, expires_at, _scope, organization_id, is_customer, is_provider = (
        found[0]
    )
    digest = hashlib.sha256(raw_key.encode()).hexdigest()
    if not hmac.compare_digest(key_hash, digest) or revoked_at is not None:
        return None
    if expires_at is not None and expires_at <= timezone.now():
        return None
    return organization_id, is_customer, is_provider


@functools.cache
def _capacity_plan() -> list[list[str]]:
    """The captured statements of each sampled capacity query (written by bench/load.py)."""
    plan = json.loads(Path(os.environ["BENCH_BARE_PLAN"]).read_text())
    return list(plan["capacity"])


# ------------------------------------------------------------------ views


def ping(request: HttpRequest) -> HttpResponse:
    """Readiness probe of the bench server (no database)."""
    return HttpResponse("ok", content_type="text/plain")


def capacity(request: HttpRequest) -> HttpResponse:
    """Replay the SELECTs GET /api/v1/capacity/ ran for sampled query `i`; rows as JSON."""
    statements = _capacity_plan()[int(request.GET.get("i", "0"))]
    with connection.cursor() as cursor:
        results = [_rows(cursor, statement) for statement in statements]
    return _json({"results": results})


def _free(
    cursor: Any,
    node_ids: list[int],
    *,
    start: datetime,
    end: datetime,
    lock: bool,
    only: list[int] | None = None,
    exclude: set[int] | None = None,
) -> dict[int, list[int]]:
    """The free-GPU statement of leasing.services.allocation, on-demand (may preempt)."""
    statement, params = free_gpus_statement(
        node_ids, start=start, end=end, may_preempt=True, only=only, exclude=exclude
    )
    if lock:
        statement += GPUS_SKIP_LOCKED  # leasing.locks.free_gpus_skip_locked's claim
    by_node: dict[int, list[int]] = {}
    for gpu_id, node_id in _rows(cursor, statement, params):
        by_node.setdefault(node_id, []).append(gpu_id)
    return by_node


def _pool(cursor: Any, offer: tuple[Any, ...], named: list[int]) -> list[int]:
    """The offer's named nodes (read with the offer), else its model's nodes at its site."""
    if named:
        return sorted(named)
    return sorted(node_id for (node_id,) in _rows(cursor, POOL_NODES_SQL, [offer[3], offer[2]]))


def _contract_write(
    cursor: Any,
    *,
    customer_id: int,
    offer: tuple[Any, ...],
    start: datetime,
    end: datetime,
    count: int,
    now: datetime,
    actor: str,
) -> int:
    """The lease's contract, created and put in force (as lease_contract_create); its id."""
    rate = offer[4]
    cursor.execute("SAVEPOINT bare_contract")
    (sequence,) = _rows(cursor, NEXTVAL_SQL)[0]
    number = f"CH-{start.year}-{sequence:06d}"
    created = timezone.now()
    ((contract_id,),) = _rows(
        cursor,
        CONTRACT_INSERT_SQL,
        [
            number,
            offer[1],
            customer_id,
            start,
            end,
            offer[5],
            offer[10],
            rate,
            count,
            created,
            created,
        ],
    )
    _rows(cursor, HISTORY_SQL, [timezone.now(), "+", contract_id])
    _rows(
        cursor,
        EVENT_INSERT_SQL,
        [
            contract_id,
            "created",
            created,
            timezone.now(),
            actor,
            "",
            "draft",
            f"Contract {number} drafted between {offer[11]} (lessor) and the customer.",
            '{"clauses": []}',
        ],
    )
    # Put in force in the same savepoint: the row is this transaction's own (no lock, and its
    # clauses are not read back).
    activated = max(now, start)
    _rows(cursor, CONTRACT_ACTIVE_SQL, [activated, timezone.now(), contract_id])
    _rows(cursor, HISTORY_SQL, [timezone.now(), "~", contract_id])
    _rows(
        cursor,
        EVENT_INSERT_SQL,
        [
            contract_id,
            "status_changed",
            activated,
            timezone.now(),
            actor,
            "draft",
            "active",
            "Status changed from draft to active.",
            "{}",
        ],
    )
    cursor.execute("RELEASE SAVEPOINT bare_contract")
    return int(contract_id)


def _lease_answer(
    cursor: Any,
    *,
    customer_id: int,
    offer: tuple[Any, ...],
    named: list[int],
    body: dict[str, Any],
    actor: str,
) -> tuple[int, Any]:
    """The lease transaction of POST /api/v1/leases/ as plain SQL: (status, answer body)."""
    now = timezone.now()
    start = datetime.fromisoformat(body["start"])
    end = datetime.fromisoformat(body["end"])
    count = int(body["gpu_count"])
    cursor.execute("SAVEPOINT bare_lease")
    # leasing.admission's checks: a spent blocking budget, a triggered funds policy.
    _rows(cursor, ANY_SPENT_BLOCKING_BUDGET_SQL, [customer_id, "block", now.date().replace(day=1)])
    _rows(cursor, ANY_STOPPING_POLICY_SQL, [customer_id, ["stop_new"]])
    _rows(cursor, MARKET_SQL, [offer[5], offer[10], start.date()])
    rate = offer[4]
    node_ids = _pool(cursor, offer, named)
    busy: set[int] = set()
    chosen: tuple[dict[int, int], str] | None = None
    contract_id: int | None = None
    expired_looked_up = False
    for _ in range(MAX_PLACEMENT_ATTEMPTS):
        choice = gpus_choose(
            _free(cursor, node_ids, start=start, end=end, lock=False, exclude=busy), count
        )
        if choice is None and not expired_looked_up:
            expired_looked_up = True
            if _rows(cursor, EXPIRED_HOLDS_SQL, [now, node_ids, start, end]):
                continue  # (none in this benchmark: lapsing them is not written out)
        if choice is None:
            break
        if contract_id is None:
            # As placement's before_lock: the contract is written once GPUs are found free,
            # before any is locked.
            contract_id = _contract_write(
                cursor,
                customer_id=customer_id,
                offer=offer,
                start=start,
                end=end,
                count=count,
                now=now,
                actor=actor,
            )
        wanted, placement = choice
        locked = _free(cursor, node_ids, start=start, end=end, lock=True, only=wanted)
        got = {gpu: node for node, ids in locked.items() for gpu in ids}
        if len(got) == count:
            chosen = (got, placement)
            break
        busy |= set(wanted) - set(got)
    if chosen is None:
        # The GPUs reachable if interruptible ones were cut, over the pool already read.
        free_now = sum(
            len(ids) for ids in _free(cursor, node_ids, start=start, end=end, lock=False).values()
        )
        cursor.execute("ROLLBACK TO SAVEPOINT bare_lease")
        return 409, {
            "code": "capacity_gone",
            "message": "Not enough free GPUs for the whole window.",
            "detail": {"free_gpus": free_now, "requested": count},
        }
    node_of, placement = chosen
    gpu_ids = sorted(node_of)
    created = timezone.now()
    ((lease_id,),) = _rows(
        cursor,
        LEASE_INSERT_SQL,
        [
            customer_id,
            offer[0],
            contract_id,
            count,
            start,
            end,
            rate,
            offer[5],
            placement,
            created,
            created,
        ],
    )
    explanation = f"leased {count} GPUs from offer {offer[0]} under contract {contract_id}."
    _rows(
        cursor,
        LEASE_EVENT_INSERT_SQL,
        [lease_id, created, created, actor, explanation, json.dumps({"offer_id": offer[0]})],
    )
    payload = {
        "lease_id": lease_id,
        "contract_id": contract_id,
        "status": "active",
        "gpu_count": count,
        "start": body["start"],
        "end": body["end"],
        "pricing_mode": "on_demand",
        "explanation": explanation,
    }
    _rows(
        cursor, OUTBOX_INSERT_SQL, [json.dumps(payload), created, created, [customer_id, offer[1]]]
    )
    cursor.execute("SAVEPOINT bare_allocations")
    try:
        _rows(
            cursor,
            ALLOCATIONS_INSERT_SQL,
            [lease_id, start, end, timezone.now(), gpu_ids, [node_of[gpu] for gpu in gpu_ids]],
        )
    except IntegrityError:  # the exclusion constraint: someone else booked it after all
        cursor.execute("ROLLBACK TO SAVEPOINT bare_lease")
        return 409, {"code": "capacity_gone", "message": "Taken meanwhile.", "detail": {}}
    cursor.execute("RELEASE SAVEPOINT bare_allocations")
    cursor.execute("RELEASE SAVEPOINT bare_lease")
    lease = _rows(cursor, LEASE_READ_SQL, [lease_id])
    allocations = _rows(cursor, ALLOCATIONS_READ_SQL, [lease_id])
    return 201, json.loads(
        json.dumps({"lease": lease, "allocations": allocations}, cls=_RowEncoder)
    )


@csrf_exempt
def leases(request: HttpRequest) -> HttpResponse:
    """POST /api/v1/leases/ (offer, gpu_count, start, end) as hand-written SQL, Idempotency-Key."""
    body = json.loads(request.body)
    key = request.headers.get("Idempotency-Key")
    with transaction.atomic(), connection.cursor() as cursor:
        caller = _caller(cursor, request)
        if caller is None:
            return _json({"code": "invalid_api_key"}, status=401)
        customer_id, is_customer, _ = caller
        if not is_customer or not key:
            return _json({"code": "customer_only"}, status=403)
        scope = f"org:{customer_id}"
        fingerprint = request_fingerprint(method="POST", path=request.path, body=body)
        _rows(
            cursor, IDEMPOTENCY_INSERT_SQL, [scope, key, request.path, fingerprint, timezone.now()]
        )
        ((record_id, first_fingerprint, status_code, stored),) = _rows(
            cursor, IDEMPOTENCY_LOCK_SQL, [key, scope]
        )
        if first_fingerprint != fingerprint:
            return _json({"code": "idempotency_key_reused"}, status=422)
        if status_code is not None:
            return _json(stored, status=status_code, headers={"Idempotent-Replayed": "true"})
        offer = _rows(cursor, OFFER_SQL, [body["offer"], customer_id])
        if not offer:
            return _json({"code": "offer_not_found"}, status=404)
        named = list(offer[0][12])
        status_code, answer = _lease_answer(
            cursor,
            customer_id=customer_id,
            offer=offer[0],
            named=named,
            body=body,
            actor=f"api-key:{request.headers['Authorization'].split('_')[1]}",
        )
        _rows(cursor, IDEMPOTENCY_ANSWER_SQL, [status_code, json.dumps(answer), record_id])
    return _json(answer, status=status_code)


@csrf_exempt
def usage_events(request: HttpRequest) -> HttpResponse:
    """POST /api/v1/usage/events/ as hand-written SQL: new event ids back, nothing validated."""
    events = json.loads(request.body)["events"]
    now = timezone.now()
    with transaction.atomic(), connection.cursor() as cursor:
        caller = _caller(cursor, request)
        if caller is None:
            return _json({"code": "invalid_api_key"}, status=401)
        provider_id, _, is_provider = caller
        if not is_provider:
            return _json({"code": "provider_only"}, status=403)
        asked = sorted({event["contract"] for event in events})
        contract_ids = [row[0] for row in _rows(cursor, USAGE_CONTRACTS_SQL, [provider_id, asked])]
        _rows(cursor, USAGE_SHARE_SQL, [contract_ids])
        _rows(cursor, USAGE_INVOICED_SQL, [contract_ids])
        _rows(cursor, USAGE_CONTRACT_ROWS_SQL, [provider_id, contract_ids])
        _rows(cursor, CLAUSES_SQL, [contract_ids])
        ((batch_id,),) = _rows(cursor, BATCH_INSERT_SQL, [provider_id, now, len(events)])
        cursor.execute(CREATE_STAGING_SQL)
        cursor.execute(CLEAR_STAGING_SQL)
        with cursor.cursor.copy(COPY_SQL) as copy:
            copy.set_types(STAGING_TYPES)
            for event in events:
                copy.write_row(
                    (
                        event["event_id"],
                        event["contract"],
                        datetime.fromisoformat(event["occurred_at"]),
                        event["input_tokens"],
                        event["output_tokens"],
                        event["status"],
                        event.get("ttft_ms"),
                        event.get("e2e_ms"),
                        event.get("tpot_ms"),
                        False,
                        event.get("cached_input_tokens", 0),
                        event.get("mode", "online"),
                        "{}",
                    )
                )
        inserted = [
            event_id for (event_id,) in _rows(cursor, INSERT_SQL, [provider_id, now, batch_id])
        ]
        _rows(cursor, BATCH_COUNTS_SQL, [len(inserted), len(events) - len(inserted), batch_id])
    return _json(
        {"batch_id": batch_id, "accepted": len(inserted), "event_ids": inserted},
        status=201 if inserted else 200,
    )


urlpatterns = [
    path("bench/bare/ping", ping),
    path("bench/bare/capacity", capacity),
    path("bench/bare/leases", leases),
    path("bench/bare/usage-events", usage_events),
    path("", include("config.urls")),
]
