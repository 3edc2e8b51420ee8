//! A stop under load loses nothing a client sent: keep-alive HTTP/1, HTTP/2 and gRPC clients
//! ask for IDs across SIGTERM, and every request they sent gets an answer — an ID, or a 503
//! they may retry — while the listeners close (`cli/src/serve/drain.rs`).
//!
//! The clients tell "sent" from "not sent" exactly: a connection refused at `connect` (the
//! listener closed) carried no request; an HTTP/2 request h2 declines to open (the connection
//! had its GOAWAY) was never sent. Everything else is a request sent, and must be answered.

#[path = "../../tests/common/mod.rs"]
mod common;
mod server;

use std::collections::HashSet;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use server::{GUARD, Server};

#[allow(clippy::all, dead_code)]
mod pb {
    include!(concat!(env!("OUT_DIR"), "/monoflake.v1.rs"));
}

/// What one protocol's clients saw.
#[derive(Debug, Default)]
struct Tally {
    /// Requests written (HTTP/1), streams opened (HTTP/2), calls made (gRPC).
    sent: u64,
    /// The IDs answered.
    ids: Vec<u64>,
    /// Answers 503 (gRPC: `UNAVAILABLE` with `retry-after-ms`): nothing issued, retry.
    retry: u64,
    /// HTTP/2 streams above the last stream ID of the server's GOAWAY: never processed, by
    /// the protocol's word (RFC 9113, 6.8), so the client sends them again.
    unprocessed: u64,
    /// gRPC calls tonic's connection still held in its queue when the connection closed
    /// (hyper's `Canceled: connection closed`, which hands the request back unsent): the
    /// client sends them again.
    unsent: u64,
    /// Requests sent that got no answer, with what the client saw.
    errors: Vec<String>,
    /// Connections refused at `connect`, when (no request was sent on them).
    refused: Vec<Instant>,
    /// Answers that closed their connection (`Connection: close`, or GOAWAY).
    closing: u64,
    /// Connections opened.
    connections: u64,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.sent += other.sent;
        self.ids.extend(other.ids);
        self.retry += other.retry;
        self.unprocessed += other.unprocessed;
        self.unsent += other.unsent;
        self.errors.extend(other.errors);
        self.refused.extend(other.refused);
        self.closing += other.closing;
        self.connections += other.connections;
    }

    fn answered(&self) -> u64 {
        self.ids.len() as u64 + self.retry
    }
}

/// What every client shares: whether to stop, and how many have had their first answer.
#[derive(Debug, Default)]
struct Load {
    done: AtomicBool,
    started: AtomicUsize,
}

impl Load {
    fn done(&self) -> bool {
        self.done.load(Ordering::Relaxed)
    }

