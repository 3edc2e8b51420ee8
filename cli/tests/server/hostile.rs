//! Hostile clients for the service's tests: bytes trickled one at a time, HTTP/2 with a
//! window that never opens, the server's RSS read from /proc.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::GUARD;

/// The HTTP/2 connection preface.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What a slow client sends, a byte at a time, for ever (its tail repeats).
#[derive(Clone, Copy, Debug)]
pub enum Trickle {
    /// A TLS handshake record header announcing 512 bytes of ClientHello, then the hello.
    TlsHello,
    /// The HTTP/2 preface, an empty SETTINGS, then PING after PING.
    H2Pings,
    /// An HTTP/1.1 request head whose last header never ends.
    H1Head,
}

impl Trickle {
    fn head(self) -> Vec<u8> {
        match self {
            Trickle::TlsHello => vec![0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc],
            Trickle::H2Pings => [PREFACE, &[0, 0, 0, 4, 0, 0, 0, 0, 0]].concat(),
            Trickle::H1Head => b"GET /v1/id HTTP/1.1\r\nHost: x\r\nX-Slow: ".to_vec(),
        }
    }

    fn tail(self) -> Vec<u8> {
        match self {
            Trickle::TlsHello => vec![0x42],
            Trickle::H2Pings => vec![0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
            Trickle::H1Head => b"a".to_vec(),
        }
    }
}

/// A client trickling `what` to `addr`, one byte every `gap`, on its own thread.
pub struct Slow {
    thread: std::thread::JoinHandle<Option<Duration>>,
}

impl Slow {
    pub fn start(addr: &str, what: Trickle, gap: Duration) -> Slow {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(gap)).unwrap();
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            let head = what.head();
            let tail = what.tail();
            let mut bytes = head.iter().chain(tail.iter().cycle());
            let mut sink = [0u8; 4096];
            while start.elapsed() < GUARD {
                let byte = *bytes.next().unwrap();
                if stream.write_all(&[byte]).is_err() {
                    return Some(start.elapsed());
                }
                // Waiting for the next byte's turn, and seeing whether the server closed.
                match stream.read(&mut sink) {
                    Ok(0) => return Some(start.elapsed()),
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => return Some(start.elapsed()),
                }
            }
            None
        });
        Slow { thread }
    }

    /// How long the server let it trickle before closing; `None` if it never did (within
    /// [`GUARD`]).
    pub fn closed_after(self) -> Option<Duration> {
        self.thread.join().unwrap()
    }
}

/// The resident set of process `pid`, in bytes.
pub fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb * 1024
}

/// The value of a metric line `name value` in an exposition.
pub fn metric(exposition: &str, name: &str) -> u64 {
    exposition
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("{name} missing from\n{exposition}"))
        .parse::<f64>()
        .unwrap() as u64
}

/// `/metrics` at `url`, once `ready` holds for it (a connection's end is counted just after
/// its socket closes, so a client can see the close first); the last one after [`GUARD`].
pub fn metrics_once(url: &str, ready: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let m = super::get(&super::agent(), url, &[]).body;
        if ready(&m) || start.elapsed() > GUARD {
            return m;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
