#!/usr/bin/env bash
# Issue 34, case 7, end to end: a PostgreSQL primary streaming to an asynchronous standby
# refuses claims (`monoflake gen --backend postgres`) unless --pg-failover manual; the standby
# itself is refused either way. About 15 s once the CLI is built (it builds it first, with the
# postgres feature, into $CARGO_TARGET_DIR or target/).
#
#   bash scripts/pg-failover-check.sh
#
# Both servers run as an unprivileged user (`nobody` when run as root, else the caller) on
# 127.0.0.1 with free ports, in a temporary directory, and are stopped by their pids on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build -q -p monoflake-cli --features postgres
bin="${CARGO_TARGET_DIR:-$PWD/target}/debug/monoflake"
pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
as_pg=()
[ "$(id -u)" != 0 ] || as_pg=(setpriv --reuid=65534 --regid=65534 --clear-groups)

dir=$(mktemp -d /tmp/monoflake-pg-failover.XXXXXX)
chmod 755 "$dir"
pids=()
stop() {
    for pid in ${pids[@]+"${pids[@]}"}; do
        kill -INT "$pid" 2>/dev/null || true
    done
    for pid in ${pids[@]+"${pids[@]}"}; do
        while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    done
    rm -rf "$dir"
}
trap stop EXIT

# Below the ephemeral ports: see scripts/free_port.py.
free_port() { python3 scripts/free_port.py "$@"; }
wait_ready() { # port
    for _ in $(seq 150); do
        PGCONNECT_TIMEOUT=2 psql "postgres://monoflake:secret@127.0.0.1:$1/postgres" -X -q -c 'SELECT 1' \
            >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    echo "PostgreSQL on port $1 did not start"; cat "$dir"/*.log; exit 1
}

mkdir -m 700 "$dir/primary" "$dir/standby"
printf secret >"$dir/pw"
[ "$(id -u)" != 0 ] || chown 65534:65534 "$dir/primary" "$dir/standby" "$dir/pw"
"${as_pg[@]}" "$pg_bin/initdb" -D "$dir/primary" -U monoflake --auth-local=trust \
    --auth-host=scram-sha-256 --pwfile="$dir/pw" -E UTF8 --locale=C >"$dir/initdb.log" 2>&1
echo "host replication monoflake 127.0.0.1/32 scram-sha-256" >>"$dir/primary/pg_hba.conf"
p1=$(free_port)
"${as_pg[@]}" "$pg_bin/postgres" -D "$dir/primary" -p "$p1" -c listen_addresses=127.0.0.1 \
    -c unix_socket_directories= -c wal_level=replica -c max_wal_senders=5 >"$dir/primary.log" 2>&1 &
pids+=($!)
wait_ready "$p1"

# The standby: a base backup with -R (primary_conninfo and standby.signal written) into the
# empty directory made above.
PGPASSWORD=secret "${as_pg[@]}" "$pg_bin/pg_basebackup" -h 127.0.0.1 -p "$p1" -U monoflake \
    -D "$dir/standby" -R -X stream -c fast >"$dir/basebackup.log" 2>&1 ||
    { cat "$dir/basebackup.log"; exit 1; }
p2=$(free_port)
"${as_pg[@]}" "$pg_bin/postgres" -D "$dir/standby" -p "$p2" -c listen_addresses=127.0.0.1 \
    -c unix_socket_directories= -c cluster_name=replica1 >"$dir/standby.log" 2>&1 &
pids+=($!)
wait_ready "$p2"
primary="postgres://monoflake:secret@127.0.0.1:$p1/postgres"
for _ in $(seq 100); do
    [ "$(psql "$primary" -X -q -t -A -c 'SELECT count(*) FROM pg_stat_replication')" = 1 ] && break
    sleep 0.2
done
echo "primary on $p1 streams to: $(psql "$primary" -X -q -t -A -c \
    "SELECT application_name || ' ' || sync_state FROM pg_stat_replication")"

failed=0
gen() { "$bin" gen -n 3 --backend postgres --node auto "$@" 2>&1; }
expect() { # what, want (ok|refused), pattern, output, status
    local what=$1 want=$2 pattern=$3 out=$4 status=$5
    if { [ "$want" = ok ] && [ "$status" = 0 ]; } ||
        { [ "$want" = refused ] && [ "$status" != 0 ] && grep -q -- "$pattern" <<<"$out"; }; then
        echo "ok: $what"
        [ "$want" = ok ] || sed 's/^/    /' <<<"$out" | head -3
    else
        echo "FAILED: $what (exit $status):"; echo "$out"; failed=1
    fi
}
set +e
out=$(gen --pg-url "$primary"); st=$?
expect "an asynchronous standby: claims refused" refused "replica1 (async)" "$out" "$st"
out=$(gen --pg-url "$primary" --pg-failover manual); st=$?
expect "--pg-failover manual: claims made" ok "" "$out" "$st"
# Without pg_monitor a role sees the standby but not its state: still refused.
psql "$primary" -X -q -c "CREATE ROLE plain LOGIN PASSWORD 'secret'; GRANT CREATE ON SCHEMA public TO plain" >/dev/null
out=$(gen --pg-url "postgres://plain:secret@127.0.0.1:$p1/postgres" --pg-table plain_nodes); st=$?
expect "a role without pg_monitor: refused" refused "cannot see" "$out" "$st"
# The standby itself (read-only: libpq's read-write target refuses it before monoflake can).
out=$(gen --pg-url "postgres://monoflake:secret@127.0.0.1:$p2/postgres" --pg-failover manual); st=$?
expect "the standby: refused" refused "" "$out" "$st"
# The standby made synchronous: claims made.
psql "$primary" -X -q -c "ALTER SYSTEM SET synchronous_standby_names = 'replica1'" -c 'SELECT pg_reload_conf()' >/dev/null
for _ in $(seq 50); do
    [ "$(psql "$primary" -X -q -t -A -c 'SELECT sync_state FROM pg_stat_replication')" = sync ] && break
    sleep 0.2
done
out=$(gen --pg-url "$primary"); st=$?
expect "a synchronous standby: claims made" ok "" "$out" "$st"
set -e
[ "$failed" = 0 ] && echo "pg-failover-check: passed" || { echo "pg-failover-check: FAILED"; exit 1; }
