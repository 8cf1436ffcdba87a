"""Two web processes sharing the Redis cache enforce ONE limit together.

Two gunicorn servers (one worker of four threads each) on loopback run with CACHE_URL on the
Redis of the test broker; requests with one key go to both at once. A per-process (or a
read-modify-write) count would let more than the limit through.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import redis
from django.conf import settings

from accounts.models import Organization
from accounts.services import api_key_create

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

REPO = Path(__file__).resolve().parents[2]
LIMIT = 10
FAILURE_LIMIT = 4


def _redis_url() -> str:
    broker = settings.CELERY_BROKER_URL
    if not broker.startswith("redis://"):
        pytest.skip("needs Redis: run with CELERY_BROKER_URL=redis://127.0.0.1:6379/<db>")
    try:
        redis.Redis.from_url(broker, socket_connect_timeout=2).ping()
    except redis.RedisError:
        pytest.skip(f"Redis at {broker} does not answer")
    return broker


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def two_servers(tmp_path: Path) -> Iterator[list[str]]:
    """Two gunicorn servers on the test database, counting in the same Redis cache."""
    env = {
        **os.environ,
        "DJANGO_ENV": "test",
        "DATABASE_NAME": str(settings.DATABASES["default"]["NAME"]),
        "CACHE_URL": _redis_url(),
        "API_KEY_THROTTLE_RATE": f"{LIMIT}/min",
        "FAILED_AUTH_THROTTLE_RATE": f"{FAILURE_LIMIT}/min",
        # Behind "our proxy": the test names each run's client address in X-Forwarded-For.
        "TRUSTED_PROXY_COUNT": "1",
        "LOG_LEVEL": "WARNING",
    }
    servers, urls = [], []
    try:
        for number in range(2):
            port = _free_port()
            log = (tmp_path / f"gunicorn-{number}.log").open("wb")
            servers.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "gunicorn",
                        "config.wsgi:application",
                        "--bind",
                        f"127.0.0.1:{port}",
                        "--workers",
                        "1",
                        "--worker-class",
                        "gthread",
                        "--threads",
                        "4",
                        "--log-level",
                        "warning",
                    ],
                    cwd=REPO,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
            urls.append(f"http://127.0.0.1:{port}")
        for server, url in zip(servers, urls, strict=True):
            _wait_until_up(server, url, tmp_path)
        yield urls
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def _wait_until_up(server: subprocess.Popen[bytes], url: str, logs: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            text = "\n".join(path.read_text() for path in logs.glob("*.log"))
            raise RuntimeError(f"gunicorn exited: {text[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2):
                return
        except urllib.error.HTTPError:
            return  # it answers (503 when a health check is degraded is still an answer)
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer in 60 s")


def _fresh_address() -> str:
    """A client address of the IPv6 documentation range no earlier run has used."""
    bits = uuid.uuid4().int
    return f"2001:db8::{bits & 0xFFFF:x}:{(bits >> 16) & 0xFFFF:x}:{(bits >> 32) & 0xFFFF:x}"


def _get(url: str, key: str, address: str) -> int:
    request = urllib.request.Request(
        f"{url}/api/v1/organizations/me/",
        headers={"Authorization": f"Api-Key {key}", "X-Forwarded-For": address},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_two_processes_enforce_one_rate_limit_per_key(two_servers, customer: Organization):
    key = api_key_create(organization=customer, name="shared").raw_key
    address = _fresh_address()
    targets = [two_servers[n % 2] for n in range(3 * LIMIT)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(lambda url: _get(url, key, address), targets))

    assert Counter(statuses) == {200: LIMIT, 429: 2 * LIMIT}
    # Both processes refuse now, whichever took the requests that passed.
    assert [_get(url, key, address) for url in two_servers] == [429, 429]


def test_two_processes_count_failed_authentications_together(two_servers, customer: Organization):
    good = api_key_create(organization=customer, name="good").raw_key
    address = _fresh_address()
    statuses = [
        _get(two_servers[n % 2], f"ch_wrong{n}_secret", address) for n in range(FAILURE_LIMIT + 2)
    ]
    assert statuses == [401] * FAILURE_LIMIT + [429, 429]
    assert [_get(url, good, address) for url in two_servers] == [429, 429]
    assert _get(two_servers[0], good, _fresh_address()) == 200
