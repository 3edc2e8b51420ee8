#!/usr/bin/env bash
# The PostgreSQL extension's end-to-end test (issues 38 and 56):
#   bash scripts/pg-extension-test.sh [--no-install] [--bench SECONDS [--rounds N]]
#
# Installs the extension's test build (`cargo pgrx install --release --features test-clock`
# against $PG_CONFIG, default /usr/bin/pg_config: run as root, it writes into PostgreSQL's lib
# and share directories; the feature adds monoflake.test_clock_offset_ms, the clock check 5
# moves), builds the CLI, then starts a throwaway cluster as the `postgres` user on
# 127.0.0.1:25437, below the ephemeral ports (data directory under /tmp, stopped by its pid,
# removed at the end) and
# checks:
#   1. CONNS connections (8) × PER_CONN (100,000) `next_id()` through a BIGINT PRIMARY KEY
#      DEFAULT: no conflict, increasing per connection;
#   2. `monoflake.decode` agrees with `monoflake decode --json` on a sample of them;
#   3. a restart issues above every ID before; a restart under `faketime` one hour back
#      refuses (55000, the reservation far ahead of the clock) until
#      monoflake.trust_reservation is turned on (reload), then issues above every ID before;
#      a restart 20 s back refuses until the clock is within monoflake.tolerance_ms, then
#      issues above every ID before; a start one hour back leaves the reservation's tick on
#      disk where it was;
#   3b. reservation writes that fail (a directory in the temporary file's place): a start
#      refuses every call (55000), a first call whose identity record fails refuses (58030),
#      a call past the reservation whose extension fails refuses (58030, within 20 s); once
#      the writes work, IDs above every one before, and after a restart;
#   4. the SQL errors: next_ids out of range (22023), also at a layout's own bound (sonyflake:
#      2,816, which next_ids issues); not preloaded (55000); neither
#      monoflake.node nor monoflake.claim_url: refused (55000, "no claim database", the
#      reason and the fix); a claim database that is this server: refused (55000, its system
#      identifier); no claim database reachable: refused (55000, "no node claimed yet");
#   5. pg_terminate_backend during calls leaves the state consistent (no duplicate after);
#      the clock stepped back an hour (monoflake.test_clock_offset_ms) and a backend killed
#      (-9): the running server issues above every ID before, the crash-restarted one refuses
#      (55000, the reservation ahead of the clock), and issues above every ID once the clock
#      is back;
#   6. the node claimed, not configured: two more servers (two data directories, two ports)
#      without monoflake.node claim from one claim database (a database of this server):
#      distinct nodes, their claim rows in it, CONNS × CLAIM_PER_CONN (50,000) IDs from
#      both into one BIGINT PRIMARY KEY with no conflict; a claim taken over in the claim
#      database: the server refuses ("lease lost"), writes back, claims another node; the
#      claim worker killed (-9) during calls: the server restarts, claims again, no
#      conflict after; server a's wall clock stepped 2 s, a minute and an hour ahead
#      (monoflake.test_clock_offset_ms) and back under load: its lease kept, no refusal, no
#      conflict, no ID more than 350 ms ahead (issue 60); a server stopped: its row released
#      with a reservation at or above its last ID's time;
#   7. copies (issue 56), each counting the IDs issued by both servers over COPY_N (100,000)
#      IDs a side, issued at once, or showing the refusal: with the node claimed (server a,
#      claim database on the first server): pg_basebackup -> a copy started on its own (a
#      node of its own, 0); the original crash-restarted (kill -9 of a backend) after it (0);
#      pg_basebackup -R -> a hot standby (refused: in recovery) -> promoted while the
#      original runs (a node of its own, 0); the original crash-restarted again with its
#      clock an hour back (0). With a configured node (the first server, node 7): a hot
#      standby refused (in recovery), then promoted: refused (another timeline); a copy
#      started on its own: refused (restored from a base backup), then given node 8: 0.
# With --bench S, then pgbench for S seconds at 1 and 8 clients, N rounds (--rounds, 1),
# on the release build (reinstalled without test-clock, the server restarted): next_id()
# against nextval() of a plain sequence, gen_random_uuid() and a PL/pgSQL snowflake
# (Instagram's next_id(): a sequence and clock_timestamp()), and INSERT … DEFAULT rows/s,
# nextval measured again last (the ratios' base: the mean of its two windows); a Markdown
# table per round on stdout. The last line says what happened:
#   pg-extension: N passed, M failed
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
PG_CONFIG=${PG_CONFIG:-/usr/bin/pg_config}
BIN=$("$PG_CONFIG" --bindir)
# Below the kernel's ephemeral ports (32768–60999 by default): a client connection's local
# port there, anyone's, made a server's bind fail with "Address already in use".
PORT=${PORT:-25437}
CONNS=${CONNS:-8}
PER_CONN=${PER_CONN:-100000}
CLAIM_PER_CONN=${CLAIM_PER_CONN:-50000}
COPY_N=${COPY_N:-100000}
NODE=7
install=1
bench=0
rounds=1
while [ $# -gt 0 ]; do
    case "$1" in
        --no-install) install=0; shift ;;
        --bench) bench=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        *) echo "usage: bash scripts/pg-extension-test.sh [--no-install] [--bench SECONDS [--rounds N]]" >&2; exit 2 ;;
    esac
done

target=${CARGO_TARGET_DIR:-$PWD/target}
if [ "$install" = 1 ]; then
    (cd pg && cargo pgrx install --release --features test-clock --pg-config "$PG_CONFIG")
    cargo build -p monoflake-cli
fi
MONOFLAKE=${MONOFLAKE:-$target/debug/monoflake}

