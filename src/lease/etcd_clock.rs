//! etcd's clock: the `Date` header of its HTTP gateway, the one clock every holder and
//! claimant of an etcd cluster can read (issue 34, case 4; docs/design.md, "one inequality").
//!
//! etcd's gRPC API carries no time; its HTTP gateway, on the same client port, answers every
//! request with a `Date` header from the answering member's clock, to the second. A holder
//! reads it before each check that lets it issue and loses its claim when its own clock leads
//! it by more than the allowance; a claimant that finds no record of the node reads it after
//! its claim and starts above what any confirmed holder can have issued. This file reads the
//! header (one short HTTP/1.1 request to `/version`, over TLS where the endpoint is `https`)
//! and holds the arithmetic; `etcd.rs` decides when.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::etcd_options::EtcdOptions;

/// `Date` counts whole seconds: a reading is up to this much below the member's clock.
pub(super) const DATE_RESOLUTION_MS: u64 = 1_000;

/// The most of an answer's head read before the `Date` header must have come.
const HEAD_LIMIT: usize = 16 * 1024;

/// How far a holder's clock may lead a `Date` reading `d` of its check and still be confirmed:
/// `max_clock_lead_ms` past the member's clock, which is up to [`DATE_RESOLUTION_MS`] past `d`.
pub(super) fn check_allowance_ms(max_clock_lead_ms: u64) -> u64 {
    max_clock_lead_ms.saturating_add(DATE_RESOLUTION_MS)
}

/// What a claim that found no record carries as the store's clock (`Claim::with_store_clock`):
/// `(date_ms, lead_ms)`, with `date_ms + lead_ms` at or above the clock of every holder
/// confirmed before the claim. Such a holder's check read `d_c`, at most its member's clock
/// then; its own clock was at most `d_c + R + L` (`R` = [`DATE_RESOLUTION_MS`], `L` =
/// `max_clock_lead_ms`). That member's clock, not going back, was at the claim at most the
/// claimant's member's clock plus the skew `S` between members, which is below `date_ms + R`.
/// So `lead_ms = L + 2R + S`: the lead PostgreSQL's exact clock needs, and what a clock read
/// to the second from one of several members adds.
pub(super) fn claim_clock(
    date_ms: u64,
    max_member_skew_ms: u64,
    max_clock_lead_ms: u64,
) -> (u64, u64) {
    (
        date_ms,
        check_allowance_ms(max_clock_lead_ms)
            .saturating_add(DATE_RESOLUTION_MS)
            .saturating_add(max_member_skew_ms),
    )
}

/// Reads the `Date` of the first of the endpoints that answers.
pub(super) struct EtcdClock {
    targets: Vec<Target>,
    tls: Option<tokio_rustls::TlsConnector>,
    timeout: Duration,
    /// The endpoint that answered last, asked first: a dead first endpoint costs its timeout
    /// once, not at every check (where it would outlast the confirm bound).
    // Ordering: Relaxed; a hint, any value of it is a correct place to start.
    answered: AtomicUsize,
}

/// One endpoint: where to connect and, for TLS, the name its certificate must carry.
struct Target {
    authority: String,
    host: String,
    tls: bool,
}

impl EtcdClock {
    /// The clock of these endpoints (as given to [`EtcdStore::connect_with`](super::EtcdStore)),
    /// each request bounded by `timeout`. `Err` names what cannot be used.
    pub(super) fn new(
        endpoints: &[String],
        options: &EtcdOptions,
        timeout: Duration,
    ) -> Result<Self, String> {
        // etcd-client speaks TLS to an endpoint without a scheme when it has TLS options.
        let tls_by_default = options.ca_pem.is_some() || options.identity_pem.is_some();
        let targets = endpoints
            .iter()
            .map(|e| Target::parse(e, tls_by_default))
            .collect::<Result<Vec<_>, _>>()?;
        let tls = if targets.iter().any(|t| t.tls) {
            Some(tokio_rustls::TlsConnector::from(Arc::new(client_config(
                options,
            )?)))
        } else {
            None
        };
        Ok(EtcdClock {
            targets,
            tls,
            timeout,
            answered: AtomicUsize::new(0),
        })
    }

