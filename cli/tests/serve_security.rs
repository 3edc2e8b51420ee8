//! `monoflake serve` security: the bearer token (401), TLS with a real TLS client, and a
//! flood of idle connections that must not starve a real client.

#[path = "../../tests/common/mod.rs"]
mod common;
mod server;

use std::io::Read;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Instant;

use server::{GUARD, Server, agent, get, ids_of};

const TOKEN: &str = "s3cr3t-t0ken-0123456789abcdef";

#[test]
fn a_missing_or_wrong_token_gets_401_and_no_id() {
    let dir = common::TempDir::new("token");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let state = dir.path().join("state");
    let s = Server::start(&[
        "--state-dir",
        state.to_str().unwrap(),
        "--token-file",
        token_file.to_str().unwrap(),
    ]);
    let a = agent();
    let good = format!("Bearer {TOKEN}");
    let wrong = format!("Bearer {}x", &TOKEN[..TOKEN.len() - 1]);
    for path in ["/v1/id", "/v1/ids?count=5", "/v1/decode/175928847299117063"] {
        let missing = get(&a, &s.url(path), &[]);
        assert_eq!(missing.status, 401, "{path}");
        assert_eq!(
            missing.error(),
            "a bearer token is required: Authorization: Bearer <token>"
        );
        for header in [wrong.as_str(), "Bearer ", "Basic czNjcjN0", TOKEN] {
            let refused = get(&a, &s.url(path), &[("Authorization", header)]);
            assert_eq!(refused.status, 401, "{path} with {header:?}");
        }
        assert_eq!(
            get(&a, &s.url(path), &[("Authorization", &good)]).status,
            200
        );
    }
    // Probes and metrics stay open for the platform.
    for path in ["/healthz", "/readyz", "/metrics"] {
        assert_eq!(get(&a, &s.url(path), &[]).status, 200, "{path}");
    }
    let m = get(&a, &s.url("/metrics"), &[]);
    assert!(
        m.body.contains("monoflake_unauthorized_total 15\n"),
        "{}",
        m.body
    );
    assert!(
        m.body.contains("monoflake_ids_served_total 6\n"),
        "{}",
        m.body
    );
}

#[test]
fn a_short_or_unreadable_token_file_stops_the_start() {
    let dir = common::TempDir::new("token-bad");
    let short = dir.path().join("short");
    std::fs::write(&short, "abc\n").unwrap();
    let state = dir.path().join("state");
    let (code, log) = Server::try_start(&[
        "--state-dir",
        state.to_str().unwrap(),
        "--token-file",
        short.to_str().unwrap(),
    ])
    .err()
    .unwrap();
    assert_eq!(code, Some(2));
    assert!(log.contains("has 3 bytes; at least 16 are needed"), "{log}");
    let (code, log) = Server::try_start(&[
        "--state-dir",
        state.to_str().unwrap(),
        "--token-file",
        "/nonexistent/token",
    ])
    .err()
    .unwrap();
    assert_eq!(code, Some(2));
    assert!(
        log.contains("cannot read the token file /nonexistent/token"),
        "{log}"
    );
}