dir=$(mktemp -d /tmp/monoflake-pg.XXXXXX)
chown postgres: "$dir"
data=$dir/data
pid=""
pg_opts=""  # more server options for the next start
as_pg() { runuser -u postgres -- "$@"; }
stop() {
    [ -n "$pid" ] || return 0
    kill -INT "$pid" 2>/dev/null || true
    for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    pid=""
}
declare -A spid=() # the servers of check 6, by name
cleanup() {
    stop
    for name in "${!spid[@]}"; do srv_stop "$name"; done
    rm -rf "$dir"
}
trap cleanup EXIT
# started DATA LOG PORT: fails the run loudly, with the server's log, when the server of DATA
# is not running (it did not start: its log says why).
started() {
    [ -f "$1/postmaster.pid" ] && as_pg "$BIN/pg_isready" -q -h 127.0.0.1 -p "$3" && return 0
    echo "FAILED: the server of $1 did not start on port $3; its log ends:"
    tail -n 20 "$2" | sed 's/^/    /'
    ss -tanp 2>/dev/null | grep ":$3 " | sed 's/^/    port: /' || true
    exit 1
}
# start [prefix command...]: starts the server (as postgres), waits until it answers (up to
# 120 s: a start fsyncs, and behind a disk busy with builds an fsync can take tens of seconds).
# (pg_ctl -W, then pg_isready: pg_ctl's own wait is fooled by a faked clock.)
start() {
    as_pg "$@" "$BIN/pg_ctl" -D "$data" -l "$dir/log" -o "$pg_opts" -W start >/dev/null
    for _ in $(seq 1 1200); do
        as_pg "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" && break
        sleep 0.1
    done
    started "$data" "$dir/log" "$PORT"
    pid=$(head -1 "$data/postmaster.pid")
}
sql() { as_pg "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -qAtX "$@"; }
# sqlstate SQL: the SQLSTATE the statement fails with ("" when it does not fail).
sqlstate() {
    as_pg "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -qAtX \
        -c '\set VERBOSITY verbose' -c "$1" 2>&1 | sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p' | head -1 || true
}
# sqlerror SQL: the error line the statement fails with ("" when it does not fail).
sqlerror() {
    as_pg "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -qAtX -c "$1" 2>&1 | grep '^ERROR:' | head -1 || true
}
# refusal PORT SQL: how the statement fails on the server at PORT, verbose: its
# "ERROR:  <SQLSTATE>: …", DETAIL and HINT lines ("" when it does not fail).
refusal() {
    as_pg "$BIN/psql" -h 127.0.0.1 -p "$1" -U postgres -d postgres -qAtX \
        -c '\set VERBOSITY verbose' -c "$2" 2>&1 >/dev/null | grep -E '^(ERROR|DETAIL|HINT):' || true
}
# refusal_until PORT SQL PATTERN: refusal, polled (up to 30 s) until it matches the glob
# PATTERN (its lines joined by newlines); the last refusal.
refusal_until() {
    local r=""
    for _ in $(seq 1 300); do
        r=$(refusal "$1" "$2")
        # shellcheck disable=SC2053
        [[ "$r" == $3 ]] && break
        sleep 0.1
    done
    echo "$r"
}
# crash PORT LOG: kills (-9) one backend of the server at PORT and waits until it has
# restarted (its log, LOG, says it is ready again): every process ends, shared memory is
# set up again.
crash() {
    local ready victim=""
    ready=$(grep -c 'database system is ready to accept connections' "$2" || true)
    as_pg "$BIN/psql" -h 127.0.0.1 -p "$1" -U postgres -d postgres -qAtX -c 'SELECT pg_sleep(600)' >/dev/null 2>&1 &
    for _ in $(seq 1 100); do
        victim=$(as_pg "$BIN/psql" -h 127.0.0.1 -p "$1" -U postgres -d postgres -qAtX \
            -c "SELECT pid FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(600)'")
        [ -z "$victim" ] || break
        sleep 0.1
    done
    kill -9 "$victim"
    for _ in $(seq 1 300); do
        [ "$(grep -c 'database system is ready to accept connections' "$2" || true)" -gt "$ready" ] && break
        sleep 0.1
    done
    for _ in $(seq 1 100); do
        as_pg "$BIN/pg_isready" -q -h 127.0.0.1 -p "$1" && break
        sleep 0.1
    done
}
# conf LINE: appends a setting to postgresql.conf (the last one wins) and reloads.
# (Waits until a new session shows the value — the postmaster has reloaded, which a loaded
# machine can take more than a second to do — and a second more for running backends.)
conf() {
    echo "$1" >>"$data/postgresql.conf"
    sql -c 'SELECT pg_reload_conf()' >/dev/null
    reloaded "$PORT" "$1"
    sleep 1
}
# reloaded PORT "NAME = VALUE": waits (up to 30 s) until a new session at PORT shows VALUE.
reloaded() {
    local name=${2%% = *} value=${2#* = }
    for _ in $(seq 1 300); do
        [ "$(as_pg "$BIN/psql" -h 127.0.0.1 -p "$1" -U postgres -d postgres -qAtX -c "SHOW $name" 2>/dev/null)" = "$value" ] && return 0
        sleep 0.1
    done
    echo "FAILED: $name = $value never showed at port $1 after a reload"
    exit 1
}

passed=0
failed=0
check() { # check NAME CONDITION-STATUS DETAIL
    if [ "$2" = 0 ]; then passed=$((passed + 1)); echo "ok: $1 ($3)"
    else failed=$((failed + 1)); echo "FAILED: $1 ($3)"; fi
}

as_pg "$BIN/initdb" -D "$data" -A trust -U postgres >/dev/null
cat >>"$data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$dir'
shared_preload_libraries = 'monoflake'
monoflake.node = $NODE
max_connections = 40
EOF
start
sql -c 'CREATE EXTENSION monoflake'
layout=$(sql -c 'SELECT monoflake.layout()')
echo "layout: $layout"

# 1. Connections × next_id() through a primary key.
sql -c 'CREATE TABLE ids (id bigint PRIMARY KEY DEFAULT monoflake.next_id(), conn int, n int)'
t0=$(date +%s.%N)
pids=()
for c in $(seq 1 "$CONNS"); do
    sql -c "INSERT INTO ids (conn, n) SELECT $c, g FROM generate_series(1, $PER_CONN) g" &
    pids+=($!)
done
errors=0
for p in "${pids[@]}"; do wait "$p" || errors=$((errors + 1)); done
t1=$(date +%s.%N)
rows=$(sql -c 'SELECT count(*) FROM ids')
distinct=$(sql -c 'SELECT count(DISTINCT id) FROM ids')
back=$(sql -c 'SELECT count(*) FROM (SELECT id, lag(id) OVER (PARTITION BY conn ORDER BY n) AS prev FROM ids) s WHERE id <= prev')
rate=$(echo "$rows / ($t1 - $t0)" | bc)
check "$CONNS x $PER_CONN next_id() into a primary key" \
    "$([ "$errors" = 0 ] && [ "$rows" = $((CONNS * PER_CONN)) ] && [ "$distinct" = "$rows" ] && [ "$back" = 0 ]; echo $?)" \
    "$rows rows, $distinct distinct, $errors failed inserts, $back not increasing per connection, $rate rows/s"

# 2. decode against the CLI.
sql -c "SELECT (jsonb_build_object('id', id::text, 'unix_ms', (extract(epoch FROM d.time) * 1000)::bigint,
            'node', d.node, 'sequence', d.sequence) || d.fields)::text
        FROM (SELECT id FROM ids ORDER BY random() LIMIT 200) s, monoflake.decode(s.id) d ORDER BY id" >"$dir/sql.json"
