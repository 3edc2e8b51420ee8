//! A node's reservation file: its text, and reading and writing it by descriptor.
//!
//! ```text
//! monoflake-reservation v2
//! until_ms=1700000005000
//! sum=<16 hex digits: SipHash-2-4 of the value line>
//! ```
//!
//! The checksum tells damage (a value that lost or changed digits) from a good value; its key
//! is a constant, so it is **integrity, not authenticity**: anyone who can write the file can
//! forge it. Authenticity comes from who may write the directory (`trust.rs`). A version-1
//! file (monoflake 0.1, no checksum) is refused until an operator migrates it
//! ([`FileStore::migrate_v1`](super::FileStore::migrate_v1)).
//!
//! A reservation is replaced by a temporary file with an unpredictable name, created with
//! `O_EXCL | O_NOFOLLOW` and its mode set on the descriptor, fsynced, renamed over the old one
//! relative to the directory's descriptor, and the directory fsynced: a crash leaves the old
//! or the new reservation, never a torn one, and no path anyone else planted is followed. The
//! writer's claim is checked right before the rename and right after it, so a writer whose
//! lock file was deleted and taken meanwhile never raises its fence past what its successor
//! read.
//!
//! It touches only the file system (rustix), `trust.rs` and the crate's error type.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::trust::{Trust, fstat};
use crate::Error;
use crate::lease::handover;

/// The first line of a reservation file written by this version.
const HEADER: &str = "monoflake-reservation v2";
/// The first line of a reservation file written by monoflake 0.1 (no checksum).
const HEADER_V1: &str = "monoflake-reservation v1";
/// A reservation file is a few dozen bytes; anything longer is not one.
const MAX_LEN: u64 = 4096;

/// The name of node `node`'s reservation file.
pub(super) fn name(node: u64) -> OsString {
    format!("node-{node}.reservation").into()
}

/// The prefix of node `node`'s temporary reservation files.
fn temp_prefix(node: u64) -> String {
    format!(".node-{node}.reservation.")
}

/// The prefix of node `node`'s restored records: `node-<N>.restored.<16 hex>`, one file per
/// restoring holder (see [`restore`]).
fn restored_prefix(node: u64) -> String {
    format!("node-{node}.restored.")
}

/// The prefix of the temporary files a restoring holder writes (never removed as a crashed
/// writer's leftovers by a claimant, which could be waiting for that very record).
fn restored_temp_prefix(node: u64) -> String {
    format!(".node-{node}.restored.")
}

/// What a reservation file says.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Parsed {
    /// A version-2 file with a good checksum.
    Good(u64),
    /// A version-1 file (no checksum): its value cannot be told from a damaged one.
    V1(u64),
}

/// The checksum of a reservation's value line: SipHash-2-4 with a fixed key, so that a value
/// that lost or changed digits is not read as another time.
fn sum(value_line: &str) -> u64 {
    use std::hash::Hasher;
    let mut h = siphasher::sip::SipHasher24::new_with_keys(0x6d6f_6e6f, 0x0066_6c61_6b65);
    h.write(value_line.as_bytes());
    h.finish()
}

/// The text of a reservation until `until_ms`.
pub(super) fn text(until_ms: u64) -> String {
    let value_line = format!("until_ms={until_ms}");
    let sum = sum(&value_line);
    format!("{HEADER}\n{value_line}\nsum={sum:016x}\n")
}

/// Parses a reservation file's text.
pub(super) fn parse(text: &str) -> Result<Parsed, String> {
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    let value_line = lines.next().unwrap_or_default();
    let until = value_line
        .strip_prefix("until_ms=")
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or_else(|| format!("no until_ms=<digits> line in {text:?}"))?;
    match header {
        HEADER => {
            let sum_line = lines
                .next()
                .and_then(|l| l.strip_prefix("sum="))
                .and_then(|h| u64::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("no sum=<hex> line in {text:?}"))?;
            if sum_line != sum(value_line) || lines.any(|l| !l.is_empty()) {
                return Err(format!(
                    "its checksum does not match {value_line:?} (the file was changed or \
                     damaged)"
                ));
            }
            Ok(Parsed::Good(until))
        }
        HEADER_V1 if lines.all(|l| l.is_empty()) => Ok(Parsed::V1(until)),
        HEADER_V1 => Err(format!("trailing text after the value in {text:?}")),
        other => Err(format!("unknown header {other:?}")),
    }
}

