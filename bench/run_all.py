"""Run every benchmark of bench/ and write docs/benchmarks.md (`make bench`).

    .venv/bin/python bench/run_all.py [--quick] [--only NAME [NAME ...]] [--render] [--output PATH]

Each benchmark module's `main(argv) -> dict` runs in its own Python process, one after the
other (they configure Django for their own databases and must not share a process; load.py also
patches the standard library for gevent). Their printed output is passed through and kept.
`--quick` (or BENCH_QUICK=1) uses the smaller sizes listed in BENCHMARKS; an entry's `module`
names the bench/ module it runs when that is not its own name (capacity_search_100k runs
capacity_search.py with `--nodes 100000`; `--only capacity_search_100k` runs just the large
size, `--only capacity_search capacity_search_100k` both). `--only` re-runs some
of them and merges the new figures into the existing document, whose raw figures are kept in a
JSON comment at its end; `--render` only rewrites the document from them. A module that is
missing or fails is recorded as such; the others run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = REPO / "docs" / "benchmarks.md"
RESULTS_MARKER = "bench-results-json"


BENCHMARKS: dict[str, dict[str, Any]] = {
    "capacity_search": {
        "what": "capacity search (leasing.selectors.capacity_search_page) on 10,000 nodes / "
        "80,000 GPUs / 300,000 allocations: p50/p95 per query mix beside the goal (30 ms) and "
        "against the bare SQL of the same statement",
        "args": [],
        "quick": ["--runs", "10"],
    },
    "capacity_search_100k": {
        "module": "capacity_search",
        "what": "the same capacity search at ten times the fleet: 100,000 nodes / 800,000 GPUs "
        "/ 3,000,000 allocations (goal 100 ms; the first run loads the data, minutes)",
        "args": ["--nodes", "100000"],
        "quick": ["--nodes", "100000", "--runs", "10"],
    },
    "ingest": {
        "what": "usage ingestion: events/s through the HTTP endpoint (test client), the service "
        "and bare psycopg (COPY + INSERT ... ON CONFLICT), batches of 10,000 new events",
        "args": [],
        "quick": ["--rounds", "3"],
    },
    "economics": {
        "what": "the nightly economics job (asset_economics_refresh) on 10,000 nodes x 24 "
        "months: first run, unchanged rerun, next night and full recompute against one bare "
        "SQL aggregate over the same rows (goal: next night <= 2x bare)",
        "args": [],
        "quick": ["--nodes", "1000"],
    },
    "billing_cycle": {
        "what": "a month's billing cycle (billing_cycle_run, batches billed in one process as one "
        "worker does) on 10,000 card-hour contracts: invoices/s and SQL statements per invoice "
        "against one bare SQL aggregate + INSERT ... SELECT writes of the same invoices",
        "args": [],
        "quick": ["--contracts", "1000"],
    },
    "load": {
        "what": "the HTTP API under gunicorn driven by locust (capacity search, lease creation "
        "under contention, usage ingestion): req/s and p50/p95/p99 against bare Django "
        "views running the same SQL",
        "args": [],
        "quick": ["--duration", "8"],
    },
}


# ------------------------------------------------------------------ child: one benchmark


def _module(name: str) -> str:
    """The bench/ module a benchmark entry runs."""
    return str(BENCHMARKS[name].get("module", name)) if name in BENCHMARKS else name


def _repo_importable() -> None:
    """Put the repository on sys.path (once), so that `bench.*` imports when run as a script."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))


def _child(name: str, output: Path, argv: list[str]) -> None:
    """Run bench.<name>.main(argv) in this process and write its figures as JSON."""
    _repo_importable()
    module = importlib.import_module(f"bench.{name}")
    figures = module.main(argv)
    output.write_text(json.dumps(figures, default=str, indent=1))


