//! TLS for both listeners: rustls with the ring provider, certificate and key from PEM files,
//! and when the certificate chain stops being valid.

use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::crypto::ring;

use crate::failure::Failure;

fn bad(message: String) -> Failure {
    Failure { code: 2, message }
}

/// A certificate of the chain given and its end of validity: the one that expires first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expiry {
    /// The certificate's subject, as its distinguished name.
    pub subject: String,
    /// Its `notAfter`, in Unix seconds.
    pub not_after: i64,
}

/// Warn when the chain's first expiry is this close (or past).
pub const EXPIRY_WARNING_SECS: i64 = 7 * 24 * 3600;

impl Expiry {
    /// The certificate of `chain` (DER) that expires first; `None` when none parses as X.509
    /// (rustls then refuses the chain anyway).
    pub fn of_chain(chain: &[CertificateDer<'_>]) -> Option<Expiry> {
        chain
            .iter()
            .filter_map(|der| x509_parser::parse_x509_certificate(der).ok())
            .map(|(_, cert)| Expiry {
                subject: cert.subject().to_string(),
                not_after: cert.validity().not_after.timestamp(),
            })
            .min_by_key(|e| e.not_after)
    }

    /// A warning when the chain has expired at `now` (Unix seconds) or expires within
    /// [`EXPIRY_WARNING_SECS`]; `None` otherwise.
    pub fn warning(&self, path: &Path, now: i64) -> Option<String> {
        let when = monoflake::rfc3339(u64::try_from(self.not_after).unwrap_or(0) * 1000);
        let left = self.not_after - now;
        if left <= 0 {
            Some(format!(
                "the TLS certificate in {} ({}) expired at {when}: clients that check it \
                 refuse to connect",
                path.display(),
                self.subject
            ))
        } else if left < EXPIRY_WARNING_SECS {
            Some(format!(
                "the TLS certificate in {} ({}) expires at {when}, in {:.1} days",
                path.display(),
                self.subject,
                left as f64 / 86_400.0
            ))
        } else {
            None
        }
    }
}

/// An acceptor for `cert` (a PEM chain, leaf first) and `key` (PEM, PKCS#8, PKCS#1 or SEC1),
/// offering HTTP/2 (gRPC) and HTTP/1.1 by ALPN, and the chain's first expiry.
pub fn acceptor(cert: &Path, key: &Path) -> Result<(TlsAcceptor, Option<Expiry>), Failure> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| {
            bad(format!(
                "cannot read certificates from {}: {e}",
                cert.display()
            ))
        })?;
    if chain.is_empty() {
        return Err(bad(format!("{} holds no PEM certificate", cert.display())));
    }
    let expiry = Expiry::of_chain(&chain);
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        bad(format!(
            "cannot read a private key from {}: {e}",
            key.display()
        ))
    })?;
    let mut config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
        .map_err(|e| bad(format!("the TLS certificate and key do not fit: {e}")))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok((TlsAcceptor::from(Arc::new(config)), expiry))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warns_past_expiry_and_within_a_week_only() {
        let e = Expiry {
            subject: "CN=localhost".into(),
            not_after: 1_800_000_000,
        };
        let path = Path::new("cert.pem");
        let past = e.warning(path, 1_800_000_000).unwrap();
        assert_eq!(
            past,
            "the TLS certificate in cert.pem (CN=localhost) expired at \
             2027-01-15T08:00:00.000Z: clients that check it refuse to connect"
        );
        let soon = e.warning(path, 1_800_000_000 - 3 * 86_400).unwrap();
        assert!(
            soon.ends_with("expires at 2027-01-15T08:00:00.000Z, in 3.0 days"),
            "{soon}"
        );
        assert_eq!(e.warning(path, 1_800_000_000 - EXPIRY_WARNING_SECS), None);
    }
}
