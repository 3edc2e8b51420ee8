//! A stop that loses no request a client sent: its phases, and how a listener closes without
//! resetting the connections the kernel already accepted for it.
//!
//! What a client sees at each step decides whether it can retry safely:
//!
//! * A connection refused (`ECONNREFUSED` at `connect`) carried no request: retrying it
//!   elsewhere is always safe.
//! * An HTTP/1 answer with `Connection: close` tells the client not to send on that
//!   connection again: its next request opens a new one, and nothing is lost.
//! * An HTTP/2 `GOAWAY` names the last stream the server will serve; every stream below it is
//!   served, and the client opens no new stream on that connection.
//! * A connection closed under a request the client had already written ("connection reset",
//!   "closed without response") is the one outcome a client cannot tell apart from a lost
//!   answer. The phases below keep it out of everything sent before the listener closes —
//!   but for HTTP/1 requests pipelined behind one answered with `Connection: close`, which a
//!   pipelining client must send again (RFC 9112, 9.3.2).
//!
//! The phases, in order (`lifecycle.rs` moves them; each listener and connection watches):
//!
//! 1. [`Phase::Serving`].
//! 2. [`Phase::Draining`], from SIGTERM for `--drain-grace`: `/readyz` answers 503, the
//!    listeners still accept, every HTTP/1 answer carries `Connection: close` (so keep-alive
//!    clients move to a new connection one answer at a time), and every HTTP/2 connection
//!    gets a graceful `GOAWAY` (hyper's: first with the largest stream ID, then, a round trip
//!    later, with the last stream it took; every stream below is served).
//! 3. [`Phase::Closing`]: the listeners stop taking new connections ([`refuse_new`], then
//!    the connections whose handshake completed are accepted and served), and every
//!    connection is shut down gracefully once it has had its first request: an idle HTTP/1
//!    connection is closed, a busy one after its answer. The connections are cut after
//!    `--drain-timeout`, then the node is released.

use std::io;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

/// Where a stop is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// No stop asked.
    Serving,
    /// A stop began: accept, serve, and tell every client to move on.
    Draining,
    /// The listeners close; connections end after their requests.
    Closing,
}

/// Returns once `phase` has reached `at` (or its sender is gone).
pub async fn reached(phase: &mut watch::Receiver<Phase>, at: Phase) {
    let _ = phase.wait_for(|p| *p >= at).await;
}

/// How long a closing listener keeps accepting after the last connection it found: a
/// handshake whose SYN came before [`refuse_new`] completes within one round trip, and its
/// connection must be accepted, not reset.
pub const SETTLE: Duration = Duration::from_millis(100);

/// A classic BPF socket filter that drops every TCP segment with SYN set and ACK clear: the
/// first segment of a new connection. Attached to a listening socket, it makes the kernel
/// ignore new connection attempts while the handshakes already under way (their final ACK)
/// complete into the accept queue. The filter sees the segment from its TCP header on: the
/// flags are byte 13.
const DROP_SYN: [(u16, u8, u8, u32); 5] = [
    // ldb [13]: the flags.
    (0x30, 0, 0, 13),
    // and #0x12: SYN and ACK.
    (0x54, 0, 0, 0x12),
    // jeq #0x02: SYN alone? then drop, else keep.
    (0x15, 0, 1, 0x02),
    // ret #0: drop.
    (0x06, 0, 0, 0),
    // ret #0xffffffff: keep the whole segment.
    (0x06, 0, 0, u32::MAX),
];

/// Makes `listener` ignore new connection attempts (their SYN is dropped: the client's retry
/// of it, a second later, finds the port closed and gets "connection refused"), so that the
/// listener can then be emptied and closed without a reset for a connection the kernel had
/// accepted. Linux only; elsewhere, or when the kernel refuses the filter, the listener is
/// closed as it is.
pub fn refuse_new(listener: &TcpListener) -> io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let filter = DROP_SYN.map(|(code, jt, jf, k)| socket2::SockFilter::new(code, jt, jf, k));
        socket2::SockRef::from(listener).attach_filter(&filter)
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = listener;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "socket filters are Linux's",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream;

    /// A connection made before the filter is accepted after it; one tried after it is never
    /// accepted, and is refused once the listener is closed.
    #[tokio::test]
    async fn a_refusing_listener_keeps_its_queue_and_takes_no_new_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let early = std::thread::spawn(move || TcpStream::connect(addr).unwrap())
            .join()
            .unwrap();
        refuse_new(&listener).unwrap();
        let late = std::thread::spawn(move || {
            TcpStream::connect_timeout(&addr, Duration::from_millis(300))
        });
        let (accepted, peer) = listener.accept().await.unwrap();
        assert_eq!(peer, early.local_addr().unwrap());
        drop(accepted);
        let e = late
            .join()
            .unwrap()
            .expect_err("no connection after the filter");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(
            tokio::time::timeout(SETTLE, listener.accept())
                .await
                .is_err(),
            "nothing else queued"
        );
        drop(listener);
        let e = TcpStream::connect(addr).expect_err("closed");
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}");
    }
}
