#!/usr/bin/env bash
# cargo-mutants (https://mutants.rs/) over the lease and the generator, a group of files at a
# time, each group with the tests that exercise it (issue 35 asks for one such run by hand; the
# suite's own known-bad builds are scripts/mutants.sh).
#
#   bash scripts/cargo-mutants.sh GROUP...     run those groups
#   bash scripts/cargo-mutants.sh --list       the groups, their files and mutant counts
#   -j N            mutants built and tested at once (default 2)
#   --full          test with every test binary that reaches the group's code, not its quick set
#   --iterate       skip the mutants a group's last run caught (cargo mutants --iterate): after
#                   a quick pass, `--full --iterate` tests only what it missed
#   --out DIR       where each group's results go (default target/cargo-mutants/<group>)
#   --re REGEX      only the mutants whose name matches (repeatable; cargo mutants -F), e.g.
#                   to test again, after writing tests, what a run missed
#   --servers       run the tests that need etcd or PostgreSQL too (left out of the file
#                   store's and the claim's groups otherwise), and the stores' own test
#                   binaries (etcd_clock, postgres); needs both servers
#
# Each mutant is built in cargo-mutants' own copy of the tree and tested with cargo-nextest,
# which runs the group's test binaries side by side and stops at the first failure: a caught
# mutant costs its build and seconds, a missed one the group's slowest test. The store tests
# want the etcd and PostgreSQL of $MONOFLAKE_TEST_ETCD and $MONOFLAKE_TEST_PG (as `.ci/run`
# exports them); without them each test starts a private server, which is much slower.
# Results: <out>/mutants.out/{caught,missed,timeout,unviable}.txt; docs/reliability.md has the
# table of what was run and what each survivor means.
set -euo pipefail
cd "$(dirname "$0")/.."

# A mutant may break the tests' host scope (feature `test-host-scope`); its tests then write
# this host's own anchors in /var/tmp, which every later process of the same layout reads (a
# run here left node 3 reserved 49 days ahead, and the Python tests were refused it). As root,
# the run is a host of its own: a private mount namespace with a fresh /var/tmp.
if [ -z "${MONOFLAKE_MUTANTS_PRIVATE:-}" ]; then
    if [ "$(id -u)" = 0 ] && unshare --mount --propagation private true 2>/dev/null; then
        exec unshare --mount --propagation private -- env MONOFLAKE_MUTANTS_PRIVATE=1 \
            bash -c 'mount -t tmpfs -o mode=1777 none /var/tmp && exec bash "$0" "$@"' "$0" "$@"
    fi
    echo "cargo-mutants.sh: not root: a mutant's tests may leave anchors in /var/tmp" >&2
fi

FEATURES=etcd,postgres,tracing,serde
# Tests that need a server or a run of many seconds, left out where a group has no use for them.
NO_SERVERS='not test(/etcd|postgres|pg_/)'

# group | files (cargo mutants -f globs) | excluded (-e globs) | quick selection | full selection
# | nextest filter. A first pass tests each mutant with the quick selection (the tests made for
# that code, seconds each); `--full` passes test what is left (with --iterate: what the quick
# pass missed) with every test binary that reaches the code.
LEASE_QUICK="--lib --test trust --test store_conformance --test epochs --test lease --test default_dir --test tracing_events"
LEASE_FULL="$LEASE_QUICK --test conformance --test per_core_lease --test per_thread --test prefork --test prefork_building --test per_thread_processes --test stale_retry --test fork --test inputs --test features"
GEN_QUICK="--lib --test generator --test per_core --test per_core_lease --test per_thread --test fork --test inputs --test features --test layouts --test alloc"
GEN_FULL="$GEN_QUICK --test common_case --test conformance --test lease --test epochs --test stale_retry --test prefork --test prefork_building --test per_thread_processes --test locked_clock"
GROUPS_TABLE=(
    "file|src/lease/file/**||$LEASE_QUICK|$LEASE_FULL|$NO_SERVERS"
    "claim|src/lease/build.rs src/lease/choose.rs src/lease/outside.rs src/lease/store.rs src/lease/shape.rs src/lease/mod.rs src/lease/holding.rs||$LEASE_QUICK|$LEASE_FULL|$NO_SERVERS"
    "per-thread|src/generator/per_thread/**||$GEN_QUICK|$GEN_FULL|$NO_SERVERS"
    "generator|src/generator/**|src/generator/per_thread/** src/generator/step.rs src/generator/fence.rs|$GEN_QUICK|$GEN_FULL|$NO_SERVERS"
    "postgres|src/lease/postgres/** src/lease/postgres_options.rs||--lib --test postgres --test store_conformance|--lib --test postgres --test store_conformance|binary(postgres) | test(/postgres|pg_/)"
    "etcd|src/lease/etcd.rs src/lease/etcd_options.rs||--lib --test etcd_clock --test store_conformance|--lib --test etcd_clock --test store_conformance|binary(etcd_clock) | test(/etcd/)"
)

