//! `monoflake keygen`: a new key file for opaque IDs (`key_file.rs` reads one).

use std::fs::OpenOptions;
use std::io::{self, Write};

use monoflake::OpaqueKey;

use crate::args::KeygenArgs;
use crate::failure::Failure;

/// `monoflake keygen`: a new key from the operating system's random source
/// ([`OpaqueKey::generate`]), written as 32 hex digits and a newline, to standard output or to
/// a new file of mode 0600.
pub fn run(args: &KeygenArgs) -> Result<(), Failure> {
    let mut text = OpaqueKey::generate()?.to_hex();
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
