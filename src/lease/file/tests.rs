//! The file store's own tests: its files, as they are on disk.

use std::cell::Cell;
use std::rc::Rc;

use super::record::failpoint::{self, Stage};
use super::*;

/// A fresh directory. These tests look at the directory's files, each in a directory of
/// its own and in parallel: their claims skip the host-wide claim (host.rs has its own
/// tests), which would otherwise have them take node 0 from one another.
fn temp_dir(tag: &str) -> PathBuf {
    host::tests::SKIP.set(true);
    let dir = std::env::temp_dir().join(format!("monoflake-unit-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// What node 0's reservation file says.
fn on_file(dir: &Path) -> u64 {
    let state = FileStore::open(dir).unwrap().current().unwrap();
    let (layout_fd, _) = open_subdir(&state, dir, OsStr::new("twitter")).unwrap();
    match record::read(&layout_fd, &record::name(0), &state.trust) {
        Ok(Some(Parsed::Good(until))) => until,
        other => panic!("{other:?}"),
    }
}

/// A write-back whose restored record cannot be written fails, naming the file: the holder
/// is not told its write-back is done (it would let go of the node's host-wide claim, and a
/// successor on this host would start unaware of what it issued).
#[test]
fn a_write_back_whose_record_cannot_be_written_fails() {
    let dir = temp_dir("restore-fails");
    let store = FileStore::open(&dir).unwrap();
    let claim = store
        .claim(&Layout::twitter(), NodeRequest::Exact(0))
        .unwrap();
    store.extend(&claim, 2_000).unwrap();
    // The restored record's temporary file is taken away before its rename.
    let layout_dir = dir.join("twitter");
    failpoint::set(move |stage| {
        if stage == Stage::BeforeRename {
            for entry in std::fs::read_dir(&layout_dir).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if name.starts_with(".node-0.restored.") {
                    std::fs::remove_file(&path).unwrap();
                }
            }
        }
    });
    let written = store.restore(&claim, 3_000);
    failpoint::clear();
    match written {
        Err(Error::StateDir { action, path, .. }) => {
            assert_eq!(action, "replace");
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            assert!(name.starts_with("node-0.restored."), "{name}");
        }
        other => panic!("{other:?}"),
    }
    drop(claim);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A reservation is read up to 4,096 bytes (empty lines after its text are allowed) and
/// refused as damaged past that, naming its length: never half-read.
#[test]
fn a_reservation_is_read_up_to_its_limit_and_no_further() {
    let dir = temp_dir("record-limit");
    let store = FileStore::open(&dir).unwrap();
    let claim = store
        .claim(&Layout::twitter(), NodeRequest::Exact(0))
        .unwrap();
    store.extend(&claim, 1_700_000_005_000).unwrap();
    let good = std::fs::read_to_string(dir.join("twitter/node-0.reservation")).unwrap();
    let state = store.current().unwrap();
    let (layout_fd, _) = open_subdir(&state, &dir, OsStr::new("twitter")).unwrap();
    for len in [4096, 4097] {
        let padded = format!("{good}{}", "\n".repeat(len - good.len()));
        std::fs::write(dir.join("twitter/node-0.reservation"), padded).unwrap();
        let read = record::read(&layout_fd, &record::name(0), &state.trust);
        match (len, read) {
            (4096, Ok(Some(Parsed::Good(1_700_000_005_000)))) => {}
            (4097, Err(record::ReadError::Damaged(why))) => {
                assert_eq!(why, "it is 4097 bytes long");
            }
            (len, other) => panic!("{len} bytes: {other:?}"),
        }
    }
    drop(claim);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The fix an error about the default directory suggests works for several users under
/// systemd: a root-owned directory from tmpfiles.d, not `StateDirectory=` (which systemd
/// chowns, recursively, to the starting unit's user at every start — a directory the
/// other units then refuse as another user's).
#[test]
fn the_default_directory_fix_names_a_directory_several_units_can_share() {
    let fix = default_fix("it is missing", Path::new("/var/lib/monoflake"));
    assert!(
        fix.contains("`d /var/lib/monoflake 2770 root monoflake -`")
            && fix.contains("SupplementaryGroups=monoflake"),
        "{fix}"
    );
    assert!(!fix.contains("StateDirectory="), "{fix}");
}

/// A holder's lock file is deleted (an operator's `rm`) after the holder checked its
/// claim for its next reservation write, and a successor claims the node, reading the
/// reservation as it was, before the holder's write begins. The write must fail with
/// `LeaseLost` and leave the record alone: had it succeeded, the holder's fence would let
/// it issue up to the new reservation while the successor starts from the old one —
/// duplicates (seen with a 10 ms reservation window: thousands of the holder's IDs above
/// its successor's floor).
#[test]
fn a_successor_that_claims_while_the_holder_writes_keeps_the_record_it_read() {
    let dir = temp_dir("successor-mid-write");
    let store = FileStore::open(&dir).unwrap();
    let layout = Layout::twitter();
    let holder = store.claim(&layout, NodeRequest::Exact(0)).unwrap();
    store.extend(&holder, 1_000).unwrap();
    let lock = dir.join("twitter/node-0.lock");
    let read = Rc::new(Cell::new(None));
    let (other, seen) = (store.clone(), Rc::clone(&read));
    failpoint::set(move |stage| {
        if stage == Stage::Start && seen.get().is_none() {
            std::fs::remove_file(&lock).unwrap();
            // (On one host the host-wide claim alone refuses this successor; the record
            // layer must fence it by itself too.)
            let successor = other
                .claim(&Layout::twitter(), NodeRequest::Exact(0))
                .unwrap();
            seen.set(Some(successor.reserved_until_ms()));
            std::mem::forget(successor); // keeps its lock until the test ends
        }
    });
    let written = store.extend(&holder, 2_000);
    failpoint::clear();
    assert!(
        matches!(written, Err(Error::LeaseLost { node: 0, .. })),
        "{written:?}"
    );
    assert_eq!(read.get(), Some(Some(1_000)));
    assert_eq!(on_file(&dir), 1_000);
    drop(holder);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Twitter's bit shape with the epoch `ms` later.
fn twitter_later(ms: u64) -> Layout {
    Layout::builder()
        .node_field("worker", 10)
        .epoch_ms(Layout::twitter().epoch_ms() + ms)
        .build()
        .unwrap()
}

/// One directory, two layouts of one shape with epochs 1 s apart: one record, read as
/// the same ID value (issue 34, case 3). The cheapest check of the mutant
/// `monoflake_mutant_epoch_blind`, which keys records by state name again.
#[test]
fn an_epoch_one_second_later_reads_the_record_one_second_later() {
    let dir = temp_dir("epoch-same-dir");
    let store = FileStore::open(&dir).unwrap();
    let (early, late) = (Layout::twitter(), twitter_later(1_000));
    let claim = store.claim(&early, NodeRequest::Exact(0)).unwrap();
    store.release(claim, 1_800_000_000_000).unwrap();
    let claim = store.claim(&late, NodeRequest::Exact(0)).unwrap();
    assert_eq!(claim.reserved_until_ms(), Some(1_800_000_001_000));
    assert!(claim.recorded());
    store.release(claim, 1_800_000_002_000).unwrap();
    // Stored as Twitter's Unix ms (its preset's clock): 1 s earlier than written.
    assert_eq!(on_file(&dir), 1_800_000_001_000);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two state directories on one host (sharing its anchors), two layouts of one shape with
/// epochs 1 s apart: the second directory has no record, and the host's anchor of the
/// first holder's reservation reads as the same ID value.
#[test]
fn another_directory_reads_the_anchor_as_an_id_value() {
    let (a, b) = (temp_dir("epoch-anchor-a"), temp_dir("epoch-anchor-b"));
    let first = FileStore::open(&a).unwrap();
    let mut second = FileStore::open(&b).unwrap();
    // One host: the second store uses the first one's anchors.
    second.anchors = Arc::clone(&first.anchors);
    if !first.anchors.available() {
        return;
    }
    let claim = first
        .claim(&Layout::twitter(), NodeRequest::Exact(3))
        .unwrap();
    first.extend(&claim, 1_800_000_000_000).unwrap();
    let other = second
        .claim(&twitter_later(1_000), NodeRequest::Exact(3))
        .unwrap();
    assert_eq!(other.reserved_until_ms(), Some(1_800_000_001_000));
    assert!(!other.recorded());
    drop((claim, other));
    for dir in [&a, &b] {
        let _ = std::fs::remove_dir_all(dir);
    }
    if let Some(parent) = a.parent() {
        let name = format!(".{}.host-anchors", a.file_name().unwrap().to_string_lossy());
        let _ = std::fs::remove_dir_all(parent.join(name));
    }
}

/// The lock file replaced just before the holder's rename: the write fails after the
/// rename (`LeaseLost`), so the holder never issues under the reservation it wrote.
#[test]
fn a_lock_file_replaced_just_before_the_rename_fails_the_write() {
    let dir = temp_dir("replaced-before-rename");
    let store = FileStore::open(&dir).unwrap();
    let holder = store
        .claim(&Layout::twitter(), NodeRequest::Exact(0))
        .unwrap();
    let lock = dir.join("twitter/node-0.lock");
    failpoint::set(move |stage| {
        if stage == Stage::BeforeRename {
            std::fs::remove_file(&lock).unwrap();
            std::fs::write(&lock, "").unwrap();
        }
    });
    let written = store.extend(&holder, 2_000);
    failpoint::clear();
    assert!(
        matches!(written, Err(Error::LeaseLost { node: 0, .. })),
        "{written:?}"
    );
    drop(holder);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs the test `name` again in a process of its own, where [`writes_cut_short`] may set a
/// limit that is the whole process's, and asserts that it passed there. Returns `true` in that
/// process (go on with the test), `false` here (the test is done).
///
/// SIGXFSZ is ignored in the child (`trap ''`, kept across `exec`), so a write past the
/// file-size limit fails with `EFBIG` instead of killing it.
fn in_a_process_of_its_own(name: &str) -> bool {
    const CHILD: &str = "MONOFLAKE_TEST_OWN_PROCESS";
    if std::env::var_os(CHILD).is_some() {
        return true;
    }
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"trap '' XFSZ; exec "$0" "$@""#)
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &format!("lease::file::tests::{name}"),
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.contains("1 passed"),
        "{name} in a process of its own: {}\n{said}",
        out.status
    );
    false
}

/// Runs `f` with every write to a file cut off at 16 bytes (`RLIMIT_FSIZE`: `EFBIG`, as a full
/// disk's `ENOSPC`, and for root too), then lifts the limit. Only in a process of its own.
fn writes_cut_short<T>(f: impl FnOnce() -> T) -> T {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let was = getrlimit(Resource::Fsize);
    setrlimit(
        Resource::Fsize,
        Rlimit {
            current: Some(16),
            maximum: was.maximum,
        },
    )
    .unwrap();
    let out = f();
    setrlimit(Resource::Fsize, was).unwrap();
    out
}

/// A reservation whose write is cut short fails naming the write, and nothing is renamed into
/// place: the record keeps the reservation it had (a short record renamed into place would
/// refuse the node at every later read), and no temporary file is left.
#[test]
fn a_record_whose_write_is_cut_short_is_not_put_in_place() {
    if !in_a_process_of_its_own("a_record_whose_write_is_cut_short_is_not_put_in_place") {
        return;
    }
    let dir = temp_dir("cut-short");
    let store = FileStore::open(&dir).unwrap();
    let claim = store
        .claim(&Layout::twitter(), NodeRequest::Exact(0))
        .unwrap();
    store.extend(&claim, 2_000).unwrap();
    let before = on_file(&dir);
    match writes_cut_short(|| store.extend(&claim, 3_000)) {
        Err(Error::StateDir { action, path, .. }) => {
            assert_eq!(action, "write");
            assert_eq!(path, dir.join("twitter").join("node-0.reservation"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(on_file(&dir), before);
    let left: Vec<String> = std::fs::read_dir(dir.join("twitter"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
    drop(claim);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A version-1 reservation whose rewrite is cut short is not reported migrated: the migration
/// fails naming the write, and the record stays version 1 (refused at a claim until migrated).
#[test]
fn a_migration_whose_rewrite_is_cut_short_fails() {
    if !in_a_process_of_its_own("a_migration_whose_rewrite_is_cut_short_fails") {
        return;
    }
    let dir = temp_dir("migrate-cut-short");
    let store = FileStore::open(&dir).unwrap();
    std::fs::create_dir_all(dir.join("twitter")).unwrap();
    let path = dir.join("twitter").join("node-4.reservation");
    let v1 = "monoflake-reservation v1\nuntil_ms=5000\n";
    std::fs::write(&path, v1).unwrap();
    match writes_cut_short(|| store.migrate_v1()) {
        Err(Error::StateDir {
            action,
            path: named,
            ..
        }) => {
            assert_eq!(action, "write");
            assert_eq!(named, path);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap(), v1);
    assert_eq!(store.migrate_v1().unwrap(), vec![path]);
    let _ = std::fs::remove_dir_all(&dir);
}