    /// The first endpoint's `Date`, in Unix ms (whole seconds); the next endpoint when one
    /// cannot answer. `Err` says why none did.
    pub(super) async fn now_ms(&self) -> Result<u64, String> {
        let mut reasons = Vec::new();
        let first = self.answered.load(Ordering::Relaxed);
        for i in (0..self.targets.len()).map(|k| (first + k) % self.targets.len()) {
            let target = &self.targets[i];
            match tokio::time::timeout(self.timeout, self.read(target)).await {
                Ok(Ok(ms)) => {
                    self.answered.store(i, Ordering::Relaxed);
                    return Ok(ms);
                }
                Ok(Err(e)) => reasons.push(format!("{}: {e}", target.authority)),
                Err(_) => reasons.push(format!(
                    "{}: no answer within {} ms",
                    target.authority,
                    self.timeout.as_millis()
                )),
            }
        }
        Err(format!(
            "cannot read etcd's clock (the Date of GET /version): {}",
            reasons.join("; ")
        ))
    }

    async fn read(&self, target: &Target) -> Result<u64, String> {
        let tcp = tokio::net::TcpStream::connect(target.authority.as_str())
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        let _ = tcp.set_nodelay(true);
        match (&self.tls, target.tls) {
            (Some(tls), true) => {
                let name = ServerName::try_from(target.host.clone())
                    .map_err(|e| format!("{:?} is not a server name: {e}", target.host))?;
                let stream = tls
                    .connect(name, tcp)
                    .await
                    .map_err(|e| format!("TLS: {e}"))?;
                exchange(stream, &target.authority).await
            }
            _ => exchange(tcp, &target.authority).await,
        }
    }
}

impl Target {
    /// `http://host:port`, `https://host:port` or `host:port` — which, as etcd-client takes
    /// it, is TLS when the options configure TLS (`tls_by_default`), plain otherwise.
    fn parse(endpoint: &str, tls_by_default: bool) -> Result<Target, String> {
        let (tls, rest) = if let Some(rest) = endpoint.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = endpoint.strip_prefix("http://") {
            (false, rest)
        } else {
            (tls_by_default, endpoint)
        };
        let authority = rest.split('/').next().unwrap_or("");
        let host = match authority.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(""),
            None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
        };
        let has_port = authority.rsplit_once(':').is_some_and(|(h, p)| {
            !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && !h.is_empty()
        });
        if host.is_empty() || !has_port {
            return Err(format!(
                "endpoint {endpoint:?} is not [http[s]://]HOST:PORT, so etcd's clock cannot be read"
            ));
        }
        Ok(Target {
            authority: authority.to_owned(),
            host: host.to_owned(),
            tls,
        })
    }
}

/// One `GET /version` on `stream`; the answer's `Date`, in Unix ms.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    authority: &str,
) -> Result<u64, String> {
    let request =
        format!("GET /version HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("cannot send: {e}"))?;
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() >= HEAD_LIMIT {
            return Err(format!("no end of the answer's head in {HEAD_LIMIT} bytes"));
        }
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|e| format!("cannot read the answer: {e}"))?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..n]);
    }
    date_of(&head)
}

/// The `Date` header of an HTTP/1.1 answer's head, in Unix ms.
fn date_of(head: &[u8]) -> Result<u64, String> {
    let text = String::from_utf8_lossy(head);
    let head = text.split("\r\n\r\n").next().unwrap_or("");
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or("");
    if !status.starts_with("HTTP/1.") {
        return Err(format!("not an HTTP answer: {:?}", truncate(status)));
    }
    // An etcd member answers /version with 200. Anything else is not one — an `etcd
    // grpc-proxy` answers 404 with its own host's Date, a load balancer its error page — and
    // its clock is none of the members' the argument bounds by `max_member_skew`.
    if status.split(' ').nth(1) != Some("200") {
        return Err(format!(
            "GET /version answered {:?}, not etcd's 200: is this endpoint an etcd member?",
            truncate(status)
        ));
    }
    let date = lines
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("date"))
        .map(|(_, value)| value.trim())
        .ok_or_else(|| format!("no Date header in the answer ({})", truncate(status)))?;
    let at = httpdate::parse_http_date(date).map_err(|e| format!("Date {date:?}: {e}"))?;
    let ms = at
        .duration_since(UNIX_EPOCH)
        .map_err(|_| format!("Date {date:?} is before 1970"))?
        .as_millis();
    u64::try_from(ms).map_err(|_| format!("Date {date:?} is out of range"))
}

fn truncate(s: &str) -> &str {
    s.get(..80).unwrap_or(s)
}

