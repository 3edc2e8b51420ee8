#!/usr/bin/env bash
# The random soak's power: which of issue 35's seven known-bad builds a short soak catches, at
# each seed.
#
#   bash scripts/soak-power.sh [--seconds S] [SEED...]     (defaults: 60 s; seeds 11 12 13)
#
# For each mutant it builds `monoflake` and `monoflake-chaos` with RUSTFLAGS="--cfg <cfg>" in a
# target directory of its own ($CARGO_TARGET_DIR/soak-power/<name>, about 1.5 GB each, kept so
# that a second run rebuilds only what changed), then runs the random soak alone
# (`scripts/chaos.sh --seconds S --seed SEED --scenarios none`) at each seed. A mutant is
# caught at a seed when that soak fails; the table says how: `dup N` (N primary-key
# conflicts), `tenure` (overlapping tenures without a conflict), `time` (IDs stamped past the
# honest-time bound), or `other` (an outage not explained by a fault, a process left running:
# on a loaded machine these can be the machine's, not the mutant's; see the log). It prints one row per mutant, then per seed
# `seed S: K of 7 caught`. Logs: $CARGO_TARGET_DIR/soak-power/<name>-<seed>.log.
#
# The scripted scenarios are left out on purpose: each aims at one bug; this measures what the
# seeded random schedule finds by itself. See docs/reliability.md, "The soak's power".
set -uo pipefail
cd "$(dirname "$0")/.."

MUTANTS=(
    # name                 cfg
    "no_seal               monoflake_mutant_no_seal"
    "no_unrecorded_wait    monoflake_mutant_no_unrecorded_wait"
    "file_reread_none      monoflake_mutant_file_reread_none"
    "fork_common           monoflake_mutant_fork_common"
    "fence_no_deadline     monoflake_mutant_fence_no_deadline"
    "giveback_unpublished  monoflake_mutant_giveback_unpublished"
    "exit_stale            monoflake_mutant_exit_stale"
)

seconds=60
seeds=()
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds) [ $# -ge 2 ] || { echo "usage: $0 [--seconds S] [SEED...]" >&2; exit 2; }
        seconds=$2; shift 2 ;;
    -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "soak-power.sh: unknown option $1" >&2; exit 2 ;;
    *) seeds+=("$1"); shift ;;
    esac
done
[ "${#seeds[@]}" -gt 0 ] || seeds=(11 12 13)

base="${CARGO_TARGET_DIR:-$PWD/target}/soak-power"
mkdir -p "$base"
declare -A caught_at=()
printf '%-22s' mutant
for seed in "${seeds[@]}"; do printf ' %-10s' "seed $seed"; done
echo
for row in "${MUTANTS[@]}"; do
    read -r name cfg <<<"$row"
    dir="$base/$name"
    if ! RUSTFLAGS="--cfg $cfg" CARGO_TARGET_DIR="$dir" cargo build -q -p monoflake-cli \
        -p monoflake-chaos --features monoflake-cli/etcd,monoflake-cli/postgres \
        >"$base/$name-build.log" 2>&1; then
        echo "soak-power.sh: $name did not build (see $base/$name-build.log)" >&2
        exit 1
    fi
    printf '%-22s' "$name"
    for seed in "${seeds[@]}"; do
        log="$base/$name-$seed.log"
        if RUSTFLAGS="--cfg $cfg" CARGO_TARGET_DIR="$dir" bash scripts/chaos.sh \
            --seconds "$seconds" --seed "$seed" --scenarios none >"$log" 2>&1; then
            verdict="-"
        else
            conflicts=$(sed -n 's/^chaos: seed .* \([0-9][0-9]*\) conflicts.*/\1/p' "$log" | tail -1)
            if [ "${conflicts:-0}" -gt 0 ]; then
                verdict="dup $conflicts"
            elif grep -q "overlapping tenure" "$log"; then
                verdict="tenure"
            elif grep -q "stamped past the time bound" "$log"; then
                verdict="time"
            else
                verdict="other"
            fi
            caught_at[$seed]=$((${caught_at[$seed]:-0} + 1))
        fi
        printf ' %-10s' "$verdict"
    done
    echo
done
for seed in "${seeds[@]}"; do
    echo "seed $seed: ${caught_at[$seed]:-0} of ${#MUTANTS[@]} caught in $seconds s"
done
