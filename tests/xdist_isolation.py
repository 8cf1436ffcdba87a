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

Outside a worker (a serial run, or xdist's controller) it changes nothing. scripts/test.sh runs
serially on any other broker (RabbitMQ): its queues are not told apart here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REDIS_DATABASES = 16


def _isolate(worker: str) -> None:
    number = int(worker.removeprefix("gw"))
    broker = os.environ.get("CELERY_BROKER_URL", "")
    redis = re.fullmatch(r"(rediss?://[^/]+)(?:/(\d+))?", broker)
    if redis:
        database = (int(redis.group(2) or 0) + number) % REDIS_DATABASES
        os.environ["CELERY_BROKER_URL"] = f"{redis.group(1)}/{database}"
    elif not broker:
        os.environ["CELERY_FILESYSTEM_DIR"] = str(REPO / "var" / f"celery-test-{worker}")
    media = Path(os.environ.get("MEDIA_ROOT", str(REPO / "var" / "media")))
    os.environ["MEDIA_ROOT"] = str(media.with_name(f"{media.name}-{worker}"))


_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _worker:
    _isolate(_worker)
