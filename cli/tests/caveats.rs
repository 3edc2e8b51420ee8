//! What the file store cannot promise where it runs is said once on standard error (issue 54,
//! case 3): anchors that cannot be used, and a network namespace of its own. Each case is made
//! for real in namespaces of a child's own (`unshare`, as root: CI runs as root); as another
//! user the tests say so and check nothing.

use std::path::Path;
use std::process::{Command, Output};

fn root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// `monoflake gen -n 2 --state-dir DIR`, in a shell run by `unshare ARGS` that first runs
/// `setup`; the real host's claim and anchors (not the tests' scope).
fn gen_under(unshare: &[&str], setup: &str, dir: &Path) -> Output {
    Command::new("unshare")
        .args(unshare)
        .args([
            "sh",
            "-c",
            &format!("{setup} exec \"$0\" gen -n 2 --state-dir \"$1\""),
        ])
        .arg(env!("CARGO_BIN_EXE_monoflake"))
        .arg(dir)
        .env_remove("MONOFLAKE_TEST_HOST_SCOPE")
        .output()
        .expect("unshare runs")
}

fn temp(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("monoflake-caveat-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn anchors_that_cannot_be_used_are_said_once() {
    if !root() {
        eprintln!("not root: unshare --mount is root's; nothing checked");
        return;
    }
    let dir = temp("anchors");
    // A /var/tmp of root's without the sticky bit, in a mount namespace of the child's own.
    let out = gen_under(
        &["--mount", "--propagation", "private"],
        "mount -t tmpfs -o mode=0755 tmpfs /var/tmp &&",
        &dir,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);
    let said = "monoflake: warning: the host's anchors in /var/tmp are not used (/var/tmp is \
                not root's with the sticky bit: owner uid 0, mode 0755)";
    assert_eq!(stderr.matches(said).count(), 1, "{stderr}");
    // The host's own /var/tmp: nothing said.
    let out = gen_under(&["--mount"], "", &dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_network_namespace_of_its_own_is_said_once() {
    if !root() {
        eprintln!("not root: unshare --net is root's; nothing checked");
        return;
    }
    let dir = temp("netns");
    let out = gen_under(&["--net"], "", &dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);
    assert_eq!(
        stderr
            .matches("monoflake: warning: this process is in a network namespace of its own")
            .count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("with no interface but lo"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
