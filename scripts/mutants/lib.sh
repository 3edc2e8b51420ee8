# Shared by scripts/mutants.sh and scripts/soak-power.sh (sourced, with $root the repository
# and $tree the scratch copy): a copy of the working tree, and one mutation at a time in it.
#
# The copy is the working tree as it is (uncommitted changes and all; not target/ or .git).
# Each file a mutation touched is copied back from the tree after it, with a new modification
# time, so that cargo rebuilds it. Build the copy in a target directory of its own, never the
# repository's: cargo names a copy's artifacts as the tree's own (same paths, same hashes), so
# a mutant built there would stand in for the real build.

make_tree() {
    rm -rf "$tree"
    mkdir -p "$tree"
    # -m: every file dated now, newer than anything a kept build made from a mutant.
    tar -C "$root" --exclude=./target --exclude=./.git --exclude=./python/.venv -cf - . |
        tar -C "$tree" -xmf -
}

touched=()
# mutate MUTATION: applies `cfg NAME` or `patch FILE` to the copy; the files it changed are
# left in `touched`, for unmutate.
mutate() {
    local what=${1#* }
    touched=()
    case "$1" in
    cfg\ *)
        # NAME made true wherever it is tested: `cfg(NAME)`, `not(NAME)`, `any(loom, NAME)`,
        # `cfg!(NAME)`, as `--cfg NAME` would, in every crate of the workspace (comments left).
        # Not by RUSTFLAGS: that would rebuild every dependency for each mutant.
        mapfile -t touched < <(cd "$tree" && grep -rlw --include='*.rs' -- "$what" . | sed 's|^\./||')
        [ "${#touched[@]}" -gt 0 ] || { echo "no .rs file tests cfg $what"; return 1; }
        (cd "$tree" && perl -pi -e "s/\\b\Q$what\E\\b/all()/g unless m{^\\s*//}" "${touched[@]}")
        ;;
    patch\ *)
        local file="$root/scripts/mutants/$what"
        [ -f "$file" ] || { echo "no patch $file"; return 1; }
        mapfile -t touched < <(sed -n 's|^+++ [ab]/\([^[:space:]]*\).*|\1|p' "$file")
        (cd "$tree" && patch -p1 --forward --batch --no-backup-if-mismatch <"$file")
        ;;
    *)
        echo "unknown mutation $1 (cfg NAME or patch FILE)"
        return 1
        ;;
    esac
}

# Undoes the last mutation: its files copied back from the tree.
unmutate() {
    local f
    for f in ${touched[@]+"${touched[@]}"}; do
        rm -f "$tree/$f"
        cp "$root/$f" "$tree/$f"
    done
    touched=()
}
