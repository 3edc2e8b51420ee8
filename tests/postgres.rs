//! The PostgreSQL store against real servers (Debian's `postgresql`, started on 127.0.0.1 by
//! each test or by `.ci/run`): TLS and its refusals, client certificates, secrets never shown,
//! claimants racing, an unusable row, a server restarted under a holder.
#![cfg(feature = "postgres")]

mod common;

use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use monoflake::{Error, Generator, Layout, NodeRequest, NodeStore, PgOptions, PgStore};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

/// A table of this test's own on a shared server.
fn table(tag: &str) -> PgOptions {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    PgOptions::new()
        .table(&format!("{tag}_{}_{nanos}", std::process::id()))
        .unwrap()
}

fn layout(node_bits: u32) -> Layout {
    Layout::builder()
        .name("pgtest")
        .epoch("2024-01-01")
        .node_field("n", node_bits)
        .build()
        .unwrap()
}

#[test]
fn claimants_racing_for_any_node_each_get_their_own_until_none_is_left() {
    let pg = common::Pg::shared();
    let options = table("race");
    let layout = layout(4); // 16 nodes
    // Some rows exist already (released), some nodes have none: both kinds are handed out.
    let store = PgStore::connect_with(&pg.url, &options).unwrap();
    for node in [1, 2, 5, 9] {
        let c = store.claim(&layout, NodeRequest::Exact(node)).unwrap();
        store.release(c, 0).unwrap();
    }
    // Connected first, so that every claimant reaches the barrier; then all claim at once.
    let stores: Vec<PgStore> = (0..16)
        .map(|_| PgStore::connect_with(&pg.url, &options).unwrap())
        .collect();
    let barrier = Barrier::new(16);
    let claims: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = stores
            .iter()
            .map(|store| {
                let barrier = &barrier;
                let layout = &layout;
                s.spawn(move || {
                    barrier.wait();
                    (store, store.claim(layout, NodeRequest::Any))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let claims: Vec<_> = claims
        .into_iter()
        .map(|(store, claim)| (store, claim.unwrap()))
        .collect();
    let mut nodes: Vec<u64> = claims.iter().map(|(_, c)| c.node()).collect();
    nodes.sort_unstable();
    assert_eq!(nodes, (0..16).collect::<Vec<_>>());
    assert!(matches!(
        store.claim(&layout, NodeRequest::Any),
        Err(Error::AllNodesHeld { count: 16, .. })
    ));
    for (s, c) in claims {
        s.release(c, 0).unwrap();
    }
}

#[test]
fn the_connection_string_is_never_shown() {
    let pg = common::Pg::shared();
    let wrong = pg
        .url
        .replacen("monoflake-test-secret", "wrong-hunter2-secret", 1);
    assert_ne!(wrong, pg.url);
    let e = PgStore::connect(&wrong).unwrap_err();
    for shown in [e.to_string(), format!("{e:?}")] {
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("authentication failed"), "{shown}");
    }
    let store = PgStore::connect_with(&pg.url, &table("shown")).unwrap();
    for shown in [format!("{store:?}"), store.describe()] {
        assert!(
            !shown.contains("monoflake-test-secret") && !shown.contains("monoflake:"),
            "{shown}"
        );
        assert!(shown.contains("127.0.0.1"), "{shown}");
    }
}

#[test]
fn a_missing_table_is_created_or_reported() {
    let pg = common::Pg::shared();
    let options = table("missing").create_table(false);
    let e = PgStore::connect_with(&pg.url, &options).unwrap_err();
    assert!(
        matches!(e, Error::Store { .. }) && e.to_string().contains("does not exist"),
        "{e}"
    );
    assert_eq!(
        pg.psql(&format!(
            "SELECT to_regclass('{}') IS NULL",
            options.table_name()
        )),
        "t",
        "a store that may not create its table made it"
    );
    // An operator creates it with the SQL the store would have run.
    pg.psql(&PgStore::schema_sql(&options));
    let store = PgStore::connect_with(&pg.url, &options).unwrap();
    let c = store.claim(&layout(2), NodeRequest::Any).unwrap();
    store.release(c, 0).unwrap();
}

#[test]
fn the_schema_in_the_operations_guide_is_the_one_created() {
    let guide =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operations.md"))
            .unwrap();
    let sql = PgStore::schema_sql(&PgOptions::new());
    assert!(guide.contains(&sql), "docs/operations.md must show:\n{sql}");
}

/// A row whose reservation is negative (only possible once the table's checks are dropped)
/// is refused by number and skipped, counted and named by a claim of any node.
#[test]
fn an_unusable_row_is_skipped_by_any_and_refused_by_number() {
    let pg = common::Pg::shared();
    let options = table("unusable");
    let store = PgStore::connect_with(&pg.url, &options).unwrap();
    let layout = layout(1); // nodes 0 and 1
    let c = store.claim(&layout, NodeRequest::Exact(1)).unwrap();
    store.release(c, 5).unwrap();
    let t = options.table_name();
    pg.psql(&format!(
        "ALTER TABLE {t} DROP CONSTRAINT {t}_reserved_until_ms_check; \
         UPDATE {t} SET reserved_until_ms = -5 WHERE node = 1"
    ));
    let e = store.claim(&layout, NodeRequest::Exact(1)).unwrap_err();
    assert!(matches!(e, Error::DamagedReservation { .. }), "{e:?}");
    let first = store.claim(&layout, NodeRequest::Any).unwrap();
    assert_eq!((first.node(), first.unusable()), (0, 1));
    match store.claim(&layout, NodeRequest::Any) {
        Err(Error::AllNodesHeld {
            count: 2,
            unusable: 1,
            unusable_reasons,
            ..
        }) => assert_eq!(unusable_reasons, ["node 1: its reservation is negative"]),
        other => panic!("{other:?}"),
    }
    store.release(first, 0).unwrap();
}

/// The server stops under a holder and comes back: while it is away renewals fail as an
/// unreachable store (not a lost lease) and the generator stops within its confirm bound;
/// once it is back the store connects again and the holder goes on, on the same claim.
#[test]
fn a_restarted_server_is_ridden_through_by_a_holder() {
    let mut pg = common::Pg::start();
    let store: Arc<dyn NodeStore> = Arc::new(
        PgStore::connect_with(
            &pg.url,
            &PgOptions::new().lease_ttl(Duration::from_secs(30)),
        )
        .unwrap(),
    );
    let layout = layout(3);
    let g = Generator::builder(layout.clone())
        .build_leased(Arc::clone(&store), NodeRequest::Any)
        .unwrap();
    let before = g.next_id().unwrap();
    pg.stop();
    let stopped = Instant::now();
    // Stops within its confirm bound (2 x 500 ms); a liveness bound here.
    let refusal = loop {
        match g.try_next_id() {
            Ok(id) => assert!(id > before),
            Err(Error::WouldBlock { .. }) => {}
            Err(e) => break e,
        }
        assert!(stopped.elapsed() < Duration::from_secs(30), "never stopped");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(
        matches!(refusal, Error::ReservationUnavailable { .. }),
        "{refusal:?}"
    );
    pg.resume();
    let resumed = Instant::now();
    let after = loop {
        match g.next_id() {
            Ok(id) => break id,
            Err(_) => {
                assert!(resumed.elapsed() < Duration::from_secs(30), "never resumed");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    assert!(after > before);
    assert_eq!(g.stats().lease_losses, 0);
    g.release().unwrap();
}

/// A CA, and certificates it signs.
fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

fn signed(ca: &CertifiedIssuer<'static, KeyPair>, names: &[&str], cn: &str) -> (String, String) {
    let mut params =
        CertificateParams::new(names.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>()).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, ca).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// `sslmode=verify-full`: the server's certificate must chain to `sslrootcert` and name the
/// host; a client certificate logs in where pg_hba.conf asks for one; plain text and the
/// modes that check nothing are refused.
#[test]
fn tls_verify_full_with_passwords_and_client_certificates() {
    let dir = common::TempDir::new("pg-tls");
    let authority = ca("monoflake test CA");
    let stranger = ca("someone else's CA");
    let (server_cert, server_key) = signed(&authority, &["localhost"], "localhost");
    let (client_cert, client_key) = signed(&authority, &[], "certuser");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let ca_file = write("ca.pem", &authority.pem());
    let stranger_file = write("stranger.pem", &stranger.pem());
    let cert_file = write("client.pem", &client_cert);
    let key_file = write("client.key", &client_key);
    let ca_pem = authority.pem();
    let pg = common::Pg::start_with(
        &[
            "ssl=on",
            "ssl_cert_file=server.crt",
            "ssl_key_file=server.key",
            "ssl_ca_file=ca.crt",
        ],
        |data| {
            for (name, text) in [
                ("server.crt", server_cert.as_str()),
                ("server.key", server_key.as_str()),
                ("ca.crt", ca_pem.as_str()),
            ] {
                std::fs::write(data.join(name), text).unwrap();
                common::pg_server_file(&data.join(name));
            }
            std::fs::write(
                data.join("pg_hba.conf"),
                "local all all trust\n\
                 hostssl all certuser 127.0.0.1/32 cert\n\
                 hostssl all monoflake 127.0.0.1/32 scram-sha-256\n",
            )
            .unwrap();
        },
    );
    pg.psql("CREATE ROLE certuser LOGIN; GRANT CREATE ON SCHEMA public TO certuser");
    let port = pg.port;
    let password = "monoflake-test-secret";
    let verified = |user: &str, host: &str, extra: &str| {
        format!(
            "postgres://{user}@{host}:{port}/postgres?sslmode=verify-full&sslrootcert={}{extra}",
            ca_file.display()
        )
    };
    let works = |url: &str| {
        let store = PgStore::connect_with(url, &table("tls")).unwrap_or_else(|e| panic!("{e}"));
        let c = store.claim(&layout(2), NodeRequest::Any).unwrap();
        store.extend(&c, 1_900_000_000_000).unwrap();
        store.renew(&c).unwrap();
        store.release(c, 1_900_000_000_000).unwrap();
    };
    let refused = |url: &str, why: &str| {
        let e = PgStore::connect_with(url, &table("tls")).unwrap_err();
        let shown = format!("{e} {e:?}");
        assert!(matches!(e, Error::Store { .. }), "{shown}");
        assert!(!shown.contains(password), "{shown}");
        assert!(shown.contains(why), "expected {why:?} in {shown}");
    };
    // A password over verified TLS, and a client certificate.
    works(&verified(&format!("monoflake:{password}"), "localhost", ""));
    works(&verified(
        "certuser",
        "localhost",
        &format!(
            "&sslcert={}&sslkey={}",
            cert_file.display(),
            key_file.display()
        ),
    ));
    // The certificate names localhost, not 127.0.0.1.
    refused(
        &verified(&format!("monoflake:{password}"), "127.0.0.1", ""),
        "TLS",
    );
    // Signed by a CA we do not trust.
    refused(
        &format!(
            "postgres://monoflake:{password}@localhost:{port}/postgres?sslmode=verify-full&sslrootcert={}",
            stranger_file.display()
        ),
        "TLS",
    );
    // No client certificate where pg_hba.conf asks for one.
    refused(&verified("certuser", "localhost", ""), "certificate");
    // Plain text: the server accepts only TLS.
    refused(
        &format!("postgres://monoflake:{password}@127.0.0.1:{port}/postgres?sslmode=disable"),
        "pg_hba.conf",
    );
    // Modes that would not check the server are refused before connecting.
    refused(
        &format!("postgres://monoflake:{password}@localhost:{port}/postgres?sslmode=require"),
        "refused",
    );
}

/// The validity a renewal returns, counted from the start of the call, ends before the
/// database's expiry of the lease: the holder stops before the database could hand the node
/// to anyone else.
#[test]
fn a_renewal_s_validity_ends_before_the_database_s_expiry() {
    let pg = common::Pg::shared();
    let options = table("validity").lease_ttl(Duration::from_secs(4));
    let store = PgStore::connect_with(&pg.url, &options).unwrap();
    let claim = store.claim(&layout(2), NodeRequest::Any).unwrap();
    for _ in 0..5 {
        let start = Instant::now();
        let valid = store.renew(&claim).unwrap().expect("a lease that expires");
        // What the database has left, asked after the renewal: its expiry lies at or after
        // `asked + left_ms` on the monotonic clock's scale.
        let left_ms: f64 = pg
            .psql(&format!(
                "SELECT extract(epoch FROM lease_expires_at - clock_timestamp()) * 1000 \
                 FROM {} WHERE node = {}",
                options.table_name(),
                claim.node()
            ))
            .parse()
            .unwrap();
        let answered = start.elapsed();
        let expiry = answered + Duration::from_secs_f64(left_ms.max(0.0) / 1000.0);
        assert!(
            valid < expiry,
            "the holder's deadline {valid:?} after the renewal's start is past the database's \
             expiry {expiry:?}"
        );
        assert!(valid > Duration::from_secs(3), "{valid:?} of a 4 s lease");
    }
    store.release(claim, 0).unwrap();
}

/// `url` with `options=-c NAME=VALUE` for each setting (libpq's `options`): what a session
/// starts with before the store's own settings.
fn with_settings(url: &str, settings: &[(&str, &str)]) -> String {
    let options: Vec<String> = settings
        .iter()
        .map(|(k, v)| format!("-c%20{k}%3D{}", v.replace(',', "%2C")))
        .collect();
    format!("{url}?options={}", options.join("%20"))
}

/// Issue 34, case 6: `local` and `remote_write` acknowledge a commit that a promoted
/// synchronous standby does not have. Whether the server, the database, the role or the
/// connection string sets them, the store's session runs with `on`.
#[test]
fn synchronous_commit_below_on_is_raised_wherever_it_was_set() {
    let pg = common::Pg::start_with(&["synchronous_commit=local"], |_| {});
    let options = table("synccommit");
    let level = |url: &str| {
        let store = PgStore::connect_with(url, &options).unwrap();
        store.session_setting("synchronous_commit").unwrap()
    };
    assert_eq!(level(&pg.url), "on", "set on the server");
    pg.psql("ALTER DATABASE postgres SET synchronous_commit = remote_write");
    assert_eq!(level(&pg.url), "on", "set on the database");
    pg.psql("ALTER ROLE monoflake SET synchronous_commit = local");
    assert_eq!(level(&pg.url), "on", "set on the role");
    for weak in ["off", "local", "remote_write"] {
        let url = with_settings(&pg.url, &[("synchronous_commit", weak)]);
        assert_eq!(level(&url), "on", "set in the connection string: {weak}");
    }
    // A stronger level is kept.
    let url = with_settings(&pg.url, &[("synchronous_commit", "remote_apply")]);
    assert_eq!(level(&url), "remote_apply");
}

/// Issue 34, case 8: the table is found once, through the search path, and every statement
/// names its schema; a session whose search path leads elsewhere uses the same table, and a
/// name that two schemas hold is refused unless the schema is named.
#[test]
fn stores_with_different_search_paths_share_one_table() {
    let pg = common::Pg::shared();
    let options = table("searchpath");
    let name = options.table_name().to_owned();
    let other = format!("{name}_s");
    pg.psql(&format!("CREATE SCHEMA {other}"));
    let layout = layout(2);
    let first = PgStore::connect_with(&pg.url, &options).unwrap();
    assert!(
        first.describe().contains(&format!("table public.{name}")),
        "{}",
        first.describe()
    );
    assert_eq!(first.session_setting("search_path").unwrap(), "\"\"");
    let held = first.claim(&layout, NodeRequest::Exact(0)).unwrap();

    // A search path with an empty schema of its own first: the table in public is found.
    let elsewhere = with_settings(&pg.url, &[("search_path", &format!("{other},public"))]);
    let second = PgStore::connect_with(&elsewhere, &options).unwrap();
    assert!(
        second.describe().contains(&format!("table public.{name}")),
        "{}",
        second.describe()
    );
    assert!(matches!(
        second.claim(&layout, NodeRequest::Exact(0)),
        Err(Error::NodeHeld { node: 0, .. })
    ));

    // A table of the same name in that schema too: which one is meant is not guessed...
    pg.psql(&PgStore::schema_sql(
        &PgOptions::new().table(&format!("{other}.{name}")).unwrap(),
    ));
    let e = PgStore::connect_with(&elsewhere, &options).unwrap_err();
    assert!(e.to_string().contains("--pg-table"), "{e}");
    // ... and a schema named is the one used, whatever the search path says.
    let named = PgOptions::new().table(&format!("public.{name}")).unwrap();
    let third = PgStore::connect_with(&elsewhere, &named).unwrap();
    assert!(matches!(
        third.claim(&layout, NodeRequest::Exact(0)),
        Err(Error::NodeHeld { node: 0, .. })
    ));
    // The holder's session, reconnected, still writes where it claimed.
    first.extend(&held, 1).unwrap();
    first.release(held, 0).unwrap();
    pg.psql(&format!(
        "DROP SCHEMA {other} CASCADE; DROP TABLE public.{name}"
    ));
}

/// A guarded write that matches no row says why, from what the row holds now: each way an
/// operator or another claimant can change a held row, and the reason the holder is given.
#[test]
fn a_lost_claim_says_how_it_was_lost() {
    let pg = common::Pg::shared();
    let options = table("lostwhy");
    let t = options.table_name();
    let store = PgStore::connect_with(&pg.url, &options).unwrap();
    let layout = layout(3);
    let fence = |node: u64| -> i64 {
        pg.psql(&format!("SELECT fence FROM {t} WHERE node = {node}"))
            .parse()
            .unwrap()
    };
    // How the reason ends, from the row's fencing counter before the change.
    type Reason = fn(i64) -> String;
    // (what is done to the held row, how the reason ends)
    let cases: [(&str, Reason); 6] = [
        (
            "UPDATE {t} SET lease_expires_at = clock_timestamp() - interval '1 second'",
            |_| "its lease expired in the database (no renewal within the TTL)".into(),
        ),
        (
            "UPDATE {t} SET claimant = NULL, lease_expires_at = NULL",
            |_| " was released".into(),
        ),
        (
            "UPDATE {t} SET claimant = 'another', fence = fence + 1",
            |f| format!(" was taken over (fencing counter {}, ours {f})", f + 1),
        ),
        (
            // The same claimant token, a higher counter: not this claim either.
            "UPDATE {t} SET fence = fence + 1",
            |f| format!(" was taken over (fencing counter {}, ours {f})", f + 1),
        ),
        ("UPDATE {t} SET claimant = 'another'", |f| {
            format!(
                " was deleted, and the node claimed again since (fencing counter {f}, ours {f})"
            )
        }),
        ("DELETE FROM {t}", |_| " was deleted".into()),
    ];
    for (node, (change, reason_ends)) in cases.iter().enumerate() {
        let node = node as u64;
        let claim = store.claim(&layout, NodeRequest::Exact(node)).unwrap();
        store.extend(&claim, 1).unwrap();
        let f = fence(node);
        pg.psql(&format!("{} WHERE node = {node}", change.replace("{t}", t)));
        match store.extend(&claim, 2) {
            Err(Error::LeaseLost {
                node: lost, reason, ..
            }) => {
                assert_eq!(lost, node);
                let want = reason_ends(f);
                assert!(
                    reason.ends_with(&want)
                        && (!want.starts_with(' ') || reason.starts_with("its row in ")),
                    "{change}: {reason:?}, not ending {want:?}"
                );
            }
            other => panic!("{change}: {other:?}"),
        }
    }
}

/// A store told not to make its table (`create_table(false)`) does not make it again when it
/// is dropped after the store connected: its claim fails, naming the missing table, and the
/// table stays gone.
#[test]
fn a_table_dropped_is_not_made_again_by_a_store_that_may_not_create_it() {
    let pg = common::Pg::shared();
    let options = table("nocreate");
    let t = options.table_name().to_owned();
    drop(PgStore::connect_with(&pg.url, &options).unwrap()); // makes the table
    let store = PgStore::connect_with(&pg.url, &options.clone().create_table(false)).unwrap();
    let layout = layout(1);
    let claim = store.claim(&layout, NodeRequest::Exact(0)).unwrap();
    store.release(claim, 0).unwrap();
    pg.psql(&format!("DROP TABLE {t}"));
    for request in [NodeRequest::Exact(1), NodeRequest::Any] {
        match store.claim(&layout, request) {
            Err(e @ Error::Store { .. }) => {
                assert!(e.to_string().contains("does not exist"), "{e}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            pg.psql(&format!("SELECT to_regclass('{t}') IS NULL")),
            "t",
            "the table was made again"
        );
    }
}

/// A reservation of 0 is a reservation, not damage; a claim that renews without having
/// written one leaves the row's reservation empty (it writes back only what the database
/// acknowledged to it).
#[test]
fn a_row_holds_only_the_reservations_its_holders_wrote() {
    let pg = common::Pg::shared();
    let options = table("zero");
    let t = options.table_name();
    let store = PgStore::connect_with(&pg.url, &options).unwrap();
    let layout = layout(1);
    let claim = store.claim(&layout, NodeRequest::Exact(1)).unwrap();
    assert!(store.renew(&claim).unwrap().is_some());
    assert_eq!(
        pg.psql(&format!(
            "SELECT reserved_until_ms IS NULL FROM {t} WHERE node = 1"
        )),
        "t",
        "a renewal wrote a reservation nobody made"
    );
    store.release(claim, 0).unwrap();
    pg.psql(&format!(
        "UPDATE {t} SET reserved_until_ms = 0 WHERE node = 1"
    ));
    let claim = store
        .claim(&layout, NodeRequest::Exact(1))
        .unwrap_or_else(|e| panic!("a reservation of 0 refused: {e}"));
    assert_eq!(claim.node(), 1);
    store.release(claim, 0).unwrap();
}

/// A store checks its claim every half second, or every third of a TTL shorter than 1.5 s
/// (a TTL is at least a second).
#[test]
fn a_pg_store_checks_every_third_of_a_short_ttl() {
    let pg = common::Pg::shared();
    let short = table("interval").lease_ttl(Duration::from_millis(1_200));
    let store = PgStore::connect_with(&pg.url, &short).unwrap();
    assert_eq!(store.check_interval(), Duration::from_millis(400));
    let shortest = table("interval").lease_ttl(Duration::from_millis(300));
    let store = PgStore::connect_with(&pg.url, &shortest).unwrap();
    assert_eq!(store.check_interval(), Duration::from_secs(1) / 3);
    let store = PgStore::connect_with(&pg.url, &table("interval")).unwrap();
    assert_eq!(store.check_interval(), Duration::from_millis(500));
}

/// A holder that lost its claim to a dropped table writes back what it used (`restore`):
/// into the table made again when the store may create it, and not otherwise.
#[test]
fn a_restore_into_a_dropped_table_makes_it_again_only_when_allowed() {
    let pg = common::Pg::shared();
    let layout = layout(1);
    for create in [true, false] {
        let options = table("restoredrop");
        let t = options.table_name().to_owned();
        drop(PgStore::connect_with(&pg.url, &options).unwrap()); // makes the table
        let store = PgStore::connect_with(&pg.url, &options.create_table(create)).unwrap();
        let claim = store.claim(&layout, NodeRequest::Exact(1)).unwrap();
        // Unix ms, as the keeper writes them (values below the layout's epoch store as 0).
        let now = common::system_ms();
        store.extend(&claim, now).unwrap();
        pg.psql(&format!("DROP TABLE {t}"));
        let restored = store.restore(&claim, now + 1_000);
        let row = format!("SELECT count(*) FROM pg_catalog.pg_class WHERE relname = '{t}'");
        if create {
            restored.unwrap();
            assert_eq!(pg.psql(&row), "1");
            assert_eq!(
                pg.psql(&format!(
                    "SELECT node, claimant IS NULL, reserved_until_ms > 0 FROM {t}"
                )),
                "1|t|t"
            );
        } else {
            assert!(matches!(restored, Err(Error::Store { .. })), "{restored:?}");
            assert_eq!(pg.psql(&row), "0", "the table was made again");
        }
    }
}

/// A table dropped under a holder and made again by a successor: the holder's loss says the
/// table was dropped, not that its row was taken over.
#[test]
fn a_table_dropped_under_a_holder_is_named_in_its_loss() {
    let pg = common::Pg::shared();
    let options = table("droppedloss");
    let layout = layout(2);
    let holder = PgStore::connect_with(&pg.url, &options).unwrap();
    let claim = holder.claim(&layout, NodeRequest::Exact(1)).unwrap();
    pg.psql(&format!("DROP TABLE {}", options.table_name()));
    let successor = PgStore::connect_with(&pg.url, &options).unwrap();
    let taken = successor.claim(&layout, NodeRequest::Exact(1)).unwrap();
    match holder.extend(&claim, 1) {
        Err(Error::LeaseLost {
            node: 1, reason, ..
        }) => {
            assert!(reason.contains("was dropped"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    successor.release(taken, 0).unwrap();
}

/// Issue 34, case 4, the holder's side: a holder whose clock runs further ahead of the
/// database's `clock_timestamp()` than `PgOptions::max_clock_lead` (250 ms) issues nothing
/// there. One 3 s ahead at its build loses the claim at its first check, before its first
/// ID, the lead named. One whose clock steps 3 s ahead while it runs is refused at once (its
/// clock is past the deadline of its last confirmed check), and loses the claim at its next
/// check: sealed, what it used written back, so the node's next holder starts above it.
#[test]
fn a_holder_further_ahead_of_the_database_than_allowed_issues_nothing_there() {
    let pg = common::Pg::shared();
    let store = Arc::new(PgStore::connect_with(&pg.url, &table("lead")).unwrap());
    let layout = layout(2);
    let named = |reason: &str| {
        reason.contains("ahead of the database's clock_timestamp()")
            && reason.contains("PgOptions::max_clock_lead")
    };
    common::a_holder_ahead_of_the_store_clock_issues_nothing(store, &layout, named);
}

/// Issue 60: a holder whose wall clock is stepped 2 s, a minute and an hour past the real
/// time, then back, under load, keeps its claim throughout: its clock follows the wall clock
/// only as far as the database's clock confirms (the ceiling its renewals set), so no renewal
/// refuses it. No refusal at all, IDs in every phase, never more than the lead and `max_lead`
/// ahead of the real time; the successor, after the release, above every one of them.
#[test]
fn a_wall_clock_stepped_forward_costs_the_holder_nothing() {
    let pg = common::Pg::shared();
    let store = Arc::new(PgStore::connect_with(&pg.url, &table("ride")).unwrap());
    let layout = layout(2);
    let ride = common::ride::ride(store, &layout, 1, Duration::from_secs(3), false);
    common::ride::judge_capped(&ride);
}

/// Issue 60: a fresh claim while the wall clock is an hour ahead is refused at its first
/// renewal, naming both clocks' readings; claimed again once the wall clock is right (with a
/// fresh clock, as `monoflake serve` and Python's default do), it starts.
#[test]
fn a_fresh_claim_an_hour_ahead_is_refused_naming_both_clocks_then_starts() {
    let pg = common::Pg::shared();
    let store = Arc::new(PgStore::connect_with(&pg.url, &table("fresh")).unwrap());
    let layout = layout(2);
    let named = |reason: &str| {
        reason.contains("ahead of the database's clock_timestamp()")
            && reason.contains("this clock read ")
            && reason.contains("the database's 20")
    };
    let (refused, took) =
        common::ride::fresh_claims_until_the_clock_is_right(store, &layout, 1, named);
    eprintln!("refused {refused} times; the first ID {took} ms after the correction");
}

/// Issue 34, case 4, the successor's side: a claimant whose clock is 3 s behind the
/// database's, on a node with no row (deleted under a holder that may be stopped, or never
/// written), starts above the database's clock at its claim plus two check intervals and the
/// most a confirmed holder may lead (`handover::store_floor_ms`): above everything a holder
/// that the database confirmed before the claim can have issued, whatever the claimant's
/// clock says. (Its own clock would have started it 1.75 s below that.)
#[test]
fn a_claimant_behind_the_database_that_finds_no_row_starts_above_its_clock() {
    let pg = common::Pg::shared();
    let options = table("behind");
    let store = Arc::new(PgStore::connect_with(&pg.url, &options).unwrap());
    let layout = layout(2);
    // A row held, then deleted: the node has no record.
    let held = store.claim(&layout, NodeRequest::Exact(1)).unwrap();
    store.extend(&held, common::system_ms() + 500).unwrap();
    pg.psql(&format!("DELETE FROM {}", options.table_name()));
    let before_claim = common::system_ms();
    let first = common::first_ms_of_a_successor_behind(Arc::clone(&store) as _, &layout);
    let check_ms = u64::try_from(store.check_interval().as_millis()).unwrap();
    let floor = monoflake::handover::store_floor_ms(
        before_claim,
        check_ms,
        monoflake::handover::DEFAULT_MAX_CLOCK_LEAD_MS,
        0,
    );
    assert!(
        floor.is_some_and(|floor| first >= floor),
        "first ID at {first} ms, the database's floor {floor:?}"
    );
}

/// A TCP proxy on 127.0.0.1 in front of a server, which can hold what the server sends on a
/// new connection for a while, and stop forwarding on the connections open at a moment. Its
/// threads end with the test process.
struct Proxy {
    address: String,
    /// Connections numbered below this forward nothing more from the server.
    stalled: Arc<std::sync::atomic::AtomicUsize>,
    opened: Arc<std::sync::atomic::AtomicUsize>,
}

impl Proxy {
    /// In front of the server of `url` (`postgres://user:password@host:port/db`), holding
    /// everything the server sends on a connection until `delay` after the connection opened.
    fn start(url: &str, delay: Duration) -> Proxy {
        use std::io::{Read, Write};
        use std::net::{TcpListener, TcpStream};
        use std::sync::atomic::{AtomicUsize, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let proxy = Proxy {
            address: listener.local_addr().unwrap().to_string(),
            stalled: Arc::new(AtomicUsize::new(0)),
            opened: Arc::new(AtomicUsize::new(0)),
        };
        let (stalled, opened) = (Arc::clone(&proxy.stalled), Arc::clone(&proxy.opened));
        let upstream = url
            .split_once('@')
            .unwrap()
            .1
            .split_once('/')
            .unwrap()
            .0
            .to_owned();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let number = opened.fetch_add(1, Ordering::SeqCst);
                let held_until = Instant::now() + delay;
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let pump = |mut from: TcpStream, mut to: TcpStream, from_server: bool| {
                    let stalled = Arc::clone(&stalled);
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 8192];
                        while let Ok(n @ 1..) = from.read(&mut buf) {
                            if from_server {
                                std::thread::sleep(
                                    held_until.saturating_duration_since(Instant::now()),
                                );
                                if number < stalled.load(Ordering::SeqCst) {
                                    return; // the sockets stay open: the other pump has them
                                }
                            }
                            if to.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                };
                pump(
                    client.try_clone().unwrap(),
                    server.try_clone().unwrap(),
                    false,
                );
                pump(server, client, true);
            }
        });
        proxy
    }

    /// `url` with its `host:port` replaced by the proxy's.
    fn through(&self, url: &str) -> String {
        let (head, rest) = url.split_once('@').unwrap();
        let (_, tail) = rest.split_once('/').unwrap();
        format!("{head}@{}/{tail}", self.address)
    }

    /// From now on the connections open so far forward nothing more from the server.
    fn stall_open_connections(&self) {
        use std::sync::atomic::Ordering;
        self.stalled
            .store(self.opened.load(Ordering::SeqCst), Ordering::SeqCst);
    }
}

/// A server slow to answer a new connection (4 s, more than the 2 s request timeout, less
/// than the 5 s a connection gets on top of it) is reached, by the table's look-up at
/// connect and by the session a claim opens.
#[test]
fn a_server_slow_to_answer_a_new_connection_is_reached() {
    let pg = common::Pg::shared();
    let proxy = Proxy::start(&pg.url, Duration::from_secs(4));
    let options = table("slow");
    let store = PgStore::connect_with(&proxy.through(&pg.url), &options)
        .unwrap_or_else(|e| panic!("a slow server was not reached: {e}"));
    let claim = store
        .claim(&layout(1), NodeRequest::Exact(1))
        .unwrap_or_else(|e| panic!("a slow server was not reached: {e}"));
    assert_eq!(claim.node(), 1);
    store.release(claim, 0).unwrap();
}

/// A session the server ended (`pg_terminate_backend`) is found closed at the next request,
/// which is made again on a new connection: the renewal succeeds, on the same claim.
#[test]
fn a_session_the_server_ended_is_replaced_within_the_request() {
    let pg = common::Pg::shared();
    let name = format!("monoflake_retry_{}", std::process::id());
    let sep = if pg.url.contains('?') { '&' } else { '?' };
    let url = format!("{}{sep}application_name={name}", pg.url);
    let options = table("retry");
    let store = PgStore::connect_with(&url, &options).unwrap();
    let claim = store.claim(&layout(1), NodeRequest::Exact(0)).unwrap();
    for _ in 0..2 {
        assert_eq!(
            pg.psql(&format!(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) \
                 FROM pg_stat_activity WHERE application_name = '{name}'"
            )),
            "1",
            "the store's session was not found"
        );
        assert!(
            store
                .renew(&claim)
                .unwrap_or_else(|e| panic!("the request was not made again: {e}"))
                .is_some()
        );
    }
    store.release(claim, 0).unwrap();
}

/// A session that stopped answering (a connection that forwards nothing more) fails its
/// request at the timeout and is dropped: the next request opens a new one and succeeds.
#[test]
fn a_session_that_stopped_answering_is_replaced_at_the_next_request() {
    let pg = common::Pg::shared();
    let proxy = Proxy::start(&pg.url, Duration::ZERO);
    let store = PgStore::connect_with(&proxy.through(&pg.url), &table("stall")).unwrap();
    let claim = store.claim(&layout(1), NodeRequest::Exact(0)).unwrap();
    proxy.stall_open_connections();
    match store.renew(&claim) {
        Err(e @ Error::Store { .. }) => {
            assert!(e.to_string().contains("no answer within 2000 ms"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    assert!(
        store
            .renew(&claim)
            .unwrap_or_else(|e| panic!("the silent session was used again: {e}"))
            .is_some()
    );
    store.release(claim, 0).unwrap();
}
