"""docker-compose.yml, the production stack, read the way Compose reads it: no docker here, so
the file is loaded as YAML, its ${…} references are interpolated like Compose does, and the
services, commands and environment are checked, then the settings are loaded with the app's
environment to show it configures what the file says (primary, replica, RabbitMQ, Redis).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.conf import settings

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
# What an operator puts in .env next to the file.
DOTENV = {
    "SECRET_KEY": "compose-test-secret-key-long-enough-for-the-deploy-check-0123456789",
    "ALLOWED_HOSTS": "cardhour.example",
    "METRICS_TOKEN": "metrics-token",
    "POSTGRES_PASSWORD": "pg-secret",
    "REPLICATION_PASSWORD": "repl-secret",
    "RABBITMQ_PASSWORD": "mq-secret",
}
# ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}, ${VAR?error}; defaults may nest.
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])((?:[^{}]|\{[^{}]*\})*))?\}")


def interpolate(text: str, environment: dict[str, str]) -> str:
    """Compose's variable substitution ($$ is a literal $); a bare `$(` or `$x` fails as in
    Compose, which only accepts $$, ${…} and $NAME."""

    def substitute(match: re.Match[str]) -> str:
        name, operator, argument = match.group(1), match.group(2), match.group(3) or ""
        value = environment.get(name)
        if operator in (":?", "?"):
            if value is None or (operator == ":?" and value == ""):
                raise ValueError(f"{name} is required: {argument}")
            return value
        if operator == ":-" and not value:
            return interpolate(argument, environment)
        if operator == "-" and value is None:
            return interpolate(argument, environment)
        return value or ""

    escaped = text.replace("$$", "\0")
    for stray in re.finditer(r"\$(?![{A-Za-z_])", escaped):
        raise ValueError(
            f"Compose rejects a bare $ at {escaped[stray.start() : stray.end() + 10]!r}"
        )
    previous = None
    while previous != escaped:
        previous, escaped = escaped, _REFERENCE.sub(substitute, escaped)
    return escaped.replace("\0", "$")


def stack(environment: dict[str, str] | None = None) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(
        interpolate(COMPOSE.read_text(), DOTENV if environment is None else environment)
    )
    return loaded


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    return stack()["services"]


def command_of(service: dict[str, Any]) -> str:
    command = service.get("command", [])
    return " ".join(command) if isinstance(command, list) else str(command)


def test_the_file_loads_and_refuses_to_start_without_its_secrets() -> None:
    for name in DOTENV:
        with pytest.raises(ValueError, match=name):
            stack({key: value for key, value in DOTENV.items() if key != name})


def test_the_web_tier_runs_gunicorn_unpublished_behind_the_load_balancer(
    services: dict[str, Any],
) -> None:
    web = services["web"]
    assert command_of(web).startswith("gunicorn config.wsgi:application --bind 0.0.0.0:8000")
    # No host port: any number of web containers can run (`--scale web=N`).
    assert "ports" not in web and web["expose"] == ["8000"]
    assert int(web["deploy"]["replicas"]) >= 2
    lb = services["lb"]
    assert lb["ports"] == ["8000:8000"]
    mounted = {volume.split(":")[1]: volume.split(":")[0] for volume in lb["volumes"]}
    conf = (REPO / mounted["/etc/nginx/conf.d/default.conf"]).read_text()
    assert "set $web http://web:8000;" in conf and "proxy_pass $web;" in conf
    # The proxy adds no X-Forwarded-For entry of its own: TRUSTED_PROXY_COUNT stays 1.
    assert "proxy_set_header X-Forwarded-For $http_x_forwarded_for;" in conf
    assert str(web["environment"]["TRUSTED_PROXY_COUNT"]) == "1"


def test_workers_scale_on_rabbitmq_and_beat_runs_exactly_once(services: dict[str, Any]) -> None:
    worker = services["worker"]
    assert command_of(worker) == "celery -A config worker -Q default,ingest,billing -l INFO"
    assert int(worker["deploy"]["replicas"]) >= 2
    assert "container_name" not in worker and "hostname" not in worker
    schedulers = [
        name
        for name, service in services.items()
        if re.search(r"\bbeat\b|(^|\s)-B(\s|$)|--beat", command_of(service))
    ]
    assert schedulers == ["beat"]
    beat = services["beat"]
    assert beat["deploy"]["replicas"] == 1
    assert beat["deploy"]["update_config"]["order"] == "stop-first"
    environment = worker["environment"]
    assert environment["CELERY_BROKER_URL"] == "amqp://cardhour:mq-secret@rabbitmq:5672/cardhour"
    assert environment["CELERY_RESULT_BACKEND"] == "redis://redis:6379/2"
    rabbitmq = services["rabbitmq"]
    assert rabbitmq["environment"]["RABBITMQ_DEFAULT_VHOST"] == "cardhour"
    # Longer than the longest task (acks late): BILLING_RUN_TIMEOUT_MINUTES is 30.
    timeout_ms = int(rabbitmq["environment"]["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"].split()[-1])
    assert timeout_ms > settings.BILLING_RUN_TIMEOUT_MINUTES * 60_000
    for name in ("web", "worker", "beat"):
        assert services[name]["depends_on"]["rabbitmq"]["condition"] == "service_healthy"
        assert services[name]["depends_on"]["migrate"] == {
            "condition": "service_completed_successfully"
        }


def test_the_primary_streams_to_a_hot_standby_through_a_slot(services: dict[str, Any]) -> None:
    primary = services["postgres"]
    assert "wal_level=replica" in primary["command"]
    init = {volume.split(":")[1]: volume.split(":")[0] for volume in primary["volumes"]}
    script = (REPO / init["/docker-entrypoint-initdb.d/10-replication.sh"]).read_text()
    assert "CREATE ROLE replicator WITH REPLICATION LOGIN" in script
    assert "pg_create_physical_replication_slot('replica1')" in script
    assert "host replication replicator all scram-sha-256" in script
    replica = services["postgres-replica"]
    assert replica["image"] == primary["image"]
    mounts = {volume.split(":")[1]: volume.split(":")[0] for volume in replica["volumes"]}
    [entrypoint] = replica["entrypoint"]
    standby = (REPO / mounts[entrypoint]).read_text()
    assert re.search(r'pg_basebackup -h "\$PRIMARY_HOST".*\n.*-R -X stream -S replica1', standby)
    assert "exec docker-entrypoint.sh postgres -c hot_standby=on" in standby
    assert replica["environment"]["PRIMARY_HOST"] == "postgres"
    assert mounts["/var/lib/postgresql/data"] != init["/var/lib/postgresql/data"]
    assert "pg_is_in_recovery()" in replica["healthcheck"]["test"][1]
    for path in ("deploy/postgres/primary-init.sh", "deploy/postgres/replica-entrypoint.sh"):
        assert os.access(REPO / path, os.X_OK), path


def test_both_servers_cache_the_capacity_search_indexes_and_the_operator_can_size_them(
    services: dict[str, Any],
) -> None:
    # The search's indexes (243 MB at 10,000 nodes) fit in the defaults, which leave a 16 GB
    # host running both servers three quarters of its memory; the default 128 MB would not.
    primary, replica = services["postgres"], services["postgres-replica"]
    assert "shared_buffers=2GB" in primary["command"]
    assert "effective_cache_size=6GB" in primary["command"]
    # After a restart, autoprewarm reads back what was cached, instead of cold searches.
    assert "shared_preload_libraries=pg_prewarm" in primary["command"]
    assert primary["shm_size"] == replica["shm_size"] == "1g"
    assert primary["stop_grace_period"] == replica["stop_grace_period"] == "2m"
    assert replica["environment"]["POSTGRES_SHARED_BUFFERS"] == "2GB"
    assert replica["environment"]["POSTGRES_EFFECTIVE_CACHE_SIZE"] == "6GB"
    mounts = {volume.split(":")[1]: volume.split(":")[0] for volume in replica["volumes"]}
    standby = (REPO / mounts[replica["entrypoint"][0]]).read_text()
    assert '-c shared_buffers="${POSTGRES_SHARED_BUFFERS:-2GB}"' in standby
    assert '-c effective_cache_size="${POSTGRES_EFFECTIVE_CACHE_SIZE:-6GB}"' in standby
    assert "-c shared_preload_libraries=pg_prewarm" in standby

    # Sized for hosts of their own (100,000 nodes: 2 GB of indexes), the standby like the primary
    # unless it is given its own figures.
    sized = stack(
        {
            **DOTENV,
            "POSTGRES_SHARED_BUFFERS": "8GB",
            "POSTGRES_EFFECTIVE_CACHE_SIZE": "24GB",
            "POSTGRES_SHM_SIZE": "2g",
        }
    )["services"]
    assert "shared_buffers=8GB" in sized["postgres"]["command"]
    assert "effective_cache_size=24GB" in sized["postgres"]["command"]
    assert sized["postgres-replica"]["environment"]["POSTGRES_SHARED_BUFFERS"] == "8GB"
    assert sized["postgres-replica"]["environment"]["POSTGRES_EFFECTIVE_CACHE_SIZE"] == "24GB"
    assert sized["postgres-replica"]["shm_size"] == "2g"
    apart = stack(
        {**DOTENV, "POSTGRES_SHARED_BUFFERS": "8GB", "POSTGRES_REPLICA_SHARED_BUFFERS": "4GB"}
    )["services"]
    assert "shared_buffers=8GB" in apart["postgres"]["command"]
    assert apart["postgres-replica"]["environment"]["POSTGRES_SHARED_BUFFERS"] == "4GB"


def app_environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as the container sees it (an empty YAML value is "")."""
    return {
        key: "" if value is None else str(value) for key, value in service["environment"].items()
    }