/// Why a reservation could not be read.
#[derive(Debug)]
pub(super) enum ReadError {
    /// Not to be believed: a link (symbolic or hard), not a regular file, owned or writable
    /// by someone untrusted.
    Untrusted(String),
    /// Damaged: no valid reservation text.
    Damaged(String),
    /// The file system failed.
    Io(&'static str, Errno),
}

impl ReadError {
    /// The crate error for reading `path`.
    pub(super) fn into_error(self, path: &Path) -> Error {
        match self {
            ReadError::Untrusted(reason) => Error::UntrustedState {
                path: path.to_owned(),
                reason,
            },
            ReadError::Damaged(reason) => Error::DamagedReservation {
                path: path.to_owned(),
                reason,
            },
            ReadError::Io(action, e) => Error::StateDir {
                path: path.to_owned(),
                action,
                source: e.into(),
            },
        }
    }
}

/// Reads the reservation `name` in the directory `dir` (`None`: there is none), refusing a
/// file that is not a regular file the directory's trusted principals alone can write.
pub(super) fn read(
    dir: &OwnedFd,
    name: &OsStr,
    trust: &Trust,
) -> Result<Option<Parsed>, ReadError> {
    let fd = match rustix::fs::openat(
        dir,
        name,
        // NONBLOCK: opening a FIFO planted here must not wait for a writer.
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(Errno::LOOP) => {
            return Err(ReadError::Untrusted(
                "it is a symbolic link, which is never followed".into(),
            ));
        }
        Err(e) => return Err(ReadError::Io("open", e)),
    };
    let m = fstat(&fd).map_err(|e| ReadError::Io("stat", e))?;
    if m.kind != FileType::RegularFile {
        return Err(ReadError::Untrusted(format!(
            "it is not a regular file ({:?})",
            m.kind
        )));
    }
    // Another name for the same file (another node's reservation, a file elsewhere): its
    // value is not this node's.
    if m.nlink != 1 {
        return Err(ReadError::Untrusted(format!(
            "it has {} names (a hard link to another file)",
            m.nlink
        )));
    }
    trust.check_entry(&fd, &m).map_err(ReadError::Untrusted)?;
    if m.size > MAX_LEN {
        return Err(ReadError::Damaged(format!("it is {} bytes long", m.size)));
    }
    let mut text = String::new();
    std::fs::File::from(fd)
        .take(MAX_LEN)
        .read_to_string(&mut text)
        .map_err(|e| ReadError::Io("read", Errno::from_io_error(&e).unwrap_or(Errno::IO)))?;
    let parsed = parse(&text).map_err(ReadError::Damaged)?;
    Ok(Some(parsed))
}

/// Replaces node `node`'s reservation in `dir` with one until `until_ms` (see the module
/// comment), for a writer whose claim `held` says still stands. `path` names the directory in
/// errors.
///
/// `held` is asked right before the rename and right after it, and an error from either is
/// the write's: a claim checked only before the write (which takes a sync, a millisecond or
/// more) could have been lost meanwhile — its lock file deleted, and the node claimed by a
/// successor that read the reservation as it was. Before the rename, that leaves the record
/// what the successor read; after it, the writer at least never issues under what it wrote
/// (the successor's claim, and its reading, came before the rename, so its lock file was
/// already there to be seen). What is left is the few instructions between the check and the
/// rename: a successor that claims and writes its own record in them has it replaced by this
/// lower one until its next write.
pub(super) fn write(
    dir: &OwnedFd,
    path: &Path,
    node: u64,
    until_ms: u64,
    trust: &Trust,
    held: &dyn Fn() -> Result<(), Error>,
) -> Result<(), Error> {
    replace(
        dir,
        path,
        &name(node),
        &temp_prefix(node),
        until_ms,
        trust,
        held,
    )
}

/// Writes a record until `until_ms` as `target` in `dir`, through a temporary file named with
/// `temp_prefix`; `held` as for [`write`].
fn replace(
    dir: &OwnedFd,
    path: &Path,
    target: &OsStr,
    temp_prefix: &str,
    until_ms: u64,
    trust: &Trust,
    held: &dyn Fn() -> Result<(), Error>,
) -> Result<(), Error> {
    #[cfg(test)]
    failpoint::hit(failpoint::Stage::Start);
    let temp = format!("{temp_prefix}{:016x}", unpredictable());
    let fail = |action: &'static str, e: Errno| Error::StateDir {
        path: path.join(target),
        action,
        source: e.into(),
    };
    let fd = rustix::fs::openat(
        dir,
        temp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        trust.file_mode(),
    )
    .map_err(|e| fail("create a temporary file for", e))?;
    let written = (|| {
        // Exactly the mode meant, whatever the umask.
        rustix::fs::fchmod(&fd, trust.file_mode()).map_err(|e| fail("set the mode of", e))?;
        let mut file = std::fs::File::from(fd);
        file.write_all(text(until_ms).as_bytes())
            .map_err(|e| fail("write", Errno::from_io_error(&e).unwrap_or(Errno::IO)))?;
        rustix::fs::fsync(&file).map_err(|e| fail("sync", e))?;
        held()?;
        #[cfg(test)]
        failpoint::hit(failpoint::Stage::BeforeRename);
        rustix::fs::renameat(dir, temp.as_str(), dir, target).map_err(|e| fail("replace", e))
    })();
    if let Err(e) = written {
        let _ = rustix::fs::unlinkat(dir, temp.as_str(), AtFlags::empty());
        return Err(e);
    }
    held()?;
    rustix::fs::fsync(dir).map_err(|e| fail("sync the directory of", e))
}

