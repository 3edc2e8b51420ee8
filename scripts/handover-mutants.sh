#!/usr/bin/env bash
# The hand-over's broken variants, each a patch of the holder's state machine
# (scripts/mutants/handover/*.patch), against the model checker that drives it:
#
#   bash scripts/handover-mutants.sh                 # every patch, every search
#   bash scripts/handover-mutants.sh fence_limit_late second_write_back
#   bash scripts/handover-mutants.sh --fast NAME...  # only the searches each patch names
#
# Each patch is applied to a scratch worktree of HEAD (never to this tree), handover-check is
# built from it and run; a patch counts as killed only when the checker exits with the code
# the patch's `# expect:` line names (3: a duplicate found; 4: the check went blind, for a
# liveness bug), and only if the unmutated tree, built and run first in the same scratch
# tree, exits 0. Anything else is printed as what it is — ERROR (the patch does not apply or
# does not build), TIMEOUT, WRONG-FAILURE (another exit code), SURVIVED — and fails the run.
# `--fast` runs, for the unmutated tree and each patch, only the searches the patch's
# `# search:` line names (CI's cheap set). Builds share target/ with the rest of the
# workspace (its dependencies built once), so each patch rebuilds only monoflake and the
# checker.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
timeout_s=${MUTANT_TIMEOUT:-900}
fast=0
if [ "${1:-}" = --fast ]; then
    fast=1
    shift
fi
patches=()
if [ "$#" -gt 0 ]; then
    for name in "$@"; do patches+=("scripts/mutants/handover/$name.patch"); done
else
    patches=(scripts/mutants/handover/*.patch)
fi
export CARGO_TARGET_DIR="$root/target"
scratch=$(mktemp -d)
cleanup() {
    git -C "$root" worktree remove --force "$scratch" >/dev/null 2>&1 || rm -rf "$scratch"
    git -C "$root" worktree prune >/dev/null 2>&1 || true
}
trap cleanup EXIT
git worktree add -q --detach "$scratch" HEAD || exit 1

# Builds the checker in the scratch tree and runs it (with ONLY=$1 when given); prints its
# exit code (or ERROR / TIMEOUT) and leaves its output in $scratch/out.
check() {
    if ! (cd "$scratch" && cargo build -q --release -p handover-check) >"$scratch/build.log" 2>&1; then
        echo ERROR
        return
    fi
    ONLY="${1:-}" timeout "$timeout_s" "$CARGO_TARGET_DIR/release/handover-check" >"$scratch/out" 2>/dev/null
    local rc=$?
    if [ "$rc" -eq 124 ]; then echo TIMEOUT; else echo "$rc"; fi
}

# The searches a patch names (`# search:`), in --fast mode; every search otherwise.
search_of() {
    [ "$fast" = 1 ] || return 0
    sed -n 's/^# search: *//p' "$1" 2>/dev/null | head -1
}

started=$(date +%s)
bases=""
for patch in "${patches[@]}"; do
    only=$(search_of "$patch")
    case " $bases " in *" [$only] "*) continue ;; esac
    bases="$bases [$only]"
    base=$(check "$only")
    if [ "$base" != 0 ]; then
        echo "the unmutated tree's check${only:+ of \"$only\"} did not pass (exit $base): no patch can be judged"
        tail -20 "$scratch/out" "$scratch/build.log" 2>/dev/null
        exit 1
    fi
    echo "unmutated${only:+ (\"$only\")}: exit 0 ($(grep -o '[0-9]* worlds explored' "$scratch/out"))"
done
killed=0
total=0
printf '%-26s %-8s %-6s %-14s %s\n' mutant expect exit verdict "found by"
for patch in "${patches[@]}"; do
    name=$(basename "$patch" .patch)
    total=$((total + 1))
    expect=$(sed -n 's/^# expect: *\([0-9]*\).*/\1/p' "$patch" 2>/dev/null | head -1)
    git -C "$scratch" checkout -q -- .
    rm -f "$scratch/out"
    took=0
    if [ ! -f "$patch" ] || ! git -C "$scratch" apply "$root/$patch" 2>/dev/null; then
        rc=ERROR
    else
        t=$(date +%s)
        rc=$(check "$(search_of "$patch")")
        took=$(($(date +%s) - t))
    fi
    case "$rc" in
        "$expect") verdict=KILLED; killed=$((killed + 1)) ;;
        0) verdict=SURVIVED ;;
        ERROR | TIMEOUT) verdict=$rc ;;
        *) verdict=WRONG-FAILURE ;;
    esac
    # The searches that found it: the line before each DUPLICATE or BLIND.
    found=$(grep -B1 -E '^  (DUPLICATE|BLIND)' "$scratch/out" 2>/dev/null |
        grep -vE '^  (DUPLICATE|BLIND)|^--' | cut -d: -f1-2 | head -2 | paste -sd';' -)
    printf '%-26s %-8s %-6s %-14s %s (%ss)\n' "$name" "${expect:-?}" "$rc" "$verdict" "$found" "$took"
done
git -C "$scratch" checkout -q -- .
echo "handover mutants: $killed killed of $total ($(($(date +%s) - started)) s)"
[ "$killed" -eq "$total" ]
