#!/usr/bin/env bash
# The mutant suite: known-bad builds of the library, each one bug behind a cfg, and the cheapest
# check that must kill it (a test, a loom model, a program such as a model checker).
#
#   bash scripts/mutants.sh                 every mutant
#   bash scripts/mutants.sh --cheap         those marked cheap (what .ci/run runs)
#   bash scripts/mutants.sh NAME...         the ones named
#   bash scripts/mutants.sh --list          the table
#   --no-baseline                           skip running each check on the unmutated build first
#   --keep                                  keep each mutant's build (a second run then only
#                                           rebuilds what changed; 0.3-1 GB per mutant)
#
# For each mutant it builds the check with RUSTFLAGS="--cfg <cfg>" in a target directory of its
# own ($CARGO_TARGET_DIR/mutants/<name>, or target/mutants/<name>; about 0.6-1 GB for a test's,
# 0.3 GB for a loom model's), runs the check, and then removes that directory unless --keep is
# given: thirty builds kept would fill a small disk (a CI run once lost half its mutants so).
# A mutant is killed when the check builds and then fails; a check that does not
# build is an error of the suite, never a kill; and first, each check must pass on the
# unmutated build (in $CARGO_TARGET_DIR/mutants/baseline-<kind>), else the run stops: a check
# that fails anyway kills nothing. It prints one line per mutant and, last,
# `mutants: K killed of N`; it exits 1 if any mutant survived (or its check did not build).
#
# Adding a mutant: put the bug behind `#[cfg(monoflake_mutant_<name>)]` (or cfg!(...)) in the
# library, declare the cfg in Cargo.toml's check-cfg list, and add one line to MUTANTS below:
#
#   name  cfg  cheap|slow  kind args...
#
# kinds:
#   test ARGS...      cargo test -p monoflake ARGS (e.g. --test fork some_test)
#   loom TEST         the loom model file loom-tests/tests/TEST.rs, LOOM_MAX_PREEMPTIONS=2, release
#   run PKG ARGS...   cargo run --release -p PKG -- ARGS (a model checker: it must exit non-zero)
#   chaos S SEED [FLAGS]  the soak (scripts/chaos.sh --seconds S --seed SEED --scenarios none,
#                     or FLAGS instead of --scenarios none, e.g. --scenarios deleted-dir)
#   sh COMMAND...     a shell command run from the repository root with RUSTFLAGS and
#                     CARGO_TARGET_DIR set (it builds nothing first: prefer a kind that does)
set -uo pipefail
cd "$(dirname "$0")/.."

