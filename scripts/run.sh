#!/usr/bin/env bash
# Start the whole service in the foreground: embedded PostgreSQL (unless DATABASE_URL is set),
# migrations, demo data, then the Procfile's web + Celery worker + Celery beat until Ctrl-C.
#
# Ctrl-C (or SIGTERM) stops them in order and quietly: beat first (no new scheduled work), then
# web, then the worker with a warm shutdown (running tasks finish), then PostgreSQL; the script
# exits 0. The processes run in sessions of their own, so the terminal's Ctrl-C reaches only
# this script, which signals each main process itself — never a whole process group, so
# Celery's pool children are stopped by their own worker, not killed beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
export CARDHOUR_PORT="${CARDHOUR_PORT:-8000}"

# Started in the background by another script (CI runs `make run &`), this shell inherits SIGINT
# ignored, and bash can neither trap nor reset a signal ignored on entry: start over once with
# SIGINT at its default, so Ctrl-C and `kill -INT` reach the trap below.
if [ -z "${CARDHOUR_RUN_SIGINT_RESET:-}" ]; then
  export CARDHOUR_RUN_SIGINT_RESET=1
  exec python -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])' bash "$PWD/scripts/run.sh" "$@"
fi

names=()
pids=()
interrupted=0
stopped=0

embedded=0
stop_db() {
  if [ "$embedded" = 1 ]; then
    echo "Stopping the embedded PostgreSQL ..."
    python -m config.embedded_db stop
  fi
}

# stop_process NAME PID SECONDS: SIGTERM, then wait; a worker that has not finished its warm
# shutdown by then gets SIGQUIT (Celery's cold shutdown), still no SIGKILL.
stop_process() {
  local name=$1 pid=$2 seconds=$3
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 $((seconds * 5))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "$name did not stop within ${seconds}s; asking it to stop now ..."
    kill -QUIT "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

stop_all() {
  [ "$stopped" = 1 ] && return 0
  stopped=1
  [ "${#pids[@]}" -gt 0 ] || return 0
  echo "Stopping beat, web and the worker ..."
  local index
  for name in beat web worker; do
    for index in "${!names[@]}"; do
      if [ "${names[$index]}" = "$name" ]; then
        stop_process "$name" "${pids[$index]}" "$([ "$name" = worker ] && echo 60 || echo 15)"
      fi
    done
  done
}

on_exit() {
  stop_all
  stop_db
}
trap on_exit EXIT
# Until the processes run, Ctrl-C ends the set-up (migrate, seed_demo) as usual; afterwards it
# only sets a flag that the wait loop below reads.
trap 'exit 130' INT TERM

if [ -z "${DATABASE_URL:-}" ]; then
  embedded=1
  echo "Starting the embedded PostgreSQL in ./var/pgdata ..."
  python -m config.embedded_db start >/dev/null
fi

python manage.py migrate --noinput
python manage.py seed_demo
echo
echo "  web:      http://127.0.0.1:${CARDHOUR_PORT}/   (API docs /api/docs/, admin /admin/, /healthz)"
echo "  try:      curl -H 'Authorization: Api-Key <key>' http://127.0.0.1:${CARDHOUR_PORT}/api/v1/organizations/me/"
echo "  CLI:      export CARDHOUR_URL=http://127.0.0.1:${CARDHOUR_PORT} CARDHOUR_API_KEY=<key>; .venv/bin/cardhour --help"
echo

trap 'interrupted=1' INT TERM

# Each Procfile line in a session of its own, its output prefixed with its name.
while IFS= read -r line; do
  case "$line" in '' | '#'*) continue ;; esac
  name=${line%%:*}
  command=${line#*:}
  prefix=$(printf '%-7s| ' "$name")
  setsid bash -c "exec $command" > >(setsid sed -u "s/^/$prefix/") 2>&1 &
  names+=("$name")
  pids+=("$!")
done < Procfile

# Until Ctrl-C / SIGTERM, or until one of the processes ends on its own.
ended=""
while [ "$interrupted" = 0 ] && [ -z "$ended" ]; do
  sleep 1 &
  wait $! 2>/dev/null || true
  for index in "${!names[@]}"; do
    kill -0 "${pids[$index]}" 2>/dev/null || ended=${names[$index]}
  done
done

if [ -n "$ended" ] && [ "$interrupted" = 0 ]; then
  echo "$ended stopped on its own; stopping the rest."
  stop_all
  exit 1
fi
stop_all
echo "Stopped."
exit 0
