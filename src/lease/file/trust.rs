//! Who may write the state directory, and opening it without following a path anyone else
//! could have changed.
//!
//! The state directory is the file store's trust boundary (docs/operations.md, "Security"):
//! whoever can write it can forge a reservation, so only trusted principals may. Trusted are
//! root, this process's effective user, the directory's owner and — when the directory is
//! group-writable with the setgid bit (mode 2770), so that every file in it carries its group —
//! the members of its group. Refused, with the command that fixes it:
//!
//! * a state directory someone else can write (world-writable, group-writable without the
//!   setgid bit, or by an access control list), or owned by a user who is neither root nor
//!   this one;
//! * a directory on its path that someone else could rename it out of (writable by others and
//!   not sticky, like /tmp is), or owned by a user who is neither root nor this one, and a
//!   symbolic link on it owned by such a user;
//! * an entry of the state directory owned by, or writable by, someone outside the trusted set
//!   (by its mode, or by an access control list on a group-writable one).
//!
//! Everything is opened by descriptor, component by component from `/`, with `O_NOFOLLOW`:
//! a path is never looked up twice, so what is checked is what is used.
//!
//! It touches only the file system (rustix) and the crate's error type.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::Error;

/// How many symbolic links a path may go through.
const MAX_LINKS: u32 = 40;

/// What `stat` says of a file, in fixed types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Meta {
    pub(super) dev: u64,
    pub(super) ino: u64,
    pub(super) uid: u32,
    pub(super) gid: u32,
    /// Permission bits, with setuid, setgid and sticky (`0o7777`).
    pub(super) mode: u32,
    pub(super) kind: FileType,
    pub(super) nlink: u64,
    pub(super) size: u64,
}

impl Meta {
    /// The same file: device and inode.
    pub(super) fn same_file(&self, other: &Meta) -> bool {
        self.dev == other.dev && self.ino == other.ino
    }

    /// The same file, with the same owner, group and mode: what its trust was judged on.
    pub(super) fn same_standing(&self, other: &Meta) -> bool {
        self.same_file(other)
            && (self.uid, self.gid, self.mode) == (other.uid, other.gid, other.mode)
    }
}

#[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
fn meta(st: &rustix::fs::Stat) -> Meta {
    Meta {
        dev: st.st_dev as u64,
        ino: st.st_ino as u64,
        uid: st.st_uid as u32,
        gid: st.st_gid as u32,
        mode: (st.st_mode as u32) & 0o7777,
        kind: FileType::from_raw_mode(st.st_mode.into()),
        nlink: st.st_nlink as u64,
        size: u64::try_from(st.st_size).unwrap_or(0),
    }
}

/// `fstat` of a descriptor.
pub(super) fn fstat(fd: impl AsFd) -> Result<Meta, Errno> {
    rustix::fs::fstat(fd).map(|st| meta(&st))
}

/// `fstatat` of `name` in `dir`, not following a final symbolic link.
pub(super) fn lstat_at(dir: impl AsFd, name: &OsStr) -> Result<Meta, Errno> {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map(|st| meta(&st))
}

/// `stat` of a path, following links: what a process opening the path now would find.
pub(super) fn stat_path(path: &Path) -> Result<Meta, Errno> {
    rustix::fs::statat(CWD, path, AtFlags::empty()).map(|st| meta(&st))
}

/// The principals a state directory trusts (see the module comment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Trust {
    /// This process's effective user.
    me: u32,
    /// The directory's owner.
    owner: u32,
    /// The directory's group, when its members may write it (group-writable and setgid).
    group: Option<u32>,
}

impl Trust {
    /// Whether the directory is shared with a group: files are then created group-writable.
    pub(super) fn shared(&self) -> bool {
        self.group.is_some()
    }

    /// The mode of a directory this store creates in the state directory.
    pub(super) fn dir_mode(&self) -> Mode {
        Mode::from_raw_mode(if self.shared() { 0o2770 } else { 0o700 })
    }

    /// The mode of a file this store creates in the state directory.
    pub(super) fn file_mode(&self) -> Mode {
        Mode::from_raw_mode(if self.shared() { 0o660 } else { 0o600 })
    }

    fn trusts_user(&self, uid: u32) -> bool {
        uid == 0 || uid == self.me || uid == self.owner
    }

    /// Why an entry of the state directory, open as `fd` with `m` its `fstat`, is not to be
    /// believed, if it is not: owned by someone outside the trusted set, or writable by them
    /// (by its mode or by an access control list).
    pub(super) fn check_entry(&self, fd: impl AsFd, m: &Meta) -> Result<(), String> {
        self.check_mode(m)?;
        self.check_acl(fd, m)
    }

