//! How an [`EtcdStore`](super::EtcdStore) reaches a production etcd: TLS (a CA, a client
//! certificate) and etcd's user/password authentication.

use std::fmt;
use std::time::Duration;

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
#[derive(Clone)]
pub struct EtcdOptions {
    pub(super) ca_pem: Option<Vec<u8>>,
    pub(super) identity_pem: Option<(Vec<u8>, Vec<u8>)>,
    pub(super) user: Option<(String, String)>,
    pub(super) max_clock_lead: Duration,
    pub(super) max_member_skew: Duration,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        EtcdOptions {
            ca_pem: None,
            identity_pem: None,
            user: None,
            max_clock_lead: Duration::from_millis(crate::handover::DEFAULT_MAX_CLOCK_LEAD_MS),
            max_member_skew: DEFAULT_MAX_MEMBER_SKEW,
        }
    }
}

/// How far apart the clocks of an etcd cluster's members may be by default
/// ([`EtcdOptions::max_member_skew`]): one second, where etcd itself warns ("prober found
/// high clock drift").
///
/// ```
/// assert_eq!(monoflake::DEFAULT_MAX_MEMBER_SKEW, std::time::Duration::from_secs(1));
/// ```
pub const DEFAULT_MAX_MEMBER_SKEW: Duration = Duration::from_secs(1);

impl fmt::Debug for EtcdOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdOptions")
            .field("ca", &self.ca_pem.is_some())
            .field("client_identity", &self.identity_pem.is_some())
            .field("user", &self.user.as_ref().map(|(name, _)| name))
            .field("max_clock_lead", &self.max_clock_lead)
            .field("max_member_skew", &self.max_member_skew)
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

    /// How far a holder's clock may lead etcd's (the `Date` its HTTP gateway answers with,
    /// read before every check that lets the holder issue; 250 ms by default, as
    /// [`PgOptions::max_clock_lead`](crate::PgOptions::max_clock_lead)). A holder further
    /// ahead loses its claim at that check — sealed, what it used written back, `LeaseLost`
    /// naming the lead — and a claimant that finds no record of its node starts above etcd's
    /// clock at its claim plus this lead, `Date`'s second twice, the members' skew and two
    /// check intervals: above everything any holder confirmed before can have issued, whatever
    /// its clock did after (docs/design.md, "one inequality", the third case).
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = monoflake::EtcdOptions::new().max_clock_lead(Duration::from_millis(500));
    /// assert_eq!(options.clock_lead(), Duration::from_millis(500));
    /// assert_eq!(monoflake::EtcdOptions::new().clock_lead(), Duration::from_millis(250));
    /// ```
    pub fn max_clock_lead(mut self, lead: Duration) -> Self {
        self.max_clock_lead = lead;
        self
    }

    /// How far a holder's clock may lead etcd's ([`EtcdOptions::max_clock_lead`]).
    ///
    /// ```
    /// assert_eq!(monoflake::EtcdOptions::new().clock_lead().as_millis(), 250);
    /// ```
    pub fn clock_lead(&self) -> Duration {
        self.max_clock_lead
    }

    /// How far apart the clocks of the cluster's members may be ([`DEFAULT_MAX_MEMBER_SKEW`]
    /// by default). A holder's check and a later claim may read etcd's clock from different
    /// members; a claimant that finds no record adds this to where it starts. Keep the
    /// members' clocks in step (NTP): beyond it, a holder's last IDs before its records were
    /// deleted can be issued again.
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = monoflake::EtcdOptions::new().max_member_skew(Duration::from_millis(100));
    /// assert_eq!(options.member_skew(), Duration::from_millis(100));
    /// ```
    pub fn max_member_skew(mut self, skew: Duration) -> Self {
        self.max_member_skew = skew;
        self
    }

    /// How far apart the members' clocks may be ([`EtcdOptions::max_member_skew`]).
    ///
    /// ```
    /// assert_eq!(monoflake::EtcdOptions::new().member_skew().as_secs(), 1);
    /// ```
    pub fn member_skew(&self) -> Duration {
        self.max_member_skew
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
