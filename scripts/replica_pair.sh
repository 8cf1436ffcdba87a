#!/usr/bin/env bash
# A throwaway PostgreSQL primary and a real streaming hot standby of it, for CI's replica tests
# (tests/core/test_real_replica.py), with the machine's own PostgreSQL binaries:
#   scripts/replica_pair.sh start DIR PRIMARY_PORT REPLICA_PORT
#   scripts/replica_pair.sh stop DIR
# The machine's shared server (127.0.0.1:5432) is left alone: its pg_hba.conf allows no
# replication connections, and changing a server everyone uses is not a test's business.
# As root the servers run as the `postgres` user (PostgreSQL refuses to run as root).
set -euo pipefail

initdb_path=$(readlink -f "$(command -v initdb || ls /usr/lib/postgresql/*/bin/initdb | tail -1)")
bin=$(dirname "$initdb_path")
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

start() {
  local dir=$1 primary_port=$2 replica_port=$3
  mkdir -p "$dir"
  chmod 0755 "$dir"
  if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; fi
  as_pg "$bin/initdb" -D "$dir/primary" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
  # initdb's pg_hba.conf already lets local users replicate with trust.
  cat >>"$dir/primary/postgresql.conf" <<CONF
port = $primary_port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
wal_level = replica
max_wal_senders = 5
fsync = off
synchronous_commit = off
CONF
  as_pg "$bin/pg_ctl" -D "$dir/primary" -l "$dir/primary.log" -w start >/dev/null
  # -R: standby.signal + primary_conninfo; -C -S: a slot, so the primary keeps the WAL for it.
  as_pg "$bin/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U postgres -D "$dir/replica" \
    -R -X stream -C -S ci_replica --checkpoint=fast
  printf "port = %s\nhot_standby = on\n" "$replica_port" >>"$dir/replica/postgresql.auto.conf"
  as_pg "$bin/pg_ctl" -D "$dir/replica" -l "$dir/replica.log" -w start >/dev/null
  local state
  state=$(psql -h 127.0.0.1 -p "$replica_port" -U postgres -Atc "SELECT pg_is_in_recovery()")
  [ "$state" = t ] || { echo "the replica is not in recovery"; cat "$dir/replica.log"; exit 1; }
  local streaming
  streaming=$(psql -h 127.0.0.1 -p "$primary_port" -U postgres -Atc \
    "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")
  for _ in $(seq 1 30); do
    [ "$streaming" = 1 ] && break
    sleep 1
    streaming=$(psql -h 127.0.0.1 -p "$primary_port" -U postgres -Atc \
      "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")
  done
  [ "$streaming" = 1 ] || { echo "the replica does not stream"; cat "$dir/replica.log"; exit 1; }
  echo "primary 127.0.0.1:$primary_port streams to a hot standby on 127.0.0.1:$replica_port"
}

stop() {
  local dir=$1
  for node in replica primary; do
    if [ -f "$dir/$node/postmaster.pid" ]; then
      as_pg "$bin/pg_ctl" -D "$dir/$node" -m fast -w stop >/dev/null || true
    fi
  done
  rm -rf "$dir"
}

case "${1:-}" in
  start) start "$2" "$3" "$4" ;;
  stop) stop "$2" ;;
  *) echo "usage: $0 start DIR PRIMARY_PORT REPLICA_PORT | stop DIR" >&2; exit 2 ;;
esac
