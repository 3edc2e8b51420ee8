//! How an [`EtcdStore`](super::EtcdStore) reaches a production etcd: TLS (a CA, a client
//! certificate) and etcd's user/password authentication.

use std::fmt;

/// TLS and credentials for [`EtcdStore::connect_with`](super::EtcdStore::connect_with)
/// (feature `etcd`). The default is plain text without authentication, as
/// [`EtcdStore::connect`](super::EtcdStore::connect) uses.
///
/// * **TLS** (`https://` endpoints): [`EtcdOptions::ca_pem`] names the CA that signs etcd's
///   server certificate; [`EtcdOptions::client_identity_pem`] adds a client certificate for
///   etcd's `--client-cert-auth`. rustls with the ring provider.
/// * **User/password** ([`EtcdOptions::user`]): etcd's auth; the client gets a token with
///   them and sends it with every request. The password never appears in `Debug` output.
///
/// # Example
///
/// ```no_run
/// use monoflake::{EtcdOptions, EtcdStore, DEFAULT_LEASE_TTL};
///
/// let options = EtcdOptions::new()
///     .ca_pem(std::fs::read("/etc/etcd/ca.pem")?)
///     .client_identity_pem(std::fs::read("/etc/etcd/client.pem")?, std::fs::read("/etc/etcd/client-key.pem")?)
///     .user("monoflake", "s3cret");
/// let store = EtcdStore::connect_with(&["https://etcd-0:2379"], "/monoflake", DEFAULT_LEASE_TTL, &options)?;
/// println!("{store:?}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
pub struct EtcdOptions {
    pub(super) ca_pem: Option<Vec<u8>>,
    pub(super) identity_pem: Option<(Vec<u8>, Vec<u8>)>,
    pub(super) user: Option<(String, String)>,
}

impl fmt::Debug for EtcdOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdOptions")
            .field("ca", &self.ca_pem.is_some())
            .field("client_identity", &self.identity_pem.is_some())
            .field("user", &self.user.as_ref().map(|(name, _)| name))
            .finish()
    }
}

impl EtcdOptions {
    /// Plain text, no authentication.
    ///
    /// ```
    /// assert!(!format!("{:?}", monoflake::EtcdOptions::new()).contains("true"));
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Speaks TLS, trusting the CA certificates in this PEM text.
    ///
    /// ```
    /// let options = monoflake::EtcdOptions::new().ca_pem(b"-----BEGIN CERTIFICATE-----\n...".to_vec());
    /// assert!(format!("{options:?}").contains("ca: true"));
    /// ```
    pub fn ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca_pem = Some(pem.into());
        self
    }

    /// Presents this client certificate (PEM) and private key (PEM) for mutual TLS.
    ///
    /// ```
    /// let options = monoflake::EtcdOptions::new().client_identity_pem(b"cert".to_vec(), b"key".to_vec());
    /// assert!(format!("{options:?}").contains("client_identity: true"));
    /// ```
    pub fn client_identity_pem(
        mut self,
        cert: impl Into<Vec<u8>>,
        key: impl Into<Vec<u8>>,
    ) -> Self {
        self.identity_pem = Some((cert.into(), key.into()));
        self
    }

    /// Authenticates as `name` with `password` (etcd's user/password auth).
    ///
    /// ```
    /// let options = monoflake::EtcdOptions::new().user("ids", "hunter22");
    /// let shown = format!("{options:?}");
    /// assert!(shown.contains("\"ids\"") && !shown.contains("hunter22"));
    /// ```
    pub fn user(mut self, name: impl Into<String>, password: impl Into<String>) -> Self {
        self.user = Some((name.into(), password.into()));
        self
    }

    /// The etcd-client options with these settings applied.
    pub(super) fn apply(
        &self,
        mut options: etcd_client::ConnectOptions,
    ) -> etcd_client::ConnectOptions {
        if let Some((name, password)) = &self.user {
            options = options.with_user(name.clone(), password.clone());
        }
        if self.ca_pem.is_some() || self.identity_pem.is_some() {
            let mut tls = etcd_client::TlsOptions::new();
            if let Some(ca) = &self.ca_pem {
                tls = tls.ca_certificate(etcd_client::Certificate::from_pem(ca));
            }
            if let Some((cert, key)) = &self.identity_pem {
                tls = tls.identity(etcd_client::Identity::from_pem(cert, key));
            }
            options = options.with_tls(tls);
        }
        options
    }
}
