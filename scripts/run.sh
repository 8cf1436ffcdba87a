#!/usr/bin/env bash
# Start the whole service in the foreground: embedded PostgreSQL (unless DATABASE_URL is set),
# migrations, demo data, then web + Celery worker + Celery beat until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
export CARDHOUR_PORT="${CARDHOUR_PORT:-8000}"

embedded=0
if [ -z "${DATABASE_URL:-}" ]; then
  embedded=1
  echo "Starting the embedded PostgreSQL in ./var/pgdata ..."
  python -m config.embedded_db start >/dev/null
fi
stop_db() {
  if [ "$embedded" = 1 ]; then
    echo "Stopping the embedded PostgreSQL ..."
    python -m config.embedded_db stop
  fi
}
trap stop_db EXIT
trap 'exit 130' INT TERM

python manage.py migrate --noinput
python manage.py seed_demo
echo
echo "  web:      http://127.0.0.1:${CARDHOUR_PORT}/   (API docs /api/docs/, admin /admin/, /healthz)"
echo "  try:      curl -H 'Authorization: Api-Key <key>' http://127.0.0.1:${CARDHOUR_PORT}/api/v1/organizations/me/"
echo
honcho start -f Procfile
