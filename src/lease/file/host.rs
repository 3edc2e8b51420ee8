//! The host-wide claim: on one host, a node of one bit shape is held by one process at a
//! time, whatever state directory each process was given.
//!
//! A lock file only excludes the processes that lock the same file. Two directories on one
//! host (a user's `MONOFLAKE_STATE_DIR` beside root's default, or a per-user default beside
//! the host-wide one) each hand out node 0, and their holders then issue the same IDs. So a
//! file-store claim also binds a Linux abstract-namespace Unix socket named after the node
//! and the layout's bit shape, for the claim's whole life:
//!
//! * any user can bind one, and no file, directory or permission is involved: nothing an
//!   unprivileged user must be given, nothing root's first run can close to others;
//! * a second bind of the name fails with `EADDRINUSE`, whoever tries: two processes on one
//!   host (one network namespace) never hold one node of one shape at once;
//! * the kernel frees the name when the last descriptor on it is closed — the process
//!   exits, is killed, or releases the claim — and never while the process exists, even
//!   stopped (SIGSTOP) or frozen: a successor on this host cannot take the node of a paused
//!   holder whose records were deleted;
//! * the socket listens, so the kernel lists it in `/proc/net/unix`, and a refused claimant
//!   can find the process that holds it (one this user may inspect) and say so.
//!
//! The name holds only what decides where a node's bits sit in an ID — the time, node and
//! sequence widths and their order — not the layout's name, field names, epoch or tick:
//! layouts whose IDs can be equal share one node space on the host.
//!
//! What another user can do with it: bind a name first (a squatter), which makes the claims
//! of that node refused — never a duplicate. The refusal names the squatter's pid and uid.
//! Abstract sockets belong to a network namespace: processes in different network namespaces
//! (containers) are different hosts here, as they are to the file store when each has its
//! own directory. On other systems there is no such namespace, and the claim is the lock
//! file's alone.

use std::path::Path;

use crate::Layout;

/// The host a store's claims are made on: `None`, the host itself — except in this
/// workspace's own test builds (feature `test-host-scope`) with `MONOFLAKE_TEST_HOST_SCOPE=dir`,
/// where each state directory (by its absolute path) is a host of its own, so that tests run
/// in parallel as on separate hosts. No other build reads the variable.
pub(super) fn scope_of(state_dir: &Path) -> Option<String> {
    #[cfg(feature = "test-host-scope")]
    if std::env::var_os("MONOFLAKE_TEST_HOST_SCOPE").is_some_and(|v| v == "dir") {
        use std::hash::Hasher;
        use std::os::unix::ffi::OsStrExt;
        let mut hasher = siphasher::sip::SipHasher24::new_with_keys(0, 0);
        hasher.write(state_dir.as_os_str().as_bytes());
        return Some(format!("{:016x}", hasher.finish()));
    }
    let _ = state_dir;
    None
}

/// What decides where a node's bits sit in an ID, as text: the time, node and sequence
/// widths and their order (`t41-n10-s12-node-high` for Twitter's). Layouts of one shape share
/// a node space on the host: the host-wide claim's name and the anchors' (`anchor.rs`).
pub(super) fn shape(layout: &Layout) -> String {
    format!(
        "t{}-n{}-s{}-{}",
        layout.time_bits(),
        layout.node_bits(),
        layout.sequence_bits(),
        if layout.node_below_sequence() {
            "node-low"
        } else {
            "node-high"
        },
    )
}

/// The socket name of `node` of `layout`'s bit shape (without the leading NUL that makes it
/// abstract), in `scope` (see [`scope_of`]; `None` on every build but the tests').
pub(super) fn name(layout: &Layout, node: u64, scope: Option<&str>) -> String {
    let scope = scope.map_or_else(String::new, |s| format!("test-{s}/"));
    format!(
        "monoflake/host-claim/v1/{scope}{}/node-{node}",
        shape(layout)
    )
}

/// What a host-wide claim found.
pub(super) enum Host {
    /// The name is ours until this is dropped.
    Claimed(HostClaim),
    /// Another process on this host holds it: `holder` says which, when the kernel told.
    Held { holder: String },
}

/// A held host-wide claim: the bound, listening socket. Dropping it frees the name (unless a
/// forked child still has the descriptor, which keeps the node refused on this host while
/// it lives: a refusal, never a duplicate).
#[derive(Debug)]
pub(super) struct HostClaim {
    #[cfg(target_os = "linux")]
    _socket: std::os::fd::OwnedFd,
}

