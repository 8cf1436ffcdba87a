#!/usr/bin/env bash
# The streaming read replica: on first start, copy the primary with pg_basebackup -R (which
# writes primary_conninfo and standby.signal) through the slot the primary's init script made,
# then run the image's own entrypoint as a hot standby. Later starts resume streaming.
set -euo pipefail
: "${REPLICATION_PASSWORD:?set REPLICATION_PASSWORD}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  export PGPASSWORD="$REPLICATION_PASSWORD"
  until pg_isready -h "$PRIMARY_HOST" -p 5432 -q; do sleep 2; done
  until pg_basebackup -h "$PRIMARY_HOST" -p 5432 -U replicator -D "$PGDATA" \
      -R -X stream -S replica1 --checkpoint=fast; do
    echo "pg_basebackup failed; retrying in 5 s" >&2
    sleep 5
  done
  chmod 0700 "$PGDATA"
  unset PGPASSWORD
fi
exec docker-entrypoint.sh postgres -c hot_standby=on -c hot_standby_feedback=on \
  -c shared_buffers="${POSTGRES_SHARED_BUFFERS:-2GB}" \
  -c effective_cache_size="${POSTGRES_EFFECTIVE_CACHE_SIZE:-6GB}" \
  -c shared_preload_libraries=pg_prewarm
