//! The embedded default node store: lock files and reservation files in a state directory.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::store::{Claim, NodeRequest, NodeStore};
use crate::{Error, Layout};

/// A node store in a directory on one host; no server.
///
/// * **Claim**: one lock file per node ID, `<dir>/<layout>/node-<N>.lock`, locked with
///   `flock` ([`File::try_lock`]). The lock dies with the process — a crash or `kill -9` frees
///   the node — and cannot be shared: when every node ID is held the next claimant gets
///   [`Error::AllNodesHeld`].
/// * **Reservation**: `<dir>/<layout>/node-<N>.reservation`, written to a temporary file,
///   fsynced, renamed over the old one, and the directory fsynced: a crash leaves the old or
///   the new reservation, never a torn one.
/// * **Renewal**: nothing to renew while the process lives; [`NodeStore::renew`] checks that the
///   lock file is still the one locked (a deleted state directory would let a second process
///   lock a new file of the same name) and reports [`Error::LeaseLost`] otherwise.
/// * Lock files are never deleted (deleting them would race with claimants).
///
/// # Example
///
/// ```
/// use monoflake::{Error, FileStore, Layout, NodeRequest, NodeStore};
///
/// let dir = std::env::temp_dir().join(format!("monoflake-doc-file-{}", std::process::id()));
/// let store = FileStore::open(&dir)?;
/// let layout = Layout::builder().node_field("n", 1).build()?; // two node IDs
/// let a = store.claim(&layout, NodeRequest::Any)?;
/// let b = store.claim(&layout, NodeRequest::Any)?;
/// assert_eq!((a.node(), b.node()), (0, 1));
/// assert!(matches!(store.claim(&layout, NodeRequest::Any), Err(Error::AllNodesHeld { count: 2, .. })));
/// # drop((a, b)); std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct FileStore {
    dir: PathBuf,
    /// The host-wide default: every user on the host shares its node space, so the files it
    /// creates are usable by all of them (directories 0777, files 0666).
    shared: bool,
}

/// The host-wide default state directory, shared by every user on the host so that two
/// services under different users never take the same node ID.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/monoflake";

/// Mode of the directories a shared store creates: every user may create and replace files.
const SHARED_DIR_MODE: u32 = 0o777;
/// Mode of the files a shared store creates: every user may lock and rewrite them.
const SHARED_FILE_MODE: u32 = 0o666;

/// The file store's claim token: the locked file (the lock lives as long as it is open).
#[derive(Debug)]
struct FileClaim {
    lock: File,
    dir: PathBuf,
    lock_path: PathBuf,
    /// Whether the store is shared by every user on the host.
    shared: bool,
}

/// The first line of a reservation file written by this version.
const RESERVATION_HEADER: &str = "monoflake-reservation v2";
/// The first line of a reservation file written by monoflake 0.1 (no checksum).
const RESERVATION_HEADER_V1: &str = "monoflake-reservation v1";