# ------------------------------------------------------------------ machine and tree


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _postgres_version() -> str:
    try:
        _repo_importable()
        from bench.databases import admin_connection, server_url

        # The server's maintenance database: DATABASE_URL's own need not exist (each benchmark
        # makes its own database on that server).
        with admin_connection(server_url()) as connection:
            row = connection.execute("SELECT version()").fetchone()
        return str(row[0]).split(" on ")[0] if row else "unknown"
    except Exception as exc:  # the document still says what the machine is
        return f"unknown ({exc.__class__.__name__})"


def machine() -> dict[str, Any]:
    """CPU, cores, RAM, OS, Python and PostgreSQL of this machine."""
    cpuinfo = _read("/proc/cpuinfo")
    models = re.findall(r"^model name\s*:\s*(.+)$", cpuinfo, flags=re.MULTILINE)
    memory = re.search(r"^MemTotal:\s+(\d+) kB", _read("/proc/meminfo"), flags=re.MULTILINE)
    pretty = re.search(r'^PRETTY_NAME="?([^"\n]+)"?', _read("/etc/os-release"), flags=re.MULTILINE)
    return {
        "cpu": models[0] if models else platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "memory_gb": round(int(memory.group(1)) / 1024 / 1024, 1) if memory else None,
        "os": f"{pretty.group(1) if pretty else platform.system()} (kernel {platform.release()})",
        "python": platform.python_version(),
        "postgresql": _postgres_version(),
    }


# The machine's speed varies from session to session and within one (a shared VM): the same
# unchanged statement ran 1.7x slower an hour after a run on the same machine. A fixed Python
# workload timed just before each benchmark says how fast the machine was then: the loop that
# docs/scaling.md quotes (`python3 -c` of SPEED_PROBE_SOURCE, its names module globals; what it
# took on the machines so far: SPEED_PROBE_REFERENCE); compare figures taken at similar speeds.
SPEED_PROBE_SOURCE = "s = 0\nfor i in range(10_000_000):\n    s += i\n"
SPEED_PROBE_REFERENCE = "0.75 s: the faster machines so far, 1.0 s: the slower"


def speed_probe() -> float:
    """Seconds this machine takes now for SPEED_PROBE_SOURCE, run as a module (`python -c`)."""
    code = compile(SPEED_PROBE_SOURCE, "<speed probe>", "exec")
    began = time.perf_counter()
    exec(code, {})  # a constant loop, its names module globals as `python3 -c` runs it
    return round(time.perf_counter() - began, 2)


def _git(*args: str) -> str:
    """A read-only git command (no optional index refresh)."""
    try:
        done = subprocess.run(
            ["git", "--no-optional-locks", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return ""
    return done.stdout.strip()


def tree() -> dict[str, Any]:
    """The commit the benchmarks ran on and whether the working tree differed from it."""
    return {
        "commit": _git("rev-parse", "HEAD") or "unknown",
        "subject": _git("log", "-1", "--format=%s"),
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
    }


# ------------------------------------------------------------------ running


def run_one(name: str, *, quick: bool) -> dict[str, Any]:
    """Run one benchmark in a child process; its figures, output, time and load average."""
    spec = BENCHMARKS[name]
    record: dict[str, Any] = {
        "what": spec["what"],
        "args": spec["quick"] if quick else spec["args"],
        "quick": quick,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_average_before": round(os.getloadavg()[0], 2),
        "speed_probe_s": speed_probe(),
    }
    module = _module(name)
    if not (REPO / "bench" / f"{module}.py").exists():
        record.update(status="missing", output=f"bench/{module}.py does not exist.")
        print(f"== {name}: missing (bench/{module}.py does not exist)", flush=True)
        return record
    figures_path = REPO / "var" / "bench" / f"{name}.json"
    figures_path.parent.mkdir(parents=True, exist_ok=True)
    figures_path.unlink(missing_ok=True)
    command = [sys.executable, str(Path(__file__)), "--child", module, str(figures_path)]
    command += ["--", *record["args"]]
    print(f"== {name}: {' '.join(['bench/' + module + '.py', *record['args']])}", flush=True)
    began = time.monotonic()
    lines: list[str] = []
    with subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as child:
        assert child.stdout is not None
        for line in child.stdout:
            print(line, end="", flush=True)
            lines.append(line)
    record["seconds"] = round(time.monotonic() - began, 1)
    record["load_average_after"] = round(os.getloadavg()[0], 2)
    record["output"] = "".join(lines[-200:])
    if child.returncode == 0 and figures_path.exists():
        record["status"] = "ok"
        record["figures"] = json.loads(figures_path.read_text())
    else:
        record["status"] = f"failed (exit {child.returncode})"
    print(f"== {name}: {record['status']} in {record['seconds']} s", flush=True)
    return record


# ------------------------------------------------------------------ the document


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value).replace("|", "\\|")


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]
    return lines