    /// Counts a client in once its first answer came.
    fn first(&self, t: &Tally, counted: &mut bool) {
        if !*counted && t.answered() > 0 {
            *counted = true;
            self.started.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One HTTP/1.1 answer, read off the connection.
struct Reply {
    status: u16,
    close: bool,
    body: String,
}

/// Writes `GET /v1/id` and reads its answer (status line, headers, a `Content-Length` body).
fn exchange(conn: &mut BufReader<TcpStream>) -> io::Result<Reply> {
    conn.get_mut()
        .write_all(b"GET /v1/id HTTP/1.1\r\nHost: monoflake\r\n\r\n")?;
    let mut line = String::new();
    if conn.read_line(&mut line)? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "closed without an answer",
        ));
    }
    let status = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::other(format!("not a status line: {line:?}")))?;
    let (mut length, mut close) = (0, false);
    loop {
        line.clear();
        if conn.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "cut in the head",
            ));
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':').unwrap_or((header, ""));
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap_or(0),
            "connection" => close = value.trim().eq_ignore_ascii_case("close"),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    conn.read_exact(&mut body)?;
    Ok(Reply {
        status,
        close,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// The ID of a `{"id":"…"}` body.
fn id_of(body: &str) -> u64 {
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    v["id"].as_str().unwrap().parse().unwrap()
}

/// Counts one HTTP answer.
fn count(t: &mut Tally, status: u16, body: &str, what: &str) {
    match status {
        200 => t.ids.push(id_of(body)),
        503 => t.retry += 1,
        other => t.errors.push(format!("{what}: status {other}: {body}")),
    }
}

/// A keep-alive HTTP/1.1 client asking for IDs back to back, on a new connection whenever
/// an answer says `Connection: close`, until a connection is refused or `done`.
fn http1_client(addr: SocketAddr, load: &Load) -> Tally {
    let mut t = Tally::default();
    let mut counted = false;
    let mut conn: Option<BufReader<TcpStream>> = None;
    while !load.done() {
        let c = match conn.as_mut() {
            Some(c) => c,
            None => match TcpStream::connect_timeout(&addr, GUARD) {
                Ok(s) => {
                    s.set_read_timeout(Some(GUARD)).unwrap();
                    t.connections += 1;
                    conn.insert(BufReader::new(s))
                }
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    t.refused.push(Instant::now());
                    break;
                }
                Err(e) => panic!("connect: {e}"),
            },
        };
        t.sent += 1;
        match exchange(c) {
            Ok(reply) => {
                count(&mut t, reply.status, &reply.body, "HTTP/1");
                if reply.close {
                    t.closing += 1;
                    conn = None;
                }
            }
            Err(e) => {
                t.errors.push(format!("HTTP/1: {e}"));
                conn = None;
            }
        }
        load.first(&t, &mut counted);
    }
    t
}

/// An HTTP/2 client: `streams` request loops on one connection at a time; when the
/// connection has its GOAWAY (h2 declines to open a stream on it), a new one.
async fn h2_client(addr: SocketAddr, streams: usize, load: Arc<Load>) -> Tally {
    let mut t = Tally::default();
    while !load.done() {
        let tcp = match tokio::net::TcpStream::connect(addr).await {
            Ok(tcp) => tcp,
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                t.refused.push(Instant::now());
                break;
            }
            Err(e) => panic!("connect: {e}"),
        };
        t.connections += 1;
        let (send, connection) = h2::client::handshake(tcp).await.expect("h2 handshake");
        tokio::spawn(connection);
        let mut loops = tokio::task::JoinSet::new();
        for _ in 0..streams {
            let send = send.clone();
            let load = Arc::clone(&load);
            loops.spawn(async move {
                let mut t = Tally::default();
                let mut counted = false;
                while !load.done() {
                    // Declined (not sent) once the connection has had GOAWAY.
                    let Ok(mut send) = send.clone().ready().await else {
                        break;
                    };
                    let request = http::Request::get("http://monoflake/v1/id")
                        .body(())
                        .unwrap();
                    let Ok((response, _)) = send.send_request(request, true) else {
                        break;
                    };
                    t.sent += 1;
                    match read_h2(response).await {
                        Ok((status, body)) => count(&mut t, status, &body, "HTTP/2"),
                        Err(e) if unprocessed(&e) => t.unprocessed += 1,
                        Err(e) => t.errors.push(format!("HTTP/2: {e}")),
                    }
                    load.first(&t, &mut counted);
                }
                t
            });
        }
        while let Some(one) = loops.join_next().await {
            t.add(one.unwrap());
        }
        t.closing += 1;
    }
    t
}

/// Whether a stream failed because the server's GOAWAY named a last stream below it: the
/// server never processed it. h2 reports such a stream with the GOAWAY's own error (a
/// graceful one: `NO_ERROR`). It happens when the client queued the stream just as the first
/// GOAWAY came, and answered that GOAWAY's PING before the stream's HEADERS left (h2 writes
/// a PING's answer before queued frames), so the server's final GOAWAY counts it out.
fn unprocessed(e: &h2::Error) -> bool {
    e.is_go_away() && e.is_remote() && e.reason() == Some(h2::Reason::NO_ERROR)
}