/// The TLS client etcd-client uses, for the same endpoints: the CA of [`EtcdOptions::ca_pem`]
/// (the system's without it) and the client identity of
/// [`EtcdOptions::client_identity_pem`].
fn client_config(options: &EtcdOptions) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    match &options.ca_pem {
        Some(pem) => {
            let certs = CertificateDer::pem_slice_iter(pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("the CA PEM: {e}"))?;
            roots.add_parsable_certificates(certs);
        }
        None => {
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        }
    }
    if roots.is_empty() {
        return Err("https endpoints, and no CA certificate to check them with".into());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots);
    match &options.identity_pem {
        None => Ok(builder.with_no_client_auth()),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("the client certificate PEM: {e}"))?;
            let key = PrivateKeyDer::from_pem_slice(key)
                .map_err(|e| format!("the client key PEM: {e}"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("the client certificate and key: {e}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answers_date_is_read_to_the_second() {
        let head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                     date: Thu, 26 Nov 2026 19:34:10 GMT\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(date_of(head), Ok(1_795_721_650_000));
    }

    #[test]
    fn an_answer_without_a_date_or_not_http_is_refused() {
        let none = date_of(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").unwrap_err();
        assert!(none.contains("no Date header"), "{none}");
        let bad = date_of(b"HTTP/1.1 200 OK\r\nDate: yesterday\r\n\r\n").unwrap_err();
        assert!(bad.contains("\"yesterday\""), "{bad}");
        let grpc = date_of(b"\0\0\x12\x04\0\0\0\0\0").unwrap_err();
        assert!(grpc.contains("not an HTTP answer"), "{grpc}");
        // etcd's grpc-proxy: a 404 with the proxy host's Date, which is no member's clock.
        let proxy =
            date_of(b"HTTP/1.1 404 Not Found\r\nDate: Thu, 26 Nov 2026 20:25:00 GMT\r\n\r\n")
                .unwrap_err();
        assert!(proxy.contains("not etcd's 200"), "{proxy}");
        assert!(proxy.contains("\"HTTP/1.1 404 Not Found\""), "{proxy}");
        // A status line is quoted up to its first 80 bytes, however long it is.
        let long = format!("HTTP/1.1 500 {}\r\n\r\n", "x".repeat(1000));
        let long = date_of(long.as_bytes()).unwrap_err();
        assert!(
            long.contains(&format!("\"HTTP/1.1 500 {}\"", "x".repeat(67))),
            "{long}"
        );
        let moved = date_of(
            b"HTTP/1.1 301 Moved Permanently\r\nDate: Thu, 26 Nov 2026 20:25:00 GMT\r\n\r\n",
        )
        .unwrap_err();
        assert!(moved.contains("not etcd's 200"), "{moved}");
    }

    /// A head below [`HEAD_LIMIT`] is read whole, over many reads; one that has not ended by
    /// then is refused, whatever follows (memory stays bounded whatever an endpoint sends).
    #[test]
    fn a_head_is_read_up_to_its_limit_and_no_further() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let answer = |pad: usize| {
            let mut bytes = b"HTTP/1.1 200 OK\r\n".to_vec();
            bytes.extend(format!("X-Pad: {}\r\n", "a".repeat(pad)).as_bytes());
            bytes.extend(b"Date: Thu, 26 Nov 2026 19:34:10 GMT\r\n\r\n{}");
            bytes
        };
        let read = |bytes: Vec<u8>| {
            runtime.block_on(async {
                let (client, mut server) = tokio::io::duplex(64 * 1024);
                server.write_all(&bytes).await.unwrap();
                let read = exchange(client, "127.0.0.1:2379").await;
                drop(server);
                read
            })
        };
        assert_eq!(read(answer(12 * 1024)), Ok(1_795_721_650_000));
        let long = read(answer(HEAD_LIMIT)).unwrap_err();
        assert!(long.contains("no end of the answer's head"), "{long}");
    }
    #[test]
    fn endpoints_parse_as_etcd_client_takes_them() {
        let t = Target::parse("https://etcd-0.example:2379", false).unwrap();
        assert_eq!(
            (t.authority.as_str(), t.host.as_str(), t.tls),
            ("etcd-0.example:2379", "etcd-0.example", true)
        );
        let t = Target::parse("127.0.0.1:2379", false).unwrap();
        assert_eq!(
            (t.authority.as_str(), t.host.as_str(), t.tls),
            ("127.0.0.1:2379", "127.0.0.1", false)
        );
        // Without a scheme and with TLS options, etcd-client speaks TLS: so must the clock.
        let t = Target::parse("127.0.0.1:2379", true).unwrap();
        assert_eq!(
            (t.authority.as_str(), t.host.as_str(), t.tls),
            ("127.0.0.1:2379", "127.0.0.1", true)
        );
        assert!(!Target::parse("http://127.0.0.1:2379", true).unwrap().tls);
        let t = Target::parse("http://[::1]:2379/", false).unwrap();
        assert_eq!(
            (t.authority.as_str(), t.host.as_str(), t.tls),
            ("[::1]:2379", "::1", false)
        );
        for bad in ["http://etcd", "https://:2379", "etcd:port", ""] {
            assert!(Target::parse(bad, false).is_err(), "{bad}");
        }
    }

    /// An HTTP endpoint on 127.0.0.1 that reads a request and gives `answer` the connection.
    fn serve(answer: fn(&mut std::net::TcpStream)) -> String {
        use std::io::Read;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for mut s in listener.incoming().flatten() {
                let mut buf = [0u8; 512];
                let _ = s.read(&mut buf);
                answer(&mut s);
            }
        });
        format!("http://{addr}")
    }

    /// A hostile or broken endpoint: one that trickles its head a byte at a time, one whose
    /// head never ends, one that answers nothing for 10 s. Each is an `Err` within its timeout
    /// (300 ms; the bound below is ten times that, a liveness bound: without the timeout the
    /// trickle would never end and the silent one would take 10 s), and the endless head costs
    /// about `HEAD_LIMIT` of memory.
    #[test]
    fn a_hostile_endpoint_costs_at_most_the_timeout() {
        use std::io::Write;
        let trickle = serve(|s| {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\n");
            while s.write_all(b"X").is_ok() {
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let endless = serve(|s| {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\n");
            let line = [b'a'; 4096];
            while s.write_all(&line).is_ok() {}
        });
        let silent = serve(|_| std::thread::sleep(Duration::from_secs(10)));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        for endpoint in [trickle, endless, silent] {
            let clock = EtcdClock::new(
                std::slice::from_ref(&endpoint),
                &EtcdOptions::new(),
                Duration::from_millis(300),
            )
            .unwrap();
            let started = std::time::Instant::now();
            let read = runtime.block_on(clock.now_ms());
            let took = started.elapsed();
            assert!(read.is_err(), "{endpoint}: {read:?}");
            assert!(
                took < Duration::from_secs(3),
                "{endpoint}: {took:?} {read:?}"
            );
        }
    }

    /// A dead first endpoint is asked once: the one that answered is asked first afterwards.
    #[test]
    fn the_endpoint_that_answered_is_asked_first() {
        use std::io::Write;
        let silent = serve(|_| std::thread::sleep(Duration::from_secs(10)));
        let good = serve(|s| {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nDate: Thu, 26 Nov 2026 19:34:10 GMT\r\n\r\n");
        });
        let clock = EtcdClock::new(
            &[silent, good],
            &EtcdOptions::new(),
            Duration::from_millis(200),
        )
        .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        assert_eq!(clock.answered.load(Ordering::Relaxed), 0);
        assert_eq!(runtime.block_on(clock.now_ms()), Ok(1_795_721_650_000));
        assert_eq!(clock.answered.load(Ordering::Relaxed), 1);
        assert_eq!(runtime.block_on(clock.now_ms()), Ok(1_795_721_650_000));
        assert_eq!(clock.answered.load(Ordering::Relaxed), 1);
    }

    /// The inequality: a holder confirmed at a check whose `Date` read `d_c` (its member's
    /// clock in `[d_c, d_c + R)`), its clock at most the allowance past `d_c`, and a claim
    /// later whose `Date` read `d_t` from a member up to `S` behind the first: the claim's
    /// `store_ms + lead` is at or above the holder's clock, for every placement of the two
    /// members' true times within a second.
    #[test]
    fn a_claims_clock_is_above_every_holder_confirmed_before_it() {
        let (lead, skew) = (250, 1_000);
        for true_a in (10_000..12_000).step_by(50) {
            let d_c = true_a / 1_000 * 1_000;
            let holder = d_c + check_allowance_ms(lead);
            // Later, the member of the claim reads at least `true_a - skew`.
            for later in [0, 10, 999, 5_000] {
                let true_b = true_a + later - skew;
                let d_t = true_b / 1_000 * 1_000;
                let (store_ms, lead_ms) = claim_clock(d_t, skew, lead);
                assert!(store_ms + lead_ms >= holder, "{true_a} {later}");
            }
        }
        // Without the skew it would not hold for a claim read from a member 1.5 s behind.
        let d_c = 11_000;
        let (store_ms, lead_ms) = claim_clock(9_000, 0, 250);
        assert!(store_ms + lead_ms < d_c + check_allowance_ms(250));
    }
}
