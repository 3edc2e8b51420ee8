//! A forked child inherits the generator's state and node; it must refuse to issue.
//!
//! `fork()` has no safe wrapper, so this one test file allows `unsafe`; the library has none.
#![allow(unsafe_code)]

use std::sync::Arc;

use monoflake::{Error, FileStore, Generator, Layout, NodeRequest};

/// Forks; the child runs `child` and exits with its code (without unwinding or allocating
/// after the fork beyond what `child` does); the parent gets the child's exit code.
fn in_forked_child(child: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the child only runs `child` (atomic loads in the generator) and `_exit`s.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = child();
        // SAFETY: leaves the child at once, running no destructors or atexit handlers.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status));
    libc::WEXITSTATUS(status)
}

#[test]
fn a_forked_child_refuses_to_issue_under_the_parents_node() {
    let plain = Generator::new(Layout::twitter(), 5).unwrap();
    let dir = std::env::temp_dir().join(format!("monoflake-test-fork-{}", std::process::id()));
    let store = Arc::new(FileStore::open(&dir).unwrap());
    let leased = Generator::builder(Layout::twitter())
        .build_leased(store, NodeRequest::Any)
        .unwrap();
    let before = (plain.next_id().unwrap(), leased.next_id().unwrap());

    let code = in_forked_child(|| {
        let plain_refused = matches!(plain.try_next_id(), Err(Error::Forked { node: 5, .. }));
        let leased_refused = matches!(leased.try_next_id(), Err(Error::Forked { node: 0, .. }));
        let batch_refused = matches!(plain.try_next_ids(8), Err(Error::Forked { .. }));
        if plain_refused && leased_refused && batch_refused {
            0
        } else {
            1
        }
    });
    assert_eq!(code, 0, "the child issued an ID under the parent's node");

    // The parent goes on as before.
    assert!(plain.next_id().unwrap() > before.0);
    assert!(leased.next_id().unwrap() > before.1);
    drop(leased);
    let _ = std::fs::remove_dir_all(&dir);
}
