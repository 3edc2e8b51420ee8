//! The data directory's reservation: the highest tick this server may have issued, written
//! to disk before any ID of a later tick is issued.
//!
//! One file, `monoflake.reservation` in the data directory (every server process's working
//! directory), holding the layout's state name and the tick:
//!
//! ```text
//! monoflake reservation 1
//! twitter
//! 1234567890
//! ```
//!
//! written as the library's file store writes its records: a temporary file, fsync, rename,
//! fsync of the directory. A server starting reads it and issues only above it. A file whose
//! layout is not the one in force is refused, not guessed at (IDs of two layouts do not
//! compare as times): the operator removes it deliberately when changing the layout.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};

/// The file, relative to the data directory.
const FILE: &str = "monoflake.reservation";
const TEMP: &str = "monoflake.reservation.tmp";
const HEADER: &str = "monoflake reservation 1";

/// Reads the reservation: `None` when there is none yet.
pub(crate) fn read(state_name: &str) -> Result<Option<u64>, String> {
    let mut text = String::new();
    match File::open(FILE) {
        Ok(mut f) => f
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read {FILE}: {e}"))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot open {FILE}: {e}")),
    };
    let mut lines = text.lines();
    let (Some(HEADER), Some(name), Some(tick)) = (lines.next(), lines.next(), lines.next()) else {
        return Err(format!("{FILE} is damaged: {text:?}"));
    };
    if name != state_name {
        return Err(format!(
            "{FILE} was written under the layout '{name}', not '{state_name}' (monoflake.layout): \
             IDs of two layouts do not compare; remove the file deliberately to change the layout"
        ));
    }
    tick.parse()
        .map(Some)
        .map_err(|_| format!("{FILE} is damaged: tick {tick:?}"))
}

/// Writes the reservation `tick` and waits until it is on disk.
pub(crate) fn write(state_name: &str, tick: u64) -> Result<(), String> {
    let fail = |what: &str, e: io::Error| format!("cannot write {FILE} ({what}): {e}");
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(TEMP)
        .map_err(|e| fail("create", e))?;
    f.write_all(format!("{HEADER}\n{state_name}\n{tick}\n").as_bytes())
        .map_err(|e| fail("write", e))?;
    f.sync_all().map_err(|e| fail("fsync", e))?;
    drop(f);
    std::fs::rename(TEMP, FILE).map_err(|e| fail("rename", e))?;
    File::open(".")
        .and_then(|d| d.sync_all())
        .map_err(|e| fail("fsync of the data directory", e))
}
