//! `monoflake health`: asks a running `monoflake serve` whether it is ready (`GET /readyz`,
//! or `/healthz` with `--live`), for a container's `HEALTHCHECK` or an exec probe in an image
//! without curl.
//!
//! * One HTTP/1.1 request on a new connection, everything within `--timeout`: the connection,
//!   the TLS handshake, the request and the answer (each step's socket timeout is what is left
//!   of it).
//! * The server is found as `serve` was told to listen: `--listen` or `$MONOFLAKE_LISTEN`
//!   (an unspecified address, `0.0.0.0` or `::`, is reached on loopback), HTTPS when
//!   `--tls-cert` or `$MONOFLAKE_TLS_CERT` is set. The certificate is pinned: the server must
//!   present exactly the first certificate of that file (the probe connects by address, so no
//!   name check could pass, and it trusts nothing else).
//! * Exit 0 on a 200, printing the answer; 1 otherwise, saying why (Docker reserves exit
//!   code 2 of a health check).
//!
//! Imports `args` and `failure`; no other command.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls;
use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::crypto::{CryptoProvider, ring};
use tokio_rustls::rustls::{DigitallySignedStruct, SignatureScheme};

use crate::args::HealthArgs;
use crate::failure::Failure;

/// The most of an answer read: `/readyz` and `/healthz` answer a line of JSON.
const MAX_ANSWER: u64 = 16 * 1024;

fn failed(message: String) -> Failure {
    Failure { code: 1, message }
}

pub fn run(args: &HealthArgs) -> Result<(), Failure> {
    let deadline = Instant::now() + Duration::from_secs_f64(args.timeout);
    let addr = reachable(args.listen);
    let path = if args.live { "/healthz" } else { "/readyz" };
    let tls = match &args.tls_cert {
        Some(cert) => Some(client_config(cert)?),
        None => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let target = format!("{scheme}://{addr}{path}");
    let answer = ask(addr, path, tls, deadline).map_err(|e| {
        let why = if e.kind() == io::ErrorKind::TimedOut || e.kind() == io::ErrorKind::WouldBlock {
            format!("no answer within {} s", args.timeout)
        } else {
            e.to_string()
        };
        failed(format!("{target}: {why}"))
    })?;
    let (status, body) = parse(&answer).ok_or_else(|| {
        failed(format!(
            "{target}: not an HTTP answer: {:?}",
            String::from_utf8_lossy(&answer[..answer.len().min(64)])
        ))
    })?;
    if status != 200 {
        return Err(failed(format!("{target}: {status} {}", body.trim_end())));
    }
    println!("{}", body.trim_end());
    Ok(())
}

/// Where a probe reaches a server told to listen on `listen`: an unspecified address means
/// every interface, loopback among them.
fn reachable(listen: SocketAddr) -> SocketAddr {
    let ip = match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, listen.port())
}

/// What is left until `deadline`, or a timeout error when nothing is.
fn left(deadline: Instant) -> io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::ErrorKind::TimedOut.into());
    }
    Ok(left)
}

/// A socket whose every read and write gives up at `deadline`.
struct Timed {
    stream: TcpStream,
    deadline: Instant,
}

impl Read for Timed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.set_read_timeout(Some(left(self.deadline)?))?;
        self.stream.read(buf)
    }
}

impl Write for Timed {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.set_write_timeout(Some(left(self.deadline)?))?;
        self.stream.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

/// Sends `GET path` to `addr` (over TLS with `tls`) and reads the answer to its end.
fn ask(
    addr: SocketAddr,
    path: &str,
    tls: Option<Arc<rustls::ClientConfig>>,
    deadline: Instant,
) -> io::Result<Vec<u8>> {
    let stream = TcpStream::connect_timeout(&addr, left(deadline)?)?;
    let timed = Timed { stream, deadline };
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: monoflake-health/{}\r\n\
         Connection: close\r\n\r\n",
        env!("CARGO_PKG_VERSION")
    );
    let mut answer = Vec::new();
    match tls {
        None => exchange(timed, request.as_bytes(), &mut answer)?,
        Some(config) => {
            let name = ServerName::IpAddress(addr.ip().into());
            let conn = rustls::ClientConnection::new(config, name).map_err(io::Error::other)?;
            exchange(
                rustls::StreamOwned::new(conn, timed),
                request.as_bytes(),
                &mut answer,
            )?;
        }
    }
    Ok(answer)
}

/// Writes `request` on `io` and reads what comes back until the server closes (the request
/// said `Connection: close`), at most [`MAX_ANSWER`] bytes.
fn exchange(mut io: impl Read + Write, request: &[u8], answer: &mut Vec<u8>) -> io::Result<()> {
    io.write_all(request)?;
    io.flush()?;
    match io.take(MAX_ANSWER).read_to_end(answer) {
        Ok(_) => Ok(()),
        // A TLS server that closes without close_notify, after a whole answer.
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && !answer.is_empty() => Ok(()),
        Err(e) => Err(e),
    }
}

/// The status and the body of an HTTP/1.1 answer (a `Content-Length` one, as `serve` gives
/// its probes).
fn parse(answer: &[u8]) -> Option<(u16, String)> {
    let text = std::str::from_utf8(answer).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head
        .strip_prefix("HTTP/1.")?
        .get(2..)?
        .split(' ')
        .next()?
        .parse()
        .ok()?;
    Some((status, body.to_owned()))
}

/// TLS to a server whose certificate must be the first one of `cert` (`--tls-cert`).
fn client_config(cert: &Path) -> Result<Arc<rustls::ClientConfig>, Failure> {
    let pinned = CertificateDer::pem_file_iter(cert)
        .and_then(|mut certs| certs.next().transpose())
        .map_err(|e| {
            failed(format!(
                "cannot read a certificate from {}: {e}",
                cert.display()
            ))
        })?
        .ok_or_else(|| failed(format!("{} holds no PEM certificate", cert.display())))?;
    let provider = Arc::new(ring::default_provider());
    let verifier = Pinned {
        cert: pinned.into_owned(),
        file: cert.display().to_string(),
        provider: Arc::clone(&provider),
    };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| failed(format!("TLS: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Accepts exactly one certificate: the one `serve` was given. The handshake's signatures are
/// still checked against it, so only the holder of its key passes.
#[derive(Debug)]
struct Pinned {
    cert: CertificateDer<'static>,
    file: String,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.cert.as_ref() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(format!(
                "the server's certificate is not the first one in {} (renewed there but not \
                 yet loaded? serve reads it at start)",
                self.file
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unspecified_listener_is_reached_on_loopback() {
        let at = |s: &str| reachable(s.parse().unwrap()).to_string();
        assert_eq!(at("0.0.0.0:8080"), "127.0.0.1:8080");
        assert_eq!(at("[::]:8080"), "[::1]:8080");
        assert_eq!(at("10.1.2.3:9"), "10.1.2.3:9");
    }

    #[test]
    fn an_answer_is_read_for_its_status_and_body() {
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\n{}\n";
        assert_eq!(parse(ok), Some((200, "{}\n".to_owned())));
        let refused =
            b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\n\r\n{\"error\":\"x\"}";
        assert_eq!(parse(refused), Some((503, "{\"error\":\"x\"}".to_owned())));
        assert_eq!(parse(b"SSH-2.0-OpenSSH\r\n\r\n"), None);
        assert_eq!(parse(b"HTTP/1.1 200 OK\r\n"), None, "a head cut short");
    }
}
