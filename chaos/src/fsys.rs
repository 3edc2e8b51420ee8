//! The file store's ground: a small tmpfs (so a fault can fill it), the state directory the
//! run makes itself (mode 0700, owned by the run's user: nobody else may write it), and the
//! faults on it: delete it, replace it (by an empty directory or a copy), fill its filesystem.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use nix::mount::{MntFlags, MsFlags, mount, umount2};

/// The tmpfs's size: a few reservation files need a few KiB; full means full.
const TMPFS_SIZE: &str = "size=8m";

#[derive(Debug)]
pub struct Disk {
    /// The tmpfs's mount point (a plain directory when it could not be mounted).
    pub root: PathBuf,
    /// Why the fill-the-disk fault is skipped (no tmpfs), if it is.
    pub skipped: Option<String>,
    replaced: AtomicU64,
}

/// `mkdir -m 0700` (the mode set explicitly, whatever the umask).
pub fn private_dir(path: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new().mode(0o700).create(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
}

impl Disk {
    /// Mounts a tmpfs at `root` (created 0700); when that fails (not root, no mount
    /// namespace) `root` stays a plain directory and [`Disk::skipped`] says why.
    pub fn mount(root: PathBuf) -> std::io::Result<Disk> {
        private_dir(&root)?;
        let skipped = mount(
            Some("tmpfs"),
            &root,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(format!("{TMPFS_SIZE},mode=0700").as_str()),
        )
        .err()
        .map(|e| format!("cannot mount a tmpfs at {}: {e}", root.display()));
        Ok(Disk {
            root,
            skipped,
            replaced: AtomicU64::new(0),
        })
    }

    /// A fresh state directory `name` on the disk (0700).
    pub fn state_dir(&self, name: &str) -> std::io::Result<PathBuf> {
        let dir = self.root.join(name);
        private_dir(&dir)?;
        Ok(dir)
    }

    /// `rm -rf` the directory; made again (0700) when `recreate`, else left to the next
    /// process to create.
    pub fn delete(&self, dir: &Path, recreate: bool) -> std::io::Result<()> {
        std::fs::remove_dir_all(dir)?;
        if recreate {
            private_dir(dir)?;
        }
        Ok(())
    }

    /// Moves the directory aside and puts in its place an empty one, or (`copy`) a copy of
    /// it: the same names and records in new files, so the locks held are on files no longer
    /// in the directory. The old one is removed at once (holders keep their open files).
    pub fn replace(&self, dir: &Path, copy: bool) -> std::io::Result<()> {
        let n = self.replaced.fetch_add(1, Ordering::Relaxed);
        let old = dir.with_extension(format!("old-{n}"));
        std::fs::rename(dir, &old)?;
        if copy {
            let out = std::process::Command::new("cp")
                .arg("-a")
                .arg(&old)
                .arg(dir)
                .output()?;
            if !out.status.success() {
                return Err(std::io::Error::other(format!(
                    "cp -a: {}",
                    String::from_utf8_lossy(&out.stderr)
                )));
            }
        } else {
            private_dir(dir)?;
        }
        std::fs::remove_dir_all(&old)
    }

    /// Fills the disk: writes zeros to a file until the filesystem refuses (ENOSPC).
    /// Returns the file, for [`Disk::unfill`], and how much it took.
    pub fn fill(&self) -> std::io::Result<(PathBuf, u64)> {
        let path = self.root.join("filler");
        let mut f = std::fs::File::create(&path)?;
        let chunk = vec![0u8; 64 * 1024];
        let mut written = 0u64;
        loop {
            match f.write(&chunk) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => return Err(e),
            }
        }
        let _ = f.sync_all();
        Ok((path, written))
    }

    pub fn unfill(&self, path: &Path) -> std::io::Result<()> {
        std::fs::remove_file(path)
    }

    /// Unmounts the tmpfs (lazily: a process the run lost track of cannot keep it busy).
    pub fn unmount(&self) {
        if self.skipped.is_none() {
            let _ = umount2(&self.root, MntFlags::MNT_DETACH);
        }
    }
}
