"""Benchmark of a month's billing cycle: 10,000 card-hour contracts drafted, rated and issued.

    DJANGO_ENV=test DATABASE_URL=postgres://postgres@127.0.0.1:5432/cardhour \
        .venv/bin/python -m bench.billing_cycle [--contracts 10000] [--batch-size 100] \
        [--workers N] [--profile]

(`python bench/billing_cycle.py` works too; BENCH_CYCLE_CONTRACTS sets the size as well.)

Builds, in its own database (`cardhour_bench_cycle` on the server of DATABASE_URL, or on the
embedded one; CARDHOUR_BENCH_CYCLE_DATABASE names another), with COPY: 20 providers, 400
customers, one node of 4 GPUs per contract, one card-hour contract and lease per node (a year's
term from 2026-01-01, billed monthly from its start) with its four allocations, and an outage on
one node in a hundred. Then, as of 2026-02-01 02:00 (January has ended, and its grace hour):

- the bare path: one SQL aggregate of January's GPU-seconds and amount per contract, then the
  invoices and their lines written with INSERT ... SELECT (numbers per issuer by row_number),
  in a transaction rolled back afterwards;
- the billing cycle (`billing_cycle_run`, batches billed one after the other in this process, as
  one worker does): every invoice drafted, rated once and issued. `--workers N`: fanned out as
  beat runs it, to a real `celery -A config worker -c N` on the billing queue of
  CELERY_BROKER_URL (env.sh's Redis), timed until the last batch closes the run; the workers'
  CPU seconds are reported (start-up included). `--profile`: under cProfile, printing the top
  functions by cumulative and own time and the statements by total time.

It prints invoices/s, CPU milliseconds per invoice (what a loaded machine inflates least), SQL
statements per invoice (counted by an execute wrapper, SAVEPOINTs included, in this process
only) and total seconds beside the goals (<= 60 s, <= 10 statements per invoice), the bare
time and the ratio, and the load average; `main()` returns the figures. The invoices it issues
are checked against the bare amounts.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import re
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent
if str(BASE_DIR) not in sys.path:
    sys.path.insert(0, str(BASE_DIR))

from bench.databases import django_on  # noqa: E402

BENCH_DATABASE = os.environ.get("CARDHOUR_BENCH_CYCLE_DATABASE", "cardhour_bench_cycle")
CONTRACTS = 10_000
PROVIDERS = 20
CUSTOMERS = 400
GPUS = 4
TERM_START = datetime(2026, 1, 1, tzinfo=UTC)
TERM_END = datetime(2027, 1, 1, tzinfo=UTC)
NOW = datetime(2026, 2, 1, 2, tzinfo=UTC)
PERIOD_END = datetime(2026, 2, 1, tzinfo=UTC)
GOAL_SECONDS = 60.0
GOAL_STATEMENTS = 10.0

TRUNCATE = (
    "TRUNCATE billing_ledgerentry, billing_ledgertransaction, billing_ledgeraccount,"
    " billing_commissioncharge, billing_invoiceevent, billing_invoiceline_events,"
    " billing_invoiceline, billing_invoice, billing_documentsequence, billing_billingrun,"
    " core_outboxevent, leasing_allocation, leasing_lease, leasing_offer, contracts_clause,"
    " contracts_contractevent, contracts_contract, inventory_outage, inventory_gpu,"
    " inventory_node, inventory_site, accounts_organization,"
    # Kept by triggers on the nodes, outages and allocations, which TRUNCATE does not fire.
    " leasing_nodefreespan, leasing_poolsize, leasing_pooloutage RESTART IDENTITY CASCADE"
)


# The tables `load` fills (and analyzes).
LOADED = (
    "accounts_organization",
    "inventory_site",
    "inventory_node",
    "inventory_gpu",
    "leasing_offer",
    "contracts_contract",
    "leasing_lease",
    "leasing_allocation",
    "inventory_outage",
)


def _setup_django(*, workers: int = 0) -> None:
    # Statements are counted by a wrapper, not the query log; with workers, tasks go to the
    # broker of CELERY_BROKER_URL (env.sh's Redis).
    django_on(BENCH_DATABASE, memory_broker=not workers)


def _copy(cursor: Any, table: str, columns: str, rows: Iterator[tuple[Any, ...]]) -> int:
    """COPY rows into a table (columns: names separated by spaces); returns how many."""
    written = 0
    with cursor.copy(f"COPY {table} ({', '.join(columns.split())}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
            written += 1
    return written


def load(contracts: int) -> float:
    """Replace the bench data with `contracts` fresh card-hour contracts; returns seconds."""
    from django.db import connection, transaction

    began = time.perf_counter()
    created = TERM_START - timedelta(days=10)
    with transaction.atomic(), connection.cursor() as django_cursor:
        cursor = django_cursor.cursor  # the psycopg cursor: COPY
        cursor.execute(TRUNCATE)
        model_id, slug = cursor.execute(
            "SELECT id, slug FROM inventory_gpumodel ORDER BY id LIMIT 1"
        ).fetchone()
        providers = range(1, PROVIDERS + 1)
        customers = range(PROVIDERS + 1, PROVIDERS + CUSTOMERS + 1)
        _copy(
            cursor,
            "accounts_organization",
            "id name slug is_provider is_customer is_operator country billing_emails created_at",
            (
                (
                    i,
                    f"Org {i}",
                    f"org-{i}",
                    i in providers,
                    i in customers,
                    False,
                    "US",
                    "[]",
                    created,
                )
                for i in range(1, PROVIDERS + CUSTOMERS + 1)
            ),
        )
        _copy(
            cursor,
            "inventory_site",
            "id organization_id name country city region pue power_price_per_kwh power_currency"
            " opex_per_node_month opex_currency fault_domain tier created_at updated_at",
            (
                (
                    p,
                    p,
                    f"Site {p}",
                    "US",
                    "Ashburn",
                    "US-VA",
                    "1.3",
                    "0.08",
                    "USD",
                    "900",
                    "USD",
                    "",
                    "tier_3",
                    created,
                    created,
                )
                for p in providers
            ),
        )

        def provider_of(contract_id: int) -> int:
            return 1 + (contract_id - 1) % PROVIDERS

        def customer_of(contract_id: int) -> int:
            return PROVIDERS + 1 + (contract_id - 1) % CUSTOMERS

        _copy(
            cursor,
            "inventory_node",
            "id site_id hostname serial gpu_model_id gpu_count cpu_cores ram_gb nvme_tb nvlink"
            " infiniband_gbit_s ethernet_gbit_s status capex capex_currency acquired_on"
            " service_life_months salvage_value power_full_kw power_idle_kw created_at updated_at",
            (
                (
                    c,
                    provider_of(c),
                    f"node-{c}",
                    "",
                    model_id,
                    GPUS,
                    96,
                    1024,
                    "15",
                    True,
                    400,
                    100,
                    "active",
                    "250000",
                    "USD",
                    created.date(),
                    60,
                    "15000",
                    "6",
                    "1.5",
                    created,
                    created,
                )
                for c in range(1, contracts + 1)
            ),
        )
        cursor.execute(
            "INSERT INTO inventory_gpu (id, node_id, index, uuid, serial, health)"
            " SELECT (n.id - 1) * %(g)s + i + 1, n.id, i, '', '', 'ok'"
            " FROM inventory_node n CROSS JOIN generate_series(0, %(g)s - 1) i",
            {"g": GPUS},
        )
        _copy(
            cursor,
            "leasing_offer",
            "id provider_id site_id gpu_model_id name price_per_gpu_hour currency"
            " reserved_ladder preemption_notice_minutes min_term_hours available_from"
            " contract_template status created_at updated_at price_unit",
            (
                (
                    p,
                    p,
                    p,
                    model_id,
                    f"Pool {p}",
                    "2.49",
                    "USD",
                    "{}",
                    5,
                    1,
                    created,
                    "[]",
                    "published",
                    created,
                    created,
                    "gpu_hour",
                )
                for p in providers
            ),
        )

        def rate(contract_id: int) -> str:
            return f"{2 + (contract_id % 50) / 100:.2f}"

        _copy(
            cursor,
            "contracts_contract",
            "id number version term_start term_end currency billing_period billing_anchor_day"
            " pricing_basis leased_model_slug base_rate_per_gpu_hour committed_gpus status"
            " end_reason billing_start exit_party provider_insolvency_flagged"
            " created_at updated_at lessee_id lessor_id",
            (
                (
                    c,
                    f"CH-{c:07d}",
                    1,
                    TERM_START,
                    TERM_END,
                    "USD",
                    "monthly",
                    1,
                    "card_hour",
                    slug,
                    rate(c),
                    GPUS,
                    "active",
                    "",
                    TERM_START,
                    "",
                    False,
                    created,
                    created,
                    customer_of(c),
                    provider_of(c),
                )
                for c in range(1, contracts + 1)
            ),
        )
        _copy(
            cursor,
            "leasing_lease",
            'id customer_id offer_id contract_id gpu_count start "end" pricing_mode term_months'
            " price_per_gpu_hour currency status placement workload created_at updated_at tags",
            (
                (
                    c,
                    customer_of(c),
                    provider_of(c),
                    c,
                    GPUS,
                    TERM_START,
                    TERM_END,
                    "reserved",
                    12,
                    rate(c),
                    "USD",
                    "active",
                    "single_node",
                    "unspecified",
                    created,
                    created,
                    "{}",
                )
                for c in range(1, contracts + 1)
            ),
        )
        # node_id is filled by the allocation trigger.
        cursor.execute(
            "INSERT INTO leasing_allocation"
            " (id, gpu_id, lease_id, period, preemptible, ended_reason, created_at)"
            " SELECT g.id, g.id, g.node_id, tstzrange(%(start)s, %(end)s, '[)'), false, '',"
            "  %(created)s FROM inventory_gpu g ORDER BY g.id",
            {"start": TERM_START, "end": TERM_END, "created": created},
        )
        _copy(
            cursor,
            "inventory_outage",
            'id node_id gpu_id start "end" kind cause note created_at updated_at',
            (
                (
                    n // 100,
                    n,
                    None,
                    TERM_START + timedelta(days=9),
                    None,
                    "hardware",
                    "",
                    "",
                    created,
                    created,
                )
                for n in range(100, contracts + 1, 100)
            ),
        )
        cursor.execute(
            "UPDATE inventory_outage SET \"end\" = start + interval '7 hours' WHERE true"
        )
        for table in LOADED:
            cursor.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"
                f" (SELECT COALESCE(max(id), 0) + 1 FROM {table}), false)"
            )
    # The loaded tables only: the tables the cycle fills stay "never analyzed" (as TRUNCATE left
    # them), so the plans a connection caches at the start of the run (the ledger's balance
    # check and foreign-key triggers) take their indexes. Analyzed empty, they were planned as
    # sequential scans, kept for the whole run: 29,000 scans of the growing entries table at
    # 10,000 contracts, a cost a month's run on a database holding earlier months never pays.
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {', '.join(LOADED)}")
    return time.perf_counter() - began


# January's billable GPU-seconds and amount per contract: allocation time within the period
# less outage time, times the rate, to the cent.
BARE_AGGREGATE = """
CREATE TEMP TABLE bench_bare AS
SELECT c.id AS contract_id, c.lessor_id, c.lessee_id, c.base_rate_per_gpu_hour AS rate,
       sum(extract(epoch FROM upper(a.period * p.period) - lower(a.period * p.period))
           - coalesce(o.seconds, 0)) AS seconds
