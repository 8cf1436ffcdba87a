"""Usage-ingestion benchmark: events/s through the HTTP endpoint, the service and the bare database.

Run it as `.venv/bin/python bench/ingest.py [--rounds 10] [--batch 10000]`. It creates its own
database (`cardhour_bench_ingest`) on the server of DATABASE_URL, or on the embedded server when
DATABASE_URL is unset, migrates it, and drops it at the end.

Three paths write the same number of new events per round, interleaved so that noise from other
processes on the machine falls on all of them alike:

- http: POST /api/v1/usage/events/ through Django's test client (auth, JSON parsing, validation,
  the database, rendering a 10,000-result answer); the request body is encoded beforehand;
- service: `usage_batch_ingest` on the decoded JSON (validation, contract checks, the database);
- bare: psycopg alone, no validation, no Django: binary COPY of ready tuples into the same TEMP
  staging table and the same statement (new keys INSERT ... ON CONFLICT (source_id, event_id) DO
  NOTHING into the key table, their events into the monthly partitions), one transaction per
  batch.

The figure that matters is the ratio service / bare: what validation and bookkeeping cost on top
of the database work that any implementation must do.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.databases import drop_database, recreate_database, server_url, with_database  # noqa: E402

BENCH_DATABASE = "cardhour_bench_ingest"
TARGET_SERVICE_EVENTS_PER_S = 50_000
TARGET_RATIO = 0.5

STAGING_TABLE = "billing_usage_staging"
COLUMNS = (
    "event_id, contract_id, occurred_at, input_tokens, output_tokens, status,"
    " ttft_ms, e2e_ms, tpot_ms, is_late, cached_input_tokens, mode, tags"
)
TYPES = [
    "text",
    "int8",
    "timestamptz",
    "int8",
    "int8",
    "text",
    "float8",
    "float8",
    "float8",
    "bool",
    "int8",
    "text",
    "text",
]
BARE_STAGING = (
    f"CREATE TEMP TABLE IF NOT EXISTS {STAGING_TABLE} (event_id text, contract_id int8,"
    " occurred_at timestamptz, input_tokens int8, output_tokens int8, status text,"
    " ttft_ms float8, e2e_ms float8, tpot_ms float8, is_late bool, cached_input_tokens int8,"
    " mode text, tags text) ON COMMIT DELETE ROWS"
)
BARE_BATCH = (
    "INSERT INTO billing_usagebatch (provider_id, received_at, event_count, accepted_count,"
    " duplicate_count, rejected_count, late_count) VALUES (%s, %s, %s, 0, 0, 0, 0) RETURNING id"
)
# The service's statement (billing/services/ingest_sql.py), written out: the new keys into the
# unpartitioned key table, the events whose key was new into their month's partition.
_STAGED = ", ".join(
    f"staged.{name.strip()}::jsonb" if name.strip() == "tags" else f"staged.{name.strip()}"
    for name in COLUMNS.split(",")
)
BARE_INSERT = (
    "WITH fresh AS ("
    " INSERT INTO billing_usageeventkey (source_id, event_id, occurred_at)"
    f' SELECT %s, event_id, occurred_at FROM {STAGING_TABLE} ORDER BY event_id COLLATE "C"'
    " ON CONFLICT (source_id, event_id) DO NOTHING RETURNING source_id, event_id)"
    f" INSERT INTO billing_usageevent (source_id, received_at, batch_id, {COLUMNS})"
    f" SELECT fresh.source_id, %s, %s, {_STAGED} FROM {STAGING_TABLE} AS staged"
    ' JOIN fresh ON fresh.event_id = staged.event_id COLLATE "C"'
    " RETURNING event_id"
)


def _setup_django() -> None:
    """Django on the bench database; tasks go to an in-memory broker, never to a real queue."""
    sys.path.insert(0, str(REPO))
    os.environ["DATABASE_NAME"] = BENCH_DATABASE
    os.environ["DEBUG"] = "false"  # no query log
    os.environ["CELERY_BROKER_URL"] = "memory://localhost/"
    os.environ["CELERY_RESULT_BACKEND"] = "cache+memory://"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def _raw_events(contract_id: int, prefix: str, count: int, start: datetime) -> list[dict[str, Any]]:
    """Events as a provider sends them (decoded JSON): mostly successes, some failures."""
    rng = random.Random(prefix)
    statuses = rng.choices(["success", "timeout", "error", "rejected"], [94, 2, 2, 2], k=count)
    events = []
    for i, status in enumerate(statuses):
        served = status == "success"
        events.append(
            {
                "event_id": f"{prefix}-{i:07d}-{rng.getrandbits(32):08x}",
                "contract": contract_id,
                "occurred_at": (start + timedelta(milliseconds=i * 7)).isoformat(),
                "input_tokens": rng.randint(50, 8000),
                "output_tokens": rng.randint(1, 2000),
                "status": status,
                "ttft_ms": round(rng.uniform(30, 900), 2) if served else None,
                "e2e_ms": round(rng.uniform(200, 20000), 2) if served else None,
                "tpot_ms": round(rng.uniform(5, 60), 2) if served else None,
            }
        )
    return events


def _rows(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The same events as ready tuples for the bare path (no validation)."""
    return [
        (
            e["event_id"],
            e["contract"],
            datetime.fromisoformat(e["occurred_at"]),
            e["input_tokens"],
            e["output_tokens"],
            e["status"],
            e["ttft_ms"],
            e["e2e_ms"],
            e["tpot_ms"],
            False,
            0,
            "online",
            "{}",
        )
        for e in events
    ]


