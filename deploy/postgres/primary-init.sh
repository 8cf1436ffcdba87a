#!/usr/bin/env bash
# Runs once, when the primary's data directory is first created (docker-entrypoint-initdb.d):
# a role that may stream the WAL, a physical slot that keeps the WAL until the replica has it,
# and a pg_hba line letting that role replicate over the compose network with its password.
set -euo pipefail
: "${REPLICATION_PASSWORD:?set REPLICATION_PASSWORD}"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v password="$REPLICATION_PASSWORD" <<'SQL'
CREATE ROLE replicator WITH REPLICATION LOGIN PASSWORD :'password';
SELECT pg_create_physical_replication_slot('replica1');
SQL
echo "host replication replicator all scram-sha-256" >> "$PGDATA/pg_hba.conf"
