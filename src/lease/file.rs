//! The embedded default node store: lock files and reservation files in a state directory.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read, Write};
use std::os::unix::fs::MetadataExt;
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
}

/// The file store's claim token: the locked file (the lock lives as long as it is open).
#[derive(Debug)]
struct FileClaim {
    lock: File,
    dir: PathBuf,
    lock_path: PathBuf,
}

const RESERVATION_HEADER: &str = "monoflake-reservation v1";

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
        Ok(FileStore { dir })
    }

    /// Opens the default state directory: `$MONOFLAKE_STATE_DIR`, else
    /// `$XDG_STATE_HOME/monoflake`, else `~/.local/state/monoflake`.
    ///
    /// # Errors
    ///
    /// As [`FileStore::open`]; [`Error::StateDir`] when none of the variables is set.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-env-{}", std::process::id()));
    /// assert_eq!(monoflake::FileStore::default_dir_from(Some(dir.clone().into()), None, None)?, dir);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn open_default() -> Result<Self, Error> {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        Self::open(Self::default_dir_from(
            var("MONOFLAKE_STATE_DIR"),
            var("XDG_STATE_HOME"),
            var("HOME"),
        )?)
    }

    /// The default directory from the values of `MONOFLAKE_STATE_DIR`, `XDG_STATE_HOME` and
    /// `HOME`, in that order of preference.
    ///
    /// # Errors
    ///
    /// [`Error::StateDir`] when all three are missing.
    ///
    /// ```
    /// use std::path::PathBuf;
    /// use monoflake::FileStore;
    /// assert_eq!(
    ///     FileStore::default_dir_from(None, Some("/x".into()), Some("/home/a".into()))?,
    ///     PathBuf::from("/x/monoflake")
    /// );
    /// assert_eq!(
    ///     FileStore::default_dir_from(None, None, Some("/home/a".into()))?,
    ///     PathBuf::from("/home/a/.local/state/monoflake")
    /// );
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn default_dir_from(
        monoflake_state_dir: Option<std::ffi::OsString>,
        xdg_state_home: Option<std::ffi::OsString>,
        home: Option<std::ffi::OsString>,
    ) -> Result<PathBuf, Error> {
        if let Some(dir) = monoflake_state_dir {
            return Ok(dir.into());
        }
        if let Some(state) = xdg_state_home {
            return Ok(PathBuf::from(state).join("monoflake"));
        }
        if let Some(home) = home {
            return Ok(PathBuf::from(home).join(".local/state/monoflake"));
        }
        Err(state_dir(
            Path::new("~/.local/state/monoflake"),
            "locate",
            io::Error::new(
                io::ErrorKind::NotFound,
                "none of MONOFLAKE_STATE_DIR, XDG_STATE_HOME, HOME is set",
            ),
        ))
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
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(|e| state_dir(&lock_path, "open", e))?;
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
    let until = text
        .strip_prefix(RESERVATION_HEADER)
        .and_then(|rest| rest.trim().strip_prefix("until_ms="))
        .and_then(|v| v.parse::<u64>().ok());
    match until {
        Some(until) => Ok(Some(until)),
        None => Err(state_dir(
            path,
            "parse",
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("not a reservation: {text:?}"),
            ),
        )),
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
        let tmp = self.dir.join(format!("node-{node}.reservation.tmp"));
        let write = || -> io::Result<()> {
            let mut f = File::create(&tmp)?;
            writeln!(f, "{RESERVATION_HEADER}\nuntil_ms={until_ms}")?;
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
        let dir = self.dir.join(layout.name());
        fs::create_dir_all(&dir).map_err(|e| state_dir(&dir, "create", e))?;
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
