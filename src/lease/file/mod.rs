//! The embedded default node store: lock files and reservation files in a state directory.
//!
//! * `mod.rs`: [`FileStore`] — claims, renewals, reservations, releases.
//! * `default.rs`: the default directory, host-wide or this user's own, and its notes.
//! * `legacy.rs`: records of before (version 1, layouts' state names).
//! * `trust.rs`: who may write the state directory; opening it by descriptor.
//! * `record.rs`: a reservation file's text, read and written by descriptor.
//! * `anchor.rs`: the host's anchors in `/var/tmp`; `host.rs`: the host-wide claim.

mod anchor;
mod caveats;
mod default;
mod host;
mod legacy;
mod record;
mod trust;

use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustix::fs::{FileType, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use self::default::{default_fix, private_fix};
use self::record::Parsed;
use self::trust::{
    Meta, TrustedDir, absolute, fstat, lstat_at, open_state_dir, open_subdir, stat_path,
};
use super::store::{Claim, NodeRequest, NodeStore};
use super::{handover, shape};
use crate::{Error, Layout};

/// A node store in a directory on one host; no server.
///
/// * **Per bit shape**: `<layout>` below is [`Layout::shape_key`] — a preset's name for a
///   preset's widths and order, whatever the epoch or tick — so every layout whose IDs can
///   equal another's shares its node claims and reservations, and a reservation holds an ID
///   value (Unix ms of the preset's clock for a preset's shape, else the time-field value),
///   read in each claimant's own epoch and tick. A layout's directory of before,
///   `<dir>/<state name>/` ([`Layout::state_name`]), is read at a claim as a floor.
/// * **Claim**: one lock file per node ID, `<dir>/<layout>/node-<N>.lock`, locked with
///   `flock`. The lock dies with the process — a crash or `kill -9` frees the node — and
///   cannot be shared: when every node ID is held the next claimant gets
///   [`Error::AllNodesHeld`].
/// * **Reservation**: `<dir>/<layout>/node-<N>.reservation`, with a checksum against damage,
///   written to a temporary file, fsynced, renamed over the old one, and the directory
///   fsynced: a crash leaves the old or the new reservation, never a torn one.
/// * **Renewal**: nothing to renew while the process lives; [`NodeStore::renew`] checks that the
///   state directory, the layout's directory and the lock file are still the ones opened (a
///   directory deleted or replaced under a holder would let a second process lock a new file
///   of the same name) and reports [`Error::LeaseLost`] otherwise.
/// * **A trust boundary.** The directory is opened once, component by component from `/`, and
///   everything in it by descriptor with `O_NOFOLLOW`: no symbolic link planted in it is ever
///   followed, temporary files are created `O_EXCL` under unpredictable names, and modes are
///   set on descriptors. A directory that anyone but its owner (or, with mode 2770, its group)
///   can write is refused ([`Error::UntrustedState`], with the command that fixes it), and so
///   is a record owned by, or writable by, anyone else: whoever cannot write the directory
///   cannot forge a reservation, stop a holder or redirect a write. See the "Security"
///   section of `docs/operations.md`.
/// * **Any node skips what it cannot use** — a lock file that is a directory or a link, a
///   damaged or untrusted reservation — and counts it
///   ([`Stats::nodes_skipped_unusable`](crate::Stats::nodes_skipped_unusable)); if no node is
///   left, [`Error::AllNodesHeld`] names them.
/// * Lock files are never deleted (deleting them would race with claimants).
///
/// # Example
///
/// ```
/// use monoflake::{Error, FileStore, Layout, NodeRequest, NodeStore};
///
/// let dir = std::env::temp_dir().join(format!("monoflake-doc-file-{}", std::process::id()));
/// let store = FileStore::open(&dir)?;
/// let layout = Layout::builder().epoch("2024-01-01").node_field("n", 1).build()?; // two node IDs
/// let a = store.claim(&layout, NodeRequest::Any)?;
/// let b = store.claim(&layout, NodeRequest::Any)?;
/// assert_eq!((a.node(), b.node()), (0, 1));
/// assert!(matches!(store.claim(&layout, NodeRequest::Any), Err(Error::AllNodesHeld { count: 2, .. })));
/// # drop((a, b)); std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct FileStore {
    /// The path given.
    path: PathBuf,
    /// The path given made absolute when the store was opened, for messages and for noticing
    /// the directory replaced: the same directory whatever the process's working directory
    /// is later.
    absolute: PathBuf,
    /// Whether it is the host-wide default (for the fix an error suggests).
    default: bool,
    /// The directory as opened and checked: used while it is still the one at `path`.
    dir: Arc<TrustedDir>,
    /// Why the default is this user's own directory ([`FileStore::default_note`]).
    note: Option<String>,
    /// The host the host-wide claims are made on (`host::scope_of`): `None`, this host.
    host_scope: Option<String>,
    /// The host's anchors of each node (`anchor.rs`), read at a claim and written with each
    /// reservation.
    anchors: Arc<anchor::Anchors>,
}

