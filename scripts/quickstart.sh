#!/usr/bin/env bash
# README's first command, run exactly as README writes it (read out of README now, not a
# copy), the way newcomers meet it on a fresh host:
#   1. as root, on an empty /var/lib (nothing set up);
#   2. then as an unprivileged user (uid 65534, a home of its own), after root's run made
#      /var/lib/monoflake private to root;
#   3. then as a second unprivileged user (uid 65533).
# All three run in one private mount namespace (unshare -m) with a tmpfs on /var/lib, so the
# host's own /var/lib is neither read nor changed. Each must print five decoded IDs, and the
# fifteen IDs must all differ. Run from the repository root: bash scripts/quickstart.sh
# As a user other than root (no namespace can be made) it runs the command once, as that user.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

# The first line of the first ```sh block under "## Quick start".
command=$(awk '/^## Quick start/ {q = 1} q && /^```sh/ {getline; print; exit}' README.md)
[ -n "$command" ] || { echo "quickstart: no command under README's Quick start" >&2; exit 1; }
echo "quickstart: README's first command: $command"

work=$(mktemp -d /tmp/monoflake-quickstart.XXXXXX)
chmod 755 "$work"
cleanup() {
    local rc=$?
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT

# Checks one run's output: five lines, each an ID and its decoded parts.
check() {
    local who=$1 out=$2
    local lines
    lines=$(grep -c . "$out" || true)
    if [ "$lines" != 5 ] || ! grep -qE '^[0-9]+ ' "$out" ||
        [ "$(grep -cE '^[0-9]+ .*(datacenter|worker)' "$out" || true)" != 5 ]; then
        echo "quickstart: $who did not get five decoded IDs:" >&2
        cat "$out" >&2
        exit 1
    fi
    echo "quickstart: $who: five decoded IDs, the first: $(head -1 "$out")"
}

if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null || ! command -v setpriv >/dev/null; then
    start=$(date +%s)
    (eval "$command") >"$work/out.self" 2>"$work/err.self" || {
        cat "$work/err.self" >&2
        exit 1
    }
    check "$(id -un)" "$work/out.self"
    echo "quickstart: one run as $(id -un) in $(($(date +%s) - start)) s (no namespace: not root)"
    exit 0
fi

# What the unprivileged users need: the toolchain, a home of their own, and a copy of the
# repository they may write, with the release build root's run made (so they build nothing
# again), bind-mounted over the repository's path.
cargo_bin=$(dirname "$(command -v cargo)")
rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
cargo_home=${CARGO_HOME:-$HOME/.cargo}
target=${CARGO_TARGET_DIR:-$repo/target}

inside=$(cat <<'EOF'
set -euo pipefail
mount -t tmpfs -o mode=755 tmpfs /var/lib
cd "$repo"
start=$(date +%s)
(eval "$command") >"$work/out.root" 2>"$work/err.root" || { cat "$work/err.root" >&2; exit 1; }
echo "quickstart: root's run took $(($(date +%s) - start)) s (building what was not built)"
# The users build with root's toolchain and registry at their very paths (cargo then finds
# root's release build fresh; another registry path would rebuild every crate): root's home
# is made reachable in this namespace (a tmpfs over it, every entry bound back), and the
# cargo home is a directory the user may write (cargo locks its package cache there) with
# root's bin/ and registry/ bound into it.
home_of_root=$HOME
if [ -d "$home_of_root" ] && [ "$(stat -c %a "$home_of_root")" != 755 ]; then
    mkdir -p "$work/old-home"
    mount --bind "$home_of_root" "$work/old-home"
    mount -t tmpfs -o mode=755 tmpfs "$home_of_root"
    for e in "$work/old-home"/.[!.]* "$work/old-home"/*; do
        [ -e "$e" ] || continue
        n=$(basename "$e")
        if [ -d "$e" ]; then mkdir "$home_of_root/$n"; else touch "$home_of_root/$n"; fi
        mount --bind "$e" "$home_of_root/$n"
    done
fi
mkdir -p "$work/cargo-home"
mount --bind "$cargo_home" "$work/cargo-home"
mount -t tmpfs -o mode=755 tmpfs "$cargo_home"
for d in bin registry git; do
    [ -d "$work/cargo-home/$d" ] || continue
    mkdir "$cargo_home/$d"
    mount --bind "$work/cargo-home/$d" "$cargo_home/$d"
done
for uid in 65534 65533; do
    home="$work/home-$uid"
    copy="$work/repo-$uid"
    mkdir -p "$home" "$copy"
    git -C "$repo" ls-files -co --exclude-standard -z | (cd "$repo" && xargs -0 cp --parents -a -t "$copy")
    mkdir -p "$copy/target"
    cp -a "$target/release" "$copy/target/"
    cp -a "$target/.rustc_info.json" "$target/CACHEDIR.TAG" "$copy/target/" 2>/dev/null || true
    chown -R "$uid:$uid" "$home" "$copy"
    chown "$uid:$uid" "$cargo_home"
    # Over the repository's own path, so cargo finds root's release build fresh; where this
    # user cannot reach that path (a clone under /root), in the copy's (cargo then builds).
    at="$repo"
    if setpriv --reuid="$uid" --regid="$uid" --clear-groups test -r "$repo/README.md"; then
        mount --bind "$copy" "$repo"
    else
        at="$copy"
    fi
    (cd "$at" && setpriv --reuid="$uid" --regid="$uid" --clear-groups \
        env -i PATH="$cargo_bin:/usr/bin:/bin" HOME="$home" CARGO_HOME="$cargo_home" \
        RUSTUP_HOME="$rustup_home" CARGO_TERM_COLOR=never \
        bash -c "$command") >"$work/out.$uid" 2>"$work/err.$uid" ||
        { echo "quickstart: uid $uid failed:" >&2; cat "$work/err.$uid" >&2; exit 1; }
    [ "$at" != "$repo" ] || umount "$repo"
    grep -h "^monoflake: " "$work/err.$uid" | sed "s/^/quickstart: uid $uid said: /" || true
done
EOF
)
repo="$repo" work="$work" command="$command" rustup_home="$rustup_home" \
    cargo_home="$cargo_home" cargo_bin="$cargo_bin" target="$target" \
    unshare -m --propagation private bash -c "$inside"

check root "$work/out.root"
check "uid 65534" "$work/out.65534"
check "uid 65533" "$work/out.65533"
all=$(cat "$work/out.root" "$work/out.65534" "$work/out.65533" | awk '{print $1}')
if [ "$(printf '%s\n' "$all" | sort -u | wc -l)" != 15 ]; then
    echo "quickstart: the three runs issued a duplicate:" >&2
    printf '%s\n' "$all" | sort | uniq -d >&2
    exit 1
fi
echo "quickstart: 15 IDs from root and two users, all different"