python3 - "$dir/sql.json" "$MONOFLAKE" "$layout" <<'EOF' && ok=0 || ok=1
import json, subprocess, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
out = subprocess.run([sys.argv[2], "decode", "--json", "--layout", sys.argv[3]] + [r["id"] for r in rows],
                     check=True, capture_output=True, text=True).stdout
cli = [json.loads(l) for l in out.splitlines() if l.strip()]
for c in cli:
    c.pop("time", None)
bad = [(r, c) for r, c in zip(rows, cli) if r != c]
print(f"{len(rows)} IDs compared, {len(bad)} differ" + (f": {bad[0]}" if bad else ""))
sys.exit(1 if bad or len(rows) != len(cli) or not rows else 0)
EOF
check "decode agrees with monoflake decode" "$ok" "sample of 200"

# 3. Restarts: plain, then with the clock one hour back.
before=$(sql -c 'SELECT max(id) FROM ids')
stop; start
after=$(sql -c 'SELECT monoflake.next_id()')
check "a restart issues above every ID before" "$([ "$after" -gt "$before" ]; echo $?)" "$after > $before"
before=$after
# (libfaketime preloaded directly: the `faketime` wrapper waits for the server to exit.)
FAKETIME_SO=${FAKETIME_LIB:-/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1}
stop
# The reservation's tick on disk (its third line), read while no server runs.
reserved_tick() { sed -n 3p "$data/monoflake.reservation"; }
r0=$(reserved_tick)
start env LD_PRELOAD="$FAKETIME_SO" FAKETIME=-1h
now=$(sql -c 'SELECT now()')
state=$(sqlstate 'SELECT monoflake.next_id()')
error=$(sqlerror 'SELECT monoflake.next_id()')
batch=$(sqlstate 'SELECT count(*) FROM monoflake.next_ids(10)')
r1=$(reserved_tick)
echo "$error"
# A start writes its reservation ahead of the clock, but never below what is on disk: a
# second start with the clock still back would otherwise issue below the IDs before.
check "a start one hour back leaves the reservation on disk where it was, or higher" \
    "$([ -n "$r0" ] && [ -n "$r1" ] && [ "$r1" -ge "$r0" ]; echo $?)" "tick $r0 before, $r1 after"
check "a restart one hour back (faketime) refuses: the reservation is ahead of the clock" \
    "$([ "$state" = 55000 ] && [ "$batch" = 55000 ] &&
        [[ "$error" == *"ahead of the server's clock"*"more than monoflake.tolerance_ms (5600 ms)"*"monoflake.trust_reservation"* ]]; echo $?)" \
    "next_id SQLSTATE $state, next_ids SQLSTATE $batch; the server's clock reads $now"
conf 'monoflake.trust_reservation = on'
after=$(sql -c 'SELECT monoflake.next_id()')
check "one hour back, with monoflake.trust_reservation on (reload): issues above every ID before" \
    "$([ -n "$after" ] && [ "$after" -gt "$before" ]; echo $?)" "$after > $before"
before=$(sql -c 'SELECT monoflake.next_id()')
conf 'monoflake.trust_reservation = off'
# 20 s back: refused while the reservation (22.5–25 s ahead of the faked clock, less the
# restart's own seconds) is beyond the tolerance, then issued from it on, without a restart.
stop; start env LD_PRELOAD="$FAKETIME_SO" FAKETIME=-20
first=$(sqlstate 'SELECT monoflake.next_id()')
t0=$(date +%s.%N)
after=""
refused=0
for _ in $(seq 1 120); do
    after=$(sql -c 'SELECT monoflake.next_id()' 2>/dev/null) && break
    after=""; refused=$((refused + 1)); sleep 0.5
done
waited=$(echo "$(date +%s.%N) - $t0" | bc)
again=$(sql -c 'SELECT max(x) FROM monoflake.next_ids(1000) x' 2>/dev/null || true)
check "20 s back: refused, then issues above every ID before once the clock catches up" \
    "$([ "$first" = 55000 ] && [ "$refused" -gt 0 ] && [ -n "$after" ] && [ "$after" -gt "$before" ] &&
        [ -n "$again" ] && [ "$again" -gt "$after" ]; echo $?)" \
    "first SQLSTATE $first, $refused refusals over ${waited}s, then $after > $before, then $again"
stop; start

# 3b. Reservation writes that fail (a directory where the temporary file goes: each write
# fails at its create): no ID the file on disk does not cover, and the failure said.
tmpdir="$data/monoflake.reservation.tmp"
before=$(sql -c 'SELECT monoflake.next_id()')
stop; as_pg mkdir "$tmpdir"; start
r=$(refusal "$PORT" 'SELECT monoflake.next_id()' | head -1)
check "a start whose reservation write fails issues nothing" \
    "$([[ "$r" == "ERROR:  55000: monoflake did not start: cannot write monoflake.reservation (create): "* ]]; echo $?)" \
    "${r:0:110}"
stop; as_pg rmdir "$tmpdir"; start; as_pg mkdir "$tmpdir"
r=$(refusal "$PORT" 'SELECT monoflake.next_id()' | head -1)
check "a first call whose identity record fails to write issues nothing" \
    "$([[ "$r" == "ERROR:  58030: monoflake: cannot write monoflake.reservation (create): "* ]]; echo $?)" \
    "${r:0:110}"
# Past the window the start reserved (5 s; 7 s waited), a call needs the reservation extended first: it
# fails (bounded: a call that hangs is killed and counted a failure).
as_pg rmdir "$tmpdir"
sql -c 'SELECT monoflake.next_id()' >/dev/null
as_pg mkdir "$tmpdir"
sleep 7
refusal "$PORT" "SELECT monoflake.next_id() /* past the window */" >"$dir/past" &
rp=$!
for _ in $(seq 1 200); do kill -0 "$rp" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$rp" 2>/dev/null; then
    r="no answer within 20 s"
    victim=$(sql -c "SELECT pid FROM pg_stat_activity WHERE query LIKE '%past the window%' AND pid <> pg_backend_pid()")
    ready=$(grep -c 'database system is ready to accept connections' "$dir/log" || true)
    [ -z "$victim" ] || kill -9 $victim
    for _ in $(seq 1 300); do
        [ "$(grep -c 'database system is ready to accept connections' "$dir/log" || true)" -gt "$ready" ] && break
        sleep 0.1
    done
else
    r=$(head -1 "$dir/past")
