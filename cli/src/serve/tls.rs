//! TLS for both listeners: rustls with the ring provider, certificate and key from PEM files.

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

/// An acceptor for `cert` (a PEM chain, leaf first) and `key` (PEM, PKCS#8, PKCS#1 or SEC1),
/// offering HTTP/2 (gRPC) and HTTP/1.1 by ALPN.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, Failure> {
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
    Ok(TlsAcceptor::from(Arc::new(config)))
}