def _settings_under(environment: dict[str, str]) -> dict[str, Any]:
    """The settings the app container would start with (production, nothing connected)."""
    probe = (
        "import json, django; django.setup(); from django.conf import settings as s;"
        "print(json.dumps({'default': s.DATABASES['default'], 'replica':"
        " s.DATABASES.get('replica'), 'read': s.DATABASE_READ_REPLICA, 'broker':"
        " s.CELERY_BROKER_URL, 'results': s.CELERY_RESULT_BACKEND, 'cache':"
        " s.CACHES['default']['BACKEND']}, default=str))"
    )
    answer = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        env={"PATH": os.environ["PATH"], "DJANGO_SETTINGS_MODULE": "config.settings"} | environment,
        capture_output=True,
        text=True,
        check=True,
    )
    loaded: dict[str, Any] = json.loads(answer.stdout.strip().splitlines()[-1])
    return loaded


def test_the_app_environment_configures_primary_replica_broker_and_results(
    services: dict[str, Any],
) -> None:
    loaded = _settings_under(app_environment(services["web"]))
    assert (loaded["default"]["HOST"], loaded["default"]["NAME"]) == ("postgres", "cardhour")
    assert (loaded["replica"]["HOST"], loaded["replica"]["NAME"]) == (
        "postgres-replica",
        "cardhour",
    )
    assert loaded["replica"]["PASSWORD"] == "pg-secret"
    assert loaded["read"] == "replica"
    assert loaded["broker"].startswith("amqp://") and loaded["results"].startswith("redis://")
    assert loaded["cache"] == "django.core.cache.backends.redis.RedisCache"


def test_an_empty_replica_url_sends_every_query_to_the_primary() -> None:
    web = stack(DOTENV | {"DATABASE_REPLICA_URL": ""})["services"]["web"]
    loaded = _settings_under(app_environment(web))
    assert loaded["replica"] is None and loaded["read"] is None


def test_the_image_holds_every_app_and_the_templates() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    copied = set(re.findall(r"^COPY (\S+) \./\1$", dockerfile, flags=re.MULTILINE))
    local_apps = {app for app in settings.INSTALLED_APPS if (REPO / app).is_dir()}
    assert local_apps | {"config", "templates", "cardhour_cli"} <= copied
