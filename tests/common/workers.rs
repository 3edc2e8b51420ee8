//! Worker processes forked from a test, for the prefork tests: fork one every way there is,
//! wait for it.
#![allow(unsafe_code)]

// glibc's `_Fork` (2.34 and later): a fork that runs no `pthread_atfork` handlers.
unsafe extern "C" {
    fn _Fork() -> libc::pid_t;
}

/// Forks the way `how` names (`fork`, `SYS_fork`, `_Fork`); the child runs `child` and
/// `_exit`s with its code, running no destructor of the parent's.
///
/// # Safety
///
/// The child may allocate and take locks: no other thread of the parent may hold one the
/// child takes (libc's `fork` makes the allocator safe; the other two do not).
pub unsafe fn spawn(how: &str, child: impl FnOnce() -> i32) -> libc::pid_t {
    // SAFETY: the caller keeps the parent's other threads out of the child's way (above);
    // these calls only create a process.
    let pid = unsafe {
        match how {
            "fork" => libc::fork(),
            "SYS_fork" => libc::syscall(libc::SYS_fork) as libc::pid_t,
            "_Fork" => _Fork(),
            other => panic!("no fork called {other}"),
        }
    };
    assert!(pid >= 0, "{how} failed");
    if pid == 0 {
        let code = child();
        // SAFETY: leaves the child at once.
        unsafe { libc::_exit(code) };
    }
    pid
}

/// Waits for the worker `pid` and returns its exit code.
pub fn wait(pid: libc::pid_t) -> i32 {
    let mut status = 0;
    // SAFETY: waits for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "worker {pid} was killed");
    libc::WEXITSTATUS(status)
}

/// Takes `n` IDs from the process-wide default and writes them to `file` (8 bytes each);
/// the exit code says what failed: 3 `Forked`, 4 another error (printed), 5 the file.
pub fn work(n: usize, file: &std::path::Path) -> i32 {
    let mut bytes = Vec::with_capacity(n * 8);
    for _ in 0..n {
        match monoflake::next_id() {
            Ok(id) => bytes.extend_from_slice(&id.as_u64().to_le_bytes()),
            Err(monoflake::Error::Forked { .. }) => return 3,
            Err(e) => {
                eprintln!("worker {}: {e}", std::process::id());
                return 4;
            }
        }
    }
    if std::fs::write(file, bytes).is_err() {
        return 5;
    }
    0
}

/// The IDs a worker wrote with [`work`].
pub fn read_ids(file: &std::path::Path) -> Vec<u64> {
    std::fs::read(file)
        .unwrap()
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}