def _bare_batch(conn: psycopg.Connection[Any], rows: list[tuple[Any, ...]], source_id: int) -> int:
    """One batch the bare way; returns how many rows were new."""
    now = datetime.now(UTC)
    with conn.transaction(), conn.cursor() as cursor:
        cursor.execute(BARE_BATCH, (source_id, now, len(rows)))
        batch_row = cursor.fetchone()
        assert batch_row is not None
        cursor.execute(BARE_STAGING)
        with cursor.copy(f"COPY {STAGING_TABLE} ({COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(TYPES)
            for row in rows:
                copy.write_row(row)
        cursor.execute(BARE_INSERT, (source_id, now, batch_row[0]))
        return len(cursor.fetchall())


def _rate(events: int, seconds: float) -> float:
    return round(events / seconds, 1) if seconds else 0.0


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the figures and return them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--batch", type=int, default=10_000)
    args = parser.parse_args(argv)

    url = server_url()
    recreate_database(url, BENCH_DATABASE)
    bare_conn: psycopg.Connection[Any] | None = None
    try:
        _setup_django()
        from django.db import connections
        from django.test import Client
        from django.utils import timezone

        from accounts.choices import KeyScope
        from accounts.models import Organization
        from accounts.services import api_key_create
        from billing.models import UsageEvent
        from billing.services.ingest import usage_batch_ingest
        from contracts.services import contract_activate, contract_create

        provider = Organization.objects.create(
            name="Bench Provider", slug="bench-provider", is_provider=True, is_customer=False
        )
        customer = Organization.objects.create(
            name="Bench Customer", slug="bench-customer", is_customer=True
        )
        term_start = datetime(2026, 1, 1, tzinfo=UTC)
        contract = contract_create(
            lessor=provider,
            lessee=customer,
            term_start=term_start,
            term_end=datetime(2036, 1, 1, tzinfo=UTC),
            currency="USD",
            pricing_basis="token_sla",
            rate_per_million_input_tokens=Decimal("0.20"),
            rate_per_million_output_tokens=Decimal("0.80"),
        )
        contract_activate(contract=contract, actor="bench", at=term_start)
        key = api_key_create(organization=provider, name="bench", scope=KeyScope.WRITE)
        client = Client(HTTP_AUTHORIZATION=f"Api-Key {key.raw_key}")
        bare_conn = psycopg.connect(with_database(url, BENCH_DATABASE))

        # Every round writes new events (of the last days, none of them late).
        start = min(timezone.now(), datetime(2035, 1, 1, tzinfo=UTC)) - timedelta(days=1)

        def batch_of(path: str, round_index: int) -> list[dict[str, Any]]:
            return _raw_events(contract.pk, f"{path}{round_index}", args.batch, start)

        # Warm-up: imports, prepared adapters, the staging table of each connection.
        warm = _raw_events(contract.pk, "warm", 100, start)
        usage_batch_ingest(provider=provider, raw_events=warm, now=timezone.now())
        _bare_batch(
            bare_conn, _rows(_raw_events(contract.pk, "warm-bare", 100, start)), provider.pk
        )
        client.post(
            "/api/v1/usage/events/",
            data=json.dumps({"events": _raw_events(contract.pk, "warm-http", 100, start)}),
            content_type="application/json",
        )

        seconds = {"bare": 0.0, "service": 0.0, "http": 0.0}
        written = {"bare": 0, "service": 0, "http": 0}
        first_service_batch: list[dict[str, Any]] = []
        for round_index in range(args.rounds):
            rows = _rows(batch_of("bare", round_index))
            began = time.perf_counter()
            written["bare"] += _bare_batch(bare_conn, rows, provider.pk)
            seconds["bare"] += time.perf_counter() - began

            events = batch_of("service", round_index)
            first_service_batch = first_service_batch or events
            began = time.perf_counter()
            outcome = usage_batch_ingest(provider=provider, raw_events=events, now=timezone.now())
            seconds["service"] += time.perf_counter() - began
            written["service"] += outcome.accepted

            body = json.dumps({"events": batch_of("http", round_index)}).encode()
            began = time.perf_counter()
            response = client.post(
                "/api/v1/usage/events/", data=body, content_type="application/json"
            )
            seconds["http"] += time.perf_counter() - began
            if response.status_code != 201:
                raise RuntimeError(
                    f"HTTP path answered {response.status_code}: {response.content[:300]!r}"
                )
            written["http"] += response.json()["accepted"]

        began = time.perf_counter()
        replay = usage_batch_ingest(
            provider=provider, raw_events=first_service_batch, now=timezone.now()
        )
        replay_seconds = time.perf_counter() - began
        assert replay.duplicate == len(first_service_batch)

        expected = args.rounds * args.batch
        if written != {"bare": expected, "service": expected, "http": expected}:
            raise RuntimeError(f"Not every event was written: {written}")
        rates = {path: _rate(written[path], seconds[path]) for path in seconds}
        result: dict[str, Any] = {
            "events_per_path": expected,
            "batch_size": args.batch,
            "rounds": args.rounds,
            "http_events_per_s": rates["http"],
            "service_events_per_s": rates["service"],
            "bare_events_per_s": rates["bare"],
            "service_replay_events_per_s": _rate(len(first_service_batch), replay_seconds),
            "ratio_service_to_bare": round(rates["service"] / rates["bare"], 3),
            "ratio_http_to_bare": round(rates["http"] / rates["bare"], 3),
            "rows_in_table": UsageEvent.objects.count(),
            "target_service_events_per_s": TARGET_SERVICE_EVENTS_PER_S,
            "target_ratio": TARGET_RATIO,
            "service_target_met": rates["service"] >= TARGET_SERVICE_EVENTS_PER_S,
            "ratio_target_met": rates["service"] / rates["bare"] >= TARGET_RATIO,
            "cpus": os.cpu_count(),
            "load_average_1m": round(os.getloadavg()[0], 2),
        }
        connections.close_all()
    finally:
        if bare_conn is not None:
            bare_conn.close()
        drop_database(url, BENCH_DATABASE)

    lines = [
        f"usage ingestion, {result['events_per_path']} new events per path",
        ("bare (COPY + INSERT ON CONFLICT)", result["bare_events_per_s"]),
        ("service (usage_batch_ingest)", result["service_events_per_s"]),
        ("HTTP (POST /api/v1/usage/events/)", result["http_events_per_s"]),
        ("service, all duplicates (replay)", result["service_replay_events_per_s"]),
    ]
    for line in lines:
        print(line if isinstance(line, str) else f"  {line[0] + ':':<36}{line[1]:>10,.0f} events/s")
    print(
        f"  ratio service/bare: {result['ratio_service_to_bare']}"
        f"  http/bare: {result['ratio_http_to_bare']}"
    )
    print(f"  load average during the run: {result['load_average_1m']} on {result['cpus']} CPUs")
    return result


if __name__ == "__main__":
    main()
