//! Many processes, restarts, crashes and a clock set back, through the `monoflake` CLI on the
//! file backend (the embedded default).

#[path = "../../tests/common/mod.rs"]
mod common;

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use monoflake::{FileStore, Id, Layout, NodeRequest, NodeStore};

fn monoflake(state: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_monoflake"));
    c.env("MONOFLAKE_STATE_DIR", state);
    c
}

fn ids(out: &Output) -> Vec<u64> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

#[test]
fn eight_processes_at_once_on_one_state_dir() {
    let state = common::TempDir::new("eight");
    let children: Vec<_> = (0..8)
        .map(|_| {
            monoflake(state.path())
                .args(["gen", "-n", "200000"])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut all = HashSet::new();
    // Per node, the (first, last) ID of each process that held it.
    let mut runs: std::collections::BTreeMap<u64, Vec<(u64, u64)>> = Default::default();
    let layout = Layout::twitter();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let ids = ids(&out);
        assert_eq!(ids.len(), 200_000);
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "a process went back");
        let node = Id::from_u64(ids[0]).parts(&layout).unwrap().node();
        assert!(
            ids.iter()
                .all(|&id| Id::from_u64(id).parts(&layout).unwrap().node() == node)
        );
        runs.entry(node)
            .or_default()
            .push((ids[0], ids[ids.len() - 1]));
        all.extend(ids);
    }
    assert_eq!(all.len(), 1_600_000, "duplicates across processes");
    // A node may be handed on by a process that finished before another started (the
    // processes need not overlap), but only in turn: the later holder's IDs lie above the
    // earlier one's.
    for (node, mut held) in runs {
        held.sort_unstable();
        for pair in held.windows(2) {
            assert!(
                pair[0].1 < pair[1].0,
                "node {node} was held by two processes at once: {held:?}"
            );
        }
    }
}

/// `monoflake` under libfaketime with the wall clock offset by `offset` (e.g. `-1h`, or
/// `@2026-12-01 08:00:00` to start there), as `faketime -f OFFSET monoflake` would run it.
fn under_faketime(state: &Path, offset: &str) -> Command {
    let mut c = monoflake(state);
    c.env("LD_PRELOAD", common::libfaketime())
        .env("FAKETIME", offset);
    c
}

/// Runs `cmd` (a `gen` asking for node 0) and checks that it is refused, issuing nothing,
/// with the holder named: node 0 is the process `holder`'s on this host.
fn assert_refused_by(cmd: &mut Command, holder: u32) {
    let refused = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{err}");
    assert!(refused.stdout.is_empty(), "{err}");
    assert!(
        err.contains(&format!("node 0 is held by process {holder} of user")),
        "{err}"
    );
}

