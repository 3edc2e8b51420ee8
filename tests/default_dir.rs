//! `FileStore::open_default` as a fresh host's users meet it: a user who cannot use the
//! host-wide `/var/lib/monoflake` is given a directory of their own and told so, and nothing
//! else ever is (not a directory named in `MONOFLAKE_STATE_DIR`, not root, not a host-wide
//! directory broken some other way, not a host without its anchors in `/var/tmp`).
//!
//! Each case runs this test binary again in a mount namespace of its own (`unshare`), with a
//! tmpfs over `/var/lib` and `/var/tmp` set up as the case needs, as `nobody` (`setpriv`) or
//! root: the host's own directories are never touched. That needs root, `unshare` and `setpriv`
//! (CI has all three); elsewhere the tests say they were skipped.

use std::path::Path;
use std::process::Command;

use monoflake::{Error, FileStore, Layout, NodeRequest, NodeStore};

/// Set in the child: which case it runs, so the test it is named by acts instead of spawning.
const CASE: &str = "MONOFLAKE_DEFAULT_DIR_CASE";
/// The line the child prints its result on.
const RESULT: &str = "default-dir-result:";
const HOME: &str = "/var/lib/home-nobody";

/// Whether this process may set up a mount namespace and run a command as `nobody` there.
fn can_run_cases() -> bool {
    let ok = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "--"])
        .args(["sh", "-c", "mount -t tmpfs none /mnt && command -v setpriv"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: needs root, unshare (a mount namespace) and setpriv");
    }
    ok
}

/// What `open_default` gave, in the child, as one line.
fn open_default_result() -> String {
    match FileStore::open_default() {
        Ok(store) => format!(
            "ok {} | {}",
            store.dir().display(),
            store.default_note().unwrap_or("no note")
        ),
        // Whether the error says how to share the directory (`install -d -m 2770 ...`).
        Err(Error::StateDir { source, .. }) => format!(
            "err StateDir {:?}{}",
            source.kind(),
            if source
                .to_string()
                .contains("install -d -m 2770 -g monoflake")
            {
                " with the fix"
            } else {
                ""
            }
        ),
        Err(Error::UntrustedState { .. }) => "err UntrustedState".to_string(),
        Err(other) => format!("err other: {other}"),
    }
}

/// Runs `test` (this binary, `--exact`) as `user` in a mount namespace where `setup` (a shell
/// line, as root) has made `/var/lib` and `/var/tmp` what the case needs; `env` is added, and
/// `MONOFLAKE_STATE_DIR` and `XDG_STATE_HOME` are removed unless given. Returns the child's
/// result line.
fn run_case(test: &str, setup: &str, user: Option<u32>, env: &[(&str, &str)]) -> String {
    let exe = std::env::current_exe().unwrap();
    // The binary is copied into the namespace's tmpfs: `nobody` may not reach the build's
    // directory (cargo-mutants builds in a private temporary one).
    let switch = match user {
        Some(uid) => format!("setpriv --reuid={uid} --regid={uid} --clear-groups --"),
        None => String::new(),
    };
    let script = format!(
        "set -e; mount -t tmpfs -o mode=0755 none /var/lib; \
         mkdir -m 0755 /var/lib/bin; cp \"$EXE\" /var/lib/bin/t; chmod 0755 /var/lib/bin/t; \
         mkdir -m 0700 {HOME}; chown 65534:65534 {HOME}; {setup}; \
         exec {switch} /var/lib/bin/t --exact {test} --nocapture --test-threads=1"
    );
    let mut command = Command::new("unshare");
    command
        .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg(script)
        .env("EXE", &exe)
        .env(CASE, test)
        .env("HOME", HOME)
        .env_remove("MONOFLAKE_STATE_DIR")
        .env_remove("XDG_STATE_HOME");
    for (key, value) in env {
        command.env(key, value);
    }
    let out = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{test}: the child failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.split_once(RESULT).map(|(_, result)| result))
        .unwrap_or_else(|| panic!("{test}: no result line in\n{stdout}"))
        .trim()
        .to_string()
}

