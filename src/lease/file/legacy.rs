//! Records of before: version-1 reservations migrated once, and the records a layout kept
//! under its state name before records were kept by bit shape, read as floors.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::FileType;
use rustix::io::Errno;

use super::record::{self, Parsed};
use super::trust::{TrustedDir, lstat_at, open_subdir};
use super::{Attempt, FileStore, file_claim, read_node};
use crate::lease::{handover, shape};
use crate::{Error, Layout};

impl FileStore {
    /// Rewrites every version-1 reservation (monoflake 0.1, no checksum) of free nodes as
    /// version 2, and returns the files rewritten. Version-1 files are refused at a claim
    /// ([`Error::LegacyReservation`]),
    /// since a damaged value cannot be told from a good one: run this once, as an operator
    /// who has checked the directory, after upgrading. Nodes held by a live process are left
    /// alone; files that cannot be trusted (a link, another owner) are an error.
    ///
    /// # Errors
    ///
    /// [`Error::UntrustedState`], [`Error::DamagedReservation`] or [`Error::StateDir`] for the
    /// first file that cannot be migrated (those before it are migrated).
    ///
    /// ```
    /// use monoflake::{FileStore, Layout, NodeRequest, NodeStore};
    /// let dir = std::env::temp_dir().join(format!("monoflake-doc-migrate-{}", std::process::id()));
    /// let store = FileStore::open(&dir)?;
    /// let layout_dir = dir.join(Layout::twitter().state_name().as_ref());
    /// std::fs::create_dir_all(&layout_dir)?;
    /// std::fs::write(layout_dir.join("node-4.reservation"), "monoflake-reservation v1\nuntil_ms=5000\n")?;
    /// // Refused until migrated.
    /// assert!(store.claim(&Layout::twitter(), NodeRequest::Exact(4)).is_err());
    /// assert_eq!(store.migrate_v1()?, vec![layout_dir.join("node-4.reservation")]);
    /// let claim = store.claim(&Layout::twitter(), NodeRequest::Exact(4))?;
    /// assert_eq!(claim.reserved_until_ms(), Some(5000));
    /// # drop(claim); std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn migrate_v1(&self) -> Result<Vec<PathBuf>, Error> {
        let mut migrated = Vec::new();
        let io = |path: &Path, action: &'static str, e: Errno| Error::StateDir {
            path: path.to_owned(),
            action,
            source: e.into(),
        };
        let state = self.current()?;
        let layouts =
            rustix::fs::Dir::read_from(&state.fd).map_err(|e| io(&self.absolute, "list", e))?;
        let mut names: Vec<OsString> = layouts
            .flatten()
            .filter(|e| e.file_type() == FileType::Directory)
            .map(|e| OsStr::from_bytes(e.file_name().to_bytes()).to_owned())
            // Not "." nor "..": layouts' names never start with a dot.
            .filter(|n| !n.as_bytes().starts_with(b"."))
            .collect();
        names.sort();
        for layout_name in names {
            let (layout_dir, _) = open_subdir(&state, &self.absolute, &layout_name)?;
            let layout_path = self.absolute.join(&layout_name);
            let entries =
                rustix::fs::Dir::read_from(&layout_dir).map_err(|e| io(&layout_path, "list", e))?;
            let mut nodes: Vec<u64> = entries
                .flatten()
                .filter_map(|e| {
                    let name = std::str::from_utf8(e.file_name().to_bytes())
                        .ok()?
                        .to_owned();
                    name.strip_prefix("node-")?
                        .strip_suffix(".reservation")?
                        .parse()
                        .ok()
                })
                .collect();
            nodes.sort_unstable();
            for node in nodes {
                let name = record::name(node);
                let path = layout_path.join(&name);
                // Held by a live process: it wrote (or will write) its own reservation. A node
                // whose files cannot be trusted is an error, not a file silently left refused.
                let claim = match self.lock_node(
                    None,
                    &state,
                    &layout_dir,
                    &layout_name,
                    &layout_path,
                    node,
                    true,
                )? {
                    Attempt::Claimed(claim) => claim,
                    Attempt::Held(_) => continue,
                };
                let token = file_claim(&claim)?;
                match record::read(&token.layout_dir, &name, &state.trust) {
                    Ok(Some(Parsed::V1(until))) => {
                        record::write(
                            &token.layout_dir,
                            &layout_path,
                            node,
                            until,
                            &state.trust,
                            &|| token.check_held(node),
                        )?;
                        migrated.push(path);
                    }
                    Ok(_) => {}
                    Err(e) => return Err(e.into_error(&path)),
                }
            }
        }
        Ok(migrated)
    }

    /// What node `node`'s records of before said, as a floor in `layout`'s Unix ms: the
    /// reservation and restored records in the directory named after the layout's state name
    /// (`shape::legacy_key`), where this layout kept them before records were kept by bit
    /// shape — Unix ms of exactly this layout, as that name includes the epoch and the tick.
    /// `None` when there is no such directory; an untrusted or damaged record there is an
    /// error, as it is here.
    pub(super) fn legacy_floor(
        &self,
        state: &TrustedDir,
        layout: &Layout,
        node: u64,
    ) -> Result<Option<u64>, Error> {
        let Some(old) = shape::legacy_key(layout) else {
            return Ok(None);
        };
        let name = OsString::from(&*old);
        if lstat_at(&state.fd, &name) == Err(Errno::NOENT) {
            return Ok(None);
        }
        let (dir, _) = open_subdir(state, &self.absolute, &name)?;
        let (reserved, restored) =
            read_node(&dir, &self.absolute.join(&name), node, &state.trust, false)?;
        Ok(handover::reservation_of([reserved, restored]))
    }
}
