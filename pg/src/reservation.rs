//! The data directory's reservation: the highest tick this server may have issued, written
//! to disk before any ID of a later tick is issued.
//!
//! One file, `monoflake.reservation` in the data directory (every server process's working
//! directory), holding the layout's state name, the tick, and the history the node was used
//! under (`identity.rs`; absent until the server first issues, and in files of version 1):
//!
//! ```text
//! monoflake reservation 2
//! twitter
//! 1234567890
//! node 7 timeline 1 backup none
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
const HEADER: &str = "monoflake reservation 2";
/// The first version: no identity line.
const HEADER_1: &str = "monoflake reservation 1";

/// What the file holds.
#[derive(Debug)]
pub(crate) struct Stored {
    /// The highest tick reserved.
    pub(crate) tick: u64,
    /// The identity line (`identity.rs`), "" when none was recorded.
    pub(crate) identity: String,
}

/// Reads the reservation: `None` when there is none yet.
pub(crate) fn read(state_name: &str) -> Result<Option<Stored>, String> {
    let mut text = String::new();
    match File::open(FILE) {
        Ok(mut f) => f
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read {FILE}: {e}"))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot open {FILE}: {e}")),
    };
    let mut lines = text.lines();
    let (Some(header @ (HEADER | HEADER_1)), Some(name), Some(tick)) =
        (lines.next(), lines.next(), lines.next())
    else {
        return Err(format!("{FILE} is damaged: {text:?}"));
    };
    let identity = match header {
        HEADER => lines.next().unwrap_or("").to_owned(),
        _ => String::new(),
    };
    if name != state_name {
        return Err(format!(
            "{FILE} was written under the layout '{name}', not '{state_name}' (monoflake.layout): \
             IDs of two layouts do not compare; remove the file deliberately to change the layout"
        ));
    }
    let tick = tick
        .parse()
        .map_err(|_| format!("{FILE} is damaged: tick {tick:?}"))?;
    Ok(Some(Stored { tick, identity }))
}

/// Writes the reservation `tick` with the identity line `identity` ("" for none) and
/// waits until it is on disk.
pub(crate) fn write(state_name: &str, tick: u64, identity: &str) -> Result<(), String> {
    let fail = |what: &str, e: io::Error| format!("cannot write {FILE} ({what}): {e}");
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(TEMP)
        .map_err(|e| fail("create", e))?;
    f.write_all(format!("{HEADER}\n{state_name}\n{tick}\n{identity}\n").as_bytes())
        .map_err(|e| fail("write", e))?;
    f.sync_all().map_err(|e| fail("fsync", e))?;
    drop(f);
    std::fs::rename(TEMP, FILE).map_err(|e| fail("rename", e))?;
    File::open(".")
        .and_then(|d| d.sync_all())
        .map_err(|e| fail("fsync of the data directory", e))
}
