#!/usr/bin/env bash
# Load test of `monoflake serve` with wrk, on loopback only, bounded in time, against a bare
# handler on the same stack in the same run.
#
#   scripts/load.sh [--pipeline N] [SECONDS] [CONNECTIONS]
#       (defaults: 10 s a run, 32 connections, wrk -t1, no pipelining)
#
# Builds the release binary and the baseline (cli/benches/bare_http.rs: axum + hyper-util
# with the service's settings, a counter for a handler), both with the release profile, starts
# both on 127.0.0.1 with free ports (`serve` with a temporary state directory), then runs wrk
# three rounds, alternating: the bare handler's GET /, then serve's GET /v1/id, and prints each
# round's requests/s, each server's own CPU time per request (from /proc/PID/stat: steadier
# than requests/s on a shared host) and the ratios serve / bare (the same machine, the same
# minute: the only fair comparison there). With --pipeline N, wrk sends N requests per write
# on each connection (HTTP/1 pipelining, a Lua script). Then GET /v1/ids?count=1000 with IDs/s,
# the server's RSS before and after, and its counters; both servers are stopped at the end.
# Needs wrk (Debian: apt-get install wrk).
set -euo pipefail

pipeline=1
if [[ ${1:-} == --pipeline ]]; then
    pipeline=${2:-}
    shift 2 || true
fi
seconds=${1:-10}
connections=${2:-32}
if ! [[ $pipeline =~ ^[0-9]+$ ]] || ((pipeline < 1 || pipeline > 256)); then
    echo "load.sh: --pipeline N must be 1..256, got $pipeline" >&2
    exit 2
fi
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
# Both with the release profile, so that the ratio compares the code, not the compiler
# settings (`cargo bench` would build the baseline with the bench profile: fat LTO, one
# codegen unit). Two builds, the baseline first: built together, the server would get the
# dev-dependencies' features (the library's `test-host-scope`). Paths from cargo's JSON
# messages, so CARGO_TARGET_DIR is honoured.
executable() { # KIND NAME: the path of the executable target NAME, built
    cargo build --release -q -p monoflake-cli --manifest-path "$root/Cargo.toml" "--$1" "$2" \
        --message-format=json | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' |
        grep "/$2[^/]*\$" | tail -1
}
bare_bin=$(executable bench bare_http)
bin=$(executable bin monoflake)
[[ -x $bare_bin ]] || { echo "load.sh: cannot find the bare_http bench binary" >&2; exit 1; }
[[ -x $bin ]] || { echo "load.sh: cannot find the monoflake binary" >&2; exit 1; }
work=$(mktemp -d)
server_pid=
bare_pid=
cleanup() {
    for pid in $server_pid $bare_pid; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

# Waits for `pattern` in `log` and prints the address it names.
address() {
    local log=$1 found=
    for _ in $(seq 1 500); do
        found=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$log" | head -1 || true)
        [[ -n $found ]] && { echo "$found"; return; }
        sleep 0.01
    done
    cat "$log" >&2
    exit 1
}

started=$(date +%s%N)
"$bin" serve --listen 127.0.0.1:0 --state-dir "$work/state" 2>"$work/log" &
server_pid=$!
addr=$(address "$work/log")
until curl -sf "$addr/readyz" >/dev/null; do sleep 0.005; done
ready=$(date +%s%N)
echo "server $addr ready $(((ready - started) / 1000000)) ms after start (includes the shell's polling)"
"$bare_bin" 127.0.0.1:0 2>"$work/bare.log" &
bare_pid=$!
bare=$(address "$work/bare.log")
until curl -sf "$bare/" >/dev/null; do sleep 0.005; done
echo "bare handler $bare"
rss() { awk '/VmRSS/ {print $2 " kB"}' "/proc/$server_pid/status"; }
echo "RSS before: $(rss)"

script=()
if ((pipeline > 1)); then
    cat >"$work/pipeline.lua" <<EOF
init = function(args)
    local r = {}
    for i = 1, $pipeline do r[i] = wrk.format(nil) end
    req = table.concat(r)
end
request = function() return req end
EOF
    script=(-s "$work/pipeline.lua")
fi
# CPU ticks (user + system, USER_HZ) a process has used.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
# PID URL: "requests/s CPU-µs-per-request" of one wrk run against URL, served by PID. The CPU
# time is the server's own, so it is steadier than requests/s on a shared machine.
run() {
    local before after out
    before=$(ticks "$1")
    out=$(wrk -t1 -c"$connections" -d"${seconds}s" --latency "${script[@]}" "$2" | tee -a "$work/all")
    after=$(ticks "$1")
    awk -v t=$((after - before)) -v hz="$hz" '
        /requests in/ {n = $1} /Requests\/sec/ {r = $2}
        END {printf "%s %.1f\n", r, n ? t / hz * 1e6 / n : 0}' <<<"$out"
}

echo
echo "== same run, alternating: wrk -t1 -c$connections -d${seconds}s, pipeline $pipeline"
printf '%-6s %12s %9s %14s %9s %7s %9s\n' round "bare req/s" "µs/req" "serve /v1/id" "µs/req" ratio "CPU ratio"
ratios=()
for round in 1 2 3; do
    read -r b bcpu < <(run "$bare_pid" "$bare/")
    read -r s scpu < <(run "$server_pid" "$addr/v1/id")
    r=$(awk -v s="$s" -v b="$b" 'BEGIN {printf "%.2f", s / b}')
    c=$(awk -v s="$scpu" -v b="$bcpu" 'BEGIN {printf "%.2f", s / b}')
    ratios+=("$r")
    printf '%-6s %12s %9s %14s %9s %7s %9s\n' "$round" "$b" "$bcpu" "$s" "$scpu" "$r" "$c"
done
echo "serve / bare (req/s): $(printf '%s\n' "${ratios[@]}" | sort -n | head -1)–$(printf '%s\n' "${ratios[@]}" | sort -n | tail -1);" \
    "CPU ratio: serve's CPU time per request over bare's"
errors=$(grep -c 'Non-2xx\|Socket errors' "$work/all" || true)
echo "runs with errors or non-2xx answers: $errors"

echo
echo "== wrk -t1 -c$connections -d${seconds}s --latency $addr/v1/ids?count=1000"
wrk -t1 -c"$connections" -d"${seconds}s" --latency "$addr/v1/ids?count=1000" | tee "$work/batch"
rps=$(awk '/Requests\/sec/ {print $2}' "$work/batch")
echo "IDs/s in batches of 1000: $(awk -v r="$rps" 'BEGIN {printf "%.0f", r * 1000}')"
echo "RSS after: $(rss)"
curl -s "$addr/metrics" | grep -E '^monoflake_(ids_served_total|would_block_total|request_waits_total|requests_refused_total|requests_over_budget_total|responses_total)' || true
kill -TERM "$server_pid"
wait "$server_pid"
echo "server stopped with status $?"
server_pid=
