//! The host's memory of each node across state directories: an anchor file per node, bit
//! shape and user in `/var/tmp`.
//!
//! The host-wide claim (`host.rs`) keeps two processes of a host from holding one node at
//! once; a state directory remembers what its holders used, so a restart starts above it. Two
//! directories used in turn — root's `/var/lib/monoflake`, then a user's own default, or two
//! `--state-dir`s — each remember only their own holders: a claimant whose clock was set back
//! since the other directory's holder ran found no record and issued its IDs again (2,000,000
//! of 2,000,000 with the clock 0.9 s back, in a review). So every file-store holder also
//! writes what its reservation says to an anchor the whole host can read, and a claim starts
//! above the largest anchor of its node as above its own record:
//!
//! * `/var/tmp/monoflake-anchor-v2.<shape>.node-<N>.uid-<U>`, one per node, bit shape (as the
//!   host-wide claim names it) and user; written with the reservation (the same value, the
//!   same `fsync`s), by a temporary file renamed over it;
//! * the value is an ID value, as the records hold it (`shape.rs`: the shape's clock), so
//!   that layouts of one shape with different epochs or ticks read what the others used;
//!   an anchor of before (`monoflake-anchor-v1.…`, Unix ms of a writer whose epoch it does
//!   not say) is still read, as Unix ms of the claimant's own layout. That reading is exact
//!   for the layout that wrote it — the only one such an anchor ever protected — and a
//!   floor a claimant with an earlier epoch reads higher (a refusal, never a duplicate); a
//!   claimant whose epoch is later than the writer's reads it lower than the ID values it
//!   stands for, which is what it protected before either. Such anchors are never written
//!   again, and one written before the upgrade is in the past within a reservation window;
//! * `/var/tmp` is the one directory every user of a host may write that survives a reboot
//!   and that only its owner (root) may take entries from others in (the sticky bit); it is
//!   used only when it is root's and sticky, else no anchor is read or written;
//! * an anchor is only ever a floor: the claim takes the largest. Anyone can plant one, but a
//!   forged anchor can only raise a floor — a node reserved ahead is waited for, or refused
//!   or skipped ([`Error::ReservationAhead`](crate::Error::ReservationAhead)) — and a damaged
//!   one that reads lower changes nothing: refusals, never a duplicate. Files that are not
//!   regular, or are larger than a record, are passed over; nothing is followed.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::Layout;

/// Where the anchors are.
const DIR: &str = "/var/tmp";
/// The largest anchor file read.
const MAX_LEN: usize = 64;

/// Where a store's anchors are: `/var/tmp`, or the tests' scoped directory.
#[derive(Debug)]
enum Place {
    Host,
    /// `.<name>.host-anchors` beside the state directory `<name>`, made when missing: the
    /// tests' host scope, where each state directory is a host of its own. Beside it, not in
    /// it: tests delete state directories under their holders, as a host's `/var/tmp` is not.
    Scoped(std::path::PathBuf),
}

/// The anchors of one store.
#[derive(Debug)]
pub(super) struct Anchors {
    place: Place,
    uid: u32,
    /// The tests' host scope (`host::scope_of`), as the host-wide claim's.
    scope: Option<String>,
}

impl Anchors {
    /// The host's anchors in `/var/tmp`; in the tests' host scope (`scope` set, see
    /// `host::scope_of`) that host's own, beside the state directory.
    pub(super) fn open(scope: Option<String>, state_dir: &Path) -> Anchors {
        let place = match (&scope, state_dir.parent(), state_dir.file_name()) {
            (Some(_), Some(parent), Some(name)) => {
                let mut own = std::ffi::OsString::from(".");
                own.push(name);
                own.push(".host-anchors");
                Place::Scoped(parent.join(own))
            }
            _ => Place::Host,
        };
        Anchors {
            place,
            uid: rustix::process::geteuid().as_raw(),
            scope,
        }
    }

