"""Fault-injection tools: a private Redis, Celery workers to kill, stalled INSERTs, a held Stripe.

Every process here listens on, or talks to, 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import redis
import requests
from celery import Celery
from django.conf import settings
from django.db import connection, connections

from tests.billing.conftest import API_KEY, LocalStripe
from tests.conftest import REPO

REDIS_SERVER = shutil.which("redis-server")
# How long a delivered, unacknowledged message stays invisible before a worker puts it back in
# its queue (kombu's Redis transport; the default is an hour), so that a test sees a killed
# worker's task come back within seconds. A slow task is not run twice meanwhile: a solo worker
# does not look for expired messages while it runs one, and only one worker runs at a time.
VISIBILITY_TIMEOUT_S = 3
# A cycle or delivery run open this long counts as abandoned (BILLING_RUN_TIMEOUT_MINUTES: half
# an hour in production). Shorter than the visibility timeout, as in production, so a killed
# run is past it by the time its task comes back, and the rerun marks it abandoned and takes
# over. No run of these tests overlaps another of its kind (one solo worker at a time).
RUN_TIMEOUT_S = 1


def wait_for(predicate: Callable[[], Any], *, seconds: float, what: str) -> Any:
    """Poll `predicate` until it returns something truthy; fail with `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds:g} s waiting for {what}")
        time.sleep(0.1)


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ---------------------------------------------------------------- a private Redis broker


class RedisServer:
    """A redis-server of one test on a free loopback port, persisting every write (AOF)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None
        self.client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

    def start(self) -> None:
        """Start (or start again, on the same port and data) and wait until it answers."""
        assert REDIS_SERVER is not None
        self.directory.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                REDIS_SERVER,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--dir",
                str(self.directory),
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
                "--protected-mode",
                "yes",
                "--logfile",
                str(self.directory / "redis.log"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(self._answers, seconds=10, what=f"redis-server on port {self.port}")

    def _answers(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            log = (self.directory / "redis.log").read_text(errors="replace")[-2000:]
            raise AssertionError(f"redis-server exited with {self.process.returncode}:\n{log}")
        try:
            return bool(self.client.ping())
        except redis.ConnectionError:
            return False

    def stop(self) -> None:
        """SIGTERM, as a service manager stops it, and wait for the exit."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.client.connection_pool.disconnect()

    def restart(self) -> None:
        """Stop, then start again on the same port and data."""
        self.stop()
        self.start()

    def queue_length(self, queue: str) -> int:
        """How many messages wait in a Celery queue."""
        return int(self.client.llen(queue))

    def unacked(self) -> int:
        """How many delivered messages were not acknowledged yet (kombu's Redis transport)."""
        return int(self.client.hlen("unacked"))


# ---------------------------------------------------------------- Celery workers and a sender


def send_task(broker_url: str, name: str, *args: Any) -> None:
    """Send a task by name to one broker, routed as the project's app routes it.

    The connection is passed explicitly: Celery reads CELERY_BROKER_URL from the environment
    before any configured broker_url, so configuring another app would still send to the
    suite's broker, where the session worker of the other tests could take the task.
    """
    app = Celery("faults-sender", set_as_current=False)
    app.conf.update(
        task_routes=settings.CELERY_TASK_ROUTES,
        task_queues=settings.CELERY_TASK_QUEUES,
        task_default_queue=settings.CELERY_TASK_DEFAULT_QUEUE,
        task_serializer="json",
        accept_content=["json"],
    )
    with app.connection_for_write(broker_url) as broker:
        app.send_task(name, args=list(args), connection=broker, ignore_result=True)


def service_env(*, broker_url: str, tmp_path: Path, stripe_url: str | None) -> dict[str, str]:
    """The environment of a worker or API process of a test: the test database, its broker."""
    env = dict(os.environ)
    if not env.get("DATABASE_URL"):
        env.pop("DATABASE_URL", None)  # the embedded server, as for the test process
    (tmp_path / "mail").mkdir(parents=True, exist_ok=True)
    env.update(
        DJANGO_ENV="test",
        DATABASE_NAME=str(settings.DATABASES["default"]["NAME"]),
        CELERY_BROKER_URL=broker_url,
        CELERY_RESULT_BACKEND=broker_url,
        MEDIA_ROOT=str(tmp_path / "media"),
        EMAIL_URL=f"filemail:///{tmp_path / 'mail'}",
        STRIPE_API_KEY=API_KEY if stripe_url else "",
        STRIPE_API_BASE=stripe_url or "",
        CELERY_VISIBILITY_TIMEOUT_SECONDS=str(VISIBILITY_TIMEOUT_S),
        BILLING_RUN_TIMEOUT_MINUTES=str(RUN_TIMEOUT_S / 60),
        FAULTS_BROKER_TRANSPORT_OPTIONS=json.dumps(
            {
                "visibility_timeout": VISIBILITY_TIMEOUT_S,
                # Look for expired messages every second (kombu's default: every 10 s, and
                # then only on every 10th look).
                "unacked_restore_interval": 1,
                "unacked_restore_throttle": 1,
            }
        ),
    )
    return env


class Worker:
    """One `celery worker` process (solo pool, every queue) of tests.faults.worker_app."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        self.offset = log.stat().st_size if log.exists() else 0
        self._log_file = log.open("ab")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "tests.faults.worker_app",
                "worker",
                "-Q",
                "default,ingest,billing",
                "-P",
                "solo",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-l",
                "INFO",
                "-n",
                f"faults-{uuid.uuid4().hex[:8]}@%h",
            ],
            cwd=REPO,
            env=env,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
        )

    def output(self) -> str:
        """What this process logged so far."""
        with self.log.open("rb") as log:
            log.seek(self.offset)
            return log.read().decode(errors="replace")

    def wait_ready(self, seconds: float = 60) -> None:
        """Wait until the worker consumes (Celery logs 'ready.')."""

        def ready() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(f"the worker exited early:\n{self.output()[-4000:]}")
            return " ready." in self.output()

        wait_for(ready, seconds=seconds, what="the Celery worker to be ready")

    def kill(self) -> None:
        """SIGKILL: no warm shutdown, no acknowledgement, no requeue — as an OOM kill or a crash."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            assert self.process.wait(timeout=10) == -signal.SIGKILL
        self._log_file.close()


# ---------------------------------------------------------------- stalled INSERTs


def _key() -> int:
    return random.randint(1, 2**31 - 1)


class StalledInserts:
    """Hold, in a BEFORE INSERT trigger, every INSERT into `table` whose row matches `condition`.

    The trigger waits for a shared advisory lock that a connection of the test holds
    exclusively, so the writer's transaction stops at a known point, shows in pg_locks as a
    waiter on that lock, and goes on (or is killed) exactly when the test says — no fixed sleep.
    With `nth`, only the nth matching INSERT stalls; the count survives rollbacks (a sequence).
    """

    def __init__(self, table: str, condition: str, *, nth: int | None = None) -> None:
        self.table = table
        self.condition = condition
        self.nth = nth
        self.name = f"faults_stall_{uuid.uuid4().hex[:12]}"
        self.lock = (_key(), _key())
        self.gate: Any = None

    def __enter__(self) -> StalledInserts:
        self.gate = connections.create_connection("default")
        with self.gate.cursor() as cursor:  # autocommit: a session lock, held until release()
            cursor.execute("SELECT pg_advisory_lock(%s, %s)", self.lock)
        wait = f"PERFORM pg_advisory_xact_lock_shared({self.lock[0]}, {self.lock[1]});"
        if self.nth is not None:
            wait = f"IF nextval('{self.name}') = {int(self.nth)} THEN {wait} END IF;"
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE SEQUENCE {self.name}")
            cursor.execute(
                f"CREATE FUNCTION {self.name}() RETURNS trigger LANGUAGE plpgsql AS $$"
                f" BEGIN IF {self.condition} THEN {wait} END IF; RETURN NEW; END $$"
            )
            cursor.execute(
                f"CREATE TRIGGER {self.name} BEFORE INSERT ON {self.table}"
                f" FOR EACH ROW EXECUTE FUNCTION {self.name}()"
            )
        return self

    def stalled_pids(self) -> list[int]:
        """The server processes waiting in the trigger right now."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                " AND classid = %s AND objid = %s AND objsubid = 2",
                self.lock,
            )
            return [pid for (pid,) in cursor.fetchall()]

    def wait_stalled(self, seconds: float = 60) -> int:
        """Wait until one writer waits in the trigger; its server process id."""
        pids = wait_for(self.stalled_pids, seconds=seconds, what=f"an INSERT into {self.table}")
        assert len(pids) == 1, pids
        return int(pids[0])

    def release(self) -> None:
        """Let stalled and later matching INSERTs go on."""
        if self.gate is not None:
            self.gate.close()  # ends the session, and with it the exclusive lock
            self.gate = None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '20s'")
            cursor.execute(f"DROP TRIGGER IF EXISTS {self.name} ON {self.table}")
            cursor.execute(f"DROP FUNCTION IF EXISTS {self.name}()")
            cursor.execute(f"DROP SEQUENCE IF EXISTS {self.name}")
            cursor.execute("RESET lock_timeout")


def terminate_backend(pid: int) -> None:
    """pg_terminate_backend from another session, as a failover or an operator would."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        assert cursor.fetchone() == (True,)


def sessions_waiting_on_rows() -> int:
    """Other sessions of this database waiting for a row (or transaction) lock."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()"
            " AND NOT l.granted AND l.locktype IN ('transactionid', 'tuple')"
        )
        return int(cursor.fetchone()[0])


# ---------------------------------------------------------------- a Stripe that holds answers


class HeldStripe(LocalStripe):
    """LocalStripe (see tests/billing/conftest.py) with the answer holds of stripe_server.py."""

    def hold(self, path: str, *, method: str = "POST", times: int = 1) -> None:
        """Hold back the answers of the next `times` requests matching `path` (a regex)."""
        body: dict[str, Any] = {"method": method, "path": path, "times": times}
        self.session.post(self.url + "/_config/holds", json=body, timeout=10).raise_for_status()

    def holds(self) -> dict[str, int]:
        """{"held": answers held now, "seen": answers held since the last reset}."""
        response = self.session.get(self.url + "/_config/holds", timeout=10)
        response.raise_for_status()
        return dict(response.json())

    def release(self) -> None:
        """Send the held answers and disarm."""
        self.session.post(self.url + "/_config/holds/release", timeout=10).raise_for_status()

    def reset(self) -> None:
        """Forget every object, idempotency key, fault and hold."""
        super().reset()
        self.session.post(self.url + "/_config/holds/reset", timeout=10).raise_for_status()


def start_stripe_server() -> tuple[subprocess.Popen[str], str]:
    """The held-answer localstripe in its own process; (process, base URL)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.faults.stripe_server"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert process.stdout is not None
    port = process.stdout.readline().strip()
    if not port.isdigit():
        process.kill()
        raise RuntimeError(f"the fake Stripe did not start (exit {process.poll()})")
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: _answers(url), seconds=10, what="the fake Stripe")
    return process, url


def _answers(url: str) -> bool:
    try:
        return requests.get(url + "/_config/holds", timeout=2).ok
    except requests.ConnectionError:
        return False


# ---------------------------------------------------------------- the API in its own process


class ApiServer:
    """gunicorn serving the project on a free loopback port, with the given environment."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self._log_file = log.open("ab")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "config.wsgi:application",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                "1",
            ],
            cwd=REPO,
            env=env,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for(self._answers, seconds=60, what="gunicorn to answer")
        except BaseException:
            self.stop()
            raise

    def _answers(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"gunicorn exited:\n{self.log.read_text(errors='replace')}")
        try:
            # Any answer will do (a 401 here); /healthz would wait on the broker.
            requests.get(self.url + "/api/v1/usage/events/", timeout=5)
        except requests.ConnectionError:
            return False
        return True

    def stop(self) -> None:
        """SIGTERM and wait."""
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log_file.close()
