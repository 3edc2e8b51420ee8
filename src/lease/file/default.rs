//! The default state directory: the host-wide `/var/lib/monoflake`, or — for a user who
//! cannot use it — that user's own, and what the choice is told as.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::trust::{absolute, open_state_dir};
use super::{DEFAULT_STATE_DIR, FileStore, anchor, host};
use crate::Error;

impl FileStore {
    /// Opens the default state directory: `$MONOFLAKE_STATE_DIR` when set, else
    /// [`DEFAULT_STATE_DIR`] (`/var/lib/monoflake`), creating it private to this user (mode
    /// 0700) when missing; for a user other than root who cannot use that one, this user's
    /// own directory ([`FileStore::user_dir_from`]), saying why in [`FileStore::default_note`].
    ///
    /// Node IDs stay exclusive on the host whichever directory a process uses: every claim
    /// also takes the node's host-wide claim (an abstract Unix socket per node and bit shape,
    /// bound while the claim lives), so two processes on one host never hold one node at
    /// once — whatever directory each was given. What the directory adds is memory: the
    /// reservation a restart starts above. Processes that take turns on a node should
    /// therefore share one directory, which the host-wide default does with a group
    /// (mode 2770):
    ///
    /// ```text
    /// sudo groupadd monoflake
    /// sudo usermod -aG monoflake USER          # for every user that runs monoflake
    /// sudo install -d -m 2770 -g monoflake /var/lib/monoflake
    /// ```
    ///
    /// Under systemd, have `systemd-tmpfiles` make it — a line `d /var/lib/monoflake 2770 root
    /// monoflake -` in `/etc/tmpfiles.d/monoflake.conf` — and give each unit
    /// `SupplementaryGroups=monoflake`. Not `StateDirectory=`: systemd hands that directory,
    /// recursively, to the starting unit's own user, and a directory owned by another user
    /// than root or this one is refused.
    ///
    /// # Errors
    ///
    /// As [`FileStore::open`]: for `$MONOFLAKE_STATE_DIR`, for root, or when this user's own
    /// directory cannot be used either (then the error about the host-wide one, which says
    /// how to share it).
    ///
    /// ```
    /// use std::path::PathBuf;
    /// use monoflake::FileStore;
    /// assert_eq!(FileStore::default_dir_from(None), PathBuf::from("/var/lib/monoflake"));
    /// assert_eq!(FileStore::default_dir_from(Some("/srv/ids".into())), PathBuf::from("/srv/ids"));
    /// let store = FileStore::open_default()?;
    /// if let Some(note) = store.default_note() {
    ///     eprintln!("monoflake: {note}"); // a user who cannot use /var/lib/monoflake
    /// }
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn open_default() -> Result<Self, Error> {
        let set = std::env::var_os("MONOFLAKE_STATE_DIR").filter(|v| !v.is_empty());
        let explicit = set.is_some();
        let path = Self::default_dir_from(set);
        let host_wide = Self::open_as_default(path);
        let e = match host_wide {
            Ok(store) => return Ok(store),
            Err(e) if explicit || rustix::process::geteuid().is_root() => return Err(e),
            Err(e) if !this_user_cannot_use(&e) => return Err(e),
            Err(e) => e,
        };
        // Without the host's anchors a directory of this user's own would not know what the
        // host-wide one's holders used: keep the error.
        if !anchor::Anchors::open(None, Path::new(DEFAULT_STATE_DIR)).available() {
            return Err(e);
        }
        let Some(own) =
            Self::user_dir_from(std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME"))
        else {
            return Err(e);
        };
        let why = match &e {
            Error::StateDir {
                path,
                action,
                source,
            } => format!(
                "cannot {action} {}: {}",
                path.display(),
                source.to_string().split(". ").next().unwrap_or_default()
            ),
            other => other.to_string(),
        };
        let Ok(mut store) = Self::open(&own) else {
            return Err(e);
        };
        let note = format!(
            "state directory {} ({why}); node IDs are still claimed host-wide (no other \
             process in this network namespace holds the same node) and what each node used \
             is anchored in /var/tmp for every directory; share {DEFAULT_STATE_DIR} with a \
             group to keep one directory for every user",
            own.display()
        );
        #[cfg(feature = "tracing")]
        tracing::info!(dir = %own.display(), "monoflake: {note}");
        store.note = Some(note);
        Ok(store)
    }

    /// Opens `path` as the default directory (the fix an error suggests is the default's).
    fn open_as_default(path: PathBuf) -> Result<Self, Error> {
        let absolute = absolute(&path)?;
        let dir = Arc::new(open_state_dir(&absolute, &|reason| {
            default_fix(reason, &absolute)
        })?);
        let host_scope = host::scope_of(&absolute);
        Ok(FileStore {
            anchors: Arc::new(anchor::Anchors::open(host_scope.clone(), &absolute)),
            host_scope,
            path,
            absolute,
            default: true,
            dir,
            note: None,
        })
    }

    /// Why [`FileStore::open_default`] uses this user's own directory instead of the
    /// host-wide one, in one line for a person (`None` when it uses the host-wide one, or
    /// `$MONOFLAKE_STATE_DIR`). A command line prints it once on standard error.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-note-{}", std::process::id()));
    /// assert_eq!(monoflake::FileStore::open(&dir)?.default_note(), None);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn default_note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// This user's own state directory, for a user who cannot use the host-wide one:
    /// `$XDG_STATE_HOME/monoflake` when that is an absolute path, else
    /// `$HOME/.local/state/monoflake`; `None` without a home.
    ///
    /// ```
    /// use std::path::PathBuf;
    /// use monoflake::FileStore;
    /// assert_eq!(
    ///     FileStore::user_dir_from(None, Some("/home/ann".into())),
    ///     Some(PathBuf::from("/home/ann/.local/state/monoflake"))
    /// );
    /// assert_eq!(
    ///     FileStore::user_dir_from(Some("/var/state/ann".into()), Some("/home/ann".into())),
    ///     Some(PathBuf::from("/var/state/ann/monoflake"))
    /// );
    /// // A relative XDG_STATE_HOME is ignored, as the XDG specification says.
    /// assert_eq!(
    ///     FileStore::user_dir_from(Some("state".into()), None),
    ///     None
    /// );
    /// ```
    pub fn user_dir_from(
        xdg_state_home: Option<OsString>,
        home: Option<OsString>,
    ) -> Option<PathBuf> {
        let xdg = xdg_state_home
            .map(PathBuf::from)
            .filter(|p| p.is_absolute());
        if let Some(xdg) = xdg {
            return Some(xdg.join("monoflake"));
        }
        home.map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .map(|home| home.join(".local/state/monoflake"))
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
}

/// Whether an error about the host-wide directory says that this user may not use it (it
/// cannot create it, open it, or trust it), rather than that something is broken.
fn this_user_cannot_use(e: &Error) -> bool {
    match e {
        // `EACCES`/`EPERM` and `EROFS`, as std names them.
        Error::StateDir { source, .. } => matches!(
            source.kind(),
            std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
        ),
        Error::UntrustedState { .. } => true,
        _ => false,
    }
}

/// What an error about a directory given to [`FileStore::open`] suggests.
pub(super) fn private_fix(reason: &str, path: &Path) -> String {
    format!(
        "{reason}. Use a directory that only you can write (for example `install -d -m 0700 \
         {0}`), or share one with a group: `install -d -m 2770 -g GROUP {0}`",
        path.display()
    )
}

/// What an error about the host-wide default directory suggests.
pub(super) fn default_fix(reason: &str, path: &Path) -> String {
    format!(
        "{reason}. The host-wide state directory is shared only with the users of its group: \
         `sudo groupadd monoflake`, `sudo usermod -aG monoflake USER` for every user that runs \
         monoflake, then `sudo install -d -m 2770 -g monoflake {0}` (under systemd: the \
         tmpfiles.d line `d {0} 2770 root monoflake -` and SupplementaryGroups=monoflake in \
         each unit); or give this service a directory of its own (MONOFLAKE_STATE_DIR, \
         FileStore::open): its nodes are still claimed host-wide, but its records are its \
         own",
        path.display()
    )
}
