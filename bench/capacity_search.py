"""Benchmark of capacity search at marketplace scale (a script, not a test).

    .venv/bin/python bench/capacity_search.py [--nodes N] [--reload] [--runs N]

Builds — once, in a separate database `cardhour_bench` (`cardhour_bench_<N>` for another size)
on the DATABASE_URL server (or the embedded one) — 10,000 nodes, 80,000 GPUs, 300,000
allocations, 3,000 outages and 300 offers (`--nodes` scales nodes, sites, allocations and outages
alike: 100000 gives 800,000 GPUs and 3,000,000 allocations), then times five query mixes through
`leasing.selectors.capacity_search_page` and the bare SQL of the same statement, and prints
p50 / p95 per mix beside the goal and their ratio, and the p95 of the same statement counting
from the allocations (`capacity_sql(from_allocations=True)`, the rule before the timeline).
Goals (issue 22): p95 <= 30 ms at 10,000 nodes, <= 100 ms at 100,000. `main()` returns the
figures (bench/run_all.py collects them).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent
if str(BASE_DIR) not in sys.path:
    sys.path.insert(0, str(BASE_DIR))

from bench.databases import django_on  # noqa: E402

# Another name (CARDHOUR_BENCH_DATABASE) keeps concurrent runs of different trees apart.
BENCH_DATABASE = os.environ.get("CARDHOUR_BENCH_DATABASE", "cardhour_bench")
NODES = 10_000
GPUS_PER_NODE = 8
ALLOCATIONS = 300_000
SITES = 125
PROVIDERS = 25
NODE_OUTAGES = 1_000
GPU_OUTAGES = 2_000
TARGET_P95_MS = 30.0
SEED = 20260301
# The two partial indexes a broad search reads its spans from (leasing 0026), one per mode.
SEARCH_INDEXES = ("node_free_span_class_key", "node_free_span_class_key_strict")
# What searches read, read into shared buffers before timing when all of it fits: the search
# indexes, and the spans by node that narrow searches probe.
PREWARMED = (*SEARCH_INDEXES, "node_free_span_node_end")
# p95 goals by fleet size (issue 22): the largest size not above the benched one applies.
GOALS_P95_MS = {10_000: 30.0, 100_000: 100.0}


def scale(nodes: int) -> None:
    """Set the module's sizes for a fleet of `nodes` (the defaults are 10,000)."""
    global NODES, ALLOCATIONS, SITES, NODE_OUTAGES, GPU_OUTAGES, TARGET_P95_MS
    factor = nodes / 10_000
    NODES = nodes
    ALLOCATIONS = 30 * nodes
    SITES = max(1, round(125 * factor))
    NODE_OUTAGES = round(1_000 * factor)
    GPU_OUTAGES = round(2_000 * factor)
    fitting = [size for size in GOALS_P95_MS if size <= nodes]
    TARGET_P95_MS = GOALS_P95_MS[max(fitting)] if fitting else GOALS_P95_MS[10_000]


# ------------------------------------------------------------------ database set-up


def _setup_django(database: str) -> None:
    django_on(database)


# ------------------------------------------------------------------ data


COUNTRIES = [
    ("AU", "Melbourne", "AU-VIC"),
    ("AU", "Sydney", "AU-NSW"),
    ("MY", "Kuala Lumpur", "MY-14"),
    ("SG", "Singapore", "SG-01"),
    ("US", "Ashburn", "US-VA"),
    ("US", "Dallas", "US-TX"),
    ("DE", "Frankfurt", "DE-HE"),
    ("JP", "Tokyo", "JP-13"),
    ("GB", "London", "GB-LND"),
    ("IN", "Mumbai", "IN-MH"),
]


def _loaded() -> bool:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM inventory_node), (SELECT count(*) FROM inventory_gpu),"
            " (SELECT count(*) FROM leasing_allocation), (SELECT count(*) FROM leasing_offer)"
        )
        nodes, gpus, allocations, offers = cursor.fetchone()
    return (nodes, gpus, allocations) == (NODES, NODES * GPUS_PER_NODE, ALLOCATIONS) and offers > 0