fi
wait "$rp" 2>/dev/null || true
check "a call past the reservation, whose extension fails, is refused" \
    "$([[ "$r" == "ERROR:  58030: monoflake: cannot write monoflake.reservation (create): "* ]]; echo $?)" \
    "${r:0:110}"
as_pg rmdir "$tmpdir"
after=$(sql -c 'SELECT monoflake.next_id()')
stop; start
again=$(sql -c 'SELECT monoflake.next_id()')
check "the writes back: issues above every ID before, and after a restart" \
    "$([ -n "$after" ] && [ "$after" -gt "$before" ] && [ -n "$again" ] && [ "$again" -gt "$after" ]; echo $?)" \
    "$before < $after < $again"

# 4. The errors.
state=$(sqlstate 'SELECT monoflake.next_ids(0)')
check "next_ids(0) is refused" "$([ "$state" = 22023 ]; echo $?)" "SQLSTATE $state"
state=$(sqlstate 'SELECT count(*) FROM monoflake.next_ids(100000000)')
check "next_ids past the bound is refused" "$([ "$state" = 22023 ]; echo $?)" "SQLSTATE $state"
n=$(sql -c 'SELECT count(DISTINCT x) FROM monoflake.next_ids(100000) x')
check "next_ids(100000) gives 100000 distinct IDs" "$([ "$n" = 100000 ]; echo $?)" "$n"
# The bound is less where the layout cannot issue 100,000 within its lead: sonyflake's 10 ms
# ticks of 256 values issue 11 ticks (the clock's and the lead's 10), 2,816 IDs, at most.
# (Its own reservation file: the first layout's is put aside, and back after.)
stop
as_pg mv "$data/monoflake.reservation" "$dir/reservation.first"
pg_opts="-c monoflake.layout=sonyflake"; start
n=$(sql -c 'SELECT count(DISTINCT x) FROM monoflake.next_ids(2816) x' 2>&1 || true)
r=$(refusal "$PORT" 'SELECT count(*) FROM monoflake.next_ids(2817)' | head -1)
check "sonyflake: next_ids(2816), the layout's largest batch, gives 2816 distinct IDs; 2817 is refused" \
    "$([ "$n" = 2816 ] && [[ "$r" == "ERROR:  22023: monoflake.next_ids: n = 2817 is out of range 1..=2816" ]]; echo $?)" \
    "${n:0:120}; ${r:0:90}"
stop
as_pg rm -f "$data/monoflake.reservation"
as_pg mv "$dir/reservation.first" "$data/monoflake.reservation"
pg_opts=""; start
# Neither monoflake.node nor monoflake.claim_url (the default): refused, with the reason and
# the fix. A server never claims its node from itself: a copy would take the claims along.
stop; pg_opts="-c monoflake.node=-1"; start
r=$(refusal "$PORT" 'SELECT monoflake.next_id()')
rb=$(refusal "$PORT" 'SELECT count(*) FROM monoflake.next_ids(10)' | head -1)
echo "$r"
warned=$(grep -c 'WARNING:  monoflake: neither monoflake.node nor monoflake.claim_url is set' "$dir/log" || true)
check "neither monoflake.node nor monoflake.claim_url: refused, the reason and the fix" \
    "$([[ "$r" == "ERROR:  55000: monoflake: no claim database: neither monoflake.node nor monoflake.claim_url is set"* ]] &&
        [[ "$r" == *"DETAIL:  A server cannot claim its node from a database in its own data directory"* ]] &&
        [[ "$r" == *"HINT:  set monoflake.claim_url in postgresql.conf to a database on another server"* ]] &&
        [[ "$rb" == "ERROR:  55000: monoflake: no claim database"* ]] && [ "$warned" -ge 1 ]; echo $?)" \
    "next_ids: ${rb:0:60}…; the start's WARNING in the log: $warned"
# A claim database that is this server (by another name): refused by its system identifier.
stop; pg_opts="-c monoflake.node=-1 -c monoflake.claim_url='host=127.0.0.1 port=$PORT user=postgres dbname=postgres'"; start
r=$(refusal_until "$PORT" 'SELECT monoflake.next_id()' "ERROR:  55000: monoflake: the claim database*")
sysid=$(sql -c 'SELECT system_identifier FROM pg_control_system()')
echo "$r"
check "a claim database that is this server: refused (its system identifier)" \
    "$([[ "$r" == "ERROR:  55000: monoflake: the claim database (monoflake.claim_url) has this server's system identifier, $sysid: "* ]] &&
        [[ "$r" == *"HINT:  set monoflake.claim_url"* ]] &&
        [ "$(sql -c "SELECT count(*) FROM pg_tables WHERE tablename = 'monoflake_nodes'")" = 0 ]; echo $?)" \
    "system identifier $sysid; no monoflake_nodes table made in it"
# No claim database reachable: refused, never an ID.
stop; pg_opts="-c monoflake.node=-1 -c monoflake.claim_url='host=127.0.0.1 port=1 user=postgres dbname=postgres'"; start
state=$(sqlstate 'SELECT monoflake.next_id()')
error=$(sqlerror 'SELECT monoflake.next_id()')
detail=""
for _ in $(seq 1 100); do
    detail=$(as_pg "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -qAtX \
        -c 'SELECT monoflake.next_id()' 2>&1 | sed -n 's/^DETAIL:  //p' | head -1 || true)
    [ -z "$detail" ] || break
    sleep 0.1
done
echo "$error / DETAIL: $detail"
check "no claim database reachable: refused" \
    "$([ "$state" = 55000 ] && [ "$error" = "ERROR:  monoflake: no node claimed yet" ] &&
        [[ "$detail" == "the claim database cannot be asked for its system identifier: "* ]]; echo $?)" "SQLSTATE $state"
stop
pg_opts="-c shared_preload_libraries=''"; start
state=$(sqlstate 'SELECT monoflake.next_id()')
check "not preloaded: refused" "$([ "$state" = 55000 ]; echo $?)" "SQLSTATE $state"
stop; pg_opts=""; start

# 5. pg_terminate_backend during calls.
sql -c 'CREATE TABLE killed (id bigint PRIMARY KEY DEFAULT monoflake.next_id())'
for c in 1 2 3 4; do
    sql -c "INSERT INTO killed SELECT monoflake.next_id() FROM generate_series(1, 2000000)" >/dev/null 2>&1 &
done
sleep 1
sql -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query LIKE 'INSERT INTO killed%' AND pid <> pg_backend_pid()" >/dev/null
wait || true
sql -c 'INSERT INTO ids (conn, n) SELECT 0, g FROM generate_series(1, 100000) g' && ok=0 || ok=1
check "after pg_terminate_backend mid-call: 100000 more IDs, no conflict" "$ok" \
    "$(sql -c 'SELECT count(*) FROM ids') rows"