MUTANTS=(
    # name                    cfg                                        cost  check
    "fork_common              monoflake_mutant_fork_common               cheap test --test fork every_kind_of_fork_is_refused_on_the_common_path_in_the_parents_tick"
    "giveback_unpublished     monoflake_mutant_giveback_unpublished      cheap loom registry"
    "exit_stale               monoflake_mutant_exit_stale                cheap loom registry"
    "per_thread_reentry       monoflake_mutant_per_thread_reentry        cheap test --test per_thread a_clock_that_issues_from_another_generator"
    "park                     monoflake_broken_park                      cheap loom registry"
    "lend                     monoflake_broken_lend                      cheap loom registry"
    "seal_giveback            monoflake_broken_seal_giveback             cheap loom registry"
    "per_core_slot_bits       monoflake_broken_per_core                  cheap loom per_core"
    # A leased PerCore whose keeper writes, or seals, only its first slot.
    "per_core_one_fence       monoflake_mutant_per_core_one_fence        cheap test --test per_core_lease a_leased_per_core_generator_hands_its_node_on_after_every_id"
    "per_core_one_seal        monoflake_mutant_per_core_one_seal         cheap test --test per_core_lease a_per_core_holder_whose_claim_is_lost_seals_every_slot_and_writes_back"
    # The hand-over (docs/design.md, "The hand-over"): the give-back of ace1576 (.ci/run checks
    # it by a step of its own), and a claim that takes evidence for a record of its own.
    "give_back                monoflake_broken_give_back                 slow  run handover-check --quick"
    "evidence_as_record       monoflake_mutant_evidence_as_record        cheap run handover-check --quick"
    "evidence_as_record_store monoflake_mutant_evidence_as_record        slow  test --test store_conformance file_store_conformance"
    # The lease (issue 35's table, issue 34's case 2): each against the test that pins it.
    "no_seal                  monoflake_mutant_no_seal                   cheap test --test lease a_lost_lease_seals_and_its_write_back_covers_every_id"
    "no_unrecorded_wait       monoflake_mutant_no_unrecorded_wait        cheap run handover-check --quick"
    "file_reread_none         monoflake_mutant_file_reread_none          cheap test --test store_conformance file_store_conformance"
    "fence_no_deadline        monoflake_mutant_fence_no_deadline         slow  test --test lease a_lease_not_renewed_by_its_deadline_is_lost"
    "deadline_follows_clock   monoflake_mutant_deadline_follows_clock    cheap test --test lease a_clock_stepped_forward_while_checks_fail_issues_nothing_past_the_confirm_bound"
    "write_back_ignored       monoflake_mutant_write_back_ignored        cheap test --test lease a_write_back_that_fails_is_reported_and_the_node_stays_held"
    "release_no_write_back    monoflake_mutant_release_no_write_back     cheap test --test lease a_release_that_finds_its_claim_gone_writes_back_what_it_issued"
    # PostgreSQL (issue 34, cases 6 and 8): a session left at synchronous_commit=local, and
    # statements that name the table without its schema (found through search_path).
    "sync_commit_local        monoflake_mutant_sync_commit_local         cheap test --features postgres --lib only_on_and_remote_apply_are_durable"
    "search_path_table        monoflake_mutant_search_path_table         cheap test --features postgres --test postgres stores_with_different_search_paths_share_one_table"
    # PostgreSQL's clock as the hand-over's common clock (issue 34, case 4): a claimant that
    # found no row takes no floor from the database's clock; the database confirms a holder
    # however far its clock leads. Each against the model checker and the test that pins it.
    "db_floor                 monoflake_broken_db_floor                  cheap run handover-check --quick"
    "db_floor_pg              monoflake_broken_db_floor                  cheap test --features postgres --test postgres a_claimant_behind_the_database_that_finds_no_row"
    "db_lead                  monoflake_broken_db_lead                   cheap run handover-check --quick"
    "db_lead_pg               monoflake_broken_db_lead                   cheap test --features postgres --test postgres a_holder_further_ahead_of_the_database"
    # The same two on etcd, whose clock is the Date of its HTTP gateway.
    "db_floor_etcd            monoflake_broken_db_floor                  cheap test --features etcd --test etcd_clock a_claimant_behind_etcd_that_finds_no_record"
    "db_lead_etcd             monoflake_broken_db_lead                   cheap test --features etcd --test etcd_clock a_holder_further_ahead_of_etcd"
    # And the soak's scenario of case 4 on etcd (a holder 1 s ahead, stopped, the prefix cleared).
    "db_floor_etcd_soak       monoflake_broken_db_floor                  slow  chaos 0 7 --scenarios ahead-paused-etcd"
    "db_lead_etcd_soak        monoflake_broken_db_lead                   slow  chaos 0 7 --scenarios ahead-paused-etcd"
    # Records of one bit shape keyed by state name and compared as Unix ms (issue 34, case 3).
    "epoch_blind              monoflake_mutant_epoch_blind               cheap test --lib an_epoch_one_second_later_reads_the_record_one_second_later"
    "epoch_blind_restart      monoflake_mutant_epoch_blind               slow  test --test epochs"
    # The soak against PerThread's known bugs (a full build of the CLI and the soak: slow).
    "exit_stale_soak          monoflake_mutant_exit_stale                slow  chaos 30 35"
    "giveback_soak            monoflake_mutant_giveback_unpublished      slow  chaos 30 35"
    # .ci/run checks these two by steps of its own (every model must fail): slow here.
    "cas                      monoflake_broken_cas                       slow  loom models"
    "slots                    monoflake_broken_slots                     slow  loom slots"
)

usage() { sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; }

# Why a build failed, on the suite's own output: its last lines, and the disk's free space.
why() {
    tail -n 5 "$1" | sed 's/^/    | /'
    df -h "$base" | awk 'NR == 2 {print "    | free on " $6 ": " $4}'
}
base="${CARGO_TARGET_DIR:-$PWD/target}/mutants"
mkdir -p "$base"

cheap_only=false
list=false
baseline=true
keep=false
wanted=()
for arg in "$@"; do
    case "$arg" in
    --cheap) cheap_only=true ;;
    --list) list=true ;;
    --no-baseline) baseline=false ;;
    --keep) keep=true ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "mutants.sh: unknown option $arg" >&2; usage >&2; exit 2 ;;
    *) wanted+=("$arg") ;;
    esac
done