/// The host-wide default state directory.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/monoflake";

/// The file store's claim token: the locked file (the lock lives as long as it is open) and
/// the directories it was found in.
#[derive(Debug)]
struct FileClaim {
    /// Held, not read: the lock lives as long as this descriptor is open.
    _lock: OwnedFd,
    lock_meta: Meta,
    lock_name: OsString,
    /// The state directory the claim was made in.
    state: Arc<TrustedDir>,
    /// The layout's directory, where the lock and reservation files are.
    layout_dir: OwnedFd,
    layout_meta: Meta,
    layout_name: OsString,
    /// The layout's directory as a path, for messages.
    layout_path: PathBuf,
    /// The state directory's path, for noticing it removed or replaced.
    state_path: PathBuf,
    /// The layout claimed for, for the host's anchor and for converting the records' values
    /// (stored by bit shape, `shape.rs`) to its Unix ms (`None` only for
    /// [`FileStore::migrate_v1`], which converts nothing).
    layout: Option<Layout>,
    /// What the layout's records of before (`shape::legacy_key`) said, as a floor in its Unix
    /// ms: read at the claim, never written again.
    legacy: Option<u64>,
    /// The host-wide claim of the node (`host.rs`), held as long as the lock — or until a
    /// holder that lost its claim has written back what it used (`NodeStore::restore`): then
    /// a successor on this host may claim the node, and will read that record. `None` from
    /// the start only for the moment [`FileStore::migrate_v1`] holds a node.
    host: std::sync::Mutex<Option<host::HostClaim>>,
}

/// How one node fared in a claim.
enum Attempt {
    Claimed(Claim),
    /// Another claimant holds it: this directory's lock (`None`), or the host-wide claim of
    /// another process on this host, which the text names.
    Held(Option<String>),
}

