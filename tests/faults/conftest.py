"""Fixtures of the fault tests: a private Redis broker, workers to kill, a Stripe that holds."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.faults.tools import (
    REDIS_SERVER,
    HeldStripe,
    RedisServer,
    Worker,
    service_env,
    start_stripe_server,
)

StartWorker = Callable[[], Worker]


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test alone (no other worker takes its tasks), with AOF on."""
    if REDIS_SERVER is None:
        pytest.skip(
            "redis-server is not on PATH (Debian package redis-server): the worker-kill and"
            " broker-restart tests run a Redis of their own that they stop and restart; the"
            " filesystem transport cannot stand in, it drops a killed worker's task"
        )
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def held_stripe_url() -> Iterator[str]:
    """The localstripe server of the billing tests, with held answers (stripe_server.py)."""
    process, url = start_stripe_server()
    try:
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def held_stripe(held_stripe_url: str) -> HeldStripe:
    """An empty fake Stripe for this test, no hold armed."""
    server = HeldStripe(held_stripe_url)
    server.reset()
    return server


@pytest.fixture
def start_worker(
    private_redis: RedisServer, held_stripe: HeldStripe, tmp_path: Path
) -> Iterator[StartWorker]:
    """Start a ready worker on the private broker, Stripe on; every one is killed at the end."""
    env = service_env(broker_url=private_redis.url, tmp_path=tmp_path, stripe_url=held_stripe.url)
    started: list[Worker] = []

    def start() -> Worker:
        worker = Worker(env, tmp_path / "worker.log")
        started.append(worker)
        worker.wait_ready()
        return worker

    try:
        yield start
    finally:
        for worker in started:
            worker.kill()  # the broker and its queues go with the test: no need to wait