for w in ${wanted[@]+"${wanted[@]}"}; do
    printf '%s\n' "${MUTANTS[@]}" | awk '{print $1}' | grep -qx -- "$w" ||
        { echo "mutants.sh: no mutant named $w (--list shows them)" >&2; exit 2; }
done

if $list; then
    printf '%s\n' "${MUTANTS[@]}"
    exit 0
fi

# Builds (phase=build) or runs (phase=run) a check; its output goes to the caller's log.
check() {
    local phase=$1 kind=$2
    shift 2
    case "$kind" in
    test)
        if [ "$phase" = build ]; then
            cargo test -p monoflake --no-run "$@"
        else
            cargo test -p monoflake "$@"
        fi
        ;;
    loom)
        local file=$1
        RUSTFLAGS="--cfg loom $RUSTFLAGS" LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}" \
            cargo test -p monoflake-loom-tests --release --test "$file" $([ "$phase" = build ] && echo --no-run)
        ;;
    run)
        local pkg=$1
        shift
        if [ "$phase" = build ]; then
            cargo build --release -p "$pkg"
        else
            cargo run --release -q -p "$pkg" -- "$@"
        fi
        ;;
    chaos)
        local seconds=$1 seed=$2
        shift 2
        [ $# -gt 0 ] || set -- --scenarios none
        if [ "$phase" = build ]; then
            cargo build -q -p monoflake-cli -p monoflake-chaos \
                --features monoflake-cli/etcd,monoflake-cli/postgres
        else
            bash scripts/chaos.sh --seconds "$seconds" --seed "$seed" "$@"
        fi
        ;;
    sh)
        if [ "$phase" = build ]; then
            true
        else
            bash -c "$*"
        fi
        ;;
    *)
        echo "unknown kind $kind"
        return 2
        ;;
    esac
}

# The rows to run.
selected=()
for row in "${MUTANTS[@]}"; do
    read -r name _ cost _ <<<"$row"
    if [ "${#wanted[@]}" -gt 0 ]; then
        [[ " ${wanted[*]} " == *" $name "* ]] || continue
    elif $cheap_only && [ "$cost" != cheap ]; then
        continue
    fi
    selected+=("$row")
done

# Each check first passes on the unmutated build: a check that fails anyway would "kill"
# every mutant it is asked about.
if $baseline; then
    checked=" "
    for row in ${selected[@]+"${selected[@]}"}; do
        read -r _ _ _ kind args <<<"$row"
        key="$kind:${args// /_}"
        [[ "$checked" == *" $key "* ]] && continue
        checked+="$key "
        # shellcheck disable=SC2086 # args: one word each
        set -- $args
        dir="$base/baseline-$kind"
        log="$base/baseline-${key//[^A-Za-z0-9_.-]/_}.log"
        if ! { RUSTFLAGS="" CARGO_TARGET_DIR="$dir" check build "$kind" "$@" &&
            RUSTFLAGS="" CARGO_TARGET_DIR="$dir" check run "$kind" "$@"; } >"$log" 2>&1; then
            echo "baseline: $kind $* fails on the unmutated build (see $log): it can kill nothing"
            why "$log"
            exit 1
        fi
        echo "baseline: $kind $* passes on the unmutated build"
    done
fi

killed=0
total=0
broken=0
for row in ${selected[@]+"${selected[@]}"}; do
    read -r name cfg cost kind args <<<"$row"
    total=$((total + 1))
    log="$base/$name.log"
    # shellcheck disable=SC2086 # args: one word each
    set -- $args
    start=$(date +%s)
    if ! RUSTFLAGS="--cfg $cfg" CARGO_TARGET_DIR="$base/$name" check build "$kind" "$@" >"$log" 2>&1; then
        echo "mutant $name: ERROR, its check did not build (see $log)"
        why "$log"
        broken=$((broken + 1))
        $keep || rm -rf "${base:?}/$name"
        continue
    fi
    built=$(date +%s)
    if RUSTFLAGS="--cfg $cfg" CARGO_TARGET_DIR="$base/$name" check run "$kind" "$@" >>"$log" 2>&1; then
        echo "mutant $name: SURVIVED $kind $* (see $log)"
    else
        end=$(date +%s)
        echo "mutant $name: killed by $kind $* in $((end - built)) s (build $((built - start)) s)"
        killed=$((killed + 1))
    fi
    $keep || rm -rf "${base:?}/$name"
done
$keep || rm -rf "${base:?}"/baseline-*/
echo "mutants: $killed killed of $total"
[ "$killed" -eq "$total" ] && [ "$broken" -eq 0 ]