FROM contracts_contract c
JOIN leasing_lease l ON l.contract_id = c.id
JOIN leasing_allocation a ON a.lease_id = l.id
CROSS JOIN (SELECT tstzrange(%(start)s, %(end)s, '[)') AS period) p
LEFT JOIN LATERAL (
    SELECT sum(extract(epoch FROM least(coalesce(ou."end", %(end)s), %(end)s)
                                   - greatest(ou.start, %(start)s))) AS seconds
    FROM inventory_outage ou
    WHERE ou.node_id = a.node_id AND (ou.gpu_id IS NULL OR ou.gpu_id = a.gpu_id)
      AND ou.start < %(end)s AND coalesce(ou."end", %(end)s) > %(start)s
) o ON true
WHERE a.period && p.period
GROUP BY c.id
"""
BARE_INVOICES = """
INSERT INTO billing_invoice (contract_id, issuer_id, customer_id, period_start, period_end,
    currency, status, number, sequence_year, sequence_number, subtotal, tax_rate_pct,
    taxable_amount, tax, total, credited_total, issued_at, due_at, rated_at, pdf, emailed_to,
    stripe_invoice_id, void_reason, created_at, updated_at)
SELECT b.contract_id, b.lessor_id, b.lessee_id, %(start)s, %(end)s, 'USD', 'finalized',
    'BARE-' || b.lessor_id || '-' || n, 2026, n, b.amount, 0, b.amount, 0, b.amount, 0,
    %(now)s, %(now)s + interval '30 days', %(now)s, '', '[]', '', '', %(now)s, %(now)s