impl FileStore {
    /// Opens (creating it, private to this user, when missing) a state directory.
    ///
    /// # Errors
    ///
    /// [`Error::UntrustedState`] when the directory, or a directory or link on its path, can
    /// be changed by users it does not trust (see the type's docs); [`Error::StateDir`] when
    /// it cannot be created or opened, or its absolute path is longer than the system resolves
    /// (4095 bytes: a holder checks its directory by that path).
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-open-{}", std::process::id()));
    /// let store = monoflake::FileStore::open(&dir)?;
    /// assert_eq!(store.dir(), dir);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    ///
    /// A directory every user can write is refused:
    ///
    /// ```
    /// use std::os::unix::fs::PermissionsExt;
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-open-ww-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777))?;
    /// let refused = monoflake::FileStore::open(&dir).unwrap_err();
    /// assert!(matches!(refused, monoflake::Error::UntrustedState { .. }));
    /// assert!(refused.to_string().contains("lets every user write it"));
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, Error> {
        let path = dir.into();
        let absolute = absolute(&path)?;
        let dir = Arc::new(open_state_dir(&absolute, &|reason| {
            private_fix(reason, &absolute)
        })?);
        let host_scope = host::scope_of(&absolute);
        Ok(FileStore {
            anchors: Arc::new(anchor::Anchors::open(host_scope.clone(), &absolute)),
            host_scope,
            path,
            absolute,
            default: false,
            dir,
            note: None,
        })
    }

    /// The state directory as it is now at its path: the one opened, or — when it was
    /// removed or replaced since (an operator's `rm -rf`, a tmp cleaner), or its owner or mode
    /// changed (a `chmod 0777`) — the one there now, opened and checked afresh. Claims made in
    /// a directory replaced have lost their lease by then.
    fn current(&self) -> Result<Arc<TrustedDir>, Error> {
        match stat_path(&self.absolute) {
            Ok(m) if m.same_standing(&self.dir.meta) => Ok(Arc::clone(&self.dir)),
            _ => {
                let fix = |reason: &str| {
                    if self.default {
                        default_fix(reason, &self.absolute)
                    } else {
                        private_fix(reason, &self.absolute)
                    }
                };
                Ok(Arc::new(open_state_dir(&self.absolute, &fix)?))
            }
        }
    }

    /// The state directory.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-dir-{}", std::process::id()));
    /// assert_eq!(monoflake::FileStore::open(&dir)?.dir(), dir);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn dir(&self) -> &Path {
        &self.path
    }

    /// Writes this user's anchor of the claim's node (`anchor.rs`): `until_ms` while the
    /// claim holds the node's host-wide claim, else only raised to it
    /// ([`handover::anchor_after`]). A failure is the reservation's: nothing may be issued
    /// under a reservation the host does not know.
    fn write_anchor(&self, token: &FileClaim, node: u64, until_ms: u64) -> Result<(), Error> {
        let Some(layout) = &token.layout else {
            return Ok(());
        };
        let holds_host = token
            .host
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some();
        self.anchors
            .write(layout, node, until_ms, holds_host)
            .map_err(|e| Error::StateDir {
                path: PathBuf::from("/var/tmp"),
                action: "write the host's anchor of the node in",
                source: e.into(),
            })
    }

    /// Locks node `node`'s lock file in the layout's directory, takes the node's host-wide
    /// claim of `layout`'s shape (none without a layout: [`FileStore::migrate_v1`], which
    /// issues nothing) and reads its reservation. `legacy` accepts a version-1 reservation
    /// (for [`FileStore::migrate_v1`]).
    #[allow(clippy::too_many_arguments)]
    fn lock_node(
        &self,
        layout: Option<&Layout>,
        state: &Arc<TrustedDir>,
        layout_dir: &OwnedFd,
        layout_name: &OsStr,
        layout_path: &Path,
        node: u64,
        legacy: bool,
    ) -> Result<Attempt, Error> {
        let trust = &state.trust;
        let lock_name = OsString::from(format!("node-{node}.lock"));
        let lock_path = layout_path.join(&lock_name);
        let untrusted = |reason: String| Error::UntrustedState {
            path: lock_path.clone(),
            reason,
        };
        let io = |action: &'static str, e: Errno| Error::StateDir {
            path: lock_path.clone(),
            action,
            source: e.into(),
        };
        let base = OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let lock = match rustix::fs::openat(
            layout_dir,
            &lock_name,
            base | OFlags::RDWR | OFlags::CREATE | OFlags::EXCL,
            trust.file_mode(),
        ) {
            Ok(fd) => {
                // Exactly the mode meant, whatever the umask.
                rustix::fs::fchmod(&fd, trust.file_mode()).map_err(|e| io("set the mode of", e))?;
                fd
            }
            Err(Errno::EXIST) => {
                match rustix::fs::openat(layout_dir, &lock_name, base | OFlags::RDWR, Mode::empty())
                {
                    Ok(fd) => fd,
                    // A lock file another user of the group made read-only: a read-only
                    // descriptor locks it just as well.
                    Err(Errno::ACCESS) => rustix::fs::openat(
                        layout_dir,
                        &lock_name,
                        base | OFlags::RDONLY,
                        Mode::empty(),
                    )
                    .map_err(|e| io("open", e))?,
                    Err(Errno::LOOP) => {
                        return Err(untrusted(
                            "it is a symbolic link, which is never followed".into(),
                        ));
                    }
                    Err(Errno::ISDIR) => return Err(untrusted("it is a directory".into())),
                    Err(e) => return Err(io("open", e)),
                }
            }
            Err(e) => return Err(io("create", e)),
        };
        let lock_meta = fstat(&lock).map_err(|e| io("stat", e))?;
        if lock_meta.kind != FileType::RegularFile {
            return Err(untrusted(format!(
                "it is not a regular file ({:?})",
                lock_meta.kind
            )));
        }
        if lock_meta.nlink != 1 {
            return Err(untrusted(format!(
                "it has {} names (a hard link to another file)",
                lock_meta.nlink
            )));
        }
        trust.check_entry(&lock, &lock_meta).map_err(untrusted)?;
        match rustix::fs::flock(&lock, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(Errno::WOULDBLOCK) => return Ok(Attempt::Held(None)),
            Err(e) => return Err(io("lock", e)),
        }
        // The lock excludes the processes of this directory; the host-wide claim, those of
        // every directory on the host. Held elsewhere: the lock goes with the descriptor,
        // nothing is read or written.
        let scope = self.host_scope.as_deref();
        let host = match layout.map(|layout| host::claim(layout, node, scope)) {
            None => None,
            Some(Ok(host::Host::Claimed(host))) => Some(host),
            Some(Ok(host::Host::Held { holder })) => return Ok(Attempt::Held(Some(holder))),
            Some(Err(e)) => {
                return Err(io(
                    "claim host-wide (an abstract Unix socket) the node of",
                    e,
                ));
            }
        };
        // The node's record here, or what the host's anchor says it used from another
        // directory, or what the layout's records of before said, whichever is later. The
        // records hold ID values of the bit shape (`shape.rs`): in this layout's Unix ms here.
        let (own, restored) = read_node(layout_dir, layout_path, node, trust, legacy)?;
        let floor = |v: Option<u64>| v.map(|v| layout.map_or(v, |l| shape::from_stored(l, v)));
        let before = match layout {
            Some(l) => self.legacy_floor(state, l, node)?,
            None => None,
        };
        let reserved = handover::reservation_of([
            floor(own),
            floor(restored),
            layout.and_then(|l| self.anchors.largest(l, node)),
            before,
        ]);
        record::remove_leftovers(layout_dir, node);
        // Close-on-exec, as every descriptor the store opens: a child a thread of this
        // process spawns must not keep the directory open.
        let layout_dir =
            rustix::io::fcntl_dupfd_cloexec(layout_dir, 0).map_err(|e| io("duplicate", e))?;
        let layout_meta = fstat(&layout_dir).map_err(|e| io("stat", e))?;
        let claim = |claim: Claim| {
            if own.is_some() {
                claim
            } else {
                claim.evidence_only()
            }
        };
        Ok(Attempt::Claimed(claim(Claim::new(
            node,
            reserved,
            FileClaim {
                _lock: lock,
                lock_meta,
                lock_name,
                state: Arc::clone(state),
                layout_dir,
                layout_meta,
                layout_name: layout_name.to_owned(),
                layout_path: layout_path.to_owned(),
                state_path: self.absolute.clone(),
                layout: layout.cloned(),
                legacy: before,
                host: std::sync::Mutex::new(host),
            },
        ))))
    }
}

