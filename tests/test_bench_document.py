"""docs/benchmarks.md says how fast the machine was before each benchmark (bench/run_all.py)."""

from __future__ import annotations

from bench import run_all


def test_each_benchmark_records_the_machines_speed_before_it_and_the_document_shows_it():
    assert 0 < run_all.speed_probe() < 60
    record = {
        "what": "capacity search",
        "args": [],
        "started": "2026-12-05T07:14:16+00:00",
        "seconds": 85.9,
        "load_average_before": 1.08,
        "load_average_after": 0.55,
        "speed_probe_s": 0.81,
        "status": "failed",
        "output": "",
    }
    document = {
        "date": "2026-12-05",
        "machine": {
            "cpu": "AMD EPYC",
            "cores": 2,
            "memory_gb": 23.5,
            "os": "Debian",
            "python": "3.11",
            "postgresql": "15",
        },
        "tree": {"commit": "abc", "subject": "s", "dirty": False},
        "benchmarks": {"capacity_search": record},
    }
    text = run_all.render(document)
    assert (
        "load average (1 min) 1.08 before, 0.55 after; the machine's speed before it: 0.81 s for"
        " 10 million additions in a Python loop" in text
    )
    # A record from before the probe existed renders without it.
    del record["speed_probe_s"]
    assert "the machine's speed before it" not in run_all.render(document)


def _capacity_figures(indexes_mb: int, shared_buffers_mb: int) -> dict:
    mix = {
        "p50_ms": 19.6,
        "p95_ms": 21.6,
        "bare_sql_p50_ms": 17.1,
        "bare_sql_p95_ms": 18.4,
        "ratio_p50": 1.15,
        "from_allocations_sql_p95_ms": 64.1,
        "speedup_p95": 3.49,
        "meets_target": True,
    }
    return {
        "data": {
            "nodes": 10_000,
            "gpus": 80_000,
            "allocations": 300_000,
            "offers": 300,
            "outages": 3_000,
            "search_indexes_mb": indexes_mb,
            "shared_buffers_mb": shared_buffers_mb,
        },
        "mixes": {"broad_24h_by_price": mix},
        "target_p95_ms": 30.0,
    }


def test_the_capacity_section_says_whether_the_search_indexes_fit_in_shared_buffers():
    lines, _ = run_all._capacity_search(_capacity_figures(2_034, 128))
    # Its own paragraph, after the data's.
    assert lines[0].startswith("Data: 10,000 nodes") and lines[1] == "" and lines[3] == ""
    assert lines[2].startswith(
        "Cache: search indexes 2,034 MB (both modes), shared_buffers 128 MB: they do not fit:"
        " searches re-read index pages from the OS cache"
    )
    lines, _ = run_all._capacity_search(_capacity_figures(203, 4_096))
    assert "Cache: search indexes 203 MB (both modes), shared_buffers 4,096 MB: they fit." in lines
    warmed = _capacity_figures(203, 4_096)
    warmed["data"]["prewarmed"] = True
    assert "they fit, and were read into them before timing (pg_prewarm)." in "\n".join(
        run_all._capacity_search(warmed)[0]
    )
    warmed["data"].update(prewarmed=False, prewarm_refused="permission denied to create extension")
    assert (
        "they fit; not read into them before timing (permission denied to create extension)."
        in "\n".join(run_all._capacity_search(warmed)[0])
    )
    # Figures recorded before the bench measured it render without the line.
    figures = _capacity_figures(203, 4_096)
    del figures["data"]["search_indexes_mb"]
    assert not any(line.startswith("Cache:") for line in run_all._capacity_search(figures)[0])
