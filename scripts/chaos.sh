#!/usr/bin/env bash
# The chaos soak: bash scripts/chaos.sh --seconds N [--seed S] [more `monoflake-chaos run` flags]
#
# Installs what is missing from Debian's packages (etcd-server, etcd-client, postgresql,
# faketime, and protoc for the etcd feature), builds `monoflake` (with etcd) and
# `monoflake-chaos`, then runs the scripted scenarios and N seconds of seeded faults against a
# 3-member etcd cluster, a PostgreSQL server and ten generator processes, all on 127.0.0.1.
# Every server is started and stopped by its pid. The last line says what happened:
#   chaos: seed S, N IDs, F faults (K kinds), C conflicts, max outage M ms
# and the exit code is 0 only when every invariant held. A failing run keeps its logs in
# target/chaos/seed-S (named at the end). See docs/reliability.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
export HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"

usage() {
    echo "usage: bash scripts/chaos.sh --seconds N [--seed S] [monoflake-chaos run flags]" >&2
    exit 2
}
seconds=""
seed=""
rest=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) [ $# -ge 2 ] || usage; seconds=$2; shift 2 ;;
        --seed) [ $# -ge 2 ] || usage; seed=$2; shift 2 ;;
        -h|--help) usage ;;
        *) rest+=("$1"); shift ;;
    esac
done
[ -n "$seconds" ] || usage
# A fresh seed unless one is given; it is printed first and in the last line.
[ -n "$seed" ] || seed=$(od -An -N6 -tu8 /dev/urandom | tr -d ' ')

need=()
command -v etcd >/dev/null || need+=(etcd-server)
command -v etcdctl >/dev/null || need+=(etcd-client)
command -v protoc >/dev/null || need+=(protobuf-compiler)
[ -e /usr/include/google/protobuf/descriptor.proto ] || need+=(libprotobuf-dev)
ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || need+=(faketime)
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
command -v setpriv >/dev/null || need+=(util-linux)
if [ "${#need[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "chaos.sh: missing packages: ${need[*]} (run as root, or apt-get install them)" >&2
        exit 1
    fi
    echo "chaos.sh: installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

echo "chaos.sh: building monoflake (with etcd and postgres) and monoflake-chaos"
cargo build -q -p monoflake-cli -p monoflake-chaos --features monoflake-cli/etcd,monoflake-cli/postgres

out=target/chaos
run_dir="$out/seed-$seed"
# If the run itself dies, nothing it started may outlive it: kill what its pid file still
# lists, by pid, and unmount its tmpfs.
cleanup() {
    local rc=$?
    if [ -f "$run_dir/pids" ]; then
        while read -r pid what; do
            if kill -9 "$pid" 2>/dev/null; then
                echo "chaos.sh: killed $what (pid $pid), left running"
            fi
        done <"$run_dir/pids"
    fi
    if mountpoint -q "$run_dir/fs" 2>/dev/null; then
        umount -l "$run_dir/fs" || true
    fi
    [ -z "${pid_file:-}" ] || rm -f "$pid_file"
    exit "$rc"
}
trap cleanup EXIT
# The soak is a host of its own when it can be (root, and the kernel lets it): a new mount
# and network namespace, with a fresh tmpfs on /var/tmp (root's, sticky, as a host's) and
# its own loopback. Its processes take real host-wide claims (abstract sockets, which live in
# the network namespace) and write real host anchors (/var/tmp), under faked clocks; in the
# machine's own namespaces those outlived the run — anchors an hour ahead made later users
# of the host wait or be refused — and a soak beside the test suite fought it for nodes.
# Without namespaces (not root) it runs on the host itself, and says so.
own_host=()
mkdir -p "$out"
pid_file="$out/harness-$seed.pid"
rm -f "$pid_file"
if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null && command -v ip >/dev/null \
    && unshare --mount --net true 2>/dev/null; then
    # shellcheck disable=SC2016 # expanded by the inner shell
    own_host=(unshare --mount --net --fork --propagation private -- bash -c '
        set -e
        ip link set lo up
        mount -t tmpfs -o mode=1777,size=64m monoflake-chaos-host /var/tmp
        echo $$ >"$0"
        exec "$@"' "$pid_file")
    echo "chaos.sh: the soak runs as a host of its own (mount and network namespaces)"
else
    echo "chaos.sh: no namespaces (not root, or not allowed): the soak shares this host's" \
        "/var/tmp anchors and host-wide claims; run nothing else that uses monoflake meanwhile" >&2
fi
# In the background, so that a signal to this script is passed on at once (the run then
# stops everything it started and reports). `unshare` passes no signal on: the harness
# inside it is signalled by the pid it wrote.
bin="${CARGO_TARGET_DIR:-target}/debug"
${own_host[@]+"${own_host[@]}"} "$bin/monoflake-chaos" run --seconds "$seconds" --seed "$seed" \
    --monoflake "$bin/monoflake" --out "$out" ${rest[@]+"${rest[@]}"} &
harness=$!
stop_harness() {
    if [ -s "$pid_file" ]; then
        kill -TERM "$(cat "$pid_file")" 2>/dev/null || true
    else
        kill -TERM "$harness" 2>/dev/null || true
    fi
    wait "$harness"
    exit 130
}
trap stop_harness INT TERM
rc=0
wait "$harness" || rc=$?
exit "$rc"