impl FileClaim {
    /// The value stored for a reservation until `until_ms` of the claim's layout.
    fn stored(&self, until_ms: u64) -> u64 {
        self.layout
            .as_ref()
            .map_or(until_ms, |l| shape::to_stored(l, until_ms))
    }

    /// A stored value as the claim's layout's Unix ms.
    fn floor(&self, stored: Option<u64>) -> Option<u64> {
        stored.map(|v| self.layout.as_ref().map_or(v, |l| shape::from_stored(l, v)))
    }

    /// Whether the claim still stands: the state directory at its path, the layout's directory
    /// in it and the lock file in that are the very ones opened and locked.
    fn check_held(&self, node: u64) -> Result<(), Error> {
        let lost = |what: &Path, how: &str| Error::LeaseLost {
            node,
            reason: format!("{} was {how}", what.display()),
        };
        match stat_path(&self.state_path) {
            Ok(m) if m.same_file(&self.state.meta) => {}
            Ok(_) => return Err(lost(&self.state_path, "replaced")),
            Err(_) => return Err(lost(&self.state_path, "removed")),
        }
        match lstat_at(&self.state.fd, &self.layout_name) {
            Ok(m) if m.same_file(&self.layout_meta) => {}
            Ok(_) => return Err(lost(&self.layout_path, "replaced")),
            Err(_) => return Err(lost(&self.layout_path, "removed")),
        }
        let lock_path = self.layout_path.join(&self.lock_name);
        match lstat_at(&self.layout_dir, &self.lock_name) {
            Ok(m) if m.same_file(&self.lock_meta) => Ok(()),
            Ok(_) => Err(lost(&lock_path, "replaced")),
            Err(_) => Err(lost(&lock_path, "removed")),
        }
    }
}