def _copy(cursor: Any, table: str, columns: list[str], rows: Iterator[tuple[Any, ...]]) -> int:
    """COPY rows into a table; returns how many were written."""
    written = 0
    with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
            written += 1
    return written


def _range(start: datetime, end: datetime) -> str:
    return f"[{start.isoformat()},{end.isoformat()})"


def load(now: datetime) -> dict[str, float]:
    """Replace the bench data with a fresh, deterministic marketplace; returns load seconds."""
    from django.db import connection, transaction

    from inventory.models import GpuModel

    rng = random.Random(SEED)
    began = time.perf_counter()
    models = list(GpuModel.objects.order_by("id").values_list("id", "slug"))
    with transaction.atomic(), connection.cursor() as django_cursor:
        cursor = django_cursor.cursor  # the psycopg cursor: COPY
        cursor.execute(
            # TRUNCATE fires no row triggers: the tables they keep are emptied with the rest.
            "TRUNCATE leasing_nodefreespan, leasing_poolsize, leasing_pooloutage,"
            " leasing_allocation, leasing_hold, leasing_quote,"
            " leasing_offer_nodes, leasing_offer, inventory_outage, inventory_gpu, inventory_node,"
            " inventory_site,"
            " accounts_organization RESTART IDENTITY CASCADE"
        )
        organizations = [
            (i, f"Provider {i}", f"provider-{i}", True, False, False, "AU", "[]", now)
            for i in range(1, PROVIDERS + 1)
        ] + [
            (PROVIDERS + 1, "Bench customer", "bench-customer", False, True, False, "AU", "[]", now)
        ]
        _copy(
            cursor,
            "accounts_organization",
            [
                "id",
                "name",
                "slug",
                "is_provider",
                "is_customer",
                "is_operator",
                "country",
                "billing_emails",
                "created_at",
            ],
            iter(organizations),
        )
        customer_id = PROVIDERS + 1

        site_rows = []
        for site_id in range(1, SITES + 1):
            country, city, region = COUNTRIES[site_id % len(COUNTRIES)]
            provider_id = (site_id - 1) % PROVIDERS + 1
            site_rows.append(
                (
                    site_id,
                    provider_id,
                    f"{city} DC{site_id}",
                    country,
                    city,
                    region,
                    "1.3",
                    "0.2",
                    "USD",
                    "1500",
                    "USD",
                    "",
                    "tier_3",
                    now,
                    now,
                )
            )
        _copy(
            cursor,
            "inventory_site",
            [
                "id",
                "organization_id",
                "name",
                "country",
                "city",
                "region",
                "pue",
                "power_price_per_kwh",
                "power_currency",
                "opex_per_node_month",
                "opex_currency",
                "fault_domain",
                "tier",
                "created_at",
                "updated_at",
            ],
            iter(site_rows),
        )

        # Each site carries two GPU models, 80 nodes in all.
        site_models = {site_id: rng.sample(models, 2) for site_id in range(1, SITES + 1)}
        node_rows, node_site_model = [], {}
        per_site = NODES // SITES
        for node_id in range(1, NODES + 1):
            site_id = (node_id - 1) // per_site + 1
            model_id, _slug = site_models[site_id][node_id % 2]
            status = "maintenance" if rng.random() < 0.02 else "active"
            nvlink = rng.random() < 0.8
            infiniband = 3200 if rng.random() < 0.6 else 0
            node_site_model[node_id] = (site_id, model_id)
            node_rows.append(
                (
                    node_id,
                    site_id,
                    f"node-{node_id:05d}",
                    "",
                    model_id,
                    GPUS_PER_NODE,
                    96,
                    1024,
                    "15",
                    nvlink,
                    infiniband,
                    100,
                    status,
                    "300000",
                    "USD",
                    "2025-01-01",
                    60,
                    "0",
                    "10",
                    "2",
                    now,
                    now,
                )
            )
        _copy(
            cursor,
            "inventory_node",
            [
                "id",
                "site_id",
                "hostname",
                "serial",
                "gpu_model_id",
                "gpu_count",
                "cpu_cores",
                "ram_gb",
                "nvme_tb",
                "nvlink",
                "infiniband_gbit_s",
                "ethernet_gbit_s",
                "status",
                "capex",
                "capex_currency",
                "acquired_on",
                "service_life_months",
                "salvage_value",
                "power_full_kw",
                "power_idle_kw",
                "created_at",
                "updated_at",
            ],
            iter(node_rows),
        )

        def gpu_rows() -> Iterator[tuple[Any, ...]]:
            for node_id in range(1, NODES + 1):
                for index in range(GPUS_PER_NODE):
                    gpu_id = (node_id - 1) * GPUS_PER_NODE + index + 1
                    health = "failed" if rng.random() < 0.005 else "ok"
                    yield (gpu_id, node_id, index, "", "", health)

        _copy(
            cursor,
            "inventory_gpu",
            ["id", "node_id", "index", "uuid", "serial", "health"],
            gpu_rows(),
        )

        # Offers: one per site pool (site x model) and 50 over a few named nodes of a pool.
        offer_rows, named_rows, offer_id = [], [], 0
        pools = sorted({value for value in node_site_model.values()})
        for site_id, model_id in pools:
            offer_id += 1
            offer_rows.append(_offer_row(rng, offer_id, site_id, model_id, now))
        pool_nodes: dict[tuple[int, int], list[int]] = {}
        for node_id, key in node_site_model.items():
            pool_nodes.setdefault(key, []).append(node_id)
        for site_id, model_id in rng.sample(pools, 50):
            offer_id += 1
            offer_rows.append(_offer_row(rng, offer_id, site_id, model_id, now))
            for node_id in rng.sample(pool_nodes[(site_id, model_id)], 8):
                named_rows.append((offer_id, node_id))
        _copy(
            cursor,
            "leasing_offer",
            [
                "id",
                "provider_id",
                "site_id",
                "gpu_model_id",
                "name",
                "price_per_gpu_hour",
                "currency",
                "reserved_ladder",
                "interruptible_price_per_gpu_hour",
                "preemption_notice_minutes",
                "min_term_hours",
                "available_from",
                "available_until",
                "contract_template",
                "status",
                "created_at",
                "updated_at",
                "price_unit",
            ],
            iter(offer_rows),
        )
        _copy(cursor, "leasing_offer_nodes", ["offer_id", "node_id"], iter(named_rows))
        offer_of_pool = {(row[2], row[3]): row[0] for row in offer_rows[: len(pools)]}

        # Allocations: 3 or 4 bookings per GPU (6 h to 60 days, short gaps) from about a month
        # ago to two or three months ahead, so that most future windows meet many of them;
        # one hold per (node, booking slot) owns them.
        holds: dict[tuple[int, int], int] = {}
        hold_rows: list[tuple[Any, ...]] = []

        def allocation_rows() -> Iterator[tuple[Any, ...]]:
            allocation_id = 0
            total_gpus = NODES * GPUS_PER_NODE
            four = ALLOCATIONS - 3 * total_gpus  # GPUs with four bookings
            for gpu_id in range(1, total_gpus + 1):
                node_id = (gpu_id - 1) // GPUS_PER_NODE + 1
                bookings = 4 if gpu_id <= four else 3
                cursor_time = now - timedelta(days=30) + timedelta(hours=rng.randint(0, 240))
                for slot in range(bookings):
                    length = timedelta(hours=rng.choice([6, 24, 72, 168, 336, 720, 1440]))
                    start, end = cursor_time, cursor_time + length
                    cursor_time = end + timedelta(hours=rng.randint(0, 72))
                    key = (node_id, slot)
                    if key not in holds:
                        hold_id = len(holds) + 1
                        holds[key] = hold_id
                        hold_rows.append(
                            (
                                hold_id,
                                customer_id,
                                offer_of_pool[node_site_model[node_id]],
                                GPUS_PER_NODE,
                                start,
                                end,
                                "on_demand",
                                "active",
                                end,
                                now,
                                "{}",
                            )
                        )
                    allocation_id += 1
                    roll = rng.random()
                    yield (
                        allocation_id,
                        gpu_id,
                        node_id,
                        holds[key],
                        _range(start, end),
                        roll < 0.15,
                        now if 0.15 <= roll < 0.20 else None,
                        "",
                        now,
                    )

        # Holds must exist before their allocations: build allocations in memory first.
        allocations = list(allocation_rows())
        _copy(
            cursor,
            "leasing_hold",
            [
                "id",
                "customer_id",
                "offer_id",
                "gpu_count",
                "start",
                '"end"',
                "pricing_mode",
                "status",
                "expires_at",
                "created_at",
                "tags",  # leasing 0014: no database default
            ],
            iter(hold_rows),
        )
        _copy(
            cursor,
            "leasing_allocation",
            [
                "id",
                "gpu_id",
                "node_id",
                "hold_id",
                "period",
                "preemptible",
                "released_at",
                "ended_reason",
                "created_at",
            ],
            iter(allocations),
        )

        # Outages on distinct nodes (inventory never lets node-wide and GPU outages overlap).
        outage_nodes = rng.sample(range(1, NODES + 1), NODE_OUTAGES + GPU_OUTAGES)

        def outage_rows() -> Iterator[tuple[Any, ...]]:
            for number, node_id in enumerate(outage_nodes, start=1):
                start = now + timedelta(hours=rng.randint(-24 * 120, 24 * 30))
                end = start + timedelta(hours=rng.randint(1, 96))
                gpu_id = (
                    None
                    if number <= NODE_OUTAGES
                    else (node_id - 1) * GPUS_PER_NODE + rng.randint(0, GPUS_PER_NODE - 1) + 1
                )
                kind = "planned" if start > now else "unplanned"
                yield (number, node_id, gpu_id, start, end, kind, "hardware", "", now, now)

        _copy(
            cursor,
            "inventory_outage",
            [
                "id",
                "node_id",
                "gpu_id",
                "start",
                '"end"',
                "kind",
                "cause",
                "note",
                "created_at",
                "updated_at",
            ],
            outage_rows(),
        )
        for table in (
            "accounts_organization",
            "inventory_site",
            "inventory_node",
            "inventory_gpu",
            "leasing_offer",
            "leasing_hold",
            "leasing_allocation",
            "inventory_outage",
        ):
            cursor.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"
                f" (SELECT max(id) FROM {table}))"
            )
    # VACUUM as autovacuum would soon after such a load: it sets the visibility map, which the
    # index-only scans of capacity search rely on in a running marketplace.
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    return {"load_seconds": round(time.perf_counter() - began, 1)}


