#!/bin/bash
# One database host of the cluster: an etcd member and Patroni (which runs PostgreSQL 15), in one
# container. Configured from the environment:
#   NODE_NAME  this host's name, resolvable by the others (db1)
#   PEERS      every database host's name, comma-separated (db1,db2,db3)
#   SUBNET     the network clients and peers come from, trusted by pg_hba (10.232.0.0/24)
#   PATRONI_TTL, PATRONI_LOOP_WAIT, PATRONI_RETRY_TIMEOUT  failover timing (10, 1, 4)
# Data (etcd's and PostgreSQL's) under /var/lib/mosaic, a volume. PostgreSQL and Patroni run as
# the `postgres` user; etcd too. Both are stopped on SIGTERM; the container ends when either ends.
set -euo pipefail
: "${NODE_NAME:?set NODE_NAME}" "${PEERS:?set PEERS}" "${SUBNET:?set SUBNET}"
TTL=${PATRONI_TTL:-10}
LOOP_WAIT=${PATRONI_LOOP_WAIT:-1}
RETRY_TIMEOUT=${PATRONI_RETRY_TIMEOUT:-4}
DATA=/var/lib/mosaic
BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)

mkdir -p "$DATA/etcd" "$DATA/pg" /run/postgresql
chown -R postgres: "$DATA" /run/postgresql
chmod 700 "$DATA/pg" "$DATA/etcd"
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"; }

initial_cluster=
etcd_hosts=
for peer in ${PEERS//,/ }; do
  initial_cluster+="${initial_cluster:+,}$peer=http://$peer:2380"
  etcd_hosts+="${etcd_hosts:+, }\"$peer:2379\""
done

# JSON is YAML: Patroni reads it as is.
cat >"$DATA/patroni.yml" <<EOF
{
 "scope": "mosaic", "namespace": "/mosaic/", "name": "$NODE_NAME",
 "restapi": {"listen": "0.0.0.0:8008", "connect_address": "$NODE_NAME:8008"},
 "etcd3": {"hosts": [$etcd_hosts]},
 "bootstrap": {
  "dcs": {
   "ttl": $TTL, "loop_wait": $LOOP_WAIT, "retry_timeout": $RETRY_TIMEOUT, "primary_start_timeout": 0,
   "synchronous_mode": true, "synchronous_mode_strict": true, "synchronous_node_count": 1,
   "postgresql": {"use_pg_rewind": true, "use_slots": false, "parameters": {
    "max_connections": 200, "wal_level": "replica", "hot_standby": "on", "wal_log_hints": "on",
    "max_wal_senders": 10, "max_replication_slots": 10, "wal_keep_size": "256MB",
    "synchronous_commit": "on", "fsync": "on", "wal_retrieve_retry_interval": "250ms",
    "tcp_keepalives_idle": 3, "tcp_keepalives_interval": 1, "tcp_keepalives_count": 3,
    "tcp_user_timeout": 8000}}
  },
  "initdb": [{"encoding": "UTF8"}, {"locale": "C"}, "data-checksums"],
  "post_bootstrap": "/usr/local/bin/mosaic-post-bootstrap"
 },
 "postgresql": {
  "listen": "0.0.0.0:5432", "connect_address": "$NODE_NAME:5432",
  "data_dir": "$DATA/pg/data", "bin_dir": "$BIN", "pgpass": "$DATA/pg/pgpass",
  "authentication": {"superuser": {"username": "mosaic", "password": "mosaic"},
                     "replication": {"username": "replicator", "password": "replicator"},
                     "rewind": {"username": "mosaic", "password": "mosaic"}},
  "pg_hba": ["local all all trust", "host all all 127.0.0.1/32 trust",
             "host all all $SUBNET trust", "host replication all $SUBNET trust"],
  "basebackup": [{"checkpoint": "fast"}],
  "remove_data_directory_on_rewind_failure": true,
  "remove_data_directory_on_diverged_timelines": true
 },
 "watchdog": {"mode": "off"}
}
EOF

as_postgres etcd --name "$NODE_NAME" --data-dir "$DATA/etcd" \
  --listen-client-urls http://0.0.0.0:2379 --advertise-client-urls "http://$NODE_NAME:2379" \
  --listen-peer-urls http://0.0.0.0:2380 --initial-advertise-peer-urls "http://$NODE_NAME:2380" \
  --initial-cluster "$initial_cluster" --initial-cluster-token mosaic-cluster \
  --initial-cluster-state new --logger zap --log-outputs stderr &
etcd_pid=$!
as_postgres patroni "$DATA/patroni.yml" &
patroni_pid=$!

# Patroni stops PostgreSQL on SIGTERM (a fast shutdown); etcd after it.
trap 'kill -TERM "$patroni_pid" 2>/dev/null; wait "$patroni_pid"; kill -TERM "$etcd_pid" 2>/dev/null; wait "$etcd_pid"; exit 0' TERM INT
wait -n "$etcd_pid" "$patroni_pid" || true
echo "etcd or Patroni ended; stopping the container" >&2
kill -TERM "$patroni_pid" "$etcd_pid" 2>/dev/null || true
wait || true
exit 1
