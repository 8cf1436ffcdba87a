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