impl FileStore {
    /// Opens (creating it when missing) a state directory.
    ///
    /// # Errors
    ///
    /// [`Error::StateDir`] when the directory cannot be created or is not writable.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-open-{}", std::process::id()));
    /// let store = monoflake::FileStore::open(&dir)?;
    /// assert_eq!(store.dir(), dir);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, Error> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|e| state_dir(&dir, "create", e))?;
        // Prove it is writable now, not at the first claim.
        let probe = dir.join(format!(".probe-{}", std::process::id()));
        File::create(&probe).map_err(|e| state_dir(&dir, "write in", e))?;
        let _ = fs::remove_file(&probe);
        Ok(FileStore { dir, shared: false })
    }

    /// Opens the host-wide state directory `dir`, shared by every user on the host: creates it
    /// (mode 0777) when missing, and makes every directory and file it creates usable by all
    /// users (0777, 0666), so that services under different users share one node space.
    ///
    /// # Errors
    ///
    /// [`Error::StateDir`] when the directory cannot be created or written, with the command
    /// that fixes it.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-shared-{}", std::process::id()));
    /// let store = monoflake::FileStore::open_shared(&dir)?;
    /// use std::os::unix::fs::PermissionsExt;
    /// assert_eq!(std::fs::metadata(&dir)?.permissions().mode() & 0o777, 0o777);
    /// # drop(store); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_shared(dir: impl Into<PathBuf>) -> Result<Self, Error> {
        let dir = dir.into();
        let fix = |e: io::Error| {
            io::Error::new(
                e.kind(),
                format!(
                    "{e}; the host-wide state directory must be writable by every user that runs \
                     monoflake: create it with `sudo install -d -m 0777 {0}` (or give those \
                     users a shared group and `chmod 2770`), or choose a private directory with \
                     --state-dir or MONOFLAKE_STATE_DIR (its node IDs are then not coordinated \
                     with other users' processes)",
                    dir.display()
                ),
            )
        };
        let existed = dir.is_dir();
        fs::create_dir_all(&dir).map_err(|e| state_dir(&dir, "create", fix(e)))?;
        if !existed {
            let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(SHARED_DIR_MODE));
        }
        let probe = dir.join(format!(".probe-{}", std::process::id()));
        File::create(&probe).map_err(|e| state_dir(&dir, "write in", fix(e)))?;
        let _ = fs::remove_file(&probe);
        Ok(FileStore { dir, shared: true })
    }

    /// Makes a path this store created usable by every user, when the store is shared.
    /// Failures are ignored: a path another user created keeps the mode they gave it.
    fn share(&self, path: &Path, mode: u32) {
        if self.shared {
            let _ = fs::set_permissions(path, fs::Permissions::from_mode(mode));
        }
    }

    /// Opens the default state directory, host-wide and shared by every user
    /// ([`FileStore::open_shared`]): `$MONOFLAKE_STATE_DIR` when set, else
    /// [`DEFAULT_STATE_DIR`] (`/var/lib/monoflake`).
    ///
    /// The default is host-wide on purpose: a per-user default would give two services under
    /// different users two separate node spaces on one host, and both would take node 0.
    ///
    /// # Errors
    ///
    /// As [`FileStore::open_shared`]: a host-wide directory that cannot be used is an error
    /// that says how to fix it, never a silent fallback to a private directory.
    ///
    /// ```
    /// use std::path::PathBuf;
    /// use monoflake::FileStore;
    /// assert_eq!(FileStore::default_dir_from(None), PathBuf::from("/var/lib/monoflake"));
    /// assert_eq!(FileStore::default_dir_from(Some("/srv/ids".into())), PathBuf::from("/srv/ids"));
    /// ```
    pub fn open_default() -> Result<Self, Error> {
        Self::open_shared(Self::default_dir_from(std::env::var_os(
            "MONOFLAKE_STATE_DIR",
        )))
    }

    /// The default directory given the value of `MONOFLAKE_STATE_DIR`: that value, else
    /// [`DEFAULT_STATE_DIR`].
    ///
    /// ```
    /// assert_eq!(
    ///     monoflake::FileStore::default_dir_from(None),
    ///     std::path::Path::new(monoflake::DEFAULT_STATE_DIR)
    /// );
    /// ```
    pub fn default_dir_from(monoflake_state_dir: Option<std::ffi::OsString>) -> PathBuf {
        monoflake_state_dir
            .filter(|v| !v.is_empty())
            .map_or_else(|| PathBuf::from(DEFAULT_STATE_DIR), PathBuf::from)
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
        &self.dir
    }

    fn try_node(&self, dir: &Path, node: u64) -> Result<Option<Claim>, Error> {
        let lock_path = dir.join(format!("node-{node}.lock"));
        let existed = lock_path.exists();
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .or_else(|e| match e.kind() {
                // Another user's lock file: a read-only descriptor locks it just as well.
                io::ErrorKind::PermissionDenied => File::open(&lock_path),
                _ => Err(e),
            })
            .map_err(|e| state_dir(&lock_path, "open", e))?;
        if !existed {
            self.share(&lock_path, SHARED_FILE_MODE);
        }
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(e)) => return Err(state_dir(&lock_path, "lock", e)),
        }
        let reserved = read_reservation(&dir.join(format!("node-{node}.reservation")))?;
        Ok(Some(Claim::new(
            node,
            reserved,
            FileClaim {
                lock,
                dir: dir.to_owned(),
                lock_path,
                shared: self.shared,
            },
        )))
    }
}

fn state_dir(path: &Path, action: &'static str, source: io::Error) -> Error {
    Error::StateDir {
        path: path.to_owned(),
        action,
        source,
    }
}

fn read_reservation(path: &Path) -> Result<Option<u64>, Error> {
    let mut text = String::new();
    match File::open(path) {
        Ok(mut f) => f
            .read_to_string(&mut text)
            .map_err(|e| state_dir(path, "read", e))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(state_dir(path, "read", e)),
    };
    parse_reservation(&text)
        .map(Some)
        .map_err(|reason| Error::DamagedReservation {
            path: path.to_owned(),
            reason,
        })
}