    /// The directory, opened afresh: `/var/tmp` when it is a directory owned by root with the
    /// sticky bit, else none (no anchor is read or written).
    fn dir(&self) -> Option<OwnedFd> {
        let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC;
        match &self.place {
            Place::Scoped(own) => {
                let _ = rustix::fs::mkdir(own, Mode::from_raw_mode(0o700));
                rustix::fs::open(own, flags, Mode::empty()).ok()
            }
            Place::Host => rustix::fs::open(DIR, flags, Mode::empty())
                .ok()
                .filter(|fd| {
                    rustix::fs::fstat(fd).is_ok_and(|st| {
                        st.st_uid == 0
                            && FileType::from_raw_mode(st.st_mode) == FileType::Directory
                            && st.st_mode & 0o1000 != 0
                    })
                }),
        }
    }

    /// Whether anchors are read and written here.
    pub(super) fn available(&self) -> bool {
        self.dir().is_some()
    }

    /// Why the host's anchors cannot be used by this process, if they cannot: `/var/tmp`
    /// missing, not a directory, not root's, without the sticky bit, or private to this
    /// service (systemd's `PrivateTmp=`, where the host's other processes never see them).
    pub(super) fn unusable(&self) -> Option<String> {
        let Place::Host = self.place else {
            return None;
        };
        let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC;
        let fd = match rustix::fs::open(DIR, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(e) => return Some(format!("{DIR} cannot be opened: {e}")),
        };
        let st = rustix::fs::fstat(&fd).ok()?;
        if st.st_uid != 0 || st.st_mode & 0o1000 == 0 {
            return Some(format!(
                "{DIR} is not root's with the sticky bit: owner uid {}, mode {:04o}",
                st.st_uid,
                st.st_mode & 0o7777
            ));
        }
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        super::caveats::var_tmp_is_private(&mountinfo)
            .then(|| format!("{DIR} is private to this service (systemd's PrivateTmp=)"))
    }

    /// The name every user's anchor of `node` of `layout`'s shape starts with: `v2`, those
    /// written now (ID values); `v1`, those of before (Unix ms of an unknown layout).
    fn prefix(&self, version: &str, layout: &Layout, node: u64) -> String {
        let scope = self
            .scope
            .as_deref()
            .map_or_else(String::new, |s| format!("test-{s}."));
        format!(
            "monoflake-anchor-{version}.{scope}{}.node-{node}.uid-",
            super::host::shape(layout)
        )
    }

    /// The largest anchor of `node`, any user's, in `layout`'s Unix ms (`None`: no anchor,
    /// or none usable).
    pub(super) fn largest(&self, layout: &Layout, node: u64) -> Option<u64> {
        let dir = self.dir()?;
        let current = self.prefix("v2", layout, node);
        let before = self.prefix("v1", layout, node);
        let entries = rustix::fs::Dir::read_from(&dir).ok()?;
        entries
            .flatten()
            .filter(|e| !e.file_name().to_bytes().contains(&b'~'))
            .filter_map(|e| {
                let name = e.file_name().to_bytes();
                if name.starts_with(current.as_bytes()) {
                    read(&dir, name).map(|v| crate::lease::shape::from_stored(layout, v))
                } else if name.starts_with(before.as_bytes()) {
                    read(&dir, name)
                } else {
                    None
                }
            })
            .max()
    }