# The clock stepped back around a crash restart: libfaketime cannot (the postmaster sets up
# shared memory again in its SIGCHLD handler, where libfaketime reads the real clock), the
# test build's monoflake.test_clock_offset_ms can — every process reads it, the postmaster
# included, and a reload sets it.
[ "$(sql -c "SELECT count(*) FROM pg_settings WHERE name = 'monoflake.test_clock_offset_ms'")" = 1 ] || {
    echo "FAILED: monoflake.test_clock_offset_ms is missing: not a test build (cargo pgrx install --features test-clock)"
    exit 1
}
before=$(sql -c 'SELECT monoflake.next_id()')
conf 'monoflake.test_clock_offset_ms = -3600000'
running=$(sql -c 'SELECT max(x) FROM monoflake.next_ids(1000) x')
check "the clock an hour back while the server runs: issues above every ID before" \
    "$([ -n "$running" ] && [ "$running" -gt "$before" ]; echo $?)" "$running > $before"
crash "$PORT" "$dir/log"
r=$(refusal "$PORT" 'SELECT monoflake.next_id()')
now=$(sql -c 'SELECT now()')
echo "$r" | head -1
conf 'monoflake.test_clock_offset_ms = 0'
after=""
for _ in $(seq 1 100); do
    after=$(sql -c 'SELECT max(x) FROM monoflake.next_ids(1000) x' 2>/dev/null) && break
    after=""; sleep 0.2