def _offer_row(
    rng: random.Random, offer_id: int, site_id: int, model_id: int, now: datetime
) -> tuple[Any, ...]:
    provider_id = (site_id - 1) % PROVIDERS + 1
    price = round(rng.uniform(0.4, 6.0), 2)
    interruptible = f"{price * 0.5:.2f}" if rng.random() < 0.7 else None
    status = "paused" if rng.random() < 0.05 else "published"
    ladder = '{"1": "5", "3": "10", "6": "15", "12": "25", "24": "30", "36": "35"}'
    return (
        offer_id,
        provider_id,
        site_id,
        model_id,
        f"offer {offer_id}",
        f"{price:.2f}",
        "USD",
        ladder,
        interruptible,
        5,
        1,
        now - timedelta(days=365),
        None,
        "[]",
        status,
        now,
        now,
        "gpu_hour",  # leasing 0016: the column has no database default
    )


# ------------------------------------------------------------------ query mixes


def _mixes(now: datetime) -> dict[str, Callable[[random.Random], dict[str, Any]]]:
    """Each mix returns capacity_filters_from_query parameters for one request."""
    slugs = ["h100-sxm", "h200-sxm", "b200", "mi300x", "a100-80gb-sxm", "rtx-4090"]
    countries = sorted({country for country, _, _ in COUNTRIES})
    base = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)

    def start(rng: random.Random) -> datetime:
        return base + timedelta(hours=rng.randint(0, 24 * 30))

    def at(rng: random.Random, hours: int) -> dict[str, str]:
        begin = start(rng)
        return {"start": begin.isoformat(), "end": (begin + timedelta(hours=hours)).isoformat()}

    return {
        "broad_24h_by_price": lambda rng: at(rng, 24),
        "model_country_8_gpus_7d": lambda rng: {
            **at(rng, 24 * 7),
            "gpu_model": rng.choice(slugs),
            "country": rng.choice(countries),
            "min_gpus": "8",
        },
        "interruptible_2_models_by_free": lambda rng: {
            **at(rng, 48),
            "pricing_mode": "interruptible",
            "gpu_model": ",".join(rng.sample(slugs, 2)),
            "ordering": "-free_gpus",
        },
        "reserved_12m_80gb_by_tflops": lambda rng: {
            "start": start(rng).isoformat(),
            "pricing_mode": "reserved",
            "term_months": "12",
            "memory_gb__gte": "80",
            "ordering": "price_per_tflops",
        },
        "cluster_64_ib_30d_by_reliability": lambda rng: {
            **at(rng, 24 * 30),
            "min_gpus": "64",
            "interconnect": "infiniband",
            "ordering": "-reliability",
            "price__lte": "5.00",
        },
    }