#[test]
fn tls_serves_a_client_that_trusts_the_certificate() {
    let dir = common::TempDir::new("tls");
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    let state = dir.path().join("state");
    let s = Server::start(&[
        "--state-dir",
        state.to_str().unwrap(),
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    assert!(
        s.log().contains("serving HTTP on https://127.0.0.1:"),
        "{}",
        s.log()
    );
    let port = s.http.rsplit(':').next().unwrap().to_owned();
    let roots = ureq::tls::RootCerts::Specific(Arc::new(vec![
        ureq::tls::Certificate::from_der(certified.cert.der()).to_owned(),
    ]));
    let trusting: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(GUARD))
        .tls_config(ureq::tls::TlsConfig::builder().root_certs(roots).build())
        .build()
        .into();
    let url = format!("https://localhost:{port}/v1/ids?count=10");
    let ids = ids_of(&get(&trusting, &url, &[]));
    assert_eq!(ids.len(), 10);
    // A client that does not trust the certificate gets no answer.
    assert!(agent().get(&url).call().is_err());
    // Plain HTTP on the TLS port gets no ID either.
    let plain = agent().get(&s.url("/v1/id")).call();
    assert!(plain.map(|r| r.status().as_u16() != 200).unwrap_or(true));
    let (status, log) = s.stop();
    assert!(status.success(), "{log}");
}

#[test]
fn an_expired_or_expiring_certificate_is_a_warning_and_a_metric() {
    let dir = common::TempDir::new("tls-expiry");
    for (name, not_after, warning) in [
        (
            "expired",
            rcgen::date_time_ymd(2021, 1, 1),
            "expired at 2021-01-01T00:00:00.000Z: clients that check it refuse to connect",
        ),
        ("soon", time_in(3 * 86_400), "in 3.0 days"),
        ("fine", time_in(30 * 86_400), ""),
    ] {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = not_after;
        let cert = params.self_signed(&key).unwrap();
        let cert_file = dir.path().join(format!("{name}.pem"));
        let key_file = dir.path().join(format!("{name}.key"));
        std::fs::write(&cert_file, cert.pem()).unwrap();
        std::fs::write(&key_file, key.serialize_pem()).unwrap();
        let state = dir.path().join(format!("state-{name}"));
        let s = Server::start(&[
            "--state-dir",
            state.to_str().unwrap(),
            "--tls-cert",
            cert_file.to_str().unwrap(),
            "--tls-key",
            key_file.to_str().unwrap(),
        ]);
        let log = s.log();
        if warning.is_empty() {
            assert!(!log.contains("warning: the TLS certificate"), "{log}");
        } else {
            assert!(
                log.contains(&format!(
                    "monoflake: warning: the TLS certificate in {}",
                    cert_file.display()
                )),
                "{log}"
            );
            assert!(log.contains(warning), "{name}: {log}");
        }
        // The metric, over TLS (the metrics need no trust: the client skips verification).
        let port = s.http.rsplit(':').next().unwrap().to_owned();
        let roots = ureq::tls::RootCerts::Specific(Arc::new(vec![
            ureq::tls::Certificate::from_der(cert.der()).to_owned(),
        ]));
        let insecure: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(GUARD))
            .tls_config(
                ureq::tls::TlsConfig::builder()
                    .root_certs(roots)
                    .disable_verification(true)
                    .build(),
            )
            .build()
            .into();
        let m = get(&insecure, &format!("https://localhost:{port}/metrics"), &[]);
        let expected = format!(
            "monoflake_tls_cert_expiry_timestamp_seconds {}\n",
            not_after.unix_timestamp()
        );
        assert!(m.body.contains(&expected), "{name}: {}", m.body);
    }
}

/// A time `secs` from now, whole seconds (as a certificate holds it).
fn time_in(secs: i64) -> time::OffsetDateTime {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    time::OffsetDateTime::from_unix_timestamp(i64::try_from(now).unwrap() + secs).unwrap()
}

#[test]
fn a_flood_of_idle_connections_does_not_starve_a_real_client() {
    let dir = common::TempDir::new("flood");
    let s = Server::start(&[
        "--state-dir",
        dir.path().to_str().unwrap(),
        "--max-connections",
        "16",
        "--idle-timeout",
        "1",
        "--max-wait",
        "0.5",
    ]);
    // Four times the limit of connections that never send a byte.
    let idle: Vec<TcpStream> = (0..64)
        .map(|_| TcpStream::connect(&s.http).unwrap())
        .collect();
    // A real client still gets its IDs: idle connections are closed after a second and the
    // waiting ones are taken from the backlog in turn.
    let start = Instant::now();
    let ids = ids_of(&get(&agent(), &s.url("/v1/ids?count=100"), &[]));
    assert_eq!(ids.len(), 100);
    assert!(start.elapsed() < GUARD);
    // Every idle connection is closed by the server (EOF), none is kept forever.
    for mut c in idle {
        c.set_read_timeout(Some(GUARD)).unwrap();
        let mut buf = [0u8; 64];
        match c.read(&mut buf) {
            Ok(0) => {}
            Ok(n) => panic!("an idle connection got {n} bytes"),
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
        }
    }
    // Closed by their deadline, or shed to make room for the real client.
    let gone = |m: &str| {
        ["handshake", "shed"]
            .iter()
            .map(|reason| {
                server::hostile::metric(
                    m,
                    &format!("monoflake_connections_closed_total{{reason=\"{reason}\"}}"),
                )
            })
            .sum::<u64>()
    };
    let m = server::hostile::metrics_once(&s.url("/metrics"), |m| gone(m) >= 64);
    assert!(gone(&m) >= 64, "{} idle connections closed", gone(&m));
    // A slow client that starts a request and never finishes it is cut too.
    let mut slow = TcpStream::connect(&s.http).unwrap();
    std::io::Write::write_all(&mut slow, b"GET /v1/id HTTP/1.1\r\nHost: x\r\n").unwrap();
    slow.set_read_timeout(Some(GUARD)).unwrap();
    let mut rest = Vec::new();
    let _ = slow.read_to_end(&mut rest);
    assert!(!String::from_utf8_lossy(&rest).contains("\"id\""));
}
