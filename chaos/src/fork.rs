//! Forking a holder three ways: libc's `fork()` (runs the `pthread_atfork` handlers), a raw
//! `syscall(SYS_fork)` and glibc's `_Fork()` (neither runs them). The child issues single IDs
//! at once, from the state it inherited, and reports them with one `write(2)`; the parent does
//! the same, so a child issuing in the parent's tick is seen as a primary-key conflict.
//!
//! The child of a multi-threaded process has one thread, and other threads' locks are copied
//! held. The child here touches only the generator's hot path (a load, a compare-exchange, a
//! `getpid` off the common path), a buffer on its stack, `write(2)` and `_exit(2)`; it never
//! returns into the caller. If a library error path should allocate while another thread held
//! the allocator's lock, the child would hang, not misbehave: the parent kills a child that
//! has not exited within [`CHILD_BOUND`] and says so.
#![allow(unsafe_code)]

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use monoflake::{Error, Id};
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

/// A child that has not exited after this long is killed (and reported as hung).
pub const CHILD_BOUND: Duration = Duration::from_secs(10);

/// The most IDs one child issues (its line is written with one `write(2)` from the stack).
pub const MAX_CHILD_IDS: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    Libc,
    Raw,
    UnderscoreFork,
}

impl How {
    pub fn parse(text: &str) -> Option<How> {
        match text {
            "libc" => Some(How::Libc),
            "raw" => Some(How::Raw),
            "_Fork" => Some(How::UnderscoreFork),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            How::Libc => "libc",
            How::Raw => "raw",
            How::UnderscoreFork => "_Fork",
        }
    }
}

unsafe extern "C" {
    /// glibc ≥ 2.34: a fork that runs no `pthread_atfork` handlers.
    fn _Fork() -> libc::pid_t;
}

/// What the parent saw of one fork.
#[derive(Debug)]
pub struct Forked {
    pub child: i32,
    /// `exited 0`, `killed after 10 s` …
    pub status: String,
}

/// Forks `how`; the child issues up to `count` single IDs with `try_next_id`, writes them as
/// `c <pid> <id>…` (and `x <pid> <error>` when a call is refused) on standard output and
/// exits. The parent issues up to `count` IDs the same way at once (returned with the first
/// error, if any), then waits for the child.
pub fn fork_and_issue(
    try_next_id: &dyn Fn() -> Result<Id, Error>,
    how: How,
    count: usize,
) -> std::io::Result<(Vec<u64>, Option<Error>, Forked)> {
    let count = count.min(MAX_CHILD_IDS);
    let pid = match how {
        // SAFETY: the child runs only `child` below, which never returns (it ends in
        // `_exit`) and uses no lock another thread may hold but the allocator's, whose worst
        // case is a hang bounded by the parent (module docs).
        How::Libc => unsafe { libc::fork() },
        // SAFETY: as above. A raw fork skips glibc's bookkeeping (atfork handlers, the
        // allocator's reset): that is the case under test, and the child still only runs
        // `child`.
        How::Raw => unsafe { libc::syscall(libc::SYS_fork) as libc::pid_t },
        // SAFETY: as above; `_Fork` is glibc's fork without the atfork handlers.
        How::UnderscoreFork => unsafe { _Fork() },
    };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        child(try_next_id, count);
    }
    let mut ids = Vec::with_capacity(count);
    let mut error = None;
    for _ in 0..count {
        match try_next_id() {
            Ok(id) => ids.push(id.as_u64()),
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    let status = wait_bounded(Pid::from_raw(pid));
    Ok((ids, error, Forked { child: pid, status }))
}

/// The child: issue, write one line, exit. Never returns.
fn child(try_next_id: &dyn Fn() -> Result<Id, Error>, count: usize) -> ! {
    let pid = std::process::id();
    let mut line = Line::new();
    line.text(b"c ");
    line.number(u64::from(pid));
    let mut refused: Option<&'static str> = None;
    for _ in 0..count {
        match try_next_id() {
            Ok(id) => {
                line.text(b" ");
                line.number(id.as_u64());
            }
            Err(e) => {
                refused = Some(match e {
                    Error::Forked { .. } => "Forked",
                    Error::LeaseLost { .. } => "LeaseLost",
                    Error::WouldBlock { .. } => "WouldBlock",
                    _ => "another error",
                });
                break;
            }
        }
    }
    line.text(b"\n");
    if let Some(what) = refused {
        line.text(b"x ");
        line.number(u64::from(pid));
        line.text(b" ");
        line.text(what.as_bytes());
        line.text(b"\n");
    }
    let out = std::io::stdout();
    let _ = nix::unistd::write(out.as_fd(), line.bytes());
    // SAFETY: `_exit` ends the process at once, running no atexit handler and flushing no
    // buffer the parent also holds a copy of.
    unsafe { libc::_exit(0) }
}

/// Waits for `pid` for at most [`CHILD_BOUND`], then kills it.
fn wait_bounded(pid: Pid) -> String {
    let start = Instant::now();
    loop {
        match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) if start.elapsed() < CHILD_BOUND => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(WaitStatus::StillAlive) => {
                let _ = kill(pid, Signal::SIGKILL);
                let _ = waitpid(pid, None);
                return format!("hung: killed after {} s", CHILD_BOUND.as_secs());
            }
            Ok(WaitStatus::Exited(_, code)) => return format!("exited {code}"),
            Ok(WaitStatus::Signaled(_, signal, _)) => return format!("killed by {signal}"),
            Ok(other) => return format!("{other:?}"),
            Err(e) => return format!("waitpid failed: {e}"),
        }
    }
}

/// A line built on the stack: no allocation in the child.
struct Line {
    buf: [u8; 24 * (MAX_CHILD_IDS + 4)],
    len: usize,
}

impl Line {
    fn new() -> Line {
        Line {
            buf: [0; 24 * (MAX_CHILD_IDS + 4)],
            len: 0,
        }
    }

    fn text(&mut self, bytes: &[u8]) {
        let end = (self.len + bytes.len()).min(self.buf.len());
        let n = end - self.len;
        self.buf[self.len..end].copy_from_slice(&bytes[..n]);
        self.len = end;
    }

    fn number(&mut self, mut n: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.text(&digits[i..]);
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_holds_decimal_numbers_without_allocating() {
        let mut line = Line::new();
        line.text(b"c ");
        line.number(0);
        line.text(b" ");
        line.number(u64::MAX);
        line.text(b" ");
        line.number(1_234_567);
        assert_eq!(line.bytes(), b"c 0 18446744073709551615 1234567");
    }
}