/// Whether hyper's client gave a call back unsent: it was still in the connection's queue
/// when the connection closed (hyper then answers `Canceled`, "connection closed", and hands
/// the request back with the error; tonic keeps only the error).
fn unsent(e: &hyper::Error) -> bool {
    e.is_canceled()
}

async fn read_h2(response: h2::client::ResponseFuture) -> Result<(u16, String), h2::Error> {
    let (head, mut body) = response.await?.into_parts();
    let mut bytes = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        let _ = body.flow_control().release_capacity(chunk.len());
        bytes.extend_from_slice(&chunk);
    }
    Ok((
        head.status.as_u16(),
        String::from_utf8_lossy(&bytes).into_owned(),
    ))
}

/// Whether a tonic error is a connection refused at `connect` (no call was sent).
fn refused(status: &tonic::Status) -> bool {
    cause::<io::Error>(status).is_some_and(|io| io.kind() == io::ErrorKind::ConnectionRefused)
}

/// The first error of type `E` in `status`'s chain of sources.
fn cause<E: std::error::Error + 'static>(status: &tonic::Status) -> Option<&E> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(status);
    while let Some(e) = source {
        if let Some(found) = e.downcast_ref::<E>() {
            return Some(found);
        }
        source = e.source();
    }
    None
}

/// A gRPC client (tonic, as an application would use it): `calls` loops of `Next` on one
/// channel, which reconnects by itself after a GOAWAY.
async fn grpc_client(addr: SocketAddr, calls: usize, load: Arc<Load>) -> Tally {
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut loops = tokio::task::JoinSet::new();
    for _ in 0..calls {
        let mut client = pb::ids_client::IdsClient::new(channel.clone());
        let load = Arc::clone(&load);
        loops.spawn(async move {
            let mut t = Tally::default();
            let mut counted = false;
            while !load.done() {
                match client.next(pb::NextRequest { count: 1 }).await {
                    Ok(reply) => {
                        t.sent += 1;
                        t.ids.extend(reply.into_inner().ids);
                    }
                    Err(status) if refused(&status) => {
                        t.refused.push(Instant::now());
                        break;
                    }
                    Err(status) if cause::<hyper::Error>(&status).is_some_and(unsent) => {
                        t.unsent += 1;
                    }
                    Err(status) if cause::<h2::Error>(&status).is_some_and(unprocessed) => {
                        t.sent += 1;
                        t.unprocessed += 1;
                    }
                    Err(status)
                        if status.code() == tonic::Code::Unavailable
                            && status.metadata().get("retry-after-ms").is_some() =>
                    {
                        t.sent += 1;
                        t.retry += 1;
                    }
                    Err(status) => {
                        t.sent += 1;
                        t.errors.push(format!("gRPC: {status:?}"));
                    }
                }
                load.first(&t, &mut counted);
            }
            t
        });
    }
    let mut t = Tally::default();
    while let Some(one) = loops.join_next().await {
        t.add(one.unwrap());
    }
    t
}

/// Sums what the clients of one protocol saw.
fn sum(tallies: impl IntoIterator<Item = Tally>) -> Tally {
    let mut t = Tally::default();
    for one in tallies {
        t.add(one);
    }
    t
}