done
check "a backend killed (-9) with the clock an hour back: the crash restart refuses, then issues above every ID once the clock is back" \
    "$([[ "$r" == "ERROR:  55000: monoflake: this server's reservation"*"ahead of the server's clock"* ]] &&
        [ -n "$after" ] && [ "$after" -gt "$running" ]; echo $?)" \
    "refused while the wall clock read $now (PostgreSQL's own, not moved); then $after > $running"

# 6. The node claimed, not configured: two servers without monoflake.node, one claim
# database (the database `claims` of this server).
sql -c 'CREATE DATABASE claims'
claim_url="host=127.0.0.1 port=$PORT user=postgres dbname=claims"
claims() { as_pg "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -d claims -v ON_ERROR_STOP=1 -qAtX "$@"; }
sql_at() { local port=$1; shift; as_pg "$BIN/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -qAtX "$@"; }
# (main: the first server, for the copies of check 7.)
declare -A sport=([a]=$((PORT + 1)) [b]=$((PORT + 2)) [copy]=$((PORT + 3)) [standby]=$((PORT + 4))
    [cstandby]=$((PORT + 5)) [ccopy]=$((PORT + 6)) [main]=$PORT)
srv_start() { # srv_start NAME: starts the server NAME (as postgres), waits until it answers
    as_pg "$BIN/pg_ctl" -D "$dir/$1" -l "$dir/$1.log" -W start >/dev/null
    for _ in $(seq 1 1200); do
        as_pg "$BIN/pg_isready" -q -h 127.0.0.1 -p "${sport[$1]}" && break
        sleep 0.1
    done
    started "$dir/$1" "$dir/$1.log" "${sport[$1]}"
    spid[$1]=$(head -1 "$dir/$1/postmaster.pid")
}
srv_stop() { # srv_stop NAME: a fast shutdown (SIGINT to its postmaster), waited for
    local p=${spid[$1]:-}
    [ -n "$p" ] || return 0
    kill -INT "$p" 2>/dev/null || true
    for _ in $(seq 1 300); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    spid[$1]=""
}
# node_of NAME: the node of the server's next ID, once it holds one (up to 30 s).
node_of() {
    local n=""
    for _ in $(seq 1 300); do
        n=$(sql_at "${sport[$1]}" -c 'SELECT node FROM monoflake.decode(monoflake.next_id())' 2>/dev/null) && break
        n=""; sleep 0.1
    done
    echo "$n"
}
as_pg "$BIN/initdb" -D "$dir/template" -A trust -U postgres >/dev/null
for name in a b; do
    cp -a "$dir/template" "$dir/$name"
    cat >>"$dir/$name/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = ${sport[$name]}
unix_socket_directories = '$dir'
shared_preload_libraries = 'monoflake'
monoflake.claim_url = '$claim_url'
max_connections = 20
CONF
    srv_start "$name"
    sql_at "${sport[$name]}" -c 'CREATE EXTENSION monoflake'
done
node_a=$(node_of a)
node_b=$(node_of b)
check "two servers without monoflake.node claim distinct nodes from one claim database" \
    "$([ -n "$node_a" ] && [ -n "$node_b" ] && [ "$node_a" != "$node_b" ]; echo $?)" \
    "server a: node ${node_a:-none}, server b: node ${node_b:-none}"
rows=$(claims -c "SELECT string_agg(node::text, ',' ORDER BY node) FROM monoflake_nodes WHERE claimant IS NOT NULL")
want=$(printf '%s\n' "$node_a" "$node_b" | sort -n | paste -sd,)
check "their claims are the claim database's rows" "$([ "$rows" = "$want" ]; echo $?)" \
    "claimed rows: nodes $rows"
claims -c 'CREATE TABLE both_ids (id bigint PRIMARY KEY, server text, conn int)'
pids=()
for c in $(seq 1 "$CONNS"); do
    name=a; [ $((c % 2)) = 0 ] && name=b
    (sql_at "${sport[$name]}" -c "COPY (SELECT monoflake.next_id(), '$name', $c FROM generate_series(1, $CLAIM_PER_CONN)) TO STDOUT" |
        claims -c 'COPY both_ids FROM STDIN') &
    pids+=($!)
done
errors=0
for p in "${pids[@]}"; do wait "$p" || errors=$((errors + 1)); done
rows=$(claims -c 'SELECT count(*) FROM both_ids')
distinct=$(claims -c 'SELECT count(DISTINCT id) FROM both_ids')
check "$CONNS x $CLAIM_PER_CONN next_id() from both servers into one primary key" \
    "$([ "$errors" = 0 ] && [ "$rows" = $((CONNS * CLAIM_PER_CONN)) ] && [ "$distinct" = "$rows" ]; echo $?)" \
    "$rows rows, $distinct distinct, $errors failed copies"

# A claim taken over in the claim database (another claimant, a raised fence): server a's
# keeper finds it lost, seals the state, writes back what it issued, and the server refuses
# until the worker has claimed another node.
last_a=$(sql_at "${sport[a]}" -c 'SELECT monoflake.next_id()')
last_a_ms=$(sql -c "SELECT (extract(epoch FROM time) * 1000)::bigint FROM monoflake.decode($last_a)")
# (Held by the test's claimant for an hour, so that the worker cannot take it back when the
# lease it had would have expired: it must claim another node.)
claims -c "UPDATE monoflake_nodes SET claimant = 'pg-extension-test', fence = fence + 1,
               lease_expires_at = clock_timestamp() + interval '1 hour' WHERE node = $node_a" >/dev/null
# (Polled until the refusal carries the store's reason: for the few ms the keeper takes to
# write back, it says only "lease lost".)
lost=""
for _ in $(seq 1 500); do
    lost=$(sql_at "${sport[a]}" -c 'SELECT monoflake.next_id()' 2>&1 >/dev/null | grep '^ERROR:' || true)
    [[ "$lost" != "ERROR:  monoflake: lease lost: "* ]] || break
    sleep 0.02
done
new_a=$(node_of a)
back=$(claims -c "SELECT reserved_until_ms FROM monoflake_nodes WHERE node = $node_a")
echo "$lost"
check "a claim taken over: refused (lease lost), written back, another node claimed" \
    "$([[ "$lost" == "ERROR:  monoflake: lease lost: "* ]] && [ -n "$new_a" ] && [ "$new_a" != "$node_a" ] &&
        [ "$back" -ge "$last_a_ms" ]; echo $?)" \
    "node $node_a: reservation $back >= last ID's time $last_a_ms; then node ${new_a:-none}"

# The claim worker killed (-9) during calls: the server's crash restart ends every backend
# and sets its shared memory up again; the worker claims again; no ID repeats.
for c in 1 2; do
    (sql_at "${sport[a]}" -c "COPY (SELECT monoflake.next_id(), 'a', 100 + $c FROM generate_series(1, 2000000)) TO STDOUT" 2>/dev/null |
        claims -c 'COPY both_ids FROM STDIN' >/dev/null 2>&1) &
done
sleep 1
worker=$(ps -o pid=,args= --ppid "${spid[a]}" | awk '/monoflake claim/ {print $1}')
[ -z "$worker" ] || kill -9 "$worker"
wait || true
after_kill=$(node_of a)
before=$(claims -c 'SELECT count(*) FROM both_ids')
(sql_at "${sport[a]}" -c "COPY (SELECT monoflake.next_id(), 'a', 0 FROM generate_series(1, 100000)) TO STDOUT" |
    claims -c 'COPY both_ids FROM STDIN') && ok=0 || ok=1
now=$(claims -c 'SELECT count(*) FROM both_ids')
check "the claim worker killed (-9) during calls: claims again, 100000 more IDs, no conflict" \
    "$([ -n "$worker" ] && [ -n "$after_kill" ] && [ "$ok" = 0 ] && [ "$now" = $((before + 100000)) ]; echo $?)" \
    "worker pid ${worker:-none} killed; node ${after_kill:-none} after; $before rows, then $now"

# Issue 60: server a's wall clock stepped 2 s, a minute and an hour past the real time
# (monoflake.test_clock_offset_ms, reloaded: every process of it), then back, while two
# connections issue: its line follows the wall clock only as far as the claim database's
# clock confirms (the ceiling the worker's renewals set), so the worker keeps its lease: no
# refusal, the same node throughout, no conflict, no ID further ahead of the real time than
# the lead and max_lead (PostgreSQL's own clock_timestamp() is not moved).
node_before=$(node_of a)
before=$(claims -c 'SELECT count(*) FROM both_ids')
steps_dir=$(mktemp -d "$dir/steps.XXXXXX")
chown postgres: "$steps_dir"
for c in 1 2; do
    (
        for i in $(seq 1 60); do
            sql_at "${sport[a]}" -c "COPY (SELECT monoflake.next_id(), 'a', 200 + $c FROM generate_series(1, 5000)) TO STDOUT" |
                claims -c 'COPY both_ids FROM STDIN' >/dev/null 2>>"$steps_dir/errors.$c" || echo "copy $i failed" >>"$steps_dir/errors.$c"
            sleep 0.2
        done
    ) &
done
ahead=0
for off in 0 2000 60000 3600000 0; do
    echo "monoflake.test_clock_offset_ms = $off" >>"$dir/a/postgresql.conf"
    sql_at "${sport[a]}" -c 'SELECT pg_reload_conf()' >/dev/null
    for _ in $(seq 1 6); do
        sleep 0.5
        a_ms=$(sql_at "${sport[a]}" -c "SELECT (extract(epoch FROM d.time) * 1000)::bigint - (extract(epoch FROM clock_timestamp()) * 1000)::bigint
                                        FROM monoflake.decode(monoflake.next_id()) d" 2>>"$steps_dir/errors.0" || echo 0)
        [ "$a_ms" -le "$ahead" ] || ahead=$a_ms
    done
    echo "wall clock +$off ms: IDs up to $ahead ms ahead of the real time so far"
done
wait || true
node_after=$(node_of a)
now=$(claims -c 'SELECT count(*) FROM both_ids')
distinct=$(claims -c 'SELECT count(DISTINCT id) FROM both_ids')
refusals=$(cat "$steps_dir"/errors.* 2>/dev/null | grep -c . || true)
cat "$steps_dir"/errors.* 2>/dev/null | head -3
check "server a's wall clock stepped 2 s, 1 min, 1 h ahead, then back, under load: the lease kept, no refusal, no conflict" \
    "$([ "$refusals" = 0 ] && [ -n "$node_before" ] && [ "$node_after" = "$node_before" ] &&
        [ "$now" = $((before + 600000)) ] && [ "$distinct" = "$now" ] && [ "$ahead" -le 351 ]; echo $?)" \
    "node $node_before then ${node_after:-none}; $refusals refusals; $before rows, then $now ($distinct distinct); IDs at most $ahead ms ahead"

# A clean stop releases the node with the final reservation: the end of the last tick
# issued, at or above the last ID's time.
last_b=$(sql_at "${sport[b]}" -c 'SELECT monoflake.next_id()')
read -r node_b last_b_ms <<<"$(sql -c "SELECT node, (extract(epoch FROM time) * 1000)::bigint FROM monoflake.decode($last_b)" | tr '|' ' ')"
srv_stop b
read -r released reserved <<<"$(claims -c "SELECT claimant IS NULL, reserved_until_ms FROM monoflake_nodes WHERE node = $node_b" | tr '|' ' ')"
check "a server stopped: its node released, reserved to at least its last ID's time" \
    "$([ "$released" = t ] && [ "$reserved" -ge "$last_b_ms" ]; echo $?)" \
    "node $node_b released: $released, reservation $reserved >= $last_b_ms"

# 7. Copies (issue 56). Each pair of servers issues COPY_N IDs a side at once (two
# connections each) into one table of the claim database; "issued by both": the IDs found
# from both servers (any ID twice counted too).
claims -c 'CREATE TABLE copies (id bigint, server text)'
# basebackup NAME PORT [pg_basebackup options]: server NAME, a copy of the one at PORT.
basebackup() {
    local name=$1 port=$2
    shift 2
    as_pg "$BIN/pg_basebackup" -h 127.0.0.1 -p "$port" -U postgres -D "$dir/$name" -X stream -c fast "$@"
    printf 'port = %s\nshared_buffers = 16MB\n' "${sport[$name]}" >>"$dir/$name/postgresql.conf"
}
# both A B: COPY_N IDs from each of servers A and B at once into `copies`; prints the
# number of connections that failed.
both() {
    local pids=() errs=0 name
    for name in "$1" "$2"; do
        for _ in 1 2; do
            (sql_at "${sport[$name]}" -c "COPY (SELECT monoflake.next_id(), '$name' FROM generate_series(1, $((COPY_N / 2)))) TO STDOUT" |
                claims -c 'COPY copies FROM STDIN') &
            pids+=($!)
        done
    done
    for p in "${pids[@]}"; do wait "$p" || errs=$((errs + 1)); done
    echo "$errs"
}
# tally A B: "rows of A, rows of B, IDs issued by both, IDs found twice" over all of `copies`.
tally() {
    claims -c "SELECT (SELECT count(*) FROM copies WHERE server = '$1'), (SELECT count(*) FROM copies WHERE server = '$2'),
                      (SELECT count(*) FROM (SELECT id FROM copies GROUP BY id HAVING count(DISTINCT server) > 1) s),
                      (SELECT count(*) FROM (SELECT id FROM copies GROUP BY id HAVING count(*) > 1) s)" | tr '|' ' '
}
# pair_check NAME A B ERRS ROWS_A_BEFORE ROWS_B_BEFORE: checks the last `both A B`.
pair_check() {
    local rows_a rows_b by_both twice
    read -r rows_a rows_b by_both twice <<<"$(tally "$2" "$3")"
    check "$1" \
        "$([ "$4" = 0 ] && [ $((rows_a - $5)) = "$COPY_N" ] && [ $((rows_b - $6)) = "$COPY_N" ] &&
            [ "$by_both" = 0 ] && [ "$twice" = 0 ]; echo $?)" \
        "$2: $((rows_a - $5)) IDs, $3: $((rows_b - $6)) IDs; issued by both: $by_both (over all $((rows_a + rows_b)) of theirs); any ID twice: $twice; $4 failed connections"
}
rows() { claims -c "SELECT count(*) FROM copies WHERE server = '$1'"; }
conf_at() { # conf_at NAME LINE: a setting for server NAME, reloaded
    echo "$2" >>"$dir/$1/postgresql.conf"
    sql_at "${sport[$1]}" -c 'SELECT pg_reload_conf()' >/dev/null
    reloaded "${sport[$1]}" "$2"
    sleep 1
}

# The node claimed (server a, claim database `claims` on the first server).
node_a=$(node_of a)
basebackup copy "${sport[a]}"
srv_start copy
node_copy=$(node_of copy)
ra=$(rows a); rc=$(rows copy)
errs=$(both a copy)
pair_check "pg_basebackup -> a copy started on its own: node ${node_copy:-none} (the original: $node_a); 0 IDs issued by both" \
    a copy "$errs" "$ra" "$rc"
crash "${sport[a]}" "$dir/a.log"
node_a2=$(node_of a)
ra=$(rows a); rc=$(rows copy)
errs=$(both a copy)
pair_check "the original crash-restarted after the copy: node ${node_a2:-none} (the copy: $node_copy); 0 IDs issued by both" \
    a copy "$errs" "$ra" "$rc"
srv_stop copy
basebackup standby "${sport[a]}" -R
srv_start standby
r=$(refusal "${sport[standby]}" 'SELECT monoflake.next_id()')
rb=$(refusal "${sport[standby]}" 'SELECT count(*) FROM monoflake.next_ids(10)' | head -1)
echo "$r" | head -1
check "pg_basebackup -R -> a hot standby (node claimed): refused, in recovery" \
    "$([[ "$r" == "ERROR:  55000: monoflake: this server is in recovery"* ]] &&
        [[ "$rb" == "ERROR:  55000: monoflake: this server is in recovery"* ]] &&
        [ "$(sql_at "${sport[standby]}" -c 'SELECT pg_is_in_recovery()')" = t ]; echo $?)" "next_id and next_ids"
