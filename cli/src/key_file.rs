//! Reading a key file for opaque IDs (`--key-file` of `gen` and `decode`); `keys.rs` writes
//! new ones.
//!
//! Imports the failure type; no subcommand.

use std::path::Path;

use monoflake::OpaqueKey;

use crate::failure::Failure;

/// Reads a key file: 16 raw bytes or 32 hex digits (the library says what is wrong otherwise).
pub fn read_key(path: &Path) -> Result<OpaqueKey, Failure> {
    // At most a little more than the longest valid key (32 hex digits and a CRLF): a huge
    // file (or /dev/zero) is refused for its size, not read into memory.
    let cannot = |e: std::io::Error| Failure {
        code: 2,
        message: format!("cannot read the key file {}: {e}", path.display()),
    };
    let mut contents = Vec::with_capacity(64);
    std::io::Read::read_to_end(
        &mut std::io::Read::take(std::fs::File::open(path).map_err(cannot)?, 64),
        &mut contents,
    )
    .map_err(cannot)?;
    OpaqueKey::from_file_contents(&contents).map_err(|e| Failure {
        code: 2,
        message: format!("key file {}: {e}", path.display()),
    })
}