/// Records, for node `node`, that the times before `until_ms` were used, as a file of its own
/// (`node-<N>.restored.<random>`): written by a holder that found its records deleted under
/// it, needing no claim, and never replacing anyone's file, so two restorers cannot undo each
/// other and a live holder's reservation is never touched. Claims read the largest.
pub(super) fn restore(
    dir: &OwnedFd,
    path: &Path,
    node: u64,
    until_ms: u64,
    trust: &Trust,
) -> Result<(), Error> {
    let target = format!("{}{:016x}", restored_prefix(node), unpredictable());
    replace(
        dir,
        path,
        OsStr::new(&target),
        &restored_temp_prefix(node),
        until_ms,
        trust,
        &|| Ok(()),
    )
}

/// The largest restored record of node `node` in `dir` (see [`restore`]), refusing one that
/// cannot be trusted or is damaged, as a reservation is (with the file's name).
pub(super) fn read_restored(
    dir: &OwnedFd,
    node: u64,
    trust: &Trust,
) -> Result<Option<u64>, (OsString, ReadError)> {
    let prefix = restored_prefix(node);
    let entries = rustix::fs::Dir::read_from(dir)
        .map_err(|e| (OsString::from("."), ReadError::Io("list", e)))?;
    let mut largest = None;
    for entry in entries {
        let entry = entry.map_err(|e| (OsString::from("."), ReadError::Io("list", e)))?;
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if !name.as_bytes().starts_with(prefix.as_bytes()) {
            continue;
        }
        let until = match read(dir, name, trust) {
            Ok(Some(Parsed::Good(until))) => until,
            Ok(None) => continue, // removed meanwhile
            Ok(Some(Parsed::V1(_))) => {
                return Err((
                    name.to_owned(),
                    ReadError::Damaged("a restored record is never version 1".into()),
                ));
            }
            Err(e) => return Err((name.to_owned(), e)),
        };
        largest = handover::reservation_of([largest, Some(until)]);
    }
    Ok(largest)
}

/// Removes node `node`'s restored records at or below `until_ms`, once its reservation (which
/// the caller holds the node to write) covers them.
pub(super) fn remove_restored_below(dir: &OwnedFd, node: u64, until_ms: u64, trust: &Trust) {
    let prefix = restored_prefix(node);
    let Ok(entries) = rustix::fs::Dir::read_from(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if name.as_bytes().starts_with(prefix.as_bytes())
            && matches!(read(dir, name, trust), Ok(Some(Parsed::Good(u))) if u <= until_ms)
        {
            let _ = rustix::fs::unlinkat(dir, name, AtFlags::empty());
        }
    }
}

