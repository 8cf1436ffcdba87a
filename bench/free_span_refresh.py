"""Benchmark of what one booking costs the free-capacity timeline (a script, not a test).

    .venv/bin/python bench/free_span_refresh.py [--runs N] [--history-days D]

Uses the database of bench/capacity_search.py (run that first: it loads 10,000 nodes). For N
bookings — eight GPUs of one node for six hours, at a future moment where the spans say all eight
are free — it times the one `INSERT INTO leasing_allocation` statement (its triggers included),
then the same statement with the free-span trigger disabled, each in a transaction rolled back,
and prints p50 / p95 of both and of their difference (the trigger's own cost), with the number of
spans the node had. `--history-days D` first gives the node D days of past bookings (every GPU
busy 3 days in 4, before the bench's own history), in the same transaction, untimed: what a node
that has been leased for years costs. The data is never changed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent
if str(BASE_DIR) not in sys.path:
    sys.path.insert(0, str(BASE_DIR))

from bench.capacity_search import BENCH_DATABASE, SEED, _percentile, _setup_django  # noqa: E402

# Moments where all eight GPUs of a node are free for six hours in both modes (a booking of an
# on-demand lease must not meet a preemptible one either: the exclusion constraint forbids it).
_CANDIDATES_SQL = """
SELECT sp.node_id, lower(sp.during) AS start
FROM leasing_nodefreespan sp
JOIN inventory_node n ON n.id = sp.node_id AND n.gpu_count = 8
WHERE lower(sp.during) > now() AND cardinality(sp.free_until_strict) = 8
  AND sp.free_until_strict[1] >= lower(sp.during) + interval '6 hours'
ORDER BY md5(sp.id::text || %s)
LIMIT %s"""

_INSERT_SQL = """
INSERT INTO leasing_allocation (gpu_id, node_id, hold_id, period, preemptible, ended_reason,
                                created_at)
SELECT g.id, g.node_id, (SELECT min(id) FROM leasing_hold),
       tstzrange(%(start)s, %(start)s + interval '6 hours', '[)'), false, '', now()
FROM inventory_gpu g WHERE g.node_id = %(node)s"""

# Past bookings of every GPU of the node: 3 days in every 4, ending 60 days before now.
_HISTORY_SQL = """
INSERT INTO leasing_allocation (gpu_id, node_id, hold_id, period, preemptible, ended_reason,
                                created_at)
SELECT g.id, g.node_id, (SELECT min(id) FROM leasing_hold),
       tstzrange(now() - interval '60 days' - interval '4 days' * k,
                 now() - interval '57 days' - interval '4 days' * k, '[)'), false, '', now()
FROM inventory_gpu g CROSS JOIN generate_series(0, %(days)s / 4 - 1) AS k
WHERE g.node_id = %(node)s"""

_TRIGGER = "allocation_free_spans_insert"


def _time_insert(
    cursor: Any, node: int, start: Any, *, with_trigger: bool, history_days: int
) -> float:
    cursor.execute("BEGIN")
    try:
        if not with_trigger:
            cursor.execute(f"ALTER TABLE leasing_allocation DISABLE TRIGGER {_TRIGGER}")
        if history_days:
            cursor.execute(_HISTORY_SQL, {"node": node, "days": history_days})
        began = time.perf_counter()
        cursor.execute(_INSERT_SQL, {"node": node, "start": start})
        return (time.perf_counter() - began) * 1000
    finally:
        cursor.execute("ROLLBACK")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Time one booking's INSERT with and without the free-span trigger; print and return."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60, help="bookings timed")
    parser.add_argument("--history-days", type=int, default=0, help="past bookings to add first")
    options = parser.parse_args(argv if argv is not None else [])
    _setup_django(BENCH_DATABASE)
    from django.db import connection

    connection.ensure_connection()
    raw = connection.connection
    raw.autocommit = True
    with raw.cursor() as cursor:
        cursor.execute(_CANDIDATES_SQL, [str(SEED), options.runs + 3])
        candidates = cursor.fetchall()
        cursor.execute("SELECT count(*)::float / count(DISTINCT node_id) FROM leasing_nodefreespan")
        spans_per_node = cursor.fetchone()[0]
        with_ms, without_ms = [], []
        for number, (node, start) in enumerate(candidates):
            history = options.history_days
            with_trigger = _time_insert(
                cursor, node, start, with_trigger=True, history_days=history
            )
            without = _time_insert(cursor, node, start, with_trigger=False, history_days=history)
            if number >= 3:  # warm-up
                with_ms.append(with_trigger)
                without_ms.append(without)
    trigger_ms = [a - b for a, b in zip(with_ms, without_ms, strict=True)]
    figures = {
        "database": BENCH_DATABASE,
        "bookings": len(with_ms),
        "history_days": options.history_days,
        "spans_per_node": round(spans_per_node, 1),
        "insert_p50_ms": round(statistics.median(with_ms), 2),
        "insert_p95_ms": round(_percentile(with_ms, 95), 2),
        "without_trigger_p50_ms": round(statistics.median(without_ms), 2),
        "without_trigger_p95_ms": round(_percentile(without_ms, 95), 2),
        "trigger_p50_ms": round(statistics.median(trigger_ms), 2),
        "trigger_p95_ms": round(_percentile(trigger_ms, 95), 2),
        "load_average": [round(value, 2) for value in os.getloadavg()],
    }
    print(
        f"one booking (8 GPUs, 6 h) in {figures['database']}, {figures['bookings']} bookings, "
        f"{figures['spans_per_node']} spans per node, {figures['history_days']} days of added "
        "history:\n"
        f"  INSERT with triggers      p50 {figures['insert_p50_ms']:7.2f} ms  "
        f"p95 {figures['insert_p95_ms']:7.2f} ms\n"
        f"  without the span trigger  p50 {figures['without_trigger_p50_ms']:7.2f} ms  "
        f"p95 {figures['without_trigger_p95_ms']:7.2f} ms\n"
        f"  the span trigger's share  p50 {figures['trigger_p50_ms']:7.2f} ms  "
        f"p95 {figures['trigger_p95_ms']:7.2f} ms\n"
        f"  load average {figures['load_average']}"
    )
    return figures


if __name__ == "__main__":
    main(sys.argv[1:])