/// In the child: prints the result and returns true. In the parent: false.
fn child() -> bool {
    if std::env::var_os(CASE).is_none() {
        return false;
    }
    if std::env::var_os(CLAIM).is_some() {
        println!("{RESULT} {}", claim_twice_result());
    } else {
        println!("{RESULT} {}", open_default_result());
    }
    true
}

/// True in the parent of a host that can run the cases; in the child (which has printed its
/// result) or where cases cannot run, false, and the test returns.
fn parent_can_run_cases() -> bool {
    !child() && can_run_cases()
}

/// Set in the child: claim a node in the default directory, not only open it.
const CLAIM: &str = "MONOFLAKE_DEFAULT_DIR_CLAIM";

/// In the child: claims node 1 in the default directory, reserves, releases, and claims it
/// again (reading back this user's own records); then the modes of what it made.
fn claim_twice_result() -> String {
    use std::os::unix::fs::PermissionsExt;
    let run = || -> Result<String, Error> {
        let store = FileStore::open_default()?;
        let layout = Layout::twitter();
        let claim = store.claim(&layout, NodeRequest::Exact(1))?;
        store.release(claim, 1_700_000_005_000)?;
        let again = store.claim(&layout, NodeRequest::Exact(1))?;
        let reserved = again.reserved_until_ms();
        store.release(again, 1_700_000_006_000)?;
        let mode = |name: &str| {
            let path = store.dir().join(name);
            let mode = std::fs::metadata(path).map_or(0, |m| m.permissions().mode() & 0o7777);
            format!("{name} {mode:o}")
        };
        Ok(format!(
            "reserved {reserved:?}; {}; {}; {}",
            mode("twitter"),
            mode("twitter/node-1.lock"),
            mode("twitter/node-1.reservation")
        ))
    };
    run().unwrap_or_else(|e| format!("err {e}"))
}

const VAR_TMP_SHARED: &str = "mount -t tmpfs -o mode=1777 none /var/tmp";

#[test]
fn a_user_who_cannot_use_the_host_wide_directory_gets_their_own_and_a_note() {
    if !parent_can_run_cases() {
        return;
    }
    let own = Path::new(HOME).join(".local/state/monoflake");
    let test = "a_user_who_cannot_use_the_host_wide_directory_gets_their_own_and_a_note";
    // The directory there and root's own (mode 0700), or not there and /var/lib not writable;
    // and `MONOFLAKE_STATE_DIR` set empty, which is as if it were not set.
    // A directory anyone may write is refused (it cannot be trusted), and so is a read-only
    // /var/lib where it could not be made: both send this user to their own directory too.
    // (The home directory stays writable: it is on another tmpfs in the read-only case.)
    let root_owned = format!("mkdir -m 0700 /var/lib/monoflake; {VAR_TMP_SHARED}");
    let read_only = format!(
        "mkdir -m 0755 /var/lib/home-nobody/.local; chown 65534 /var/lib/home-nobody/.local; \
         mount -t tmpfs -o mode=0755,uid=65534 none /var/lib/home-nobody/.local; \
         mount -o remount,ro,bind /var/lib; {VAR_TMP_SHARED}"
    );
    for (setup, env) in [
        (root_owned.clone(), &[][..]),
        (VAR_TMP_SHARED.to_string(), &[][..]),
        (root_owned, &[("MONOFLAKE_STATE_DIR", "")][..]),
        (
            format!("mkdir -m 0777 /var/lib/monoflake; {VAR_TMP_SHARED}"),
            &[][..],
        ),
        (read_only, &[][..]),
    ] {
        let got = run_case(test, &setup, Some(65534), env);
        let (path, note) = got
            .strip_prefix("ok ")
            .and_then(|rest| rest.split_once(" | "))
            .unwrap_or_else(|| panic!("{setup}: expected a directory of nobody's own, got {got}"));
        assert_eq!(Path::new(path), own, "{setup}");
        let expected = format!(
            "state directory {} (cannot open /var/lib/monoflake: ",
            own.display()
        );
        let expected_missing = format!(
            "state directory {} (cannot create /var/lib/monoflake: ",
            own.display()
        );
        let expected_untrusted = format!(
            "state directory {} (state directory: /var/lib/monoflake cannot be trusted: ",
            own.display()
        );
        assert!(
            [expected, expected_missing, expected_untrusted]
                .iter()
                .any(|e| note.starts_with(e.as_str())),
            "{setup}: {note}"
        );
        assert!(
            note.contains("node IDs are still claimed host-wide"),
            "{note}"
        );
    }
}

