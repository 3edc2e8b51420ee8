#!/usr/bin/env bash
# The mutant suite: known-bad builds of the library, each one bug, and the check that must
# kill it — named, with the failure it must give.
#
#   bash scripts/mutants.sh                 every mutant
#   bash scripts/mutants.sh --cheap         those marked cheap (what .ci/run runs)
#   bash scripts/mutants.sh NAME...         the ones named
#   bash scripts/mutants.sh --list          the table (scripts/mutants/table)
#   --no-baseline                           skip running each check on the unmutated tree first
#                                           (then nothing is counted killed: see below)
#   --keep                                  keep the scratch copy and its builds (a second run
#                                           then rebuilds only what changed)
#
# The table, scripts/mutants/table, has one row per mutant, its fields split by `|`:
#
#   name | mutation | cheap|slow | timeout s | check | expected failure
#
# mutation:
#   cfg NAME          the bug sits behind `#[cfg(NAME)]` (or `cfg!(NAME)`) in the library; the
#                     scratch copy has NAME made true where it is tested (`all()` in its place)
#   patch FILE        scripts/mutants/FILE, applied to the scratch copy: the preferred way, since
#                     the library then carries no hook for it (STYLE.md point 22). A patch that
#                     no longer applies is an ERROR: re-base it.
# Every check builds and runs in one scratch copy of the working tree (uncommitted changes and
# all; never the tree itself), $CARGO_TARGET_DIR/mutants/tree, with target directories of its
# own (mutants/build, and mutants/build-loom for the loom models): each mutation is applied
# there and undone after, so the dependencies are built once per run, not once per mutant,
# and only the workspace's crates rebuild. (Never the repository's target directory: cargo
# names a copy's artifacts as the tree's own, so a mutant built there would stand in for them.)
# check (run from the tree's root; its output is the mutant's log):
#   test ARGS...      cargo test -p monoflake ARGS (e.g. --test fork some_test)
#   loom TEST         loom-tests/tests/TEST.rs, LOOM_MAX_PREEMPTIONS=2, release
#   run PKG ARGS...   the release binary of PKG with ARGS (e.g. the model checker)
#   chaos S SEED [FLAGS]  the soak: scripts/chaos.sh --seconds S --seed SEED --scenarios none,
#                     or FLAGS instead of --scenarios none (e.g. --scenarios deleted-dir)
#   sh BUILD ;; RUN   a shell command RUN, after the shell command BUILD has built what it runs
#                     (RUSTFLAGS and CARGO_TARGET_DIR set for both): a build error is an ERROR
# expected failure (what must happen for the mutant to count as killed):
#   test NAME: TEXT   the test NAME (as cargo prints it, or its last `::` part) FAILED, and TEXT
#                     (a fixed string) is in its failure output
#   exit N: REGEX     the check exited N, and a line of its output matches REGEX (grep -E),
#                     e.g. `exit 3: ^ *DUPLICATE` (the model checker found a tick issued twice)
#
# First, each check runs once on the unmutated copy and must pass within its timeout: a check
# that fails anyway kills nothing. Then each mutant: its build (a build that fails is an
# ERROR, never a kill), its check under `timeout`, and the outcome, one line each:
#   killed            the expected failure happened, within the timeout
#   SURVIVED          the check passed
#   WRONG-FAILURE     it failed, but not as expected (the failures it gave are printed)
#   TIMEOUT           it ran past its timeout (a hang is not a kill)
#   ERROR             the build, the patch or the baseline failed
# Last, `mutants: K killed of N` (and the count of each other outcome); it exits 0 only when
# every mutant was killed. The copy and its builds (2-4 GB) are removed at the end unless
# --keep is given (a second run then rebuilds only what changed). Logs:
# $CARGO_TARGET_DIR/mutants/<name>.log (the mutation and the build) and <name>.run.log (the
# check: what is judged).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
table=scripts/mutants/table

usage() { sed -n '2,56p' "$0" | sed 's/^# \{0,1\}//'; }

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

