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
python -m pytest "$@"
status=$?
if [ "$embedded" = 1 ]; then
  python -m config.embedded_db stop
fi
# pytest exits 5 when it collected no test: that is a failure here, not a pass.
exit $status