FROM (
    SELECT *, round(seconds / 3600 * rate, 2) AS amount,
           row_number() OVER (PARTITION BY lessor_id ORDER BY contract_id) AS n
    FROM bench_bare
) b
"""
BARE_LINES = """
INSERT INTO billing_invoiceline (invoice_id, position, kind, description, quantity, unit,
    unit_price, amount, currency, taxable, inputs)
SELECT i.id, 1, 'card_hours', 'GPU-hours', round(b.seconds / 3600, 6), 'GPU-hour', b.rate,
    i.total, 'USD', true, '{}'
FROM billing_invoice i JOIN bench_bare b ON b.contract_id = i.contract_id
WHERE i.number LIKE 'BARE-%%'
"""


def bare() -> tuple[float, float, dict[int, Any]]:
    """The aggregate alone, and aggregate + writes (rolled back); the bare amounts by contract."""
    from django.db import connection, transaction

    params = {"start": TERM_START, "end": PERIOD_END, "now": NOW}
    with transaction.atomic(), connection.cursor() as cursor:
        began = time.perf_counter()
        cursor.execute(BARE_AGGREGATE, params)
        aggregate = time.perf_counter() - began
        cursor.execute(BARE_INVOICES, params)
        cursor.execute(BARE_LINES, params)
        with_writes = time.perf_counter() - began
        cursor.execute("SELECT contract_id, round(seconds / 3600 * rate, 2) FROM bench_bare")
        amounts = dict(cursor.fetchall())
        transaction.set_rollback(True)
    return aggregate, with_writes, amounts


def _statement_shape(sql: str) -> str:
    """A statement without its literals, to group the timings (`--profile`)."""
    return re.sub(r"\b\d+\b", "N", sql)[:160]


def cycle(batch_size: int | None, *, profile: bool = False) -> tuple[float, float, int, Any]:
    """Run the billing cycle as of NOW in this process; (seconds, CPU seconds, statements, run).

    `profile`: run it under cProfile and print the top functions (cumulative and own time)
    and the statements that took the most time in all.
    """
    import time_machine
    from django.db import connection

    from billing.services.cycle import billing_cycle_run

    statements = 0
    timings: dict[str, list[float]] = {}

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        nonlocal statements
        statements += 1
        if not profile:
            return execute(sql, params, many, context)
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            timing = timings.setdefault(_statement_shape(sql), [0, 0.0])
            timing[0] += 1
            timing[1] += time.perf_counter() - began

    profiler = cProfile.Profile() if profile else None
    with time_machine.travel(NOW, tick=True), connection.execute_wrapper(count):
        began, cpu = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        run = billing_cycle_run(now=NOW, deliver=False, batch_size=batch_size)
        if profiler is not None:
            profiler.disable()
        seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
    if profiler is not None:
        stats = pstats.Stats(profiler, stream=sys.stdout)
        stats.sort_stats("cumulative").print_stats(45)
        stats.sort_stats("tottime").print_stats(30)
        print("statements by total time (count, seconds, shape):")
        for shape, (times, spent) in sorted(timings.items(), key=lambda item: -item[1][1])[:30]:
            print(f"  {times:>7} {spent:>8.3f} s  {shape}")
    return seconds, cpu, statements, run


def _worker_start(workers: int) -> subprocess.Popen[bytes]:
    """`celery -A config worker -c N` on the billing queue, on the bench database; waits until
    it answers a ping."""
    from celery import current_app

    worker = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "celery"),
            "-A",
            "config",
            "worker",
            "-Q",
            "billing",
            "-c",
            str(workers),
            "--loglevel",
            "WARNING",
            "--without-heartbeat",
            "--without-mingle",
            "--without-gossip",
        ],
        cwd=BASE_DIR,
        env=os.environ.copy(),
    )
    current_app.control.purge()
    deadline = time.monotonic() + 120
    while not current_app.control.ping(timeout=1.0):
        if worker.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the Celery worker did not start")
    return worker


def _worker_stop(worker: subprocess.Popen[bytes]) -> float:
    """Stop the worker (warm shutdown); the CPU seconds it and its pool used, start-up included."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    worker.send_signal(signal.SIGTERM)
    worker.wait(timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def cycle_on_workers(batch_size: int | None, workers: int) -> tuple[float, float, float, Any]:
    """Run the cycle fanned out to `workers` Celery worker processes (as beat runs it);
    (seconds, this process's CPU, the workers' CPU seconds, the closed run)."""
    import time_machine

    from billing.models import BillingRun, BillingRunOutcome
    from billing.services.cycle import billing_cycle_run

    worker = _worker_start(workers)
    try:
        with time_machine.travel(NOW, tick=True):
            began, cpu = time.perf_counter(), time.process_time()
            run = billing_cycle_run(now=NOW, deliver=False, fan_out=True, batch_size=batch_size)
        while run.outcome != BillingRunOutcome.COMPLETED:
            if worker.poll() is not None:
                raise SystemExit("the Celery worker stopped")
            time.sleep(0.2)
            run = BillingRun.objects.get(pk=run.pk)
        seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
    finally:
        worker_cpu = _worker_stop(worker)
    return seconds, cpu, worker_cpu, run


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--contracts", type=int, default=int(os.environ.get("BENCH_CYCLE_CONTRACTS", CONTRACTS))
    )
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument(
        "--profile", action="store_true", help="print cProfile's top functions and the statements"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=0,
        help="run the cycle on a Celery worker with this many processes (Redis of env.sh)",
    )
    options = parser.parse_args(argv)
    _setup_django(workers=options.workers)
    from billing.models import Invoice, InvoiceStatus

    load_average = os.getloadavg()[0]
    loaded = load(options.contracts)
    print(f"loaded {options.contracts:,} contracts in {loaded:.1f} s", flush=True)
    aggregate, with_writes, amounts = bare()
    worker_cpu = None
    statements: int | None
    if options.workers:
        seconds, cpu, worker_cpu, run = cycle_on_workers(options.batch_size, options.workers)
        statements = None  # counted in this process only
    else:
        seconds, cpu, statements, run = cycle(options.batch_size, profile=options.profile)
    issued = Invoice.objects.filter(status=InvoiceStatus.FINALIZED)
    invoices = issued.count()
    mismatched = sum(
        1
        for contract_id, subtotal in issued.values_list("contract_id", "subtotal")
        if amounts.get(contract_id) != subtotal
    )
    figures = {
        "contracts": options.contracts,
        "invoices": invoices,
        "failures": len(run.failures),
        "amounts_differing_from_bare": mismatched,
        "seconds": round(seconds, 2),
        "process_cpu_seconds": round(cpu, 2),
        "workers": options.workers,
        "worker_cpu_seconds": round(worker_cpu, 2) if worker_cpu is not None else None,
        "cpu_ms_per_invoice": (
            round(1000 * (cpu + (worker_cpu or 0)) / invoices, 2) if invoices else None
        ),
        "invoices_per_second": round(invoices / seconds, 1) if seconds else None,
        "statements": statements,
        "statements_per_invoice": (
            round(statements / invoices, 2) if invoices and statements is not None else None
        ),
        "bare_aggregate_seconds": round(aggregate, 3),
        "bare_with_writes_seconds": round(with_writes, 3),
        "ratio_to_bare_with_writes": round(seconds / with_writes, 1) if with_writes else None,
        "goal_seconds": GOAL_SECONDS,
        "goal_statements_per_invoice": GOAL_STATEMENTS,
        "load_average_before": round(load_average, 2),
        "load_average_after": round(os.getloadavg()[0], 2),
    }
    _print(figures)
    return figures