    /// Writes this user's anchor of `node`: what [`handover::anchor_after`] says of
    /// `until_ms` over the anchor now — the value itself while this writer holds the node's
    /// host-wide claim (`holds_host`), else the larger of the two. Durable when it returns
    /// (the file and `/var/tmp` fsynced). Nothing to do without anchors.
    ///
    /// [`handover::anchor_after`]: crate::handover::anchor_after
    pub(super) fn write(
        &self,
        layout: &Layout,
        node: u64,
        until_ms: u64,
        holds_host: bool,
    ) -> Result<(), Errno> {
        let Some(dir) = self.dir() else {
            return Ok(());
        };
        let dir = &dir;
        let name = format!("{}{}", self.prefix("v2", layout, node), self.uid);
        let stored = crate::lease::shape::to_stored(layout, until_ms);
        let until = crate::handover::anchor_after(read(dir, name.as_bytes()), stored, holds_host);
        let mut random = [0u8; 8];
        getrandom::fill(&mut random).map_err(|_| Errno::IO)?;
        let temp = format!("{name}~{:016x}", u64::from_ne_bytes(random));
        let file = rustix::fs::openat(
            dir,
            temp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )?;
        let text = format!("until_ms={until}\n");
        let written = rustix::io::write(&file, text.as_bytes())
            .and_then(|n| {
                if n == text.len() {
                    Ok(())
                } else {
                    Err(Errno::IO)
                }
            })
            .and_then(|()| rustix::fs::fsync(&file))
            .and_then(|()| rustix::fs::renameat(dir, temp.as_str(), dir, name.as_str()));
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(dir, temp.as_str(), rustix::fs::AtFlags::empty());
            return Err(e);
        }
        rustix::fs::fsync(dir)
    }
}