/// Node `node`'s reservation in its layout's directory: its reservation file, and the largest
/// restored record (written by a holder whose records were deleted under it), apart.
/// `legacy` accepts a version-1 reservation (for [`FileStore::migrate_v1`]).
fn read_node(
    layout_dir: &OwnedFd,
    layout_path: &Path,
    node: u64,
    trust: &trust::Trust,
    legacy: bool,
) -> Result<(Option<u64>, Option<u64>), Error> {
    let reservation = record::name(node);
    let reserved = match record::read(layout_dir, &reservation, trust) {
        Ok(None) => None,
        Ok(Some(Parsed::Good(until))) => Some(until),
        Ok(Some(Parsed::V1(until))) if legacy => Some(until),
        Ok(Some(Parsed::V1(_))) => {
            return Err(Error::LegacyReservation {
                path: layout_path.join(&reservation),
            });
        }
        Err(e) => return Err(e.into_error(&layout_path.join(&reservation))),
    };
    let restored = record::read_restored(layout_dir, node, trust)
        .map_err(|(name, e)| e.into_error(&layout_path.join(name)))?;
    Ok((reserved, restored))
}

fn file_claim(claim: &Claim) -> Result<&FileClaim, Error> {
    claim.token::<FileClaim>().ok_or_else(|| Error::LeaseLost {
        node: claim.node(),
        reason: "the claim was not made by a file store".into(),
    })
}

/// How many unusable nodes an [`Error::AllNodesHeld`] describes.
const UNUSABLE_NAMED: usize = 3;

impl NodeStore for FileStore {
    fn describe(&self) -> String {
        format!("file {}", self.absolute.display())
    }

    fn claim(&self, layout: &Layout, request: NodeRequest) -> Result<Claim, Error> {
        let state = self.current()?;
        let layout_name = OsString::from(&*shape::key(layout));
        let (layout_dir, _) = open_subdir(&state, &self.absolute, &layout_name)?;
        let layout_path = self.absolute.join(&layout_name);
        match request {
            NodeRequest::Exact(node) => {
                layout.check_node(node)?;
                match self.lock_node(
                    Some(layout),
                    &state,
                    &layout_dir,
                    &layout_name,
                    &layout_path,
                    node,
                    false,
                )? {
                    Attempt::Claimed(claim) => Ok(claim),
                    Attempt::Held(holder) => Err(Error::NodeHeld { node, holder }),
                }
            }
            NodeRequest::Any => {
                // A node whose files cannot be used (a directory or a link where a lock file
                // should be, a damaged or untrusted reservation) is skipped, not fatal: one
                // bad entry must not stop every claim on the host.
                let mut unusable = 0;
                let mut reasons = Vec::new();
                for node in 0..=layout.max_node() {
                    match self.lock_node(
                        Some(layout),
                        &state,
                        &layout_dir,
                        &layout_name,
                        &layout_path,
                        node,
                        false,
                    ) {
                        Ok(Attempt::Claimed(claim)) => return Ok(claim.with_unusable(unusable)),
                        Ok(Attempt::Held(_)) => {}
                        Err(e) => {
                            unusable += 1;
                            if reasons.len() < UNUSABLE_NAMED {
                                reasons.push(format!("node {node}: {e}"));
                            }
                        }
                    }
                }
                Err(Error::AllNodesHeld {
                    count: layout.max_node().saturating_add(1),
                    ahead: 0,
                    unusable,
                    unusable_reasons: reasons,
                })
            }
        }
    }

