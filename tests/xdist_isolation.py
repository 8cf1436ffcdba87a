"""Each pytest-xdist worker its own broker, Celery folder and media folder (loaded with `-p`).

scripts/test.sh runs the suite on two xdist workers (`--dist load`: tests in pytest-django's
order, so that each worker runs its transactional tests, whose flush empties every table, after
the tests that expect the migrations' data). pytest-django gives each worker its own test
database (`test_<name>_gw0`, …); the rest is shared unless told apart, and that must happen
before Django reads its settings, earlier than any conftest: hence a plugin named on the command
line.

- A Redis broker (and the result backend that follows it) moves to the next database numbers:
  gw0 keeps the given one, gw1 the one after it, so that one worker's Celery worker never takes
  the other's tasks.
- The filesystem broker of the embedded defaults moves to a folder per worker.
- Stored documents (MEDIA_ROOT) go to a folder per worker: the workers' databases number their
  invoices alike, and their PDFs must not overwrite each other.

Outside a worker (a serial run, or xdist's controller) it changes nothing. Any other broker
(RabbitMQ) is not told apart: scripts/test.sh runs serially on one named in the environment, and
a worker finding one (in .env, say) stops with an error saying to run serially.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import environ

REPO = Path(__file__).resolve().parent.parent
# Redis's default number of databases; a base near the top wraps round to 0.
REDIS_DATABASES = 16


def _isolate(worker: str) -> None:
    number = int(worker.removeprefix("gw"))
    # As config.settings reads them: the environment first, then .env.
    environ.Env.read_env(REPO / ".env", overwrite=False)
    broker = os.environ.get("CELERY_BROKER_URL", "")
    parts = urlsplit(broker)
    if parts.scheme in ("redis", "rediss"):
        database = int(parts.path.strip("/") or 0)
        moved = f"/{(database + number) % REDIS_DATABASES}"
        os.environ["CELERY_BROKER_URL"] = urlunsplit(parts._replace(path=moved))
    elif broker in ("", "filesystem://"):
        os.environ["CELERY_FILESYSTEM_DIR"] = str(REPO / "var" / f"celery-test-{worker}")
    else:
        # Two workers' Celery workers would take each other's tasks: refuse, loudly.
        raise RuntimeError(
            f"pytest-xdist worker {worker}: the broker {parts.scheme}:// cannot be split between "
            "workers; run the suite serially (PYTEST_WORKERS=0 make test)."
        )
    media = Path(os.environ.get("MEDIA_ROOT", str(REPO / "var" / "media")))
    os.environ["MEDIA_ROOT"] = str(media.with_name(f"{media.name}-{worker}"))


_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _worker:
    _isolate(_worker)