/// Takes the host-wide claim of `node` of `layout`'s shape.
///
/// # Errors
///
/// The system's error when a Unix socket cannot be made or bound for another reason than the
/// name being taken (a sandbox that forbids sockets): the claim fails loudly rather than go
/// on without the host-wide exclusion.
#[cfg(target_os = "linux")]
pub(super) fn claim(
    layout: &Layout,
    node: u64,
    scope: Option<&str>,
) -> Result<Host, rustix::io::Errno> {
    use rustix::io::Errno;
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};

    let name = name(layout, node, scope);
    let addr = SocketAddrUnix::new_abstract_name(name.as_bytes())?;
    let socket = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )?;
    #[cfg(test)]
    if tests::SKIP.get() {
        return Ok(Host::Claimed(HostClaim { _socket: socket }));
    }
    match rustix::net::bind(&socket, &addr) {
        Ok(()) => {
            rustix::net::listen(&socket, 64)?;
            Ok(Host::Claimed(HostClaim { _socket: socket }))
        }
        Err(Errno::ADDRINUSE) => Ok(Host::Held {
            holder: holder(&name),
        }),
        Err(e) => Err(e),
    }
}

/// Who holds the name: the process with a descriptor of the listening socket, found through
/// `/proc` (the socket's inode in `/proc/net/unix`, then the process whose descriptor is
/// that socket — only processes this user may inspect: root sees all). Not `SO_PEERCRED`: a
/// holder in another pid namespace reads as pid 0, which rustix's `Pid` cannot hold.
#[cfg(target_os = "linux")]
fn holder(name: &str) -> String {
    let unknown = "another process on this host".to_owned();
    let Some(inode) = listening_inode(name) else {
        return unknown;
    };
    let link = format!("socket:[{inode}]");
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return unknown;
    };
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let holds = fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t.as_os_str() == link.as_str()));
        if holds {
            let uid = std::fs::read_to_string(entry.path().join("status"))
                .ok()
                .and_then(|st| {
                    st.lines()
                        .find_map(|l| l.strip_prefix("Uid:"))
                        .and_then(|u| u.split_whitespace().next().map(str::to_owned))
                })
                .unwrap_or_else(|| "?".into());
            return format!("process {pid} of user {uid} on this host");
        }
    }
    format!("another process on this host (its socket is inode {inode}: `ss -xlp` names it)")
}

/// The inode of the listening socket bound to the abstract `name`, from `/proc/net/unix`
/// (`Num RefCount Protocol Flags Type St Inode Path`; a listening socket's flags are
/// `00010000`, an abstract path starts with `@`).
#[cfg(target_os = "linux")]
fn listening_inode(name: &str) -> Option<String> {
    let table = std::fs::read_to_string("/proc/net/unix").ok()?;
    let path = format!("@{name}");
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() >= 8 && f[3] == "00010000" && f[7] == path).then(|| f[6].to_owned())
    })
}

/// No abstract namespace here: the lock file alone excludes.
#[cfg(not(target_os = "linux"))]
pub(super) fn claim(
    _layout: &Layout,
    _node: u64,
    _scope: Option<&str>,
) -> Result<Host, rustix::io::Errno> {
    Ok(Host::Claimed(HostClaim {}))
}

#[cfg(all(test, target_os = "linux"))]
pub(super) mod tests {
    use std::cell::Cell;

    use super::*;

    thread_local! {
        /// Set by a unit test of the record layer that plays a successor on another host in
        /// this process: the claims this thread makes then skip the host-wide claim.
        pub(in crate::lease::file) static SKIP: Cell<bool> = const { Cell::new(false) };
    }

    fn layout(seed: u64) -> Layout {
        // A shape no other test uses, so parallel tests do not meet.
        Layout::builder()
            .epoch_ms(1_288_834_974_657)
            .time_bits(40)
            .node_field("n", 7)
            .sequence_bits(9 + (seed % 3) as u32)
            .build()
            .unwrap()
    }

    #[test]
    fn a_second_claim_is_refused_and_names_the_holder_until_the_first_is_dropped() {
        let layout = layout(0);
        let node = u64::from(std::process::id()) % 128;
        let first = match claim(&layout, node, None).unwrap() {
            Host::Claimed(c) => c,
            Host::Held { holder } => panic!("held by {holder}"),
        };
        match claim(&layout, node, None).unwrap() {
            Host::Held { holder } => {
                assert_eq!(
                    holder,
                    format!(
                        "process {} of user {} on this host",
                        std::process::id(),
                        rustix::process::getuid().as_raw()
                    )
                );
            }
            Host::Claimed(_) => panic!("claimed twice"),
        }
        drop(first);
        assert!(matches!(
            claim(&layout, node, None).unwrap(),
            Host::Claimed(_)
        ));
        // Another test scope is another host.
        let _other = match claim(&layout, node, Some("other")).unwrap() {
            Host::Claimed(c) => c,
            Host::Held { holder } => panic!("held by {holder}"),
        };
    }

    #[test]
    fn the_name_is_the_bit_shape_not_the_epoch_or_field_names() {
        let a = Layout::twitter();
        let b: Layout = "time=41,host=10,sequence=12,epoch=2024-01-01"
            .parse()
            .unwrap();
        assert_eq!(name(&a, 3, None), name(&b, 3, None));
        assert_eq!(
            name(&a, 3, None),
            "monoflake/host-claim/v1/t41-n10-s12-node-high/node-3"
        );
        assert_ne!(name(&a, 3, None), name(&a, 4, None));
        assert_ne!(name(&a, 3, None), name(&Layout::sonyflake(), 3, None));
    }
}