as_pg "$BIN/pg_ctl" -D "$dir/standby" -w promote >/dev/null
node_s=$(node_of standby)
ra=$(rows a); rs=$(rows standby)
errs=$(both a standby)
pair_check "the standby promoted while the original runs: node ${node_s:-none} (the original: $node_a2); 0 IDs issued by both" \
    a standby "$errs" "$ra" "$rs"
# The original crash-restarted once more, its clock an hour back: the claim database's clock
# says so (PgStore reads it: a node without a row counts as used up to the database's now),
# so every node is an hour ahead of this clock and the claim is refused, loudly; with the
# clock back, it claims and issues.
conf_at a 'monoflake.test_clock_offset_ms = -3600000'
crash "${sport[a]}" "$dir/a.log"
r=$(refusal_until "${sport[a]}" 'SELECT monoflake.next_id()' "ERROR:  55000: monoflake: no node claimed yet*DETAIL:  the claim from the claim database failed: node *60.0 min ahead of this clock*")
check "the original crash-restarted with its clock an hour back (node claimed): refused, the claim database's clock an hour ahead" \
    "$([[ "$r" == *"60.0 min ahead of this clock"* ]]; echo $?)" "$(head -2 <<<"$r" | cut -c1-160 | paste -sd' ')…"
conf_at a 'monoflake.test_clock_offset_ms = 0'
node_a3=$(node_of a)
ra=$(rows a); rs=$(rows standby)
errs=$(both a standby)
pair_check "then, the clock back: node ${node_a3:-none} (the standby: $node_s); 0 IDs issued by both" \
    a standby "$errs" "$ra" "$rs"
srv_stop standby
srv_stop a

# A configured node (the first server, node 7).
basebackup cstandby "$PORT" -R
srv_start cstandby
r=$(refusal "${sport[cstandby]}" 'SELECT monoflake.next_id()' | head -1)
echo "$r"
check "pg_basebackup -R -> a hot standby (node configured): refused, in recovery" \
    "$([[ "$r" == "ERROR:  55000: monoflake: this server is in recovery"* ]]; echo $?)" "the primary issues under node $NODE meanwhile"