    /// [`Trust::check_entry`] by owner and mode alone.
    fn check_mode(&self, m: &Meta) -> Result<(), String> {
        let group_trusted = self.group == Some(m.gid);
        if !self.trusts_user(m.uid) && !group_trusted {
            return Err(format!(
                "it is owned by uid {} (group {}), who is not trusted to write this state \
                 directory (trusted: root, uid {}, uid {}{})",
                m.uid,
                m.gid,
                self.me,
                self.owner,
                self.group
                    .map_or(String::new(), |g| format!(" and group {g}"))
            ));
        }
        if m.mode & 0o002 != 0 {
            return Err(format!("its mode {:04o} lets every user write it", m.mode));
        }
        if m.mode & 0o020 != 0 && !group_trusted {
            return Err(format!(
                "its mode {:04o} lets group {} write it, a group this state directory does \
                 not trust",
                m.mode, m.gid
            ));
        }
        Ok(())
    }

    /// Why a POSIX access control list on `fd` (mode in `m`) lets someone outside the trusted
    /// set write it, if it does. A named user or group gets at most what the list's mask
    /// allows, and the mode shows the mask as the group's bits: only something
    /// group-writable can have such writers — a shared directory (`2770`) and what is in it,
    /// which the mode alone would pass. (`setfacl -m u:backup:rwx` on a shared directory let
    /// a user outside the group plant a layout directory there and forge reservations.)
    pub(super) fn check_acl(&self, fd: impl AsFd, m: &Meta) -> Result<(), String> {
        if m.mode & 0o020 == 0 {
            return Ok(());
        }
        for writer in acl::writers(fd)? {
            let trusted = match writer {
                acl::Writer::User(uid) => self.trusts_user(uid),
                acl::Writer::Group(gid) => self.group == Some(gid),
            };
            if !trusted {
                return Err(format!(
                    "its access control list lets {writer} write it, who is not trusted to \
                     write this state directory (`getfacl` shows the list; `setfacl -b` \
                     removes it)"
                ));
            }
        }
        Ok(())
    }
}

/// POSIX access control lists, as Linux stores them (the `system.posix_acl_access` extended
/// attribute: a version word, then entries of tag, permissions and id, little-endian).
mod acl {
    use std::fmt;
    use std::os::fd::AsFd;

    /// A named user or group an access control list lets write.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(super) enum Writer {
        User(u32),
        Group(u32),
    }

    impl fmt::Display for Writer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                Writer::User(uid) => write!(f, "uid {uid}"),
                Writer::Group(gid) => write!(f, "group {gid}"),
            }
        }
    }

    /// The named users and groups `fd`'s access control list gives write permission (none
    /// without a list, or where the system keeps none).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub(super) fn writers(fd: impl AsFd) -> Result<Vec<Writer>, String> {
        use rustix::io::Errno;
        const ACL_USER: u16 = 0x02;
        const ACL_GROUP: u16 = 0x08;
        const ACL_WRITE: u16 = 0x02;
        // Room for 500 entries; a longer list is refused rather than half read.
        let mut buf = [0u8; 4 + 8 * 500];
        let len = match rustix::fs::fgetxattr(fd, "system.posix_acl_access", &mut buf) {
            Ok(len) => len,
            Err(Errno::NODATA | Errno::NOTSUP) => return Ok(Vec::new()),
            Err(Errno::RANGE) => return Err("its access control list is too long to read".into()),
            Err(e) => return Err(format!("its access control list cannot be read: {e}")),
        };
        let entries = buf[..len].get(4..).unwrap_or_default();
        Ok(entries
            .chunks_exact(8)
            .filter_map(|e| {
                let tag = u16::from_le_bytes([e[0], e[1]]);
                let perm = u16::from_le_bytes([e[2], e[3]]);
                let id = u32::from_le_bytes([e[4], e[5], e[6], e[7]]);
                match tag {
                    _ if perm & ACL_WRITE == 0 => None,
                    ACL_USER => Some(Writer::User(id)),
                    ACL_GROUP => Some(Writer::Group(id)),
                    _ => None,
                }
            })
            .collect())
    }

    /// Elsewhere access control lists are not read (the modes are).
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    pub(super) fn writers(_fd: impl AsFd) -> Result<Vec<Writer>, String> {
        Ok(Vec::new())
    }
}

/// The state directory, opened and checked, with the principals it trusts.
#[derive(Debug)]
pub(super) struct TrustedDir {
    pub(super) fd: OwnedFd,
    pub(super) meta: Meta,
    pub(super) trust: Trust,
}