/// The checksum of a reservation's value line: SipHash-2-4 with a fixed key, so that a value
/// that lost or changed digits is not read as another time.
fn reservation_sum(value_line: &str) -> u64 {
    use std::hash::Hasher;
    let mut h = siphasher::sip::SipHasher24::new_with_keys(0x6d6f_6e6f, 0x0066_6c61_6b65);
    h.write(value_line.as_bytes());
    h.finish()
}

/// Parses a reservation file: v2 (`until_ms=N` and `sum=<hex>`), or v1 (no checksum, from
/// monoflake 0.1).
fn parse_reservation(text: &str) -> Result<u64, String> {
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    let value_line = lines.next().unwrap_or_default();
    let until = value_line
        .strip_prefix("until_ms=")
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or_else(|| format!("no until_ms=<digits> line in {text:?}"))?;
    match header {
        RESERVATION_HEADER => {
            let sum = lines
                .next()
                .and_then(|l| l.strip_prefix("sum="))
                .and_then(|h| u64::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("no sum=<hex> line in {text:?}"))?;
            if sum != reservation_sum(value_line) || lines.any(|l| !l.is_empty()) {
                return Err(format!(
                    "its checksum does not match {value_line:?} (the file was changed or \
                     damaged)"
                ));
            }
            Ok(until)
        }
        // Written by monoflake 0.1, without a checksum: read as it is (a damaged v1 value
        // cannot be told from a good one), and replaced by a v2 file at the claim's first
        // write, which follows at once.
        RESERVATION_HEADER_V1 => Ok(until),
        other => Err(format!("unknown header {other:?}")),
    }
}

impl FileClaim {
    fn check_held(&self, node: u64) -> Result<(), Error> {
        let ours = self
            .lock
            .metadata()
            .map_err(|e| state_dir(&self.lock_path, "stat", e))?;
        match fs::metadata(&self.lock_path) {
            Ok(now) if now.dev() == ours.dev() && now.ino() == ours.ino() => Ok(()),
            _ => Err(Error::LeaseLost {
                node,
                reason: format!(
                    "the lock file {} was removed or replaced",
                    self.lock_path.display()
                ),
            }),
        }
    }

    fn write_reservation(&self, node: u64, until_ms: u64) -> Result<(), Error> {
        let path = self.dir.join(format!("node-{node}.reservation"));
        // One temporary name per process: a leftover from another user's crash is never in
        // the way.
        let tmp = self.dir.join(format!(
            "node-{node}.reservation.tmp.{}",
            std::process::id()
        ));
        let write = || -> io::Result<()> {
            let mut f = File::create(&tmp)?;
            if self.shared {
                f.set_permissions(fs::Permissions::from_mode(SHARED_FILE_MODE))?;
            }
            let value_line = format!("until_ms={until_ms}");
            let sum = reservation_sum(&value_line);
            writeln!(f, "{RESERVATION_HEADER}\n{value_line}\nsum={sum:016x}")?;
            f.sync_all()?;
            fs::rename(&tmp, &path)?;
            File::open(&self.dir)?.sync_all()
        };
        write().map_err(|e| state_dir(&path, "write", e))
    }
}

fn file_claim(claim: &Claim) -> Result<&FileClaim, Error> {
    claim.token::<FileClaim>().ok_or_else(|| Error::LeaseLost {
        node: claim.node(),
        reason: "the claim was not made by a file store".into(),
    })
}

impl NodeStore for FileStore {
    fn describe(&self) -> String {
        format!("file {}", self.dir.display())
    }

    fn claim(&self, layout: &Layout, request: NodeRequest) -> Result<Claim, Error> {
        let dir = self.dir.join(&*layout.state_name());
        if !dir.is_dir() {
            fs::create_dir_all(&dir).map_err(|e| state_dir(&dir, "create", e))?;
            self.share(&dir, SHARED_DIR_MODE);
        }
        match request {
            NodeRequest::Exact(node) => {
                layout.check_node(node)?;
                self.try_node(&dir, node)?.ok_or(Error::NodeHeld { node })
            }
            NodeRequest::Any => {
                for node in 0..=layout.max_node() {
                    if let Some(claim) = self.try_node(&dir, node)? {
                        return Ok(claim);
                    }
                }
                Err(Error::AllNodesHeld {
                    count: layout.max_node().saturating_add(1),
                    ahead: 0,
                })
            }
        }
    }

    fn extend(&self, claim: &Claim, until_ms: u64) -> Result<(), Error> {
        let token = file_claim(claim)?;
        token.check_held(claim.node())?;
        token.write_reservation(claim.node(), until_ms)
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
}