/// One run: the clients against a server, SIGTERM under their load, every request answered.
fn one_run(run: usize) {
    let dir = common::TempDir::new("serve-drain-load");
    let grace = Duration::from_secs(1);
    let s = Server::start(&[
        "--state-dir",
        dir.path().to_str().unwrap(),
        "--grpc-listen",
        "127.0.0.1:0",
        "--drain-grace",
        "1",
    ]);
    let http: SocketAddr = s.http.parse().unwrap();
    let grpc: SocketAddr = s.grpc.clone().unwrap().parse().unwrap();
    let pid = s.pid();
    let load = Arc::new(Load::default());
    let rt = server::runtime();
    let (h1, h2, grpc, sent_at, status, log) = std::thread::scope(|scope| {
        let h1: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| http1_client(http, &load)))
            .collect();
        let h2: Vec<_> = (0..2)
            .map(|_| rt.spawn(h2_client(http, 4, Arc::clone(&load))))
            .collect();
        let grpc: Vec<_> = (0..2)
            .map(|_| rt.spawn(grpc_client(grpc, 4, Arc::clone(&load))))
            .collect();
        // Every client loop under way (4 + 2 x 4 + 2 x 4), then SIGTERM under their load;
        // they run until their connections are refused (the listeners closed), or the server
        // is gone.
        let start = Instant::now();
        while load.started.load(Ordering::Relaxed) < 20 {
            assert!(start.elapsed() < GUARD, "the clients never all got going");
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(100));
        common::signal(pid, "TERM");
        let sent_at = Instant::now();
        let (status, log) = s.wait_exit();
        load.done.store(true, Ordering::Relaxed);
        let h1 = sum(h1.into_iter().map(|h| h.join().unwrap()));
        let h2 = sum(h2.into_iter().map(|h| rt.block_on(h).unwrap()));
        let grpc = sum(grpc.into_iter().map(|h| rt.block_on(h).unwrap()));
        (h1, h2, grpc, sent_at, status, log)
    });
    assert_eq!(status.code(), Some(0), "{log}");
    println!("run {run}:");
    let mut all = HashSet::new();
    for (name, t) in [
        ("HTTP/1 keep-alive (4 clients)", &h1),
        ("HTTP/2 (2 clients x 4 streams)", &h2),
        ("gRPC (2 tonic channels x 4 calls)", &grpc),
    ] {
        println!(
            "  {name}: sent {}, answered {} ({} IDs, {} retryable 503), unprocessed by \
             GOAWAY {}, errors {}; connections {}, closed by the stop {}, refused after the \
             listener closed {}, handed back unsent by the client {}",
            t.sent,
            t.answered(),
            t.ids.len(),
            t.retry,
            t.unprocessed,
            t.errors.len(),
            t.connections,
            t.closing,
            t.refused.len(),
            t.unsent
        );
        assert!(t.errors.is_empty(), "{name}: {:?}\n{log}", t.errors);
        assert_eq!(t.sent, t.answered() + t.unprocessed, "{name}");
        // The listener closes no sooner than the grace after the signal was received.
        for at in &t.refused {
            assert!(
                *at >= sent_at + grace,
                "{name}: refused within the grace\n{log}"
            );
        }
        for id in &t.ids {
            assert!(all.insert(*id), "{name}: {id} answered twice");
        }
    }
    // The stop was exercised: keep-alive clients were told to move on and were served on
    // their new connections, and HTTP/2 clients had a GOAWAY.
    assert!(h1.closing > 0 && h1.connections > 4, "{h1:?}");
    assert!(h2.closing >= 2 && h2.connections > 2, "{h2:?}");
    assert!(log.contains("no longer accepting on"), "{log}");
}