trim() { local s=$1; s=${s#"${s%%[![:space:]]*}"}; printf '%s' "${s%"${s##*[![:space:]]}"}"; }

# The table's rows: name, mutation, cost, timeout, check, expectation (tab-separated).
rows=()
while IFS= read -r line; do
    [[ "$line" =~ ^[[:space:]]*(#|$) ]] && continue
    IFS='|' read -r f_name f_mut f_cost f_timeout f_check f_expect <<<"$line"
    f_name=$(trim "$f_name")
    f_mut=$(trim "$f_mut")
    f_cost=$(trim "$f_cost")
    f_timeout=$(trim "$f_timeout")
    f_check=$(trim "$f_check")
    f_expect=$(trim "${f_expect:-}")
    bad=""
    [[ "$f_mut" =~ ^(cfg|patch)\ [^[:space:]]+$ ]] || bad="mutation must be 'cfg NAME' or 'patch FILE'"
    [[ "$f_cost" =~ ^(cheap|slow)$ ]] || bad="cost must be cheap or slow"
    [[ "$f_timeout" =~ ^[0-9]+$ ]] || bad="timeout must be seconds"
    [[ "$f_check" =~ ^(test|loom|run|chaos|sh)\  ]] || bad="unknown check kind"
    [[ "$f_check" != sh\ * || "$f_check" == *" ;; "* ]] || bad="an sh check is 'sh BUILD ;; RUN'"
    [[ "$f_expect" =~ ^(test\ [^:[:space:]]+|exit\ [0-9]+):\ .+ ]] ||
        bad="expected failure must be 'test NAME: TEXT' or 'exit N: REGEX'"
    if [[ "$f_mut" == patch\ * && ! -f "scripts/mutants/${f_mut#patch }" ]]; then
        bad="no patch scripts/mutants/${f_mut#patch }"
    fi
    if [ -n "$bad" ]; then
        echo "mutants.sh: $table: row $f_name: $bad" >&2
        exit 2
    fi
    rows+=("$f_name"$'\t'"$f_mut"$'\t'"$f_cost"$'\t'"$f_timeout"$'\t'"$f_check"$'\t'"$f_expect")
done <"$table"

for w in ${wanted[@]+"${wanted[@]}"}; do
    printf '%s\n' "${rows[@]}" | cut -f1 | grep -qx -- "$w" ||
        { echo "mutants.sh: no mutant named $w (--list shows them)" >&2; exit 2; }
done

if $list; then
    printf '%-26s %-48s %-5s %5s  %s\n' name mutation cost limit "check => expected failure"
    for row in "${rows[@]}"; do
        IFS=$'\t' read -r n m c t k e <<<"$row"
        printf '%-26s %-48s %-5s %4ss  %s => %s\n' "$n" "$m" "$c" "$t" "$k" "$e"
    done
    exit 0
fi

selected=()
for row in "${rows[@]}"; do
    IFS=$'\t' read -r name _ cost _ _ _ <<<"$row"
    if [ "${#wanted[@]}" -gt 0 ]; then
        [[ " ${wanted[*]} " == *" $name "* ]] || continue
    elif $cheap_only && [ "$cost" != cheap ]; then
        continue
    fi
    selected+=("$row")
done

target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
base="$target/mutants"
tree="$base/tree"
mkdir -p "$base"

# Why a step failed, from its log: the last lines, and the disk's free space.
why() {
    tail -n 5 "$1" | sed 's/^/    | /'
    df -h "$base" | awk 'NR == 2 {print "    | free on " $6 ": " $4}'
}

# check PHASE KIND ARGS...: builds (PHASE=build) or runs (PHASE=run) a check, from the current
# directory, with RUSTFLAGS and CARGO_TARGET_DIR as the caller set them; the caller's log gets
# the output. The run phase of every kind runs what the build phase built, under `timeout`
# ($limit seconds; the whole process group is signalled, then killed 10 s later).
check() {
    local phase=$1 kind=$2
    shift 2
    local run=(timeout -k 10 "$limit")
    case "$kind" in
    test)
        if [ "$phase" = build ]; then
            cargo test -p monoflake --no-run "$@"
        else
            "${run[@]}" cargo test -p monoflake "$@"
        fi
        ;;
    loom)
        local file=$1
        export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
        if [ "$phase" = build ]; then
            RUSTFLAGS="--cfg loom $RUSTFLAGS" cargo test -p monoflake-loom-tests --release \
                --test "$file" --no-run
        else
            RUSTFLAGS="--cfg loom $RUSTFLAGS" "${run[@]}" cargo test -p monoflake-loom-tests \
                --release --test "$file"
        fi
        ;;
    run)
        local pkg=$1
        shift
        if [ "$phase" = build ]; then
            cargo build --release -p "$pkg"
        else
            "${run[@]}" "$CARGO_TARGET_DIR/release/$pkg" "$@"
        fi
        ;;
    chaos)
        local seconds=$1 seed=$2
        shift 2
        [ $# -gt 0 ] || set -- --scenarios none
        if [ "$phase" = build ]; then
            cargo build -p monoflake-cli -p monoflake-chaos \
                --features monoflake-cli/etcd,monoflake-cli/postgres
        else
            "${run[@]}" bash scripts/chaos.sh --seconds "$seconds" --seed "$seed" "$@"
        fi
        ;;
    sh)
        local command="$*"
        if [ "$phase" = build ]; then
            bash -c "${command%% ;; *}"
        else
            "${run[@]}" bash -c "${command#* ;; }"
        fi
        ;;
    *)
        echo "unknown kind $kind"
        return 2
        ;;
    esac
}