fn unix_ms_of(id: u64, layout: &Layout) -> u64 {
    Id::from_u64(id).parts(layout).unwrap().unix_ms()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn restart_with_the_clock_set_back_an_hour() {
    let state = common::TempDir::new("faketime");
    let layout = Layout::twitter();
    let before = ids(&monoflake(state.path())
        .args(["gen", "-n", "1000", "--node", "0"])
        .output()
        .unwrap());
    let max_before = *before.iter().max().unwrap();
    // The same node, asked for by number: its reservation is an hour ahead of this clock,
    // far past the tolerance. Refused, nothing printed, the numbers in the message.
    let out = under_faketime(state.path(), "-1h")
        .args(["gen", "-n", "1000", "--node", "0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(out.stdout.is_empty());
    assert!(
        err.contains("node 0's time reservation runs to")
            && err.contains("min ahead of this clock")
            && err.contains("(with monoflake: --trust-reservation)"),
        "{err}"
    );
    // Trusting the reservation: the same node, every ID above the earlier ones.
    let trusted = ids(&under_faketime(state.path(), "-1h")
        .args(["gen", "-n", "1000", "--node", "0", "--trust-reservation"])
        .output()
        .unwrap());
    assert!(
        trusted.iter().all(|&id| id > max_before),
        "an ID after the restart is not above the earlier ones"
    );
    // Any node: node 0 is passed over; another node, stamped with this (faked) clock's time
    // — never silently: stderr says that these IDs sort below earlier ones, and by how much
    // (node 0's reservation, about an hour ahead of this clock; `Stats::sorts_below_ms`).
    let out = under_faketime(state.path(), "-1h")
        .args(["gen", "-n", "1000", "--stats"])
        .output()
        .unwrap();
    let auto = ids(&out);
    let node = Id::from_u64(auto[0]).parts(&layout).unwrap().node();
    assert_ne!(node, 0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nodes skipped ahead 1 (sorting below by up to "),
        "{err}"
    );
    assert!(
        err.contains("monoflake: warning: this clock is 60.")
            && err.contains(" min behind what the node store saw before")
            && err.contains(&format!(
                "node {node} was taken instead of waiting, and its IDs sort below IDs issued up \
                 to 60."
            )),
        "{err}"
    );
    let t = unix_ms_of(auto[0], &layout);
    assert!(
        t < now_ms() - 3_000_000,
        "not stamped with the faked clock: {t}"
    );
    let all: HashSet<u64> = before
        .iter()
        .chain(&trusted)
        .chain(&auto)
        .copied()
        .collect();
    assert_eq!(all.len(), 3000);
}

/// The wall clock steps back an hour, then forward two, while `gen` runs on a leased node
/// (libfaketime with a timestamp file; the monotonic clock is real). `gen` rides through
/// both: exit 0, every ID printed, strictly increasing, and after the forward step the IDs
/// follow the wall clock (an hour ahead of the real one).
#[test]
fn gen_rides_through_wall_clock_steps_back_and_forward() {
    let lib = common::libfaketime();
    let state = common::TempDir::new("steps");
    let offset = state.path().join("faketime");
    std::fs::write(&offset, "+0\n").unwrap();
    let count: usize = 6_000_000;
    let mut child = monoflake(state.path())
        .args(["gen", "-n", &count.to_string(), "--node", "3"])
        .env("LD_PRELOAD", lib)
        .env("FAKETIME_TIMESTAMP_FILE", &offset)
        .env("FAKETIME_NO_CACHE", "1")
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut read = 0usize;
    let mut last = 0u64;
    let mut read_some = |n: usize, read: &mut usize, last: &mut u64| {
        for _ in 0..n {
            line.clear();
            if reader.read_line(&mut line).unwrap() == 0 {
                break;
            }
            let id: u64 = line.trim().parse().unwrap();
            assert!(id > *last, "not strictly increasing: {id} after {last}");
            *last = id;
            *read += 1;
        }
    };
    // The pipe holds gen back while this test does not read, so each step is seen at gen's
    // next comparison with the wall clock (at most a second of its clock after the last).
    read_some(500_000, &mut read, &mut last);
    std::fs::write(&offset, "-3600\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    read_some(500_000, &mut read, &mut last);
    std::fs::write(&offset, "+3600\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    read_some(usize::MAX, &mut read, &mut last);
    let status = child.wait().unwrap();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        std::io::Read::read_to_string(&mut e, &mut err).unwrap();
    }
    assert!(status.success(), "gen failed: {status} {err}");
    assert_eq!(read, count, "every ID printed");
    let t = unix_ms_of(last, &Layout::twitter());
    let real = now_ms();
    assert!(
        t > real + 3_000_000,
        "after the forward step the IDs follow the wall clock: {t} vs real {real}"
    );
}

/// A node last used by a host whose clock was years ahead (a run under faketime +5y): asked
/// for by number it is refused with the numbers (exit 1, nothing printed); `--node auto`
/// skips it and says so. A run with the clock in 2100, past the layout's end, writes nothing.
#[test]
fn a_reservation_years_ahead_is_refused_by_number_and_skipped_by_auto() {
    let state = common::TempDir::new("years");
    let layout = Layout::twitter();
    let future = ids(&under_faketime(state.path(), "+5y")
        .args(["gen", "-n", "100", "--node", "0"])
        .output()
        .unwrap());
    assert!(unix_ms_of(future[0], &layout) > now_ms() + 4 * 365 * 86_400_000);
    let out = monoflake(state.path())
        .args(["gen", "-n", "5", "--node", "0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(out.stdout.is_empty());
    assert!(
        err.contains("node 0's time reservation runs to 203") && err.contains("years ahead"),
        "{err}"
    );
    let out = monoflake(state.path())
        .args(["gen", "-n", "5", "--stats"])
        .output()
        .unwrap();
    let auto = ids(&out);
    assert_eq!(Id::from_u64(auto[0]).parts(&layout).unwrap().node(), 1);
    assert!(unix_ms_of(auto[0], &layout) <= now_ms() + 150);
    assert!(String::from_utf8_lossy(&out.stderr).contains("nodes skipped ahead 1"));
    // The clock in 2100, past the end of the layout (2080): exhausted, and node 2's record is
    // not pushed to 2100 (it would be refused as ahead for decades).
    let out = under_faketime(state.path(), "@2100-01-01 00:00:00")
        .args(["gen", "-n", "5", "--node", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ran out"));
    let again = ids(&monoflake(state.path())
        .args(["gen", "-n", "5", "--node", "2"])
        .output()
        .unwrap());
    assert_eq!(again.len(), 5);
}

#[test]
fn kill_9_then_restart() {
    let state = common::TempDir::new("kill9");
    let mut child = monoflake(state.path())
        .args(["gen", "-n", "100000000000", "--layout", "sonyflake"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Read a good number of IDs, then kill it mid-stream.
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut written = Vec::new();
    let mut line = String::new();
    while written.len() < 50_000 {
        line.clear();
        reader.read_line(&mut line).unwrap();
        written.push(line.trim().parse::<u64>().unwrap());
    }
    common::signal(child.id(), "KILL");
    // Whatever it had written out before dying counts too.
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut reader, &mut rest).unwrap();
    written.extend(rest.lines().filter_map(|l| l.parse::<u64>().ok()));
    let _ = child.wait();
    let max_written = *written.iter().max().unwrap();
    let layout = Layout::sonyflake();
    // Any node: the killed node's reservation runs ahead of the clock (up to the 5 s window),
    // so another, settled node is taken at once, with honest time.
    let started = now_ms();
    let out = monoflake(state.path())
        .args(["gen", "-n", "1000", "--layout", "sonyflake", "--stats"])
        .output()
        .unwrap();
    let after = ids(&out);
    assert_eq!(Id::from_u64(after[0]).parts(&layout).unwrap().node(), 1);
    // Node 1 has no record: it waits 2.5 check intervals, in case a holder whose record was
    // deleted is still issuing (and says so).
    let stats = String::from_utf8_lossy(&out.stderr);
    assert!(stats.contains("claim wait 250 ms"), "{stats}");
    // Honest: not stamped with the killed holder's reservation, at most the lead ahead.
    assert!(unix_ms_of(after[0], &layout) <= now_ms() + 150);
    assert!(unix_ms_of(after[0], &layout) + 20 >= started);
    // The killed node by number: its reservation is waited out, and no ID goes below.
    let again = ids(&monoflake(state.path())
        .args(["gen", "-n", "1000", "--layout", "sonyflake", "--node", "0"])
        .output()
        .unwrap());
    assert!(again.iter().all(|&id| id > max_written));
}

#[test]
fn more_claimants_than_node_ids_is_a_clear_error() {
    let state = common::TempDir::new("full");
    // Hold every node ID of the js-safe layout (64) in this process.
    let store = FileStore::open(state.path()).unwrap();
    let held: Vec<_> = (0..64)
        .map(|_| store.claim(&Layout::js_safe(), NodeRequest::Any).unwrap())
        .collect();
    let out = monoflake(state.path())
        .args(["gen", "--layout", "js-safe"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("all 64 node IDs of the layout are held"),
        "{err}"
    );
    // An exact node that is held.
    let out = monoflake(state.path())
        .args(["gen", "--layout", "js-safe", "--node", "5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("node 5 is held by another live claimant")
    );
    drop(held);
    // Free again.
    let out = monoflake(state.path())
        .args(["gen", "--layout", "js-safe", "--node", "5"])
        .output()
        .unwrap();
    assert!(out.status.success());
}

#[test]
fn an_unwritable_state_dir_is_a_clear_error() {
    let state = common::TempDir::new("unwritable");
    let file = state.path().join("file");
    std::fs::write(&file, "").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_monoflake"))
        .args(["gen", "--state-dir"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("state directory: cannot open")
            && err.contains("file")
            && err.contains("Not a directory"),
        "{err}"
    );
}

#[test]
fn the_etcd_backend_without_the_feature_or_server_is_a_clear_error() {
    let state = common::TempDir::new("noetcd");
    let port = common::free_port();
    let out = monoflake(state.path())
        .args([
            "gen",
            "--backend",
            "etcd",
            "--etcd-endpoints",
            &format!("http://127.0.0.1:{port}"),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if cfg!(feature = "etcd") {
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains(&format!("node store etcd http://127.0.0.1:{port}")),
            "{err}"
        );
    } else {
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("without the `etcd` feature"), "{err}");
    }
}

/// Runs `monoflake` as user `nobody` (uid/gid 65534) with `setpriv`, or `None` when this test
/// process cannot change users (not root, or no setpriv).
fn as_nobody(state: &Path) -> Option<Command> {
    let uid = Command::new("id").arg("-u").output().ok();
    let root = uid.is_some_and(|o| o.stdout.trim_ascii() == b"0");
    let setpriv = Command::new("setpriv").arg("--version").output();
    if !root || setpriv.map_or(true, |o| !o.status.success()) {
        eprintln!("skipped: needs root and setpriv to run a second user");
        return None;
    }
    let mut c = Command::new("setpriv");
    c.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        env!("CARGO_BIN_EXE_monoflake"),
    ]);
    c.env("MONOFLAKE_STATE_DIR", state);
    Some(c)
}

/// A state directory shared with a group (mode 2770, setgid): root and `nobody` (whose primary
/// group is 65534) both in it.
fn group_shared(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir(path).unwrap();
    std::os::unix::fs::chown(path, Some(0), Some(65534)).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o2770)).unwrap();
}

#[test]
fn two_users_on_one_host_share_a_group_state_directory() {
    let base = common::TempDir::new("users");
    let shared = base.path().join("shared");
    let Some(mut nobody) = as_nobody(&shared) else {
        return;
    };
    group_shared(&shared);
    // root holds node 0 of the group's directory.
    let store = std::sync::Arc::new(FileStore::open(&shared).unwrap());
    let root_holder = monoflake::Generator::builder(Layout::twitter())
        .build_leased(store.clone(), NodeRequest::Any)
        .unwrap();
    assert_eq!(root_holder.node(), 0);
    let root_ids: Vec<Id> = (0..1000).map(|_| root_holder.next_id().unwrap()).collect();
    // Another user of the group, with the default settings, takes another node, never root's.
    let out = nobody.args(["gen", "-n", "1000"]).output().unwrap();
    let theirs = ids(&out);
    let layout = Layout::twitter();
    let node = Id::from_u64(theirs[0]).parts(&layout).unwrap().node();
    assert_ne!(node, 0, "the second user took the first user's node");
    let mut all: HashSet<u64> = root_ids.iter().map(|id| id.as_u64()).collect();
    all.extend(&theirs);
    assert_eq!(all.len(), 2000);
    // Files the group's users make are the group's (setgid), so each trusts the other's: root
    // takes the other user's node over afterwards, reservation included.
    let claim = store.claim(&layout, NodeRequest::Exact(node)).unwrap();
    let until = claim.reserved_until_ms().unwrap();
    assert!(
        until
            > Id::from_u64(*theirs.last().unwrap())
                .parts(&layout)
                .unwrap()
                .unix_ms()
    );
    store.extend(&claim, until + 1).unwrap();
    store.release(claim, until + 1).unwrap();
    root_holder.release().unwrap();
}

#[test]
fn a_host_wide_directory_another_user_cannot_write_is_an_error_that_names_the_fix() {
    let base = common::TempDir::new("users-denied");
    for (name, mode) in [("root-only", 0o700), ("root-readable", 0o755)] {
        let locked = base.path().join(name);
        std::fs::create_dir(&locked).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(mode)).unwrap();
        let Some(mut nobody) = as_nobody(&locked) else {
            return;
        };
        let out = nobody.args(["gen", "-n", "1"]).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{name}");
        assert!(out.stdout.is_empty());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("Permission denied"), "{name}: {err}");
        assert!(
            err.contains(&format!(
                "sudo install -d -m 2770 -g monoflake {}",
                locked.display()
            )),
            "{name}: {err}"
        );
    }
}

#[test]
fn a_world_writable_state_directory_is_refused_with_the_fix() {
    let base = common::TempDir::new("world-writable");
    let open = base.path().join("open");
    std::fs::create_dir(&open).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let out = monoflake(&open).args(["gen", "-n", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot be trusted"), "{err}");
    assert!(err.contains("lets every user write it"), "{err}");
    assert!(err.contains("install -d -m 2770 -g monoflake"), "{err}");
}

/// A holder paused (SIGSTOP) while its state directory is deleted — the case the chaos soak
/// found with the holder's clock a second ahead (issue 39), where its last IDs lie above any
/// floor a successor on an honest clock could compute. On one host the node's host-wide claim
/// decides: while the holder exists, stopped or not, a successor asking for its node in the
/// new directory is refused, naming the holder's pid; resumed (SIGCONT), the holder finds its
/// claim lost, stops, writes back what it used into the directory now there, and lets go;
/// only then does a successor get the node — and it starts above every ID the holder printed.
#[test]
fn a_holder_paused_while_its_directory_is_deleted_never_collides_with_the_successor() {
    let state = common::TempDir::new("paused");
    let spawn = || {
        monoflake(state.path())
            .args(["gen", "-n", "100000000000", "--node", "0", "--threads", "2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut a = spawn();
    let ra = common::Reader::spawn(&mut a);
    ra.wait_for(10_000);
    common::signal(a.id(), "STOP");
    std::fs::remove_dir_all(state.path()).unwrap();
    // Refused, naming the stopped holder, however long it stays stopped.
    for _ in 0..3 {
        assert_refused_by(
            monoflake(state.path()).args(["gen", "-n", "5", "--node", "0"]),
            a.id(),
        );
    }
    common::signal(a.id(), "CONT");
    let (code, err) = common::stderr_of(a);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("lease was lost"), "{err}");
    // The holder has let go (it exited); the successor takes node 0 and starts above it.
    let mut b = spawn();
    let rb = common::Reader::spawn(&mut b);
    rb.wait_for(100_000);
    common::signal(b.id(), "TERM");
    let _ = common::stderr_of(b);
    let (a_ids, b_ids) = (ra.finish(), rb.finish());
    common::assert_successor_above(&a_ids, &b_ids);
}

/// The chaos soak's finding (issue 39, seed 4404): a holder whose wall clock runs a second
/// ahead (libfaketime `+1s`; its locked clock follows a forward step), paused, its records
/// deleted, and a successor on an honest clock that finds no record. Its floor (its clock
/// plus the unrecorded wait and the lead) lies below the holder's last IDs, so no floor
/// computed from its clock can be right: on one host the node's host-wide claim refuses the
/// successor while the holder exists, the holder resumes, finds its claim lost, writes back
/// the time it used (a second ahead) and exits; the successor then reads that record and
/// starts above every ID the holder printed (158 duplicates in the soak before).
#[test]
fn a_holder_ahead_paused_with_its_records_deleted_is_not_overlapped() {
    let state = common::TempDir::new("ahead-paused");
    // libfaketime preloaded into the holder itself (the `faketime` wrapper would run it as a
    // child, which a signal to the wrapper does not stop).
    let lib = common::libfaketime();
    let mut a = monoflake(state.path())
        .env("LD_PRELOAD", &lib)
        .env("FAKETIME", "+1s")
        .args(["gen", "-n", "100000000000", "--node", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ra = common::Reader::spawn(&mut a);
    ra.wait_for(20_000);
    let stopped_at = now_ms();
    common::signal(a.id(), "STOP");
    std::fs::remove_dir_all(state.path()).unwrap();
    let honest = || monoflake(state.path());
    assert_refused_by(honest().args(["gen", "-n", "5", "--node", "0"]), a.id());
    common::signal(a.id(), "CONT");
    let (code, err) = common::stderr_of(a);
    assert_eq!(code, Some(1), "{err}");
    let a_ids = ra.finish();
    // The precondition: the holder's IDs ran ahead of the honest clock (a second, less
    // whatever its last IDs lagged the stop).
    let layout = Layout::twitter();
    let last_a = unix_ms_of(*a_ids.iter().max().unwrap(), &layout);
    assert!(
        last_a > stopped_at + 500,
        "the holder was not ahead: {last_a} at {stopped_at}"
    );
    let b_ids = ids(&honest()
        .args(["gen", "-n", "100000", "--node", "0"])
        .output()
        .unwrap());
    common::assert_successor_above(&a_ids, &b_ids);
}

/// Two state directories used in turn on one host with the clock set back in between (a
/// review: root's directory, then a user's own default, the second run's clock behind the
/// first's IDs: 2,000,000 of 2,000,000 issued twice). Each directory remembers only its own
/// holders, so every holder also writes what its reservation says to the host's anchor in
/// /var/tmp, and a claim starts above the node's largest anchor as above its own record: the
/// second run waits out the first's lead and starts above it. Host-wide (the tests' scope
/// removed), on a layout no other test uses.
#[test]
fn two_state_directories_in_turn_with_the_clock_set_back_never_reissue() {
    let base = common::TempDir::new("in-turn");
    let layout = "time=40,n=10,sequence=13,epoch=2024-01-01";
    let run = |dir: &str| {
        let mut c = under_faketime(&base.path().join(dir), "@2026-12-01 08:00:00");
        c.env_remove("MONOFLAKE_TEST_HOST_SCOPE");
        c.args(["gen", "--layout", layout, "-n", "300000", "--node", "0"]);
        ids(&c.output().unwrap())
    };
    let first = run("root");
    let second = run("user");
    let max_first = *first.iter().max().unwrap();
    assert!(
        second.iter().all(|&id| id > max_first),
        "the second directory's IDs start below the first's"
    );
}

/// Two processes on one host, each given a state directory of its own (root's default and a
/// user's `MONOFLAKE_STATE_DIR`, say): the node's host-wide claim keeps them apart — the
/// second is refused node 0 naming the first, and `--node auto` takes node 1 — where two
/// lock files in two directories each handed out node 0 (issue 33: 84,672 of 800,000 IDs
/// issued twice). The tests' per-directory host scope is removed here: this is the host.
#[test]
fn two_state_directories_on_one_host_never_hold_one_node_at_once() {
    let base = common::TempDir::new("two-dirs");
    let (one, two) = (base.path().join("one"), base.path().join("two"));
    // A layout no other test uses, so that a test running in parallel is not this host too.
    let layout = "time=41,n=9,sequence=13,epoch=2024-01-01";
    let host_wide = |dir: &Path| {
        let mut c = monoflake(dir);
        c.env_remove("MONOFLAKE_TEST_HOST_SCOPE");
        c
    };
    let mut a = host_wide(&one)
        .args([
            "gen",
            "--layout",
            layout,
            "-n",
            "100000000000",
            "--node",
            "0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ra = common::Reader::spawn(&mut a);
    ra.wait_for(1_000);
    assert_refused_by(
        host_wide(&two).args(["gen", "--layout", layout, "-n", "5", "--node", "0"]),
        a.id(),
    );
    let auto = host_wide(&two)
        .args(["gen", "--layout", layout, "-n", "100000", "--node", "auto"])
        .output()
        .unwrap();
    let b_ids = ids(&auto);
    common::signal(a.id(), "TERM");
    let _ = common::stderr_of(a);
    let a_ids = ra.finish();
    let layout: Layout = layout.parse().unwrap();
    assert!(
        a_ids
            .iter()
            .all(|&id| Id::from_u64(id).parts(&layout).unwrap().node() == 0)
    );
    assert!(
        b_ids
            .iter()
            .all(|&id| Id::from_u64(id).parts(&layout).unwrap().node() == 1)
    );
}

#[test]
fn gen_with_standard_output_closed_fails_instead_of_losing_ids() {
    let state = common::TempDir::new("closed-stdout");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "exec {} gen -n 5 >&-",
            env!("CARGO_BIN_EXE_monoflake")
        ))
        .env("MONOFLAKE_STATE_DIR", state.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("standard output is closed"), "{err}");
    // Sent to /dev/null on purpose, the IDs are discarded and the run succeeds.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "exec {} gen -n 5 >/dev/null",
            env!("CARGO_BIN_EXE_monoflake")
        ))
        .env("MONOFLAKE_STATE_DIR", state.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn sigterm_releases_the_node_like_ctrl_c() {
    let state = common::TempDir::new("sigterm");
    let mut child = monoflake(state.path())
        .args(["gen", "-n", "2000000000", "--node", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: u64 = lines.next().unwrap().unwrap().parse().unwrap();
    common::signal(child.id(), "TERM");
    // Drain what it printed before it stopped.
    let mut last = first;
    for line in lines {
        last = line.unwrap().parse().unwrap();
    }
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "an interrupted run must not report success"
    );
    assert_eq!(
        status.code(),
        Some(1),
        "released and exited, not killed by the signal"
    );
    // The node is free at once, and its next holder starts above everything printed.
    let next = ids(&monoflake(state.path())
        .args(["gen", "-n", "1", "--node", "0"])
        .output()
        .unwrap());
    assert!(next[0] > last);
}

/// The `issued N` count of `--stats` on stderr.
fn issued_of(stderr: &str) -> usize {
    let at = stderr.find("issued ").expect("--stats line") + "issued ".len();
    let digits: String = stderr[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

/// A signal in the middle of a long wait at the lead limit stops `gen` at once. The layout
/// has five-minute ticks of four IDs each, its tick 1 begun one second ago: the four IDs of
/// tick 1 are issued and printed, then the generator must wait for tick 2, almost five
/// minutes away.
/// SIGTERM: exit 1 well before that (60 s allowed, a blocked wait would take ~299 s), every
/// ID issued printed, the node released with a reservation above them.
#[test]
fn sigterm_stops_a_long_wait_at_the_lead_limit() {
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    let state = common::TempDir::new("sigterm-wait");
    let epoch = now_ms() - 301_000;
    let tick_1 = epoch + 300_000;
    let spec = format!("time=20,n=2,sequence=2,epoch={epoch},tick=300s");
    let layout: Layout = spec.parse().unwrap();
    // A settled reservation (up to tick 1): tick 1 can be issued at once, all of it.
    let store = FileStore::open(state.path()).unwrap();
    let claim = store.claim(&layout, NodeRequest::Exact(0)).unwrap();
    store.release(claim, tick_1).unwrap();
    let mut child = monoflake(state.path())
        .args([
            "gen", "-n", "100", "--node", "0", "--stats", "--layout", &spec,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Killed if the test fails before the child exits: a blocked `gen` would linger.
    struct KillOnDrop(u32);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            if std::thread::panicking() && self.0 != 0 {
                let _ = Command::new("kill")
                    .args(["-KILL", &self.0.to_string()])
                    .status();
            }
        }
    }
    let mut guard = KillOnDrop(child.id());
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let _ = tx.send(line.unwrap());
        }
    });
    // The whole first tick's worth is printed before the wait.
    let mut printed: Vec<u64> = (0..4)
        .map(|_| {
            rx.recv_timeout(Duration::from_secs(120))
                .expect("the first tick's IDs are printed before the wait")
                .parse()
                .unwrap()
        })
        .collect();
    common::signal(child.id(), "TERM");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "gen still waiting 60 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    guard.0 = 0; // exited and reaped: nothing to kill
    reader.join().unwrap();
    printed.extend(rx.try_iter().map(|l| l.parse::<u64>().unwrap()));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("interrupted; the node was released"),
        "{stderr}"
    );
    // Every ID issued was printed: the four of tick 1, increasing, on node 0.
    assert_eq!(printed.len(), issued_of(&stderr), "{stderr}");
    assert_eq!(printed.len(), 4);
    assert!(printed.windows(2).all(|w| w[0] < w[1]), "{printed:?}");
    for &id in &printed {
        let parts = Id::from_u64(id).parts(&layout).unwrap();
        assert_eq!((parts.node(), parts.unix_ms()), (0, tick_1));
    }
    // Released: the node can be claimed, its reservation past everything printed.
    let again = store.claim(&layout, NodeRequest::Exact(0)).unwrap();
    assert!(again.reserved_until_ms().unwrap() > tick_1);
}

/// IDs issued and buffered when issuing fails mid-run are printed, not lost: a layout whose
/// time field runs out about six seconds after the start (100 ms ticks of 256 IDs), and a
/// count far beyond what it can still issue. Exit 1 with `Exhausted`'s message; stdout holds
/// exactly the IDs issued (the `--stats` count), all valid and increasing (per thread).
#[test]
fn ids_issued_before_the_time_field_runs_out_are_all_printed() {
    for threads in ["1", "2"] {
        let state = common::TempDir::new("exhausted");
        // 7 time bits of 100 ms: 12.8 s of life, 6.8 s of it left.
        let epoch = now_ms() - 6_000;
        let spec = format!("time=7,n=2,sequence=8,epoch={epoch},tick=100ms");
        let layout: Layout = spec.parse().unwrap();
        let out = monoflake(state.path())
            .args(["gen", "-n", "100000000", "--node", "0", "--stats"])
            .args(["--threads", threads, "--layout", &spec])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("time field ran out"), "{stderr}");
        let printed: Vec<u64> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.parse().unwrap())
            .collect();
        assert!(!printed.is_empty(), "{stderr}");
        assert_eq!(
            printed.len(),
            issued_of(&stderr),
            "threads {threads}: {stderr}"
        );
        if threads == "1" {
            assert!(printed.windows(2).all(|w| w[0] < w[1]));
        }
        let unique: HashSet<u64> = printed.iter().copied().collect();
        assert_eq!(unique.len(), printed.len(), "duplicates");
        for &id in &printed {
            let parts = Id::from_u64(id).parts(&layout).unwrap();
            assert_eq!(parts.node(), 0);
            assert!(parts.unix_ms() < layout.expires_at_ms());
        }
    }
}

/// A reservation from monoflake 0.1 (no checksum) is refused until an operator migrates it
/// with `monoflake state migrate`; then the node is used as it was, above that reservation.
#[test]
fn state_migrate_rewrites_version_1_reservations_after_which_they_are_used() {
    let state = common::TempDir::new("migrate");
    let layout = Layout::twitter();
    let dir = state.path().join(&*layout.state_name());
    std::fs::create_dir_all(&dir).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    // A reservation a minute ahead: the migrated node must start above it.
    let until = now_ms() + 60_000;
    let file = dir.join("node-4.reservation");
    std::fs::write(
        &file,
        format!("monoflake-reservation v1\nuntil_ms={until}\n"),
    )
    .unwrap();
    let gen4 = || {
        monoflake(state.path())
            .args(["gen", "-n", "3", "--node", "4", "--trust-reservation"])
            .output()
            .unwrap()
    };
    let refused = gen4();
    assert_eq!(refused.status.code(), Some(1));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("written by monoflake 0.1") && err.contains("monoflake state migrate"),
        "{err}"
    );
    let migrate = || {
        Command::new(env!("CARGO_BIN_EXE_monoflake"))
            .args(["state", "migrate", "--state-dir"])
            .arg(state.path())
            .output()
            .unwrap()
    };
    let out = migrate();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        file.display().to_string()
    );
    // Nothing left the second time.
    let again = migrate();
    assert!(again.status.success());
    assert!(again.stdout.is_empty());
    assert!(String::from_utf8_lossy(&again.stderr).contains("no version-1 reservation"));
    let used = gen4();
    let issued = ids(&used);
    assert_eq!(issued.len(), 3);
    assert!(issued.iter().all(|&id| unix_ms_of(id, &layout) >= until));
}

/// Issue 34, case 5: a holder killed with kill -9, its reservation file removed, and a
/// restart at once with the clock 2 s back (5,999,999 of 6,000,000 issued again before, exit
/// 0, silent). The killed holder also wrote what its reservation says to the host's anchor in
/// /var/tmp, so the restart reads it: it is refused with the numbers, printing nothing (the
/// anchor runs up to the 5 s window past the kill, more than the 5.1 s tolerance ahead of a
/// clock 2 s back), or, if the restart came late enough for the anchor to be within the
/// tolerance, waits it out and starts above every ID the first run printed. Never an ID at or
/// below them, never silent. Host-wide (the tests' scope removed), on a bit shape no other
/// test uses (host anchors are kept per shape).
#[test]
fn a_restart_behind_a_killed_holder_whose_reservation_was_removed_never_reissues() {
    let state = common::TempDir::new("case5");
    let layout = "time=41,n=9,sequence=13,epoch=2024-01-01";
    let mut first = monoflake(state.path());
    first
        .env_remove("MONOFLAKE_TEST_HOST_SCOPE")
        .args([
            "gen",
            "--layout",
            layout,
            "-n",
            "100000000000",
            "--node",
            "0",
        ])
        .stdout(Stdio::piped());
    let mut child = first.spawn().unwrap();
    let reader = common::Reader::spawn(&mut child);
    reader.wait_for(200_000);
    common::signal(child.id(), "KILL");
    let _ = child.wait();
    let printed = reader.finish();
    // The node's reservation record, wherever the layout's shape keeps it.
    let removed: Vec<_> = std::fs::read_dir(state.path())
        .unwrap()
        .flatten()
        .map(|shape| shape.path().join("node-0.reservation"))
        .filter(|p| p.exists())
        .collect();
    assert_eq!(removed.len(), 1, "{removed:?}");
    std::fs::remove_file(&removed[0]).unwrap();
    let mut again = under_faketime(state.path(), "-2s");
    let out = again
        .env_remove("MONOFLAKE_TEST_HOST_SCOPE")
        .args(["gen", "--layout", layout, "-n", "300000", "--node", "0"])
        .output()
        .unwrap();
    let max_printed = *printed.iter().max().unwrap();
    if out.status.success() {
        assert!(
            ids(&out).iter().all(|&id| id > max_printed),
            "the restart issued at or below the killed holder's last ID"
        );
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("node 0's time reservation runs to"), "{err}");
        assert!(out.stdout.is_empty(), "printed IDs before refusing");
    }
}