/// A keep-alive HTTP/1 connection idle across the SIGTERM stays open through the grace: its
/// next request is answered, with `Connection: close`. (A second SIGTERM ends the grace.)
#[test]
fn an_idle_keep_alive_connection_is_answered_during_the_grace_and_told_to_close() {
    let dir = common::TempDir::new("serve-drain-idle");
    let s = Server::start(&[
        "--state-dir",
        dir.path().to_str().unwrap(),
        "--drain-grace",
        "60",
    ]);
    let http: SocketAddr = s.http.parse().unwrap();
    let mut idle = BufReader::new(TcpStream::connect(http).unwrap());
    idle.get_mut().set_read_timeout(Some(GUARD)).unwrap();
    let first = exchange(&mut idle).unwrap();
    assert_eq!((first.status, first.close), (200, false));
    common::signal(s.pid(), "TERM");
    // The stop has begun once readiness says so (on another connection).
    server::wait_for_status(&server::agent(), &s.url("/readyz"), 503);
    let second = exchange(&mut idle).expect("an answer on the idle connection");
    assert_eq!(
        (second.status, second.close),
        (200, true),
        "{}",
        second.body
    );
    assert!(id_of(&second.body) > id_of(&first.body));
    // The server closes it after that answer.
    let mut rest = Vec::new();
    assert_eq!(idle.read_to_end(&mut rest).unwrap(), 0);
    common::signal(s.pid(), "TERM");
    let (status, log) = s.wait_exit();
    assert_eq!(status.code(), Some(0), "{log}");
}

#[test]
fn a_stop_under_load_answers_every_request_sent() {
    // `MONOFLAKE_DRAIN_RUNS=5` for the report's five runs.
    let runs = std::env::var("MONOFLAKE_DRAIN_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    for run in 1..=runs {
        one_run(run);
    }
}

/// Connections the kernel had accepted into the listener's queue when the stop closes it are
/// served, not reset: the only slot is held by an HTTP/2 stream whose window never opens, so
/// three clients that connect and write their request wait in the kernel's queue until the
/// listener closes; each then gets its ID, with `Connection: close`.
#[test]
fn connections_queued_in_the_kernel_when_the_listener_closes_are_answered() {
    let dir = common::TempDir::new("serve-drain-queue");
    let s = Server::start(&[
        "--state-dir",
        dir.path().to_str().unwrap(),
        "--max-connections",
        "1",
        "--drain-grace",
        "0.2",
        "--drain-timeout",
        "1",
    ]);
    let http: SocketAddr = s.http.parse().unwrap();
    let rt = server::runtime();
    // The slot's holder: a batch behind a one-byte window, in flight until the drain cuts it.
    let holder = rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(http).await.unwrap();
        let (send, connection) = h2::client::Builder::new()
            .initial_window_size(1)
            .handshake::<_, bytes::Bytes>(tcp)
            .await
            .unwrap();
        tokio::spawn(connection);
        let mut send = send.ready().await.unwrap();
        let request = http::Request::get("http://monoflake/v1/ids?count=100000")
            .body(())
            .unwrap();
        let (response, _) = send.send_request(request, true).unwrap();
        let head = response.await.unwrap();
        assert_eq!(head.status(), 200);
        (send, head)
    });
    let queued: Vec<BufReader<TcpStream>> = (0..3)
        .map(|_| {
            let mut c = TcpStream::connect(http).unwrap();
            c.write_all(b"GET /v1/id HTTP/1.1\r\nHost: monoflake\r\n\r\n")
                .unwrap();
            // Nothing can have answered it: the one slot is taken.
            c.set_nonblocking(true).unwrap();
            let e = c.read(&mut [0; 1]).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "{e}");
            c.set_nonblocking(false).unwrap();
            c.set_read_timeout(Some(GUARD)).unwrap();
            BufReader::new(c)
        })
        .collect();
    common::signal(s.pid(), "TERM");
    let mut ids = HashSet::new();
    for mut c in queued {
        let mut line = String::new();
        c.read_line(&mut line).expect("an answer, not a reset");
        assert!(line.starts_with("HTTP/1.1 200 "), "{line:?}");
        let mut head = String::new();
        loop {
            line.clear();
            c.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
            head.push_str(&line.to_ascii_lowercase());
        }
        assert!(head.contains("connection: close\r\n"), "{head}");
        let mut body = String::new();
        c.read_to_string(&mut body).unwrap();
        assert!(ids.insert(id_of(&body)));
    }
    drop(holder);
    let (status, log) = s.wait_exit();
    assert_eq!(status.code(), Some(0), "{log}");
}