/// Removes node `node`'s temporary reservation files left by a holder that crashed while it
/// wrote (called by a new holder, so no live writer of the node is left).
pub(super) fn remove_leftovers(dir: &OwnedFd, node: u64) {
    let prefix = temp_prefix(node);
    let Ok(entries) = rustix::fs::Dir::read_from(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_bytes();
        if name.starts_with(prefix.as_bytes()) {
            let _ = rustix::fs::unlinkat(dir, OsStr::from_bytes(name), AtFlags::empty());
        }
    }
}

/// 64 bits from the operating system's random source (the time and the process id, mixed by
/// a randomly keyed hash, if it has none): a temporary name nobody can plant ahead.
fn unpredictable() -> u64 {
    let mut bytes = [0u8; 8];
    match rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty()) {
        Ok(8) => u64::from_ne_bytes(bytes),
        _ => {
            use std::hash::BuildHasher;
            std::collections::hash_map::RandomState::new()
                .hash_one((std::time::SystemTime::now(), std::process::id()))
        }
    }
}

/// Test-only: code run at a stage of [`write`], on the thread that writes.
#[cfg(test)]
pub(super) mod failpoint {
    use std::cell::RefCell;

    /// Where in [`write`](super::write) a failpoint runs.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(in super::super) enum Stage {
        /// Nothing is written yet (the caller has just checked its claim).
        Start,
        /// The claim was checked again; the temporary file is not yet renamed.
        BeforeRename,
    }

    type Hook = Box<dyn FnMut(Stage)>;

    thread_local! {
        static HOOK: RefCell<Option<Hook>> = const { RefCell::new(None) };
    }

    /// Runs `hook` at every stage of the writes this thread makes, until [`clear`].
    pub(in super::super) fn set(hook: impl FnMut(Stage) + 'static) {
        HOOK.with(|h| *h.borrow_mut() = Some(Box::new(hook)));
    }

    /// Removes this thread's hook.
    pub(in super::super) fn clear() {
        HOOK.with(|h| *h.borrow_mut() = None);
    }

    pub(super) fn hit(stage: Stage) {
        let hook = HOOK.with(|h| h.borrow_mut().take());
        if let Some(mut hook) = hook {
            hook(stage);
            HOOK.with(|h| {
                h.borrow_mut().get_or_insert(hook);
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reservation_reads_back_as_written() {
        for until in [0, 1, 1_700_000_005_000, u64::MAX] {
            assert_eq!(parse(&text(until)), Ok(Parsed::Good(until)));
        }
    }

    #[test]
    fn damage_and_version_1_are_told_apart_from_a_good_value() {
        let good = text(1_700_000_005_000);
        // A digit lost or changed: the checksum no longer matches.
        let lost = good.replace("until_ms=1700000005000", "until_ms=170000000500");
        assert!(
            parse(&lost)
                .unwrap_err()
                .contains("checksum does not match")
        );
        let changed = good.replace("until_ms=1700000005000", "until_ms=1700000004000");
        assert!(
            parse(&changed)
                .unwrap_err()
                .contains("checksum does not match")
        );
        assert!(parse("").is_err());
        assert!(
            parse("monoflake-reservation v3\nuntil_ms=5\n")
                .unwrap_err()
                .contains("unknown header")
        );
        assert_eq!(
            parse("monoflake-reservation v1\nuntil_ms=5\n"),
            Ok(Parsed::V1(5))
        );
        assert!(parse("monoflake-reservation v1\nuntil_ms=5\nmore\n").is_err());
        assert!(parse(&format!("{good}extra\n")).is_err());
        // Digits only: a sign Rust's parser would take is damage, even under a good checksum.
        let signed = "until_ms=+5";
        let text = format!("{HEADER}\n{signed}\nsum={:016x}\n", sum(signed));
        assert!(parse(&text).unwrap_err().contains("no until_ms=<digits>"));
    }
}