as_pg "$BIN/pg_ctl" -D "$dir/cstandby" -w promote >/dev/null
r=$(refusal_until "${sport[cstandby]}" 'SELECT monoflake.next_id()' "ERROR:  55000: monoflake: monoflake.node*")
echo "$r"
check "the standby promoted (node configured): refused, another timeline" \
    "$([[ "$r" == "ERROR:  55000: monoflake: monoflake.node = $NODE belongs to the server this one was copied from: this server is on timeline 2, but node $NODE was last used in this data directory on timeline 1"* ]] &&
        [[ "$r" == *"HINT:  give this server a node of its own"* ]]; echo $?)" "the primary still issues: $(sql -c 'SELECT monoflake.next_id()')"
srv_stop cstandby
basebackup ccopy "$PORT"
srv_start ccopy
r=$(refusal_until "${sport[ccopy]}" 'SELECT monoflake.next_id()' "ERROR:  55000: monoflake: monoflake.node*")
echo "$r" | head -1
check "pg_basebackup -> a copy started on its own (node configured): refused, restored from a base backup" \
    "$([[ "$r" == "ERROR:  55000: monoflake: monoflake.node = $NODE belongs to the server this one was copied from: this data directory was restored from a base backup (backup_label.old: "* ]]; echo $?)" ""
srv_stop ccopy
echo "monoflake.node = 8" >>"$dir/ccopy/postgresql.conf"
srv_start ccopy
rm=$(rows main); rc=$(rows ccopy)
errs=$(both main ccopy)
pair_check "the copy given node 8 of its own: issues; 0 IDs issued by both" main ccopy "$errs" "$rm" "$rc"
srv_stop ccopy

if [ "$bench" != 0 ]; then
    # The figures are the release build's: without the test clock.
    if [ "$install" = 1 ]; then
        (cd pg && cargo pgrx install --release --pg-config "$PG_CONFIG")
    fi
    stop; start
    sql -c 'CREATE SEQUENCE s; CREATE TABLE bench_seq (id bigint PRIMARY KEY DEFAULT nextval($$s$$), v int);
            CREATE TABLE bench_mf (id bigint PRIMARY KEY DEFAULT monoflake.next_id(), v int);
            CREATE TABLE bench_uuid (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), v int)'
    # Instagram's PL/pgSQL snowflake (2012): 41 bits of ms since its epoch, 13 of shard, 10
    # of a sequence modulo 1024, the time from clock_timestamp().
    sql <<'SQL'
CREATE SEQUENCE insta_seq;
CREATE FUNCTION insta_next_id(OUT result bigint) AS $$
DECLARE
    our_epoch bigint := 1314220021721;
    seq_id bigint;
    now_millis bigint;
    shard_id int := 5;
BEGIN
    SELECT nextval('insta_seq') % 1024 INTO seq_id;
    SELECT FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) INTO now_millis;
    result := (now_millis - our_epoch) << 23;
    result := result | (shard_id << 10);
    result := result | (seq_id);
END;
$$ LANGUAGE PLPGSQL;
CREATE TABLE bench_insta (id bigint PRIMARY KEY DEFAULT insta_next_id(), v int);
SQL
    echo 'SELECT monoflake.next_id();' >"$dir/mf.sql"
    echo "SELECT nextval('s');" >"$dir/seq.sql"
    echo 'SELECT gen_random_uuid();' >"$dir/uuid.sql"
    echo 'SELECT insta_next_id();' >"$dir/insta.sql"
    echo 'INSERT INTO bench_mf (v) VALUES (1);' >"$dir/ins_mf.sql"
    echo 'INSERT INTO bench_seq (v) VALUES (1);' >"$dir/ins_seq.sql"
    echo 'INSERT INTO bench_uuid (v) VALUES (1);' >"$dir/ins_uuid.sql"
    echo 'INSERT INTO bench_insta (v) VALUES (1);' >"$dir/ins_insta.sql"
    chown postgres: "$dir"/*.sql
    tps() { # tps FILE CLIENTS -> "tps latency_ms"
        as_pg "$BIN/pgbench" -h 127.0.0.1 -p "$PORT" -U postgres -n -T "$bench" -c "$2" -j "$(( $2 < 2 ? 1 : 2 ))" \
            -f "$dir/$1" postgres 2>/dev/null |
            awk '/^latency average/ {l=$4} /^tps/ {t=$3} END {printf "%.0f %.3f", t, l}'
    }
    sbase=(); ibase=()
    for round in $(seq 1 "$rounds"); do
        echo
        echo "round $round of $rounds (test clock: $(sql -c "SELECT count(*) FROM pg_settings WHERE name = 'monoflake.test_clock_offset_ms'") setting)"
        echo "| statement | clients | tps | latency (ms) | vs nextval (mean of its two) |"
        echo "|---|---:|---:|---:|---:|"
        for clients in 1 8; do
            # Each statement in turn, then nextval (and its INSERT) again: the base of the
            # ratios is the mean of the two nextval windows around the others, so that load
            # from outside that changes during the round weighs on both sides.
            rows=()
            for pair in "seq:SELECT nextval('s')" "mf:SELECT monoflake.next_id()" "uuid:SELECT gen_random_uuid()" \
                "insta:SELECT insta_next_id()" \
                "ins_seq:INSERT … DEFAULT nextval('s')" "ins_mf:INSERT … DEFAULT monoflake.next_id()" \
                "ins_uuid:INSERT … DEFAULT gen_random_uuid()" "ins_insta:INSERT … DEFAULT insta_next_id()" \
                "seq:SELECT nextval('s') (again)" "ins_seq:INSERT … DEFAULT nextval('s') (again)"; do
                f=${pair%%:*}; label=${pair#*:}
                read -r t l <<<"$(tps "$f.sql" "$clients")"
                case $f in seq) sbase+=("$t") ;; ins_seq) ibase+=("$t") ;; esac
                rows+=("$f|$label|$t|$l")
            done
            base=$(echo "(${sbase[0]} + ${sbase[1]}) / 2" | bc -l)
            ibase_mean=$(echo "(${ibase[0]} + ${ibase[1]}) / 2" | bc -l)
            for row in "${rows[@]}"; do
                IFS='|' read -r f label t l <<<"$row"
                b=$base; case $f in ins_*) b=$ibase_mean ;; esac
                echo "| \`$label\` | $clients | $t | $l | $(echo "scale=2; $t / $b" | bc) |"
            done
            sbase=(); ibase=()
        done
    done
fi

echo "pg-extension: $passed passed, $failed failed"
[ "$failed" = 0 ]