def _print(figures: dict[str, Any]) -> None:
    met = "met" if figures["seconds"] <= GOAL_SECONDS else "NOT met"
    per_invoice = figures["statements_per_invoice"]
    shown = "-" if per_invoice is None else per_invoice
    if per_invoice is None:
        statements_met = "not counted: the cycle ran on the workers"
    else:
        statements_met = "met" if per_invoice <= GOAL_STATEMENTS else "NOT met"
    print(
        f"billing cycle, {figures['contracts']:,} contracts, one month:\n"
        f"  invoices issued         {figures['invoices']:>10,}   failures {figures['failures']},"
        f" amounts differing from the bare aggregate {figures['amounts_differing_from_bare']}\n"
        f"  total                   {figures['seconds']:>10.2f} s   goal <= {GOAL_SECONDS:g} s"
        f" at 10,000 contracts ({met} at this size)\n"
        f"  this process's CPU      {figures['process_cpu_seconds']:>10.2f} s   (the rest is"
        f" PostgreSQL, or waiting for a CPU)\n"
        f"  workers' CPU            {figures['worker_cpu_seconds'] or 0:>10.2f} s   ("
        f"{figures['workers']} worker processes, start-up included; 0: the cycle ran here)\n"
        f"  CPU per invoice         {figures['cpu_ms_per_invoice']:>10} ms (this process and"
        f" the workers)\n"
        f"  invoices/s              {figures['invoices_per_second']:>10}\n"
        f"  statements per invoice  {shown:>10}   goal <= {GOAL_STATEMENTS:g} ({statements_met})\n"
        f"  bare aggregate          {figures['bare_aggregate_seconds']:>10.3f} s\n"
        f"  bare aggregate + writes {figures['bare_with_writes_seconds']:>10.3f} s   ratio"
        f" {figures['ratio_to_bare_with_writes']}x\n"
        f"  load average            {figures['load_average_before']} before,"
        f" {figures['load_average_after']} after",
        flush=True,
    )


if __name__ == "__main__":
    main()