#[test]
fn a_user_who_can_use_the_host_wide_directory_uses_it_without_a_note() {
    if !parent_can_run_cases() {
        return;
    }
    let test = "a_user_who_can_use_the_host_wide_directory_uses_it_without_a_note";
    // Root makes it when it is missing.
    let got = run_case(test, VAR_TMP_SHARED, None, &[]);
    assert_eq!(got, "ok /var/lib/monoflake | no note");
}

#[test]
fn a_directory_named_in_monoflake_state_dir_is_never_swapped_for_another() {
    if !parent_can_run_cases() {
        return;
    }
    let test = "a_directory_named_in_monoflake_state_dir_is_never_swapped_for_another";
    let setup = format!("mkdir -m 0700 /var/lib/ids; {VAR_TMP_SHARED}");
    let got = run_case(
        test,
        &setup,
        Some(65534),
        &[("MONOFLAKE_STATE_DIR", "/var/lib/ids")],
    );
    assert_eq!(got, "err StateDir PermissionDenied with the fix");
}

#[test]
fn root_is_never_given_a_directory_of_its_own() {
    if !parent_can_run_cases() {
        return;
    }
    let test = "root_is_never_given_a_directory_of_its_own";
    // Owned by another user: root refuses to trust it, and says so.
    let setup = format!(
        "mkdir -m 0700 /var/lib/monoflake; chown 65534:65534 /var/lib/monoflake; {VAR_TMP_SHARED}"
    );
    let got = run_case(test, &setup, None, &[]);
    assert_eq!(got, "err UntrustedState");
}

#[test]
fn a_host_wide_directory_broken_another_way_is_an_error_not_a_fallback() {
    if !parent_can_run_cases() {
        return;
    }
    let test = "a_host_wide_directory_broken_another_way_is_an_error_not_a_fallback";
    // A file where the directory should be: nobody could use it, but neither could anyone.
    let setup = format!("touch /var/lib/monoflake; {VAR_TMP_SHARED}");
    let got = run_case(test, &setup, Some(65534), &[]);
    assert_eq!(got, "err StateDir NotADirectory");
}

#[test]
fn without_the_hosts_anchors_a_user_keeps_the_error() {
    if !parent_can_run_cases() {
        return;
    }
    let test = "without_the_hosts_anchors_a_user_keeps_the_error";
    // /var/tmp without its sticky bit: anchors are neither read nor written there, so a
    // directory of this user's own could not know what the host-wide one's holders used.
    let setup = "mkdir -m 0700 /var/lib/monoflake; mount -t tmpfs -o mode=0755 none /var/tmp";
    let got = run_case(test, setup, Some(65534), &[]);
    assert_eq!(got, "err StateDir PermissionDenied with the fix");
}

/// The host-wide directory shared with a group as the docs say (`install -d -m 2770 -g
/// monoflake`): a member who is neither root nor its owner uses it, makes what it creates
/// writable by the group, and trusts its own records when it claims again.
#[test]
fn a_group_member_shares_the_host_wide_directory_and_trusts_its_own_records() {
    if !parent_can_run_cases() {
        return;
    }
    let test = "a_group_member_shares_the_host_wide_directory_and_trusts_its_own_records";
    // nobody's group (65534) is the directory's; nobody is not its owner.
    let setup = format!(
        "mkdir -m 2770 /var/lib/monoflake; chgrp 65534 /var/lib/monoflake; {VAR_TMP_SHARED}"
    );
    let got = run_case(test, &setup, Some(65534), &[(CLAIM, "1")]);
    assert_eq!(
        got,
        "reserved Some(1700000005000); twitter 2770; twitter/node-1.lock 660; \
         twitter/node-1.reservation 660"
    );
}