# The target directory of a check's kind, in the scratch copy.
build_dir() {
    if [ "$1" = loom ]; then echo "$base/build-loom"; else echo "$base/build"; fi
}

# A log's failed tests, as cargo's test harness names them ("test NAME ... FAILED").
failed_tests() { sed -n 's/^test \(.*\) \.\.\. FAILED$/\1/p' "$1" | sort -u; }

# The failure output of test $2 in log $1: from its `---- NAME stdout ----` header to the next
# header or the `failures:` list.
failure_of() {
    awk -v name="$2" '
        $0 == "---- " name " stdout ----" { on = 1; next }
        on && (/^---- .* stdout ----$/ || /^failures:$/) { on = 0 }
        on { print }' "$1"
}

# What a failed check gave, for a WRONG-FAILURE line.
what_failed() {
    local log=$1 rc=$2 t
    local tests
    tests=$(failed_tests "$log")
    if [ -n "$tests" ]; then
        while IFS= read -r t; do
            echo "    | test $t FAILED: $(failure_of "$log" "$t" | grep -m1 -v -e '^thread .* panicked at' -e '^$' |
                cut -c1-200)"
        done <<<"$tests"
    else
        echo "    | exit $rc; its last lines:"
        tail -n 4 "$log" | sed 's/^/    |   /'
    fi
}

# judge LOG RC EXPECT: "killed", or what else it was.
judge() {
    local log=$1 rc=$2 expect=$3
    if grep -qE '^error(\[E[0-9]+\])?: could not compile|^error\[E[0-9]+\]' "$log"; then
        echo ERROR
    elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        echo TIMEOUT
    elif [ "$rc" -eq 0 ]; then
        echo SURVIVED
    else
        local head=${expect%%: *} want=${expect#*: }
        case "$head" in
        test\ *)
            local name=${head#test } t hit=false
            while IFS= read -r t; do
                [ -n "$t" ] || continue
                if [ "$t" = "$name" ] || [[ "$t" == *"::$name" ]]; then
                    failure_of "$log" "$t" | grep -qF -- "$want" && hit=true
                fi
            done < <(failed_tests "$log")
            if $hit; then echo killed; else echo WRONG-FAILURE; fi
            ;;
        exit\ *)
            if [ "$rc" -eq "${head#exit }" ] && grep -qE -- "$want" "$log"; then
                echo killed
            else
                echo WRONG-FAILURE
            fi
            ;;
        esac
    fi
}

# The scratch copy and the mutations (make_tree, mutate, unmutate).
# shellcheck source=scripts/mutants/lib.sh
. scripts/mutants/lib.sh

if ! make_tree >"$base/tree.log" 2>&1; then
    echo "mutants.sh: cannot copy the tree to $tree (see $base/tree.log)"
    why "$base/tree.log"
    exit 1
fi

