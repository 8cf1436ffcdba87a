#!/usr/bin/env bash
# Run the whole suite: DATABASE_URL / CELERY_BROKER_URL when set, the embedded defaults otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
export DJANGO_ENV=test

embedded=0
if [ -z "${DATABASE_URL:-}" ]; then
  embedded=1
  python -m config.embedded_db start >/dev/null || exit 1
fi
# Two pytest-xdist workers, fed tests in pytest-django's order (database tests, then transactional
# ones, whose flush empties the tables, then the rest); tests/xdist_isolation.py gives each
# its own broker database (or folder) and media folder, pytest-django its own test database.
# Serially with PYTEST_WORKERS=0, and on any broker but Redis (RabbitMQ's queues are not told
# apart).
workers=${PYTEST_WORKERS:-2}
case "${CELERY_BROKER_URL:-}" in "" | filesystem://* | redis://* | rediss://*) ;; *) workers=0 ;; esac
parallel=()
if [ "$workers" != 0 ]; then
  parallel=(-n "$workers" --dist load)
fi
python -m pytest -p tests.xdist_isolation ${parallel[@]+"${parallel[@]}"} "$@"
status=$?
if [ "$embedded" = 1 ]; then
  python -m config.embedded_db stop
fi
# pytest exits 5 when it collected no test: that is a failure here, not a pass.
exit $status
