#!/usr/bin/env bash
# Load test of `monoflake serve` with wrk, on loopback only, bounded in time.
#
#   scripts/load.sh [SECONDS] [CONNECTIONS]      (defaults: 10 s, 32 connections, wrk -t1)
#
# Builds the release binary, starts `monoflake serve` on 127.0.0.1 with a free port and a
# temporary state directory, runs wrk against GET /v1/id and GET /v1/ids?count=1000, prints
# wrk's figures plus IDs/s for the batch run and the server's RSS before and after, then stops
# the server with SIGTERM. Needs wrk (Debian: apt-get install wrk).
set -euo pipefail

seconds=${1:-10}
connections=${2:-32}
if ! [[ $seconds =~ ^[0-9]+$ ]] || ((seconds < 1 || seconds > 600)); then
    echo "load.sh: SECONDS must be 1..600, got $seconds" >&2
    exit 2
fi
if ! [[ $connections =~ ^[0-9]+$ ]] || ((connections < 1 || connections > 1000)); then
    echo "load.sh: CONNECTIONS must be 1..1000, got $connections" >&2
    exit 2
fi
command -v wrk >/dev/null || { echo "load.sh: wrk is not installed (apt-get install wrk)" >&2; exit 1; }

root=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release -q -p monoflake-cli --manifest-path "$root/Cargo.toml"
bin="$root/target/release/monoflake"
work=$(mktemp -d)
server_pid=
cleanup() {
    if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

started=$(date +%s%N)
"$bin" serve --listen 127.0.0.1:0 --state-dir "$work/state" 2>"$work/log" &
server_pid=$!
addr=
for _ in $(seq 1 500); do
    addr=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/log" | head -1 || true)
    [[ -n $addr ]] && break
    sleep 0.01
done
[[ -n $addr ]] || { cat "$work/log" >&2; exit 1; }
until curl -sf "$addr/readyz" >/dev/null; do sleep 0.005; done
ready=$(date +%s%N)
echo "server $addr ready $(((ready - started) / 1000000)) ms after start (includes the shell's polling)"
rss() { awk '/VmRSS/ {print $2 " kB"}' "/proc/$server_pid/status"; }
echo "RSS before: $(rss)"

echo
echo "== wrk -t1 -c$connections -d${seconds}s --latency $addr/v1/id"
wrk -t1 -c"$connections" -d"${seconds}s" --latency "$addr/v1/id" | tee "$work/one"
echo
echo "== wrk -t1 -c$connections -d${seconds}s --latency $addr/v1/ids?count=1000"
wrk -t1 -c"$connections" -d"${seconds}s" --latency "$addr/v1/ids?count=1000" | tee "$work/batch"
rps=$(awk '/Requests\/sec/ {print $2}' "$work/batch")
echo "IDs/s in batches of 1000: $(awk -v r="$rps" 'BEGIN {printf "%.0f", r * 1000}')"
echo "RSS after: $(rss)"
curl -s "$addr/metrics" | grep -E '^monoflake_(ids_served_total|would_block_total|request_waits_total|requests_refused_total|responses_total)' || true
kill -TERM "$server_pid"
wait "$server_pid"
echo "server stopped with status $?"
server_pid=