def _percentile(samples: list[float], pct: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


def _time_mix(
    build: Callable[[random.Random], dict[str, Any]], *, runs: int, now: datetime
) -> dict[str, Any]:
    from django.db import connection

    from core.rows import large_statements
    from leasing.api.filters import capacity_filters_from_query
    from leasing.selectors import capacity_search_page, capacity_sql
    from leasing.selectors.capacity import SEARCH_WORK_MEM

    rng = random.Random(SEED)
    full_ms, bare_ms, old_ms, results = [], [], [], []

    def statement(sql: str, params: dict[str, Any]) -> float:
        # Under the selector's own settings (no JIT, its work_mem); only the statement is timed.
        with large_statements(work_mem=SEARCH_WORK_MEM), connection.cursor() as cursor:
            began = time.perf_counter()
            cursor.execute(sql, params)
            cursor.fetchall()
            return (time.perf_counter() - began) * 1000

    def selector(filters: Any) -> tuple[float, int]:
        began = time.perf_counter()
        page = capacity_search_page(filters=filters)
        return (time.perf_counter() - began) * 1000, page.total

    for run in range(runs + 3):  # three warm-up runs
        filters = capacity_filters_from_query(build(rng), now=now)
        # Whichever runs first reads the pages the other finds cached (at 100,000 nodes the
        # data is larger than shared_buffers): the order alternates from run to run.
        if run % 2 == 0:
            full, total = selector(filters)
        bare = statement(*capacity_sql(filters))
        # The same statement counting free GPUs from the allocations (before the timeline).
        old = statement(*capacity_sql(filters, from_allocations=True))
        if run % 2 == 1:
            full, total = selector(filters)
        if run >= 3:
            full_ms.append(full)
            bare_ms.append(bare)
            old_ms.append(old)
            results.append(total)
    p50_full, p95_full = statistics.median(full_ms), _percentile(full_ms, 95)
    p50_bare, p95_bare = statistics.median(bare_ms), _percentile(bare_ms, 95)
    return {
        "runs": runs,
        "p50_ms": round(p50_full, 1),
        "p95_ms": round(p95_full, 1),
        "bare_sql_p50_ms": round(p50_bare, 1),
        "bare_sql_p95_ms": round(p95_bare, 1),
        "ratio_p50": round(p50_full / p50_bare, 2) if p50_bare else None,
        "ratio_p95": round(p95_full / p95_bare, 2) if p95_bare else None,
        "from_allocations_sql_p95_ms": round(_percentile(old_ms, 95), 1),
        "speedup_p95": round(_percentile(old_ms, 95) / p95_bare, 2) if p95_bare else None,
        "median_matches": statistics.median(results),
        "meets_target": p95_full <= TARGET_P95_MS,
    }


def _machine() -> dict[str, Any]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        server_version = cursor.fetchone()[0]
        cursor.execute("SHOW shared_buffers")
        shared_buffers = cursor.fetchone()[0]
    memory_gb = None
    try:
        with open("/proc/meminfo") as meminfo:
            memory_gb = round(int(meminfo.readline().split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "memory_gb": memory_gb,
        "postgresql": server_version,
        "shared_buffers": shared_buffers,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Load (if needed), run every mix, print and return the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reload", action="store_true", help="rebuild the bench data")
    parser.add_argument("--runs", type=int, default=30, help="timed runs per mix")
    parser.add_argument("--nodes", type=int, default=10_000, help="fleet size (default 10000)")
    options = parser.parse_args(argv if argv is not None else [])
    scale(options.nodes)
    database = BENCH_DATABASE if NODES == 10_000 else f"{BENCH_DATABASE}_{NODES}"
    _setup_django(database)
    from django.db import connection

    now = datetime.now(UTC)
    figures: dict[str, Any] = {"machine": _machine(), "database": connection.settings_dict["NAME"]}
    if options.reload or not _loaded():
        print(
            f"loading {NODES:,} nodes, {NODES * GPUS_PER_NODE:,} GPUs, "
            f"{ALLOCATIONS:,} allocations …",
            flush=True,
        )
        figures.update(load(now))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM inventory_node), (SELECT count(*) FROM inventory_gpu),"
            " (SELECT count(*) FROM leasing_allocation), (SELECT count(*) FROM leasing_offer),"
            " (SELECT count(*) FROM inventory_outage), (SELECT count(*) FROM leasing_nodefreespan)"
        )
        nodes, gpus, allocations, offers, outages, spans = cursor.fetchone()
        # What a broad search reads (one entry per node in service from one of these) against
        # the server's buffer cache: when they do not fit, searches re-read index pages from the
        # OS cache and their p95s swing with what else ran (docs/scaling.md, shared_buffers).
        size_mb = (
            "SELECT coalesce(sum(pg_relation_size(to_regclass(name))), 0) / 1048576"
            " FROM unnest(%s::text[]) name"
        )
        cursor.execute(
            f"SELECT ({size_mb}), ({size_mb}),"
            " (SELECT setting::bigint * current_setting('block_size')::bigint / 1048576"
            "  FROM pg_settings WHERE name = 'shared_buffers')",
            [list(SEARCH_INDEXES), list(PREWARMED)],
        )
        indexes_mb, prewarmed_mb, shared_buffers_mb = cursor.fetchone()
    figures["data"] = {
        "nodes": nodes,
        "gpus": gpus,
        "allocations": allocations,
        "offers": offers,
        "outages": outages,
        "free_spans": spans,
        "search_indexes_mb": int(indexes_mb),
        "shared_buffers_mb": int(shared_buffers_mb),
    }
    if prewarmed_mb <= shared_buffers_mb:
        refused = _prewarm()
        figures["data"]["prewarmed"] = refused is None
        if refused:
            figures["data"]["prewarm_refused"] = refused
    figures["mixes"] = {
        name: _time_mix(build, runs=options.runs, now=now) for name, build in _mixes(now).items()
    }
    figures["target_p95_ms"] = TARGET_P95_MS
    figures["load_average"] = [round(value, 2) for value in os.getloadavg()]
    figures["all_meet_target"] = all(mix["meets_target"] for mix in figures["mixes"].values())
    _print(figures)
    return figures


def _prewarm() -> str | None:
    """Read PREWARMED into shared buffers (pg_prewarm), as a server that has been answering
    searches holds them (and production's autoprewarm reloads after a restart: compose);
    else why not. Without it, the first run after a server restart times cold reads."""
    from django.db import DatabaseError, connection, transaction

    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
            cursor.execute(
                "SELECT sum(pg_prewarm(to_regclass(name))) FROM unnest(%s::text[]) name",
                [list(PREWARMED)],
            )
    except DatabaseError as error:
        return str(error).strip().splitlines()[0].rstrip(".")
    return None


def cache_fit(data: dict[str, Any]) -> str:
    """Whether the search's indexes fit in the server's shared buffers (and were read into
    them before timing), in words."""
    indexes, buffers = data["search_indexes_mb"], data["shared_buffers_mb"]
    if indexes > buffers:
        verdict = (
            "they do not fit: searches re-read index pages from the OS cache, and their p95s"
            " swing with whatever else ran"
        )
    elif data.get("prewarmed"):
        verdict = "they fit, and were read into them before timing (pg_prewarm)"
    elif "prewarm_refused" in data:
        verdict = f"they fit; not read into them before timing ({data['prewarm_refused']})"
    else:
        verdict = "they fit"
    return f"search indexes {indexes:,} MB (both modes), shared_buffers {buffers:,} MB: {verdict}"


def _print(figures: dict[str, Any]) -> None:
    machine = figures["machine"]
    print(
        f"machine: {machine['cpu']} x{machine['cpu_count']}, {machine['memory_gb']} GB RAM, "
        f"{machine['platform']}, Python {machine['python']}, PostgreSQL "
        f"{machine['postgresql']} (shared_buffers {machine['shared_buffers']})"
    )
    data = figures["data"]
    print(
        f"data ({figures['database']}): {data['nodes']:,} nodes, {data['gpus']:,} GPUs, "
        f"{data['allocations']:,} allocations, {data['offers']:,} offers, "
        f"{data['outages']:,} outages, {data.get('free_spans', 0):,} free spans"
        + (f"; loaded in {figures['load_seconds']} s" if "load_seconds" in figures else "")
    )
    print(cache_fit(data))
    header = (
        f"{'mix':36} {'p50 ms':>8} {'p95 ms':>8} {'goal':>6} {'SQL p50':>8} {'SQL p95':>8}"
        f" {'ratio':>6} {'old SQL p95':>11} {'speedup':>7}"
    )
    print(header)
    print("-" * len(header))
    for name, mix in figures["mixes"].items():
        print(
            f"{name:36} {mix['p50_ms']:8.1f} {mix['p95_ms']:8.1f}"
            f" {figures['target_p95_ms']:6.0f} {mix['bare_sql_p50_ms']:8.1f}"
            f" {mix['bare_sql_p95_ms']:8.1f} {mix['ratio_p50']:6.2f}"
            f" {mix['from_allocations_sql_p95_ms']:11.1f} {mix['speedup_p95']:7.2f}"
            f"  {'ok' if mix['meets_target'] else 'OVER GOAL'}"
        )
    verdict = "meet" if figures["all_meet_target"] else "do NOT all meet"
    print(
        f"p95 goal {figures['target_p95_ms']:.0f} ms at {figures['data']['nodes']:,} nodes: the "
        f"mixes {verdict} it (ratio = capacity_search p50 / bare SQL p50; old SQL = the same "
        "statement counting from the allocations, speedup = its p95 / bare SQL p95); load average "
        f"{figures['load_average']}."
    )


if __name__ == "__main__":
    main(sys.argv[1:])