/// One anchor's value: `None` for anything but a small regular file that says
/// `until_ms=<digits>`.
fn read(dir: &OwnedFd, name: &[u8]) -> Option<u64> {
    let name = OsString::from(std::ffi::OsStr::from_bytes(name));
    let file = rustix::fs::openat(
        dir,
        name.as_os_str(),
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let st = rustix::fs::fstat(&file).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile
        || usize::try_from(st.st_size).ok()? > MAX_LEN
    {
        return None;
    }
    let mut buf = [0u8; MAX_LEN];
    let n = rustix::io::read(&file, &mut buf).ok()?;
    let text = std::str::from_utf8(&buf[..n]).ok()?;
    text.strip_prefix("until_ms=")?.trim_end().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host's own anchors (`/var/tmp`), under a name no other test uses.
    fn scoped(tag: &str) -> Anchors {
        let mut a = Anchors::open(None, Path::new("/nonexistent"));
        a.scope = Some(format!("unit-{tag}-{}", std::process::id()));
        a
    }

    fn layout() -> Layout {
        Layout::twitter()
    }

    /// Whether this host's `/var/tmp` is one anchors go to (a root-owned directory with the
    /// sticky bit, as on every usual host and in CI), read without the code under test: where
    /// it is, the anchors must be available, and the tests below run.
    fn host_has_anchors(a: &Anchors) -> bool {
        use std::os::unix::fs::MetadataExt;
        let usual = std::fs::symlink_metadata(DIR)
            .is_ok_and(|m| m.is_dir() && m.uid() == 0 && m.mode() & 0o1000 != 0);
        assert_eq!(a.available(), usual, "anchors available in {DIR}");
        usual
    }

    fn clean(a: &Anchors, node: u64) {
        if let Some(dir) = &a.dir() {
            let name = format!("{}{}", a.prefix("v2", &layout(), node), a.uid);
            let _ = rustix::fs::unlinkat(dir, name.as_str(), rustix::fs::AtFlags::empty());
        }
    }

    #[test]
    fn an_anchor_is_read_back_and_lowered_only_under_the_host_wide_claim() {
        let a = scoped("rw");
        if !host_has_anchors(&a) {
            return; // no root-owned sticky /var/tmp here: nothing to test
        }
        assert_eq!(a.largest(&layout(), 3), None);
        a.write(&layout(), 3, 5_000, true).unwrap();
        assert_eq!(a.largest(&layout(), 3), Some(5_000));
        a.write(&layout(), 3, 4_000, false).unwrap();
        assert_eq!(a.largest(&layout(), 3), Some(5_000));
        a.write(&layout(), 3, 4_000, true).unwrap();
        assert_eq!(a.largest(&layout(), 3), Some(4_000));
        // Another node, another shape: not this one's.
        assert_eq!(a.largest(&layout(), 4), None);
        assert_eq!(a.largest(&Layout::sonyflake(), 3), None);
        clean(&a, 3);
    }

    /// Anchors hold ID values: a layout of the same shape with its epoch 1 s later reads
    /// one 1 s later. An anchor of before (`v1`, Unix ms of an unnamed layout) reads as the
    /// reader's own Unix ms; a forged anchor of either kind only ever raises the floor.
    #[test]
    fn anchors_are_id_values_and_those_of_before_read_as_the_reader_s_ms() {
        let a = scoped("epoch");
        if !host_has_anchors(&a) {
            return;
        }
        let dir = &a.dir().unwrap();
        let later = Layout::builder()
            .node_field("worker", 10)
            .epoch_ms(layout().epoch_ms() + 1_000)
            .build()
            .unwrap();
        a.write(&layout(), 5, 1_800_000_000_000, true).unwrap();
        assert_eq!(a.largest(&later, 5), Some(1_800_000_001_000));
        assert_eq!(a.largest(&layout(), 5), Some(1_800_000_000_000));
        // Written under the later epoch, read under Twitter's: 1 s earlier, the same IDs.
        a.write(&later, 5, 1_800_000_002_000, true).unwrap();
        assert_eq!(a.largest(&layout(), 5), Some(1_800_000_001_000));
        let plant = |name: String, body: &str| {
            std::fs::write(std::path::Path::new(DIR).join(&name), body).unwrap();
            name
        };
        // Another user's forged anchors: lower changes nothing, higher raises.
        let low = plant(
            format!("{}4242", a.prefix("v2", &layout(), 5)),
            "until_ms=7\n",
        );
        assert_eq!(a.largest(&later, 5), Some(1_800_000_002_000));
        let old = plant(
            format!("{}4243", a.prefix("v1", &layout(), 5)),
            "until_ms=1800000009000\n",
        );
        assert_eq!(a.largest(&later, 5), Some(1_800_000_009_000));
        assert_eq!(a.largest(&layout(), 5), Some(1_800_000_009_000));
        for name in [low, old] {
            let _ = rustix::fs::unlinkat(dir, name.as_str(), rustix::fs::AtFlags::empty());
        }
        clean(&a, 5);
    }

    #[test]
    fn the_largest_of_every_user_s_anchor_counts_and_junk_is_passed_over() {
        let a = scoped("largest");
        if !host_has_anchors(&a) {
            return;
        }
        let dir = &a.dir().unwrap();
        let prefix = a.prefix("v2", &layout(), 9);
        let plant = |uid: &str, body: &str| {
            let name = format!("{prefix}{uid}");
            let _ = rustix::fs::unlinkat(dir, name.as_str(), rustix::fs::AtFlags::empty());
            std::fs::write(std::path::Path::new(DIR).join(&name), body).unwrap();
            name
        };
        let names = [
            plant("1001", "until_ms=7000\n"),
            plant("1002", "until_ms=9000\n"),
            plant("1003", "until_ms=garbage\n"),
            plant("1004", &"9".repeat(200)),
            // Longer than an anchor can be, though its first 64 bytes read as a larger one.
            plant("1005", &format!("{:<65}", "until_ms=12000")),
        ];
        a.write(&layout(), 9, 8_000, true).unwrap();
        assert_eq!(a.largest(&layout(), 9), Some(9_000));
        // Exactly as long as an anchor can be: read.
        let longest = plant("1006", &format!("{:<64}", "until_ms=11000"));
        assert_eq!(a.largest(&layout(), 9), Some(11_000));
        for name in names.into_iter().chain([longest]) {
            let _ = rustix::fs::unlinkat(dir, name.as_str(), rustix::fs::AtFlags::empty());
        }
        clean(&a, 9);
    }
}
