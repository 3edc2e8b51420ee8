#!/usr/bin/env bash
# Builds the library's documentation as docs.rs does — nightly, every feature, `--cfg docsrs`,
# `-Zpublic-dependency` (Cargo.toml's [package.metadata.docs.rs]) — and checks that the pages
# of its types list no blanket implementation but the standard library's (a dependency's, such
# as tracing's `Instrument` or tonic's `IntoRequest`, on every type is noise).
#
#   scripts/docsrs.sh        (needs `rustup toolchain install nightly`; its own target dir,
#                             target/docsrs, unless CARGO_TARGET_DIR says otherwise)
set -euo pipefail
cd "$(dirname "$0")/.."

target=${CARGO_TARGET_DIR:-target/docsrs}
RUSTDOCFLAGS="--cfg docsrs" CARGO_TARGET_DIR=$target \
    cargo +nightly doc -Zpublic-dependency -p monoflake --no-deps --all-features

# A blanket impl's anchor names the trait and a one-letter type parameter:
# id="impl-Borrow%3CT%3E-for-T", id="impl-Instrument-for-T".
std_only='Any|Borrow|BorrowMut|CloneToUninit|From|Into|IntoIterator|Receiver|ToOwned|ToString|TryFrom|TryInto'
pages=("$target"/doc/monoflake/struct.*.html "$target"/doc/monoflake/enum.*.html)
found=$(grep -ho 'id="impl-[A-Za-z]*\(%3C[^"]*\)\?-for-[A-Z]"' "${pages[@]}" |
    sed 's/^id="impl-//; s/%3C.*//; s/-for-.*//' | sort -u)
foreign=$(grep -Evx "$std_only" <<<"$found" || true)
if [[ -n $foreign ]]; then
    echo "docsrs.sh: blanket impls from dependencies on the library's types:" $foreign >&2
    exit 1
fi
echo "docsrs.sh: ${#pages[@]} pages, blanket impls from the standard library only:" $found