    fn extend(&self, claim: &Claim, until_ms: u64) -> Result<(), Error> {
        let token = file_claim(claim)?;
        token.check_held(claim.node())?;
        let stored = token.stored(until_ms);
        record::write(
            &token.layout_dir,
            &token.layout_path,
            claim.node(),
            stored,
            &token.state.trust,
            &|| token.check_held(claim.node()),
        )?;
        self.write_anchor(token, claim.node(), until_ms)?;
        // Restored records the reservation now covers are no longer needed.
        record::remove_restored_below(&token.layout_dir, claim.node(), stored, &token.state.trust);
        Ok(())
    }

    fn reservation(&self, claim: &Claim) -> Result<Option<u64>, Error> {
        let token = file_claim(claim)?;
        token.check_held(claim.node())?;
        let here = read_node(
            &token.layout_dir,
            &token.layout_path,
            claim.node(),
            &token.state.trust,
            false,
        )?;
        let anchor = token
            .layout
            .as_ref()
            .and_then(|l| self.anchors.largest(l, claim.node()));
        let read = handover::reservation_of([
            token.floor(here.0),
            token.floor(here.1),
            anchor,
            token.legacy,
        ]);
        // Mutant: the file store's re-read finds nothing.
        #[cfg(monoflake_mutant_file_reread_none)]
        let read = read.and(None);
        Ok(read)
    }

    /// Writes a restored record for the claim's node into the state directory now at the
    /// store's path (made again, private, if it is missing), beside whatever is there; once
    /// it is written, lets go of the node's host-wide claim, so that a successor on this host
    /// may take the node — and reads this record. While it cannot be written the host-wide
    /// claim stays: a successor on this host is refused, naming this process, rather than
    /// start unaware of what it issued.
    fn restore(&self, claim: &Claim, until_ms: u64) -> Result<(), Error> {
        let token = file_claim(claim)?;
        let state = self.current()?;
        let (layout_dir, _) = open_subdir(&state, &self.path, &token.layout_name)?;
        record::restore(
            &layout_dir,
            &self.path.join(&token.layout_name),
            claim.node(),
            token.stored(until_ms),
            &state.trust,
        )?;
        // Exactly what it used, though its last reservation was higher: the node's host-wide
        // claim is still this holder's, so no successor on the host has written since; and a
        // successor in another directory should wait for what was used, not reserved.
        self.write_anchor(token, claim.node(), until_ms)?;
        drop(
            token
                .host
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take(),
        );
        Ok(())
    }

    fn renew(&self, claim: &Claim) -> Result<Option<Duration>, Error> {
        file_claim(claim)?.check_held(claim.node())?;
        Ok(None)
    }

    fn release(&self, claim: Claim, until_ms: u64) -> Result<(), Error> {
        let result = self.extend(&claim, until_ms);
        drop(claim); // closes the file: the lock goes with it
        result
    }

    fn caveats(&self) -> Vec<crate::Caveat> {
        self.find_caveats()
    }

    /// Closes the lock file (the lock goes with it) and the host-wide claim; nothing written.
    fn abandon(&self, claim: Claim) -> Result<(), Error> {
        file_claim(&claim)?;
        drop(claim);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
