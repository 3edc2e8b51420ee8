//! The state directory is a trust boundary: another local user (`nobody`, by `setpriv`) can
//! neither forge a reservation, nor stop a holder, nor make a holder write or follow a path of
//! theirs; records they could have written are refused, never believed; and one bad entry
//! never stops a claim of any node.
//!
//! The tests that switch users need root and `setpriv` (CI has both); elsewhere they say they
//! were skipped.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use monoflake::{Error, FileStore, Generator, Layout, NodeRequest, NodeStore};

const NOBODY: u32 = 65534;

/// Whether this process may run commands as `nobody`.
fn can_switch_users() -> bool {
    let root = rustix_free_euid() == 0;
    let setpriv = Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !(root && setpriv) {
        eprintln!("skipped: needs root and setpriv to act as a second user");
    }
    root && setpriv
}

fn rustix_free_euid() -> u32 {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// Runs each shell command as `nobody`; returns the ones that succeeded.
fn as_nobody(commands: &[String]) -> Vec<String> {
    commands
        .iter()
        .filter(|c| {
            Command::new("setpriv")
                .args([
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                    "sh",
                    "-c",
                    c,
                ])
                .output()
                .unwrap()
                .status
                .success()
        })
        .cloned()
        .collect()
}

/// Claims as `store.claim` does, but waits out `NodeHeld`: a lock released in this process
/// stays held for as long as a child that another test's thread forked meanwhile (to run
/// `setpriv`) keeps its copy of the descriptor, until it execs.
fn claim_settled(
    store: &FileStore,
    layout: &Layout,
    request: NodeRequest,
) -> Result<monoflake::Claim, Error> {
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match store.claim(layout, request) {
            Err(Error::NodeHeld { .. }) if std::time::Instant::now() < give_up => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn untrusted(result: Result<impl std::fmt::Debug, Error>, path: &Path, says: &str) {
    match result {
        Err(e @ Error::UntrustedState { .. }) => {
            let text = e.to_string();
            assert!(text.contains(&path.display().to_string()), "{text}");
            assert!(text.contains(says), "expected {says:?} in: {text}");
        }
        other => panic!("expected UntrustedState for {}: {other:?}", path.display()),
    }
}

/// The review's attacks on a root holder, by a user who is not trusted: rename the lock file
/// away and forge a reservation (754,702 duplicates before), plant links and directories,
/// replace the layout's directory. Every one is refused by the kernel; the holder goes on;
/// nobody else can take its node.
#[test]
fn another_user_can_neither_forge_nor_rename_nor_plant_in_the_state_directory() {
    if !can_switch_users() {
        return;
    }
    let base = common::TempDir::new("trust-attacks");
    // Readable by everyone (0755) and private (0700): neither can be written by `nobody`.
    for mode in [0o755, 0o700] {
        let state = base.path().join(format!("state-{mode:o}"));
        std::fs::create_dir(&state).unwrap();
        set_mode(&state, mode);
        let store = Arc::new(FileStore::open(&state).unwrap());
        let holder = Generator::builder(Layout::twitter())
            .build_leased(store.clone(), NodeRequest::Exact(0))
            .unwrap();
        let mut ids: Vec<u64> = (0..50_000)
            .map(|_| holder.next_id().unwrap().as_u64())
            .collect();
        let layout_dir = state.join("twitter");
        let d = layout_dir.display();
        let s = state.display();
        let forged = "monoflake-reservation v2\\nuntil_ms=1\\nsum=0000000000000000\\n";
        let attacks = [
            format!("mv {d}/node-0.lock {d}/stolen"),
            format!("rm -f {d}/node-0.lock"),
            format!("printf '{forged}' > {d}/node-0.reservation"),
            format!("printf '{forged}' > {d}/node-1.reservation"),
            format!("ln -s /etc/passwd {d}/node-1.lock"),
            format!("ln -s /etc/passwd {d}/.node-0.reservation.0000000000000000"),
            format!("mkdir {d}/node-2.lock"),
            format!("mv {d} {s}/moved"),
            format!("mkdir {s}/twitter2"),
            format!("chmod 0777 {d}"),
            format!("flock -n {d}/node-3.lock true"),
        ];
        let succeeded = as_nobody(&attacks);
        assert!(
            succeeded.is_empty(),
            "{mode:o}: succeeded as nobody: {succeeded:?}"
        );
        // The holder goes on, its claim confirmed, and nobody else can take its node.
        ids.extend((0..50_000).map(|_| holder.next_id().unwrap().as_u64()));
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        holder.check().unwrap();
        assert!(matches!(
            store.claim(&Layout::twitter(), NodeRequest::Exact(0)),
            Err(Error::NodeHeld { node: 0, .. })
        ));
        assert_eq!(holder.stats().lease_losses, 0);
        // Files the store made are the owner's alone: nobody else can even read them.
        for entry in std::fs::read_dir(&layout_dir).unwrap() {
            let m = entry.unwrap().metadata().unwrap();
            assert_eq!(m.mode() & 0o077, 0, "{m:?}");
        }
        holder.release().unwrap();
    }
}

/// A state directory, or a directory or link on its path, that someone else can change is
/// refused, with the fix; a directory only trusted principals can write is not.
#[test]
fn a_directory_others_can_write_or_own_is_refused_with_the_fix() {
    let base = common::TempDir::new("trust-modes");
    let dir = |name: &str, mode: u32| {
        let path = base.path().join(name);
        std::fs::create_dir_all(&path).unwrap();
        set_mode(&path, mode);
        path
    };
    let world = dir("world", 0o777);
    untrusted(FileStore::open(&world), &world, "lets every user write it");
    let sticky = dir("sticky", 0o1777);
    untrusted(
        FileStore::open(&sticky),
        &sticky,
        "lets every user write it",
    );
    let group = dir("group", 0o770);
    untrusted(FileStore::open(&group), &group, "is not setgid");
    let shared = dir("shared", 0o2770);
    FileStore::open(&shared).unwrap();
    // The fix is named.
    let e = FileStore::open(&world).unwrap_err().to_string();
    assert!(
        e.contains(&format!("install -d -m 0700 {}", world.display())),
        "{e}"
    );
    // A directory on the path that others could rename the state directory out of.
    let open_parent = dir("open-parent", 0o777);
    let inner = open_parent.join("state");
    std::fs::create_dir(&inner).unwrap();
    untrusted(
        FileStore::open(&inner),
        &open_parent,
        "other users could rename",
    );
    // Sticky (as /tmp is): only the owner may rename an entry, so it is fine.
    set_mode(&open_parent, 0o1777);
    FileStore::open(&inner).unwrap();
    // A link on the path, owned by root (or this user), is followed; the store works in the
    // directory it points to.
    let real = dir("real", 0o700);
    let link = base.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let store = FileStore::open(&link).unwrap();
    drop(
        store
            .claim(&Layout::twitter(), NodeRequest::Exact(1))
            .unwrap(),
    );
    assert!(real.join("twitter/node-1.lock").exists());
    if !can_switch_users() {
        return;
    }
    // Owned by another user: refused, whoever could write it.
    let theirs = dir("theirs", 0o700);
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    untrusted(FileStore::open(&theirs), &theirs, "owned by uid 65534");
    std::os::unix::fs::lchown(&link, Some(NOBODY), Some(NOBODY)).unwrap();
    untrusted(
        FileStore::open(&link),
        &link,
        "symbolic link owned by uid 65534",
    );
    let their_parent = dir("their-parent", 0o755);
    std::fs::create_dir(their_parent.join("state")).unwrap();
    std::os::unix::fs::chown(&their_parent, Some(NOBODY), Some(NOBODY)).unwrap();
    untrusted(
        FileStore::open(their_parent.join("state")),
        &their_parent,
        "owned by uid 65534",
    );
}

/// Records a state directory held while it was open to everyone (the 0.2 default) may hold:
/// another user's reservation, a world-writable one, a directory, links and a hard link where
/// lock files belong. Each is refused for its node, naming the file; any node skips them all
/// (counted), and the files they point at are never touched.
#[test]
fn untrusted_records_are_refused_and_any_node_skips_them() {
    let base = common::TempDir::new("trust-records");
    let state = base.path().join("state");
    let store = FileStore::open(&state).unwrap();
    // 3 node bits: nodes 0..=7.
    let layout = Layout::builder()
        .node_field("n", 3)
        .epoch_ms(1_288_834_974_657)
        .build()
        .unwrap();
    let dir = state.join(&*layout.shape_key());
    drop(store.claim(&layout, NodeRequest::Exact(7)).unwrap()); // makes the layout's directory
    let victim = base.path().join("victim");
    std::fs::write(&victim, "secret").unwrap();
    set_mode(&victim, 0o600);
    let good = |node: u64| {
        // A reservation as the store writes it, copied from one it wrote.
        let claim = store.claim(&layout, NodeRequest::Exact(node)).unwrap();
        store.release(claim, 1_700_000_000_000).unwrap();
    };
    let switch = can_switch_users();
    // 0: another user's reservation (when this test may chown).
    good(0);
    if switch {
        std::os::unix::fs::chown(dir.join("node-0.reservation"), Some(NOBODY), Some(NOBODY))
            .unwrap();
    } else {
        set_mode(&dir.join("node-0.reservation"), 0o622);
    }
    // 1: a reservation every user can write.
    good(1);
    set_mode(&dir.join("node-1.reservation"), 0o666);
    // 2: a directory where the lock file belongs.
    std::fs::create_dir(dir.join("node-2.lock")).unwrap();
    // 3: a link to the victim where the lock file belongs.
    std::os::unix::fs::symlink(&victim, dir.join("node-3.lock")).unwrap();
    // 4: a link to the victim where the reservation belongs.
    std::os::unix::fs::symlink(&victim, dir.join("node-4.reservation")).unwrap();
    // 5: a hard link to the victim where the lock file belongs.
    std::fs::hard_link(&victim, dir.join("node-5.lock")).unwrap();
    let cases = [
        (
            0,
            "node-0.reservation",
            if switch {
                "owned by uid 65534"
            } else {
                "lets every user write it"
            },
        ),
        (1, "node-1.reservation", "lets every user write it"),
        (2, "node-2.lock", "is a directory"),
        (3, "node-3.lock", "symbolic link"),
        (4, "node-4.reservation", "symbolic link"),
        (5, "node-5.lock", "hard link"),
    ];
    for (node, file, says) in cases {
        untrusted(
            claim_settled(&store, &layout, NodeRequest::Exact(node)),
            &dir.join(file),
            says,
        );
    }
    // Any node skips the six, takes node 6, and says how many it skipped.
    let leased = Generator::builder(layout.clone())
        .build_leased(Arc::new(store.clone()), NodeRequest::Any)
        .unwrap();
    assert_eq!(leased.node(), 6);
    assert_eq!(leased.stats().nodes_skipped_unusable, 6);
    // With 6 and 7 held too, nothing is left: the error names what it skipped.
    let seven = store.claim(&layout, NodeRequest::Exact(7)).unwrap();
    match store.claim(&layout, NodeRequest::Any) {
        Err(
            e @ Error::AllNodesHeld {
                count: 8,
                unusable: 6,
                ..
            },
        ) => {
            // The first three are named, in the order tried; the count says the rest.
            let Error::AllNodesHeld {
                unusable_reasons, ..
            } = &e
            else {
                unreachable!()
            };
            assert_eq!(unusable_reasons.len(), 3, "{unusable_reasons:?}");
            for (node, reason) in unusable_reasons.iter().enumerate() {
                assert!(reason.starts_with(&format!("node {node}: ")), "{reason}");
            }
            let text = e.to_string();
            assert!(text.contains("6 cannot be used"), "{text}");
            assert!(
                text.contains("node 0:") && text.contains("node-0.reservation"),
                "{text}"
            );
        }
        other => panic!("{other:?}"),
    }
    drop((seven, leased));
    // The victim is as it was: never opened for writing, never chmod-ed.
    let m = std::fs::metadata(&victim).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o600);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "secret");
}

/// A reservation is replaced through a temporary file with an unpredictable name, created
/// `O_EXCL`, never through a path someone planted: a leftover from a crash (even a link) is
/// removed at the next claim of its node, and the directory holds only the node's two files.
#[test]
fn reservations_go_through_unpredictable_temporary_files_and_leftovers_are_removed() {
    let base = common::TempDir::new("trust-temp");
    let state = base.path().join("state");
    let store = Arc::new(FileStore::open(&state).unwrap());
    let dir = state.join("twitter");
    let victim = base.path().join("victim");
    std::fs::write(&victim, "secret").unwrap();
    set_mode(&victim, 0o600);
    drop(
        store
            .claim(&Layout::twitter(), NodeRequest::Exact(0))
            .unwrap(),
    );
    // Leftovers of a writer of node 0 that crashed: a file, and a link to the victim.
    std::fs::write(dir.join(".node-0.reservation.0123456789abcdef"), "x").unwrap();
    std::os::unix::fs::symlink(&victim, dir.join(".node-0.reservation.fedcba9876543210")).unwrap();
    let leased = Generator::builder(Layout::twitter())
        .reservation_window(std::time::Duration::from_millis(40))
        .build_leased(store, NodeRequest::Exact(0))
        .unwrap();
    // Many extensions (a 40 ms window is extended every ~20 ms).
    let start = std::time::Instant::now();
    while leased.stats().reservation_writes < 10 {
        leased.next_id().unwrap();
        assert!(start.elapsed() < std::time::Duration::from_secs(60));
    }
    leased.release().unwrap();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["node-0.lock", "node-0.reservation"]);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "secret");
    assert_eq!(std::fs::metadata(&victim).unwrap().mode() & 0o7777, 0o600);
}

