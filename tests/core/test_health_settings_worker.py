"""/healthz, production settings that refuse to start, and a task round trip through a worker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.tasks import ping

REPO = Path(__file__).resolve().parents[2]
# Not contacted: settings only need to name a shared cache (nothing listens on port 1).
SHARED_CACHE = "redis://127.0.0.1:1/1"


@pytest.mark.django_db
def test_healthz_is_ok_when_database_and_broker_answer(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {"database": "ok", "broker": "ok"}}


@pytest.mark.django_db
def test_healthz_is_degraded_when_the_broker_is_down(client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["status"] == "degraded"
    assert response.json()["checks"] == {"database": "ok", "broker": "down"}


def _django_check(env_overrides: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **env_overrides}
    for name in ("SECRET_KEY", "ALLOWED_HOSTS", "METRICS_TOKEN", "CACHE_URL"):
        if name not in env_overrides:
            env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("missing", ["SECRET_KEY", "ALLOWED_HOSTS", "METRICS_TOKEN"])
def test_production_refuses_to_start_without_a_secret(missing):
    env = {
        "DJANGO_ENV": "production",
        "SECRET_KEY": "x" * 50,
        "ALLOWED_HOSTS": "cardhour.example",
        "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/unused",
        "METRICS_TOKEN": "m" * 32,
        "CACHE_URL": SHARED_CACHE,
    }
    del env[missing]
    result = _django_check(env)
    assert result.returncode != 0
    assert f"{missing} must be set when DJANGO_ENV=production" in result.stderr


def test_production_starts_with_its_secrets():
    result = _django_check(
        {
            "DJANGO_ENV": "production",
            "SECRET_KEY": "x" * 50,
            "ALLOWED_HOSTS": "cardhour.example",
            "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/unused",
            "METRICS_TOKEN": "m" * 32,
            "CACHE_URL": SHARED_CACHE,
        }
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("cache_url", [None, "locmemcache://", "dummycache://"])
def test_production_refuses_to_start_without_a_shared_cache(cache_url):
    env = {
        "DJANGO_ENV": "production",
        "SECRET_KEY": "x" * 50,
        "ALLOWED_HOSTS": "cardhour.example",
        "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/unused",
        "METRICS_TOKEN": "m" * 32,
    }
    if cache_url is not None:
        env["CACHE_URL"] = cache_url
    result = _django_check(env)
    assert result.returncode != 0
    assert "CACHE_URL must name a cache every web process shares" in result.stderr


@pytest.mark.worker
def test_a_task_round_trips_through_a_real_worker(celery_worker_process):
    result = ping.apply_async(args=["cardhour"], queue="default")
    assert result.get(timeout=60) == "pong:cardhour"