# Each check's baseline, on the unmutated copy: a check that fails there can kill nothing.
# It also builds the dependencies each kind of check needs, once for the run.
declare -A baseline_ok=()
if $baseline; then
    for row in ${selected[@]+"${selected[@]}"}; do
        IFS=$'\t' read -r _ _ _ limit checkline _ <<<"$row"
        key="$limit:$checkline"
        [ -n "${baseline_ok[$key]+x}" ] && continue
        # shellcheck disable=SC2086 # the check: one word each (an sh check keeps its text)
        set -- $checkline
        kind=$1
        shift
        dir=$(build_dir "$kind")
        log="$base/baseline-$(printf '%s' "$checkline" | tr -c 'A-Za-z0-9_.-' _ | cut -c1-80).log"
        start=$(date +%s)
        if ! (cd "$tree" && RUSTFLAGS="" CARGO_TARGET_DIR="$dir" check build "$kind" "$@") \
            >"$log" 2>&1; then
            echo "baseline: $checkline: ERROR, it does not build on the unmutated tree (see $log)"
            why "$log"
            baseline_ok[$key]=false
            continue
        fi
        built=$(date +%s)
        (cd "$tree" && RUSTFLAGS="" CARGO_TARGET_DIR="$dir" check run "$kind" "$@") >"${log%.log}.run.log" 2>&1
        rc=$?
        end=$(date +%s)
        log=${log%.log}.run.log
        if [ "$rc" -eq 0 ]; then
            baseline_ok[$key]=true
            echo "baseline: $checkline passes on the unmutated tree in $((end - built)) s" \
                "(build $((built - start)) s)"
        else
            baseline_ok[$key]=false
            if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
                echo "baseline: $checkline: TIMEOUT on the unmutated tree (over $limit s)"
            else
                echo "baseline: $checkline FAILS on the unmutated tree (exit $rc, see $log):" \
                    "it can kill nothing"
                what_failed "$log" "$rc"
            fi
        fi
    done
fi

declare -A outcomes=()
killed=0
total=0
for row in ${selected[@]+"${selected[@]}"}; do
    IFS=$'\t' read -r name mutation _ limit checkline expect <<<"$row"
    total=$((total + 1))
    log="$base/$name.log"
    : >"$log"
    key="$limit:$checkline"
    # shellcheck disable=SC2086 # the check: one word each
    set -- $checkline
    kind=$1
    shift
    dir=$(build_dir "$kind")
    if $baseline && [ "${baseline_ok[$key]}" != true ]; then
        echo "mutant $name: ERROR, its check fails on the unmutated tree (above)"
        outcomes[ERROR]=$((${outcomes[ERROR]:-0} + 1))
        continue
    fi
    start=$(date +%s)
    if ! mutate "$mutation" >>"$log" 2>&1; then
        outcome=ERROR
        echo "mutant $name: ERROR, $mutation cannot be applied to this tree (re-base it; see $log)"
        why "$log"
    elif ! (cd "$tree" && RUSTFLAGS="" CARGO_TARGET_DIR="$dir" check build "$kind" "$@") \
        >>"$log" 2>&1; then
        outcome=ERROR
        echo "mutant $name: ERROR, its check did not build (see $log)"
        why "$log"
    else
        built=$(date +%s)
        # The check's own output, apart from the build's: only it can show the failure.
        log="$base/$name.run.log"
        (cd "$tree" && RUSTFLAGS="" CARGO_TARGET_DIR="$dir" check run "$kind" "$@") >"$log" 2>&1
        rc=$?
        end=$(date +%s)
        outcome=$(judge "$log" "$rc" "$expect")
        times="in $((end - built)) s (build $((built - start)) s)"
        case "$outcome" in
        killed)
            killed=$((killed + 1))
            echo "mutant $name: killed $times: $expect"
            ;;
        SURVIVED) echo "mutant $name: SURVIVED $checkline $times (see $log)" ;;
        TIMEOUT) echo "mutant $name: TIMEOUT, $checkline ran over $limit s (see $log)" ;;
        ERROR)
            echo "mutant $name: ERROR, a compile error while its check ran (see $log)"
            why "$log"
            ;;
        WRONG-FAILURE)
            echo "mutant $name: WRONG-FAILURE $times, expected $expect; it gave (see $log):"
            what_failed "$log" "$rc"
            ;;
        esac
    fi
    [ "$outcome" = killed ] || outcomes[$outcome]=$((${outcomes[$outcome]:-0} + 1))
    unmutate
done
$keep || rm -rf "${base:?}/build" "${base:?}/build-loom" "${tree:?}"
others=""
for o in SURVIVED WRONG-FAILURE TIMEOUT ERROR; do
    [ -z "${outcomes[$o]:-}" ] || others+=", ${outcomes[$o]} $o"
done
if ! $baseline; then
    echo "mutants: $killed failed as expected of $total, with no baseline run (--no-baseline):" \
        "none counts as killed$others"
    exit 1
fi
echo "mutants: $killed killed of $total$others"
[ "$killed" -eq "$total" ]