/// The state directory renamed away and replaced under a holder (by someone trusted: an
/// operator, a cleaner): the holder notices at its next check and stops for good; it never
/// writes into the new directory; a newcomer there starts above everything it issued.
#[test]
fn a_state_directory_replaced_under_a_holder_is_detected_not_followed() {
    let base = common::TempDir::new("trust-replaced");
    let state = base.path().join("state");
    let old = Generator::builder(Layout::twitter())
        .build_leased(
            Arc::new(FileStore::open(&state).unwrap()),
            NodeRequest::Exact(0),
        )
        .unwrap();
    let mut old_ids = Vec::new();
    old_ids.push(old.next_id().unwrap());
    std::fs::rename(&state, base.path().join("moved")).unwrap();
    std::fs::create_dir(&state).unwrap();
    set_mode(&state, 0o700);
    // Issue until the holder stops (a liveness bound only), a millisecond apart: a loop that
    // never sleeps would take the core the lease keeper needs (with the other one busy, as
    // under .ci/hog-runs), and the lease would lapse before the keeper looked.
    let start = std::time::Instant::now();
    let lost = loop {
        match old.try_next_id() {
            Ok(id) => old_ids.push(id),
            Err(Error::WouldBlock { .. }) => {}
            Err(e) => break e,
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "never stopped"
        );
    };
    match lost {
        Error::LeaseLost {
            node: 0, reason, ..
        } => {
            assert!(reason.contains("was replaced"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    // Nothing was locked, followed or replaced in the new directory: the holder only wrote
    // back the time it used, as a restored record of its own, for a claimant that finds no
    // reservation (see store_conformance.rs).
    let written: Vec<String> = std::fs::read_dir(state.join("twitter"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(std::fs::read_dir(&state).unwrap().count(), 1);
    assert_eq!(written.len(), 1, "{written:?}");
    assert!(written[0].starts_with("node-0.restored."), "{written:?}");
    let new = Generator::builder(Layout::twitter())
        .build_leased(
            Arc::new(FileStore::open(&state).unwrap()),
            NodeRequest::Exact(0),
        )
        .unwrap();
    let first = new.next_id().unwrap();
    assert!(
        old_ids.iter().all(|&id| id < first),
        "the newcomer went below the old holder"
    );
    drop(old);
    new.release().unwrap();
}

/// A store opened with a relative path keeps the directory that path named when it was
/// opened, wherever the process moves afterwards (a daemon's `chdir("/")`): its holder keeps
/// its node, and a later claim through it is made in the same directory. (Before, the holder
/// lost its lease at its next check, "state was removed", and the next claim made a new
/// directory under the new working directory and took node 0 again there.)
#[test]
fn a_relative_state_directory_stays_the_one_opened_after_a_chdir() {
    let base = common::TempDir::new("trust-relative");
    let elsewhere = base.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let before = std::env::current_dir().unwrap();
    std::env::set_current_dir(base.path()).unwrap();
    let store = Arc::new(FileStore::open("state").unwrap());
    let holder = Generator::builder(Layout::twitter())
        .build_leased(store.clone(), NodeRequest::Any)
        .unwrap();
    std::env::set_current_dir(&elsewhere).unwrap();
    // Several checks later (a liveness bound only), the holder still issues.
    let renewed = holder.stats().lease_renewals;
    let start = std::time::Instant::now();
    while holder.stats().lease_renewals < renewed + 5 {
        holder.next_id().unwrap();
        assert!(start.elapsed() < std::time::Duration::from_secs(60));
    }
    assert_eq!(holder.stats().lease_losses, 0);
    let second = Generator::builder(Layout::twitter())
        .build_leased(store, NodeRequest::Any)
        .unwrap();
    std::env::set_current_dir(before).unwrap();
    assert_eq!((holder.node(), second.node()), (0, 1));
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    holder.release().unwrap();
    second.release().unwrap();
}

/// A state directory opened while private and then opened to everyone (an operator's
/// `chmod 0777` under running services) is refused at the next claim through the same store,
/// as a fresh open refuses it: whoever may write it now could have forged its records.
#[test]
fn a_state_directory_opened_to_others_after_it_was_opened_is_refused_at_the_next_claim() {
    let base = common::TempDir::new("trust-chmod");
    let state = base.path().join("state");
    let store = FileStore::open(&state).unwrap();
    drop(
        store
            .claim(&Layout::twitter(), NodeRequest::Exact(0))
            .unwrap(),
    );
    set_mode(&state, 0o777);
    untrusted(
        store.claim(&Layout::twitter(), NodeRequest::Exact(0)),
        &state,
        "lets every user write it",
    );
    set_mode(&state, 0o700);
    drop(
        store
            .claim(&Layout::twitter(), NodeRequest::Exact(0))
            .unwrap(),
    );
}

/// `migrate_v1` rewrites the version-1 reservations it can trust and stops with an error at
/// the first it cannot — a link, a file others can write — naming it, rather than leaving
/// it refused at every claim while it reports nothing to migrate.
#[test]
fn migrating_version_1_reservations_names_a_file_it_cannot_trust() {
    let base = common::TempDir::new("trust-migrate");
    let state = base.path().join("state");
    let store = FileStore::open(&state).unwrap();
    let dir = state.join("twitter");
    std::fs::create_dir_all(&dir).unwrap();
    set_mode(&dir, 0o700);
    let v1 = "monoflake-reservation v1\nuntil_ms=5000\n";
    std::fs::write(dir.join("node-3.reservation"), v1).unwrap();
    let outside = base.path().join("outside");
    std::fs::write(&outside, v1).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("node-4.reservation")).unwrap();
    untrusted(
        store.migrate_v1(),
        &dir.join("node-4.reservation"),
        "symbolic link",
    );
    // The one before it was migrated.
    let claim = store
        .claim(&Layout::twitter(), NodeRequest::Exact(3))
        .unwrap();
    assert_eq!(claim.reserved_until_ms(), Some(5000));
    drop(claim);
    std::fs::remove_file(dir.join("node-4.reservation")).unwrap();
    std::fs::write(dir.join("node-4.reservation"), v1).unwrap();
    set_mode(&dir.join("node-4.reservation"), 0o666);
    untrusted(
        store.migrate_v1(),
        &dir.join("node-4.reservation"),
        "lets every user write it",
    );
    set_mode(&dir.join("node-4.reservation"), 0o600);
    assert_eq!(
        store.migrate_v1().unwrap(),
        vec![dir.join("node-4.reservation")]
    );
}

/// A reservation that is a hard link — another node's reservation, or a file elsewhere — is
/// refused like a hard-linked lock file: its value is not this node's (node 1 would have
/// started at node 0's lower reservation).
#[test]
fn a_hard_linked_reservation_is_refused() {
    let base = common::TempDir::new("trust-hard-link");
    let state = base.path().join("state");
    let store = FileStore::open(&state).unwrap();
    let layout = Layout::twitter();
    let zero = store.claim(&layout, NodeRequest::Exact(0)).unwrap();
    store.release(zero, 1_000).unwrap();
    let dir = state.join("twitter");
    std::fs::hard_link(
        dir.join("node-0.reservation"),
        dir.join("node-1.reservation"),
    )
    .unwrap();
    for node in [0, 1] {
        untrusted(
            claim_settled(&store, &layout, NodeRequest::Exact(node)),
            &dir.join(format!("node-{node}.reservation")),
            "hard link",
        );
    }
}

/// Sets a POSIX access control list giving uid `uid` read, write and search on `path` (with
/// a mask that lets it): what `setfacl -m u:UID:rwx PATH` does. False where the file system
/// keeps no such lists.
fn grant_acl_write(path: &Path, uid: u32) -> bool {
    set_acl(path, NamedEntry::User(uid), 7)
}

/// The one named entry of [`set_acl`]'s list.
enum NamedEntry {
    User(u32),
    Group(u32),
}

/// Sets a POSIX access control list with one named user or group given `perm` (7 is rwx)
/// and a mask of rwx: `setfacl -m u:UID:PERM` or `g:GID:PERM`.
fn set_acl(path: &Path, named: NamedEntry, perm: u16) -> bool {
    const UNDEFINED: u32 = u32::MAX;
    let (named_user, named_group) = match named {
        NamedEntry::User(uid) => (Some((0x02, perm, uid)), None),
        NamedEntry::Group(gid) => (None, Some((0x08, perm, gid))),
    };
    // Entries in the order the kernel wants: owner, named users, owning group, named groups,
    // mask, others.
    let entries: Vec<(u16, u16, u32)> = [Some((0x01, 7, UNDEFINED))]
        .into_iter()
        .chain([named_user, Some((0x04, 7, UNDEFINED)), named_group])
        .chain([Some((0x10, 7, UNDEFINED)), Some((0x20, 0, UNDEFINED))])
        .flatten()
        .collect();
    let mut value = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in entries {
        value.extend_from_slice(&tag.to_le_bytes());
        value.extend_from_slice(&perm.to_le_bytes());
        value.extend_from_slice(&id.to_le_bytes());
    }
    let path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: both strings are NUL-terminated and `value` lives across the call.
    #[allow(unsafe_code)]
    let set = unsafe {
        libc::setxattr(
            path.as_ptr(),
            c"system.posix_acl_access".as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if set != 0 {
        eprintln!(
            "skipped: no access control lists here ({})",
            std::io::Error::last_os_error()
        );
    }
    set == 0
}

/// A shared directory (`2770`) whose access control list lets a user outside the group write
/// it — `setfacl -m u:backup:rwx`, or a default list inherited from its parent — is refused,
/// and so is a record with such a list: the mode alone shows only the list's mask as the
/// group's bits. (Before, `nobody`, given such a list and no group, planted a layout directory
/// of its own in the state directory — setgid, so its files carried the group — with a forged
/// reservation that a root holder read.)
#[test]
fn an_access_control_list_letting_another_user_write_is_refused() {
    let base = common::TempDir::new("trust-acl");
    let state = base.path().join("state");
    std::fs::create_dir(&state).unwrap();
    set_mode(&state, 0o2770);
    let store = FileStore::open(&state).unwrap();
    let claim = store
        .claim(&Layout::twitter(), NodeRequest::Exact(0))
        .unwrap();
    store.release(claim, 1_000).unwrap();
    let reservation = state.join("twitter/node-0.reservation");
    if !grant_acl_write(&reservation, NOBODY) {
        return;
    }
    untrusted(
        claim_settled(&store, &Layout::twitter(), NodeRequest::Exact(0)),
        &reservation,
        "access control list lets uid 65534 write it",
    );
    assert!(grant_acl_write(&state, NOBODY));
    untrusted(
        FileStore::open(&state),
        &state,
        "access control list lets uid 65534 write it",
    );
    // A named group outside the directory's own may not write it either.
    assert!(set_acl(&state, NamedEntry::Group(12345), 7));
    untrusted(
        FileStore::open(&state),
        &state,
        "access control list lets group 12345 write it",
    );
    // Entries that may not write, and the directory's own group, are no one untrusted.
    let own_group = std::fs::metadata(&state).unwrap().gid();
    for (named, perm) in [
        (NamedEntry::User(NOBODY), 5),
        (NamedEntry::Group(12345), 5),
        (NamedEntry::Group(own_group), 7),
    ] {
        assert!(set_acl(&state, named, perm));
        FileStore::open(&state).unwrap();
    }
}
