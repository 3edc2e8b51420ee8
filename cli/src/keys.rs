//! Key files for opaque IDs: reading one (`--key-file`) and writing a new one (`keygen`).

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::Path;

use monoflake::OpaqueKey;

use crate::args::KeygenArgs;
use crate::commands::Failure;

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

/// `monoflake keygen`: 16 bytes from the operating system's random source, written as 32 hex
/// digits and a newline, to standard output or to a new file of mode 0600.
pub fn keygen(args: &KeygenArgs) -> Result<(), Failure> {
    let mut key = [0u8; 16];
    getrandom::fill(&mut key).map_err(|e| Failure {
        code: 1,
        message: format!("the operating system's random source failed: {e}"),
    })?;
    let mut text = String::with_capacity(33);
    for byte in key {
        text.push_str(&format!("{byte:02x}"));
    }
    text.push('\n');
    // The key must read back as it was written.
    OpaqueKey::from_file_contents(text.as_bytes())?;
    let Some(path) = &args.output else {
        let mut out = io::stdout().lock();
        out.write_all(text.as_bytes())?;
        return Ok(out.flush()?);
    };
    let cannot = |e: io::Error| Failure {
        code: if e.kind() == io::ErrorKind::AlreadyExists {
            2
        } else {
            1
        },
        message: if e.kind() == io::ErrorKind::AlreadyExists {
            format!(
                "{} exists; keygen never overwrites a key (every opaque ID made with it would \
                 change): remove it first, or choose another file",
                path.display()
            )
        } else {
            format!("cannot write the key file {}: {e}", path.display())
        },
    };
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(cannot)?;
    file.write_all(text.as_bytes()).map_err(cannot)?;
    file.sync_all().map_err(cannot)?;
    Ok(())
}
