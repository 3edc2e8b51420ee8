#!/usr/bin/env bash
# The random soak's power: which known-bad builds a short soak catches, at each seed, and how.
#
#   bash scripts/soak-power.sh [--seconds S] [--only NAME,...] [--no-baseline] [--keep] [SEED...]
#     (defaults: 60 s; seeds 11 12 13; every mutant below)
#
# Each mutant (issue 35's seven and issue 55's two: a cfg of the library's, or a patch in
# scripts/mutants/) is applied to a scratch copy of the working tree, as scripts/mutants.sh
# does (scripts/mutants/lib.sh), `monoflake` and `monoflake-chaos` are built there (in
# $CARGO_TARGET_DIR/soak-power/build, shared by every mutant: only the workspace's crates
# rebuild), and the random soak runs alone (`scripts/chaos.sh --seconds S --seed SEED
# --scenarios none`) at each seed. First the unmutated copy runs at each seed (--no-baseline
# skips it): a seed whose soak fails there can catch nothing.
#
# A soak counts as catching its mutant only by one of the checker's own verdicts on IDs:
#   dup N     N primary-key conflicts (IDs issued twice)
#   tenure    two holders of a node at once (overlapping tenures), no conflict
#   time      IDs stamped past the honest-time bound
#   order     IDs not increasing within a stream
#   fork      a forked child issued on its parent's node
# A soak that fails otherwise — an outage no fault explains, a fault that took effect
# nowhere, a process left running — caught nothing: it is shown as `FAIL` (its first reason
# under the table) and makes the script exit 1, a failure of the soak to investigate, never a
# kill. `-` is a soak that passed: the mutant survived that seed. It prints one row per mutant,
# then per seed `seed S: K of N caught`. Logs: $CARGO_TARGET_DIR/soak-power/<name>-<seed>.log.
#
# The scripted scenarios are left out on purpose: each aims at one bug; this measures what the
# seeded random schedule finds by itself. See docs/reliability.md, "The soak's power".
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

MUTANTS=(
    # name                 mutation                                    the bug
    "no_seal               patch lease/no_seal.patch"                  # a lost lease does not stop the generator
    "no_unrecorded_wait    cfg monoflake_mutant_no_unrecorded_wait"    # a claimant skips the wait of a node without a record
    "file_reread_none      cfg monoflake_mutant_file_reread_none"      # the file store's re-read finds nothing
    "fork_common           cfg monoflake_mutant_fork_common"           # the fork check on the common path disabled
    "fence_no_deadline     patch handover/fence_no_deadline.patch"     # the fence ignores the keeper's deadline
    "giveback_unpublished  cfg monoflake_mutant_giveback_unpublished"  # PerThread: a slot's last state not published
    "exit_stale            cfg monoflake_mutant_exit_stale"            # PerThread: an exiting thread gives back stale numbers
    "failed_write_adopted  patch handover/failed_write_adopted.patch"  # a keeper adopts a reservation write that failed
    "fence_limit_late      patch handover/fence_limit_late.patch"      # the fence's limit one tick late
)

usage() { sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; }
seconds=60
seeds=()
only=""
baseline=true
keep=false
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds) [ $# -ge 2 ] || { usage >&2; exit 2; }; seconds=$2; shift 2 ;;
    --only) [ $# -ge 2 ] || { usage >&2; exit 2; }; only=$2; shift 2 ;;
    --no-baseline) baseline=false; shift ;;
    --keep) keep=true; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "soak-power.sh: unknown option $1" >&2; exit 2 ;;
    *) seeds+=("$1"); shift ;;
    esac
done
[ "${#seeds[@]}" -gt 0 ] || seeds=(11 12 13)

rows=()
$baseline && rows+=("unmutated none")
for row in "${MUTANTS[@]}"; do
    read -r name _ <<<"$row"
    [ -z "$only" ] || [[ ",$only," == *",$name,"* ]] || continue
    rows+=("$row")
done

target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
base="$target/soak-power"
tree="$base/tree"
build="$base/build"
mkdir -p "$base"
# shellcheck source=scripts/mutants/lib.sh
. scripts/mutants/lib.sh
if ! make_tree >"$base/tree.log" 2>&1; then
    echo "soak-power.sh: cannot copy the tree to $tree (see $base/tree.log)" >&2
    exit 1
fi

# The verdict of a soak's log: how it caught its mutant, `FAIL`, or `-` (it passed).
verdict() {
    local log=$1 n
    n=$(sed -n 's/^ *soak: \([0-9][0-9]*\) primary-key conflicts$/\1/p' "$log" | tail -1)
    if [ -n "$n" ]; then echo "dup $n"; return; fi
    if grep -q '^ *soak: [0-9]* overlapping tenures' "$log"; then echo tenure; return; fi
    if grep -q '^ *soak: [0-9]* IDs stamped past the time bound' "$log"; then echo time; return; fi
    if grep -q '^ *soak: [0-9]* IDs not increasing' "$log"; then echo order; return; fi
    if grep -q "issued [0-9]* IDs on its parent's node" "$log"; then echo fork; return; fi
    if ! grep -q '^chaos: FAILED' "$log" && grep -q '^chaos: seed .* max outage' "$log"; then
        echo -
        return
    fi
    echo FAIL
}

declare -A caught_at=()
failed=()
total=0
printf '%-22s' mutant
for seed in "${seeds[@]}"; do printf ' %-10s' "seed $seed"; done
echo
for row in "${rows[@]}"; do
    read -r name mutation <<<"$row"
    start=$(date +%s)
    if [ "$name" != unmutated ] && ! mutate "$mutation" >"$base/$name-build.log" 2>&1; then
        echo "soak-power.sh: $mutation does not apply (see $base/$name-build.log): re-base it" >&2
        exit 1
    fi
    if ! (cd "$tree" && CARGO_TARGET_DIR="$build" cargo build -q -p monoflake-cli \
        -p monoflake-chaos --features monoflake-cli/etcd,monoflake-cli/postgres) \
        >>"$base/$name-build.log" 2>&1; then
        echo "soak-power.sh: $name did not build (see $base/$name-build.log)" >&2
        unmutate
        exit 1
    fi
    [ "$name" = unmutated ] || total=$((total + 1))
    printf '%-22s' "$name"
    for seed in "${seeds[@]}"; do
        log="$base/$name-$seed.log"
        (cd "$tree" && CARGO_TARGET_DIR="$build" bash scripts/chaos.sh --seconds "$seconds" \
            --seed "$seed" --scenarios none) >"$log" 2>&1
        v=$(verdict "$log")
        if [ "$v" = FAIL ]; then
            reason=$(sed -n '/^chaos: FAILED/{n;p;}' "$log" | head -1 | sed 's/^ *//')
            failed+=("$name at seed $seed: ${reason:-the run did not finish} (see $log)")
        elif [ "$v" != - ] && [ "$name" != unmutated ]; then
            caught_at[$seed]=$((${caught_at[$seed]:-0} + 1))
        elif [ "$v" != - ]; then
            failed+=("the unmutated tree at seed $seed: $v (see $log)")
        fi
        printf ' %-10s' "$v"
    done
    echo "  ($(($(date +%s) - start)) s)"
    unmutate
done
for seed in "${seeds[@]}"; do
    echo "seed $seed: ${caught_at[$seed]:-0} of $total caught in $seconds s"
done
$keep || rm -rf "${tree:?}" "${build:?}"
if [ "${#failed[@]}" -gt 0 ]; then
    echo "soak failures to investigate (caught nothing):"
    printf '  %s\n' "${failed[@]}"
    exit 1
fi
