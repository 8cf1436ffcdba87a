"""Fixtures shared by the whole suite: API clients per organization and a real Celery worker."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.locmem import LocMemCache
from rest_framework.test import APIClient

from accounts.choices import KeyScope
from accounts.models import Organization
from accounts.services import api_key_create
from config.celery import app
from core.celery_filesystem import PARTIAL_PREFIX
from core.tasks import ping
from tests.factories import OperatorFactory, OrganizationFactory, ProviderFactory

REPO = Path(__file__).resolve().parent.parent

ClientFor = Callable[..., APIClient]
# The session's real worker, once a test started it (celery_worker_process).
_session_worker: list[subprocess.Popen[bytes]] = []
# Purge-and-ping rounds before giving up on a worker that keeps receiving work.
DRAIN_ROUNDS = 10


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> None:
    """Each test starts with no throttle counts: they live in the cache, and every test client
    calls from 127.0.0.1, so one test's failed keys would throttle the next. Only the
    process-local default cache is cleared, never a shared one named by CACHE_URL."""
    if isinstance(caches["default"], LocMemCache):
        caches["default"].clear()


@pytest.fixture
def client_for(db: None) -> ClientFor:
    """An APIClient that authenticates with a fresh API key of the given organization."""

    def make(organization: Organization, scope: str = KeyScope.WRITE) -> APIClient:
        issued = api_key_create(organization=organization, name="test", scope=scope)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Api-Key {issued.raw_key}")
        client.organization = organization  # type: ignore[attr-defined]
        return client

    return make


@pytest.fixture
def customer(db: None) -> Organization:
    return OrganizationFactory(name="Acme AI", slug="acme-ai")


@pytest.fixture
def other_customer(db: None) -> Organization:
    return OrganizationFactory(name="Globex Labs", slug="globex")


@pytest.fixture
def provider(db: None) -> Organization:
    return ProviderFactory(name="Southern Cross GPU", slug="southern-cross")


@pytest.fixture
def other_provider(db: None) -> Organization:
    return ProviderFactory(name="Kuala Compute", slug="kuala-compute")


@pytest.fixture
def operator(db: None) -> Organization:
    return OperatorFactory(name="Cardhour Ops", slug="ops")


def _worker_env() -> dict[str, str]:
    env = dict(os.environ)
    database = settings.DATABASES["default"]
    env["DATABASE_NAME"] = str(database["NAME"])  # the test database of the same server
    if not env.get("DATABASE_URL"):
        env.pop("DATABASE_URL", None)
    env["DJANGO_ENV"] = "test"
    return env


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup: None, django_db_blocker: object) -> Iterator[None]:
    """A real `celery worker` process on the configured broker, using the test database."""
    if settings.CELERY_BROKER_URL == "filesystem://":
        shutil.rmtree(settings.CELERY_DIR / "queue", ignore_errors=True)
        (settings.CELERY_DIR / "queue").mkdir(parents=True, exist_ok=True)
    else:
        app.control.purge()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "-Q",
            "default,ingest,billing",
            "-P",
            "solo",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-l",
            "WARNING",
            "-n",
            f"pytest-{os.getpid()}@%h",
        ],
        cwd=REPO,
        env=_worker_env(),
    )
    time.sleep(1)
    _session_worker.append(process)
    try:
        yield
    finally:
        _session_worker.clear()
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def _queues_purge() -> int:
    """Drop the messages waiting in the test broker's queues; how many there were."""
    if settings.CELERY_BROKER_URL == "filesystem://":
        # A message still being written is not in the queue yet (core.celery_filesystem).
        waiting = [
            message
            for message in (settings.CELERY_DIR / "queue").iterdir()
            if not message.name.startswith(PARTIAL_PREFIX)
        ]
        for message in waiting:
            message.unlink(missing_ok=True)
        return len(waiting)
    return int(app.control.purge() or 0)


def _session_worker_drain() -> None:
    """Return once the session worker runs nothing and nothing waits for it.

    The worker runs one task at a time (`-P solo`, prefetch 1, late acks), so a ping answered
    means whatever it was running before has finished; a task that enqueued follow-ups while it
    ran leaves them to the next purge. Done when a purge before and after a ping found nothing.
    """
    _queues_purge()
    for _ in range(DRAIN_ROUNDS):
        ping.apply_async(args=["drain"], queue="default").get(timeout=60)
        if _queues_purge() == 0:
            ping.apply_async(args=["drain"], queue="default").get(timeout=60)
            if _queues_purge() == 0:
                return
    raise RuntimeError(f"the session worker still had work after {DRAIN_ROUNDS} rounds")


@pytest.fixture(autouse=True)
def session_worker_idle_before_flush(request: pytest.FixtureRequest) -> Iterator[None]:
    """A transactional test ends with a TRUNCATE of every table; the session's real worker must
    not be inside a transaction then (a task it was sent, e.g. the dispatcher kicked on commit or
    a rollup refresh, held row locks the TRUNCATE waited for while it waited for the TRUNCATE's:
    "deadlock detected"). Purges its queues and waits for it to finish before the flush."""
    marker = request.node.get_closest_marker("django_db")
    transactional = "transactional_db" in request.fixturenames or bool(
        marker is not None and marker.kwargs.get("transaction")
    )
    if not transactional:
        yield
        return
    # Set up the database first, so that this teardown runs before its flush.
    request.getfixturevalue("_django_db_helper")
    yield
    if _session_worker and _session_worker[0].poll() is None:
        _session_worker_drain()