def _flatten(figures: Any, prefix: str = "") -> list[list[Any]]:
    """Every number of a figures dict as (path, value): the fallback for unknown shapes."""
    rows: list[list[Any]] = []
    if isinstance(figures, dict):
        for key, value in figures.items():
            rows += _flatten(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(figures, int | float) and not isinstance(figures, bool):
        rows.append([prefix, figures])
    return rows


def _capacity_search(figures: dict[str, Any]) -> tuple[list[str], str]:
    data = figures.get("data", {})
    lines = [
        f"Data: {_cell(data.get('nodes'))} nodes, {_cell(data.get('gpus'))} GPUs, "
        f"{_cell(data.get('allocations'))} allocations, {_cell(data.get('offers'))} offers, "
        f"{_cell(data.get('outages'))} outages; target p95 ≤ {figures.get('target_p95_ms')} ms.",
        "",
    ]
    if "search_indexes_mb" in data:
        _repo_importable()
        from bench.capacity_search import cache_fit

        lines += [f"Cache: {cache_fit(data)}.", ""]
    rows = [
        [
            name,
            mix["p50_ms"],
            mix["p95_ms"],
            figures.get("target_p95_ms"),
            mix["bare_sql_p50_ms"],
            mix["bare_sql_p95_ms"],
            mix["ratio_p50"],
            mix.get("from_allocations_sql_p95_ms"),
            mix.get("speedup_p95"),
            mix["meets_target"],
        ]
        for name, mix in figures["mixes"].items()
    ]
    lines += _table(
        [
            "query mix",
            "p50 ms",
            "p95 ms",
            "goal p95 ms",
            "bare SQL p50",
            "bare SQL p95",
            "ratio p50",
            "SQL p95 from allocations",
            "speedup p95",
            "goal met",
        ],
        rows,
    )
    worst = max(figures["mixes"].values(), key=lambda mix: mix["p95_ms"])
    headline = (
        f"p95 {worst['p95_ms']} ms worst mix (goal {figures.get('target_p95_ms')} ms); "
        "ratio (selector / bare SQL, p50) "
        f"{min(m['ratio_p50'] for m in figures['mixes'].values())} to "
        f"{max(m['ratio_p50'] for m in figures['mixes'].values())}"
    )
    return lines, headline


def _ingest(figures: dict[str, Any]) -> tuple[list[str], str]:
    lines = [
        f"{_cell(figures['events_per_path'])} new events per path in batches of "
        f"{_cell(figures['batch_size'])}.",
        "",
    ]
    lines += _table(
        ["path", "events/s", "ratio to bare"],
        [
            [
                "HTTP (POST /api/v1/usage/events/, test client)",
                figures["http_events_per_s"],
                figures["ratio_http_to_bare"],
            ],
            [
                "service (usage_batch_ingest)",
                figures["service_events_per_s"],
                figures["ratio_service_to_bare"],
            ],
            ["bare psycopg (COPY + INSERT ON CONFLICT)", figures["bare_events_per_s"], 1.0],
            ["service, all duplicates (replay)", figures["service_replay_events_per_s"], None],
        ],
    )
    headline = (
        f"service {_cell(figures['service_events_per_s'])} events/s; "
        f"service/bare {figures['ratio_service_to_bare']}, "
        f"HTTP/bare {figures['ratio_http_to_bare']}"
    )
    return lines, headline


def _seconds(value: Any) -> Any:
    """A timing as economics.py reports it: a number, or {"s": wall, "cpu_s": ...}."""
    return value.get("s") if isinstance(value, dict) else value


def _economics(figures: dict[str, Any]) -> tuple[list[str], str]:
    job = figures.get("job", {})
    bare = figures.get("bare_sql", {})
    size = figures.get("size", {})
    first = _seconds(job.get("first_run", job.get("first_run_s")))
    second = _seconds(job.get("second_run", job.get("second_run_s")))
    lines = [
        f"Size: {_cell(size.get('nodes'))} nodes x {_cell(size.get('months'))} months.",
        "",
    ]
    rows = [
        [
            "job, first run (empty tables)",
            first,
            figures.get("rows_per_s_first_run"),
            figures.get("ratio_first_run_to_bare"),
        ],
        [
            "job, second run (nothing changed)",
            second,
            figures.get("rows_per_s_second_run"),
            figures.get("ratio_second_run_to_bare"),
        ],
        [
            "job, next night (goal <= 2x bare)",
            _seconds(job.get("next_night_s")),
            None,
            figures.get("ratio_next_night_to_bare"),
        ],
        [
            "job, full recompute",
            _seconds(job.get("full_recompute_s")),
            None,
            figures.get("ratio_full_recompute_to_bare"),
        ],
        ["bare SQL aggregate (median)", bare.get("median_s"), None, 1.0],
    ]
    copy = figures.get("copy_write", {})
    for step in ("insert", "upsert", "upsert_changed_only"):
        timing = _seconds(copy.get(step, copy.get(f"{step}_s")))
        if timing is not None:
            rows.append([f"prototype COPY write: {step.replace('_', ' ')}", timing, None, None])
    lines += _table(["step", "seconds", "rows/s", "ratio to bare"], rows)
    phases = figures.get("phases", {})
    timings = phases.get("timings", phases.get("seconds", {}))
    if timings:
        lines += ["", "Phases of the job (seconds):", ""]
        lines += _table(["phase", "seconds"], [[k, _seconds(v)] for k, v in timings.items()])
    headline = (
        f"{_cell(job.get('rows_written'))} asset months in {_cell(first)} s "
        f"(unchanged rerun {_cell(second)} s); nightly job/bare "
        f"{figures.get('ratio_next_night_to_bare', figures.get('ratio_first_run_to_bare'))}x "
        f"(goal <= {figures.get('goal_ratio', 2.0)}x)"
    )
    return lines, headline


def _load(figures: dict[str, Any]) -> tuple[list[str], str]:
    config = figures["config"]
    lines = [
        f"gunicorn {config['gunicorn']}; locust {config['users']} users with no think time "
        f"(saturation), {config['warmup_s']:.0f} s warm-up + {config['duration_s']:.0f} s "
        f"measured per run; data: {config['data']}; usage batches of {config['usage_batch']} "
        "events. Expected outcomes: ok (2xx), no_capacity (409 capacity_gone), replayed "
        "(Idempotency-Key repeat); everything else is an error.",
        "",
    ]
    rows = []
    for name, scenario in figures["scenarios"].items():
        for path in ("endpoint", "bare"):
            result = scenario[path]
            outcomes = ", ".join(f"{k} {v}" for k, v in result["outcomes"].items())
            if "events_per_s" in result:
                outcomes += f"; {result['events_per_s']:,} events/s"
            rows.append(
                [
                    name if path == "endpoint" else "",
                    path,
                    result["throughput_rps"],
                    result["p50_ms"],
                    result["p95_ms"],
                    result["p99_ms"],
                    result["errors"],
                    outcomes,
                ]
            )
        rows.append(
            [
                "",
                "**ratio**",
                f"**{scenario['ratio']}**",
                f"x{scenario['latency_ratio_p50']}",
                f"x{scenario['latency_ratio_p95']}",
                "",
                "",
                "endpoint / bare (throughput); endpoint / bare (latency)",
            ]
        )
    lines += _table(
        ["scenario", "path", "req/s", "p50 ms", "p95 ms", "p99 ms", "errors", "outcomes"], rows
    )
    lease = figures["scenarios"].get("lease_contention", {})
    by_outcome = {
        path: lease.get(path, {}).get("p50_ms_by_outcome", {}) for path in ("endpoint", "bare")
    }
    if by_outcome["endpoint"]:
        lines += [
            "",
            f"Leases: {lease.get('measure', 'time-bounded')}. p50 by outcome (ms): "
            f"endpoint {by_outcome['endpoint']}, bare {by_outcome['bare']}.",
        ]
    if lease.get("rounds"):
        each = ", ".join(
            f"{r['ratio']} ({r['endpoint_rps']} / {r['bare_rps']} req/s)" for r in lease["rounds"]
        )
        lines += [
            "",
            f"Lease ratio per round (endpoint / bare): {each}; the ratio is their median.",
        ]
    paced = lease.get("paced")
    if paced:
        lines += [
            "",
            f"Leases paced at {paced['offered_rps']} req/s by {paced.get('users', config['users'])}"
            f" users ({paced['share_of_bare']:.0%} of the bare view's saturated throughput "
            "above), each path on a fresh pool of its own:",
            "",
        ]
        lines += _table(
            ["path", "req/s", "p50 ms", "p95 ms", "p99 ms", "errors", "outcomes", "p50 by outcome"],
            [
                [
                    path,
                    paced[path]["throughput_rps"],
                    paced[path]["p50_ms"],
                    paced[path]["p95_ms"],
                    paced[path]["p99_ms"],
                    paced[path]["errors"],
                    ", ".join(f"{k} {v}" for k, v in paced[path]["outcomes"].items()),
                    ", ".join(
                        f"{k} {v}" for k, v in paced[path].get("p50_ms_by_outcome", {}).items()
                    ),
                ]
                for path in ("endpoint", "bare")
            ],
        )
    if lease.get("goal"):
        lines += ["", f"Goal: {lease['goal']['text']}."]
    lines += ["", f"Checks after the runs: `{json.dumps(figures.get('checks', {}))}`."]
    lines += [f"Statements per request: `{json.dumps(figures.get('statements', {}))}`."]
    headline = "; ".join(
        f"{name} {scenario['endpoint']['throughput_rps']} req/s, ratio {scenario['ratio']}"
        for name, scenario in figures["scenarios"].items()
    )
    return lines, headline


SUMMARIES = {
    "capacity_search": _capacity_search,
    "ingest": _ingest,
    "economics": _economics,
    "load": _load,
}


def _section(name: str, record: dict[str, Any]) -> tuple[list[str], str]:
    lines = [f"## {name}", "", f"What it measures: {record['what']}.", ""]
    command = " ".join([f".venv/bin/python bench/{_module(name)}.py", *record.get("args", [])])
    ran = f"`{command}`"
    if record.get("seconds") is not None:
        ran += (
            f", {record['seconds']} s, started {record['started']}; load average (1 min) "
            f"{record['load_average_before']} before, {record.get('load_average_after')} after"
        )
        if record.get("speed_probe_s") is not None:
            ran += (
                f"; the machine's speed before it: {record['speed_probe_s']} s for 10 million"
                f" additions in a Python loop ({SPEED_PROBE_REFERENCE})"
            )
    lines += [f"Ran: {ran}.", ""]
    if record["status"] != "ok":
        lines += [f"**Not measured: {record['status']}.**", ""]
        if record.get("output"):
            lines += ["```", record["output"].strip()[-3000:], "```", ""]
        return lines, record["status"]
    try:
        body, headline = SUMMARIES[_module(name)](record["figures"])
    except (KeyError, TypeError, ValueError):
        body = _table(["figure", "value"], _flatten(record["figures"]))
        headline = "see the table"
    lines += [*body, ""]
    lines += [
        "<details><summary>printed output</summary>",
        "",
        "```",
        record.get("output", "").strip(),
        "```",
        "",
        "</details>",
        "",
    ]
    return lines, headline


def render(document: dict[str, Any]) -> str:
    """docs/benchmarks.md from the machine, the tree and every benchmark's record."""
    host, commit = document["machine"], document["tree"]
    lines = [
        "# Benchmarks",
        "",
        "Generated by `make bench` (`bench/run_all.py`); do not edit by hand — re-run it. "
        "Each benchmark builds its own data in its own database and compares the code path "
        "with a bare implementation of the same database work; a ratio near 1 means the "
        "Python layers cost little on top of the SQL.",
        "",
        f"- Date: {document['date']}",
        f"- Commit: `{commit['commit']}` ({commit['subject']})"
        + (" — the working tree had uncommitted changes" if commit["dirty"] else ""),
        f"- Sizes: {'quick (`--quick`)' if document.get('quick') else 'the defaults'}"
        + (f"; {document['note']}" if document.get("note") else ""),
        "",
        "## Machine",
        "",
        *_table(
            ["CPU", "cores", "RAM", "OS", "Python", "PostgreSQL"],
            [
                [
                    host["cpu"],
                    host["cores"],
                    f"{host['memory_gb']} GB",
                    host["os"],
                    host["python"],
                    host["postgresql"],
                ]
            ],
        ),
        "",
        "The machine is shared: the load average before and after each benchmark is recorded "
        "with it; figures taken under a high load average are pessimistic. Its speed varies "
        "from run to run too: each benchmark records how long a fixed Python loop took just "
        "before it, so that figures are compared at similar speeds.",
        "",
    ]
    sections: list[str] = []
    summary_rows: list[list[Any]] = []
    for name in BENCHMARKS:
        record = document["benchmarks"].get(name)
        if record is None:
            record = {"what": BENCHMARKS[name]["what"], "status": "not run", "args": []}
        body, headline = _section(name, record)
        sections += body
        summary_rows.append([name, record["what"], headline, record.get("seconds")])
    lines += ["## Summary", ""]
    lines += _table(["benchmark", "what it measures", "headline figures", "seconds"], summary_rows)
    lines += ["", *sections]
    lines += [f"<!-- {RESULTS_MARKER}", json.dumps(document, default=str), "-->", ""]
    return "\n".join(lines)


def _previous(output: Path) -> dict[str, Any] | None:
    if not output.exists():
        return None
    found = re.search(rf"<!-- {RESULTS_MARKER}\n(.*)\n-->", output.read_text(), flags=re.DOTALL)
    return json.loads(found.group(1)) if found else None


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmarks, write the document, return its data."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", default=bool(os.environ.get("BENCH_QUICK")))
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), default=None)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--note", default="", help="a sentence for the document's header")
    parser.add_argument(
        "--render", action="store_true", help="only rewrite the document from its stored figures"
    )
    options = parser.parse_args(argv)

    names = [] if options.render else options.only or list(BENCHMARKS)
    previous = _previous(options.output) if options.only or options.render else None
    if options.render and previous is None:
        parser.error(f"{options.output} holds no stored figures to render")
    document: dict[str, Any] = previous or {"benchmarks": {}}
    began = time.monotonic()
    for name in names:
        document["benchmarks"][name] = run_one(name, quick=options.quick)
    if names:
        document.update(
            date=datetime.now(UTC).isoformat(timespec="seconds"),
            machine=machine(),
            tree=tree(),
            quick=options.quick,
        )
    if options.note:
        document["note"] = options.note
    options.output.parent.mkdir(parents=True, exist_ok=True)
    options.output.write_text(render(document))
    print(f"wrote {options.output} ({time.monotonic() - began:.0f} s)")
    return document


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        # python bench/run_all.py --child NAME OUTPUT -- ARGS...
        _child(sys.argv[2], Path(sys.argv[3]), sys.argv[5:])
    else:
        main(sys.argv[1:])