jobs=2
iterate=()
only=()
full=false
servers=false
out=""
list=false
want=()
while [ $# -gt 0 ]; do
    case "$1" in
        -j) jobs="$2"; shift 2 ;;
        --iterate) iterate=(--iterate); shift ;;
        --full) full=true; shift ;;
        --servers) servers=true; shift ;;
        --out) out="$2"; shift 2 ;;
        --re) only+=(-F "$2"); shift 2 ;;
        --list) list=true; shift ;;
        -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
        -*) echo "cargo-mutants.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) want+=("$1"); shift ;;
    esac
done

command -v cargo-mutants >/dev/null || { echo "needs cargo-mutants: cargo install cargo-mutants" >&2; exit 2; }
command -v cargo-nextest >/dev/null || { echo "needs cargo-nextest: cargo install cargo-nextest" >&2; exit 2; }

args_of() { # group -> the cargo mutants arguments, one per line
    local files excluded g
    IFS='|' read -r g files excluded _ _ _ <<<"$1"
    set -f # the globs are cargo mutants', not the shell's
    for f in $files; do printf '%s\n' -f "$f"; done
    for f in $excluded; do printf '%s\n' -e "$f"; done
    set +f
}

if $list || [ ${#want[@]} -eq 0 ]; then
    for row in "${GROUPS_TABLE[@]}"; do
        IFS='|' read -r g _ _ _ _ _ <<<"$row"
        mapfile -t a < <(args_of "$row")
        n=$(cargo mutants --list --features "$FEATURES" "${a[@]}" | wc -l)
        printf '%-11s %4d mutants  %s\n' "$g" "$n" "${a[*]}"
    done
    [ ${#want[@]} -eq 0 ] && ! $list && echo "name a group to run it" >&2
    exit 0
fi

for g in "${want[@]}"; do
    row=""
    for r in "${GROUPS_TABLE[@]}"; do [ "${r%%|*}" = "$g" ] && row="$r"; done
    [ -n "$row" ] || { echo "cargo-mutants.sh: no group $g (--list names them)" >&2; exit 2; }
    IFS='|' read -r _ _ _ quick all filter <<<"$row"
    select=$quick
    timeout=90
    ! $full || select=$all
    if $servers; then
        [ -n "${MONOFLAKE_TEST_ETCD:-}" ] && [ -n "${MONOFLAKE_TEST_PG:-}" ] ||
            { echo "cargo-mutants.sh: --servers needs MONOFLAKE_TEST_ETCD and MONOFLAKE_TEST_PG" >&2; exit 2; }
        filter='all()'
        # The stores' tests make a run slower than the 90 s a mutant may take otherwise.
        timeout=300
        # The stores' own test binaries, where the selection lacks them.
        for t in etcd_clock postgres; do
            case " $select " in *" --test $t "*) ;; *) select="$select --test $t" ;; esac
        done
    fi
    mapfile -t a < <(args_of "$row")
    dir="${out:-target/cargo-mutants}/$g"
    mkdir -p "$dir"
    echo "== group $g: cargo mutants ${a[*]} (results in $dir/mutants.out)"
    set -f
    # shellcheck disable=SC2086 # the selection is a list of words
    cargo mutants --test-tool nextest --features "$FEATURES" -j "$jobs" --timeout "$timeout" \
        --build-timeout 300 "${iterate[@]}" "${only[@]}" -o "$dir" "${a[@]}" -- $select -E "$filter" ||
        true # cargo mutants exits 2 when a mutant is missed: the summary says so
    set +f
    for kind in caught missed timeout unviable; do
        printf '%s %s: %d\n' "$g" "$kind" "$(wc -l <"$dir/mutants.out/$kind.txt" 2>/dev/null || echo 0)"
    done
done