fn untrusted(path: &Path, reason: impl Into<String>) -> Error {
    Error::UntrustedState {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

fn io(path: &Path, action: &'static str, e: Errno) -> Error {
    Error::StateDir {
        path: path.to_owned(),
        action,
        source: e.into(),
    }
}

/// Opens the state directory `path`, creating what is missing of it (mode 0700), checking
/// every directory and link on the way (see the module comment). `fix` is added to the reason
/// of a refusal and to an error that denies access.
///
/// # Errors
///
/// [`Error::UntrustedState`] for a directory or link someone else could change;
/// [`Error::StateDir`] when a component cannot be opened or created.
pub(super) fn open_state_dir(
    path: &Path,
    fix: &dyn Fn(&str) -> String,
) -> Result<TrustedDir, Error> {
    let me = rustix::process::geteuid().as_raw();
    let absolute = absolute(path)?;
    let mut todo: Vec<OsString> = components(&absolute);
    todo.reverse(); // popped from the end: the next component is last
    let root = Path::new("/");
    let open_dir = |dir: &OwnedFd, name: &OsStr| {
        rustix::fs::openat(
            dir,
            name,
            OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
    };
    let mut walked: Vec<(OwnedFd, Meta, PathBuf)> = Vec::new();
    let root_fd = rustix::fs::openat(
        CWD,
        root,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io(root, "open", e))?;
    let root_meta = fstat(&root_fd).map_err(|e| io(root, "stat", e))?;
    walked.push((root_fd, root_meta, root.to_owned()));
    let mut links = 0;
    while let Some(name) = todo.pop() {
        let (dir, dir_meta, dir_path) = walked.last().expect("the root is never popped");
        let here = dir_path.join(&name);
        if name == ".." {
            if walked.len() > 1 {
                walked.pop();
            }
            continue;
        }
        // The directory that holds this component must not let anyone else replace it.
        check_ancestor(dir_meta, me).map_err(|reason| untrusted(dir_path, fix(&reason)))?;
        let found = match lstat_at(dir, &name) {
            Ok(m) => m,
            Err(Errno::NOENT) => {
                // Missing: made here, private to this user (whatever the umask).
                match rustix::fs::mkdirat(dir, &name, Mode::from_raw_mode(0o700)) {
                    Ok(()) => {
                        let made =
                            open_dir(dir, &name).map_err(|e| denied(&here, "open", e, fix))?;
                        rustix::fs::fchmod(&made, Mode::from_raw_mode(0o700))
                            .map_err(|e| io(&here, "set the mode of", e))?;
                    }
                    Err(Errno::EXIST) => {}
                    Err(e) => return Err(denied(&here, "create", e, fix)),
                }
                lstat_at(dir, &name).map_err(|e| io(&here, "stat", e))?
            }
            Err(e) => return Err(denied(&here, "look up", e, fix)),
        };
        if found.kind == FileType::Symlink {
            links += 1;
            if links > MAX_LINKS {
                return Err(io(&here, "resolve", Errno::LOOP));
            }
            if found.uid != 0 && found.uid != me {
                return Err(untrusted(
                    &here,
                    fix(&format!(
                        "it is a symbolic link owned by uid {}, who could point it elsewhere",
                        found.uid
                    )),
                ));
            }
            let target = rustix::fs::readlinkat(dir, &name, Vec::new())
                .map_err(|e| io(&here, "read the link", e))?;
            let target = PathBuf::from(OsStr::from_bytes(target.as_bytes()));
            if target.is_absolute() {
                walked.truncate(1);
            }
            let mut more = components(&target);
            more.reverse();
            todo.extend(more);
            continue;
        }
        if found.kind != FileType::Directory {
            return Err(io(&here, "open", Errno::NOTDIR));
        }
        let fd = open_dir(dir, &name).map_err(|e| denied(&here, "open", e, fix))?;
        let m = fstat(&fd).map_err(|e| io(&here, "stat", e))?;
        if !m.same_file(&found) {
            return Err(untrusted(&here, "it changed while it was being opened"));
        }
        walked.push((fd, m, here));
    }
    let (fd, m, path) = walked.pop().expect("the root is never popped");
    let trust = check_state_dir(&m, me).map_err(|reason| untrusted(&path, fix(&reason)))?;
    trust
        .check_acl(&fd, &m)
        .map_err(|reason| untrusted(&path, fix(&reason)))?;
    // Usable now, not at the first claim: this user may create files in it.
    rustix::fs::accessat(
        &fd,
        ".",
        rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
        AtFlags::EACCESS,
    )
    .map_err(|e| denied(&path, "write in", e, fix))?;
    Ok(TrustedDir { fd, meta: m, trust })
}

/// `path`, relative to the working directory now when it is relative.
pub(super) fn absolute(path: &Path) -> Result<PathBuf, Error> {
    let absolute = std::path::absolute(path).map_err(|e| Error::StateDir {
        path: path.to_owned(),
        action: "resolve",
        source: e,
    })?;
    // A holder checks by this path that its directory is still the one it locked: a path the
    // system will not resolve (ENAMETOOLONG) would read as a directory removed, and every
    // claim would be lost at its first check. Refused before anything is claimed.
    let len = absolute.as_os_str().len();
    if len > MAX_PATH_BYTES {
        return Err(Error::StateDir {
            path: path.to_owned(),
            action: "resolve",
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "the absolute path is {len} bytes; a state directory's may be at most \
                     {MAX_PATH_BYTES} (the system's PATH_MAX, 4096, with its terminating NUL)"
                ),
            ),
        });
    }
    Ok(absolute)
}

/// The longest absolute path of a state directory, in bytes: Linux's `PATH_MAX` (4096) less
/// the terminating NUL.
const MAX_PATH_BYTES: usize = 4095;

/// The path's components below the root, as names (`.` dropped, `..` kept).
fn components(path: &Path) -> Vec<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_owned()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

fn denied(path: &Path, action: &'static str, e: Errno, fix: &dyn Fn(&str) -> String) -> Error {
    if e == Errno::ACCESS || e == Errno::PERM {
        Error::StateDir {
            path: path.to_owned(),
            action,
            source: std::io::Error::new(std::io::ErrorKind::PermissionDenied, fix(&e.to_string())),
        }
    } else {
        io(path, action, e)
    }
}

/// A directory on the way to the state directory: owned by root or this user, and not
/// writable by anyone else unless sticky (then only an entry's owner may rename it).
fn check_ancestor(m: &Meta, me: u32) -> Result<(), String> {
    if m.uid != 0 && m.uid != me {
        return Err(format!(
            "a directory on the state directory's path is owned by uid {}, who could rename \
             the state directory and put another in its place",
            m.uid
        ));
    }
    if m.mode & 0o022 != 0 && m.mode & 0o1000 == 0 {
        return Err(format!(
            "a directory on the state directory's path has mode {:04o}: other users could \
             rename the state directory and put another in its place",
            m.mode
        ));
    }
    Ok(())
}

/// The state directory itself: owned by root or this user; writable by no one else, or by
/// its group when it is setgid (so that every file in it carries that group).
fn check_state_dir(m: &Meta, me: u32) -> Result<Trust, String> {
    if m.uid != 0 && m.uid != me {
        return Err(format!(
            "it is owned by uid {}; a state directory must be owned by root or by the user \
             running monoflake (uid {me})",
            m.uid
        ));
    }
    if m.mode & 0o002 != 0 {
        return Err(format!(
            "its mode {:04o} lets every user write it, and so forge the reservations that keep \
             IDs unique",
            m.mode
        ));
    }
    let group = if m.mode & 0o020 != 0 {
        if m.mode & 0o2000 == 0 {
            return Err(format!(
                "its mode {:04o} lets group {} write it but is not setgid, so files in it would \
                 carry each user's own group",
                m.mode, m.gid
            ));
        }
        Some(m.gid)
    } else {
        None
    };
    Ok(Trust {
        me,
        owner: m.uid,
        group,
    })
}

/// Opens (creating it when missing) the directory `name` inside the state directory, and
/// checks it as an entry.
pub(super) fn open_subdir(
    state: &TrustedDir,
    base: &Path,
    name: &OsStr,
) -> Result<(OwnedFd, Meta), Error> {
    let path = base.join(name);
    let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(&state.fd, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => {
            match rustix::fs::mkdirat(&state.fd, name, state.trust.dir_mode()) {
                Ok(()) => {
                    let fd = rustix::fs::openat(&state.fd, name, flags, Mode::empty())
                        .map_err(|e| io(&path, "open", e))?;
                    // Exactly the mode meant, whatever the umask (setgid included).
                    rustix::fs::fchmod(&fd, state.trust.dir_mode())
                        .map_err(|e| io(&path, "set the mode of", e))?;
                    fd
                }
                Err(Errno::EXIST) => rustix::fs::openat(&state.fd, name, flags, Mode::empty())
                    .map_err(|e| io(&path, "open", e))?,
                Err(e) => return Err(io(&path, "create", e)),
            }
        }
        Err(Errno::LOOP) | Err(Errno::NOTDIR) => {
            return Err(untrusted(
                &path,
                "it is not a directory (a symbolic link or a file)",
            ));
        }
        Err(e) => return Err(io(&path, "open", e)),
    };
    let m = fstat(&fd).map_err(|e| io(&path, "stat", e))?;
    state
        .trust
        .check_entry(&fd, &m)
        .map_err(|reason| untrusted(&path, reason))?;
    Ok((fd, m))
}
