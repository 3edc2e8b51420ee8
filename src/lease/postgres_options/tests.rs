//! Unit tests of the module above: what each setting and parse gives, exactly.

use super::*;

const T: Duration = Duration::from_secs(2);

/// `PgFailover` reads what it writes, takes `auto` for `automatic`, and refuses anything
/// else as an invalid `failover` setting.
#[test]
fn failover_modes_read_what_they_write() {
    for mode in [PgFailover::Automatic, PgFailover::Manual] {
        assert_eq!(mode.to_string().parse::<PgFailover>().unwrap(), mode);
    }
    assert_eq!(PgFailover::Automatic.to_string(), "automatic");
    assert_eq!(PgFailover::Manual.to_string(), "manual");
    assert_eq!("auto".parse::<PgFailover>().unwrap(), PgFailover::Automatic);
    for bad in ["", "Manual", "sometimes"] {
        match bad.parse::<PgFailover>() {
            Err(crate::Error::InvalidConfig {
                setting: "failover",
                value,
                allowed,
            }) => {
                assert_eq!(value, format!("{bad:?}"));
                assert_eq!(allowed, "automatic or manual");
            }
            other => panic!("{bad:?}: {other:?}"),
        }
    }
}

/// A table name's parts are PostgreSQL identifiers of at most 63 bytes (its `NAMEDATALEN - 1`;
/// a longer one would be cut, naming another table): 63 is taken, 64 refused, in either part.
#[test]
fn a_table_names_parts_are_at_most_63_bytes() {
    let (longest, too_long) = ("a".repeat(63), "a".repeat(64));
    for name in [
        longest.clone(),
        format!("ids.{longest}"),
        format!("{longest}.nodes"),
    ] {
        assert!(PgOptions::new().table(&name).is_ok(), "{name}");
    }
    for name in [
        too_long.clone(),
        format!("ids.{too_long}"),
        format!("{too_long}.nodes"),
    ] {
        match PgOptions::new().table(&name) {
            Err(crate::Error::InvalidConfig {
                setting: "table",
                value,
                ..
            }) => assert_eq!(value, format!("{name:?}")),
            other => panic!("{name}: {other:?}"),
        }
    }
}

/// Each setter sets what its accessor (or field) shows, and nothing else.
#[test]
fn options_keep_what_they_are_given() {
    let d = PgOptions::new();
    assert_eq!(
        (
            d.table_name(),
            d.ttl,
            d.create_table,
            d.failover_mode(),
            d.clock_lead()
        ),
        (
            DEFAULT_PG_TABLE,
            DEFAULT_PG_LEASE_TTL,
            true,
            PgFailover::Automatic,
            Duration::from_millis(250)
        )
    );
    let o = PgOptions::new()
        .table("ids.nodes")
        .unwrap()
        .lease_ttl(Duration::from_secs(4))
        .create_table(false)
        .failover(PgFailover::Manual)
        .max_clock_lead(Duration::from_millis(40));
    assert_eq!(
        (
            o.table_name(),
            o.ttl,
            o.create_table,
            o.failover_mode(),
            o.clock_lead()
        ),
        (
            "ids.nodes",
            Duration::from_secs(4),
            false,
            PgFailover::Manual,
            Duration::from_millis(40)
        )
    );
}

/// A URL's query part, percent-decoded: escapes anywhere, `+` as a space, and refusals
/// of a short or non-hex escape and of bytes that are not UTF-8.
#[test]
fn a_query_part_is_percent_decoded() {
    assert_eq!(decode("ab%2Fcd+e%41%42f").unwrap(), "ab/cd eABf");
    assert_eq!(decode("x%C3%A9y").unwrap(), "x\u{e9}y");
    assert_eq!(decode("").unwrap(), "");
    for bad in ["ab%4", "ab%zz", "%", "a%2"] {
        assert_eq!(
            decode(bad).unwrap_err(),
            "the connection string has a bad %-escape (it is not shown here)",
            "{bad}"
        );
    }
    assert_eq!(
        decode("a%FFb").unwrap_err(),
        "the connection string is not UTF-8 once decoded (it is not shown here)"
    );
}

/// A read connection string shows where it goes and its TLS, never its password.
#[test]
fn a_connection_shows_where_it_goes_but_not_its_password() {
    let c = parse(
        "postgres://ids:s3cret@db.example:6432/ids?sslmode=verify-full&sslrootcert=/ca.pem",
        T,
    )
    .unwrap();
    assert_eq!(
        format!("{c:?}"),
        "Connection { where: \"db.example:6432/ids\", tls: VerifyFull { roots: \
         File(\"/ca.pem\"), identity: None }, .. }"
    );
}

/// What is wrong with a connection string is named when it is an option or its value,
/// never with the string itself; a client certificate or CA without TLS is refused.
#[test]
fn a_bad_connection_string_says_what_is_wrong() {
    let e = parse("host=127.0.0.1 nosuch=1 password=s3cret", T).unwrap_err();
    assert!(
        e.starts_with("the connection string cannot be read (unknown option")
            && !e.contains("s3cret"),
        "{e}"
    );
    let e = parse("host=127.0.0.1 port=notaport password=s3cret", T).unwrap_err();
    assert!(
        e.starts_with("the connection string cannot be read (invalid value for option")
            && !e.contains("s3cret"),
        "{e}"
    );
    for extra in ["sslrootcert=/ca.pem", "sslcert=/c.pem sslkey=/k.pem"] {
        let e = parse(&format!("host=127.0.0.1 sslmode=disable {extra}"), T).unwrap_err();
        assert_eq!(
            e,
            "sslrootcert, sslcert and sslkey need sslmode=verify-full"
        );
    }
}

#[test]
fn a_url_keeps_its_settings_and_gives_up_its_tls_ones() {
    let c = parse(
        "postgres://ids:s3cr%40t@db.example:6432/ids?sslmode=verify-full&sslrootcert=/ca.pem&application_name=x",
        T,
    )
    .unwrap();
    assert_eq!(
        c.tls,
        Tls::VerifyFull {
            roots: Roots::File("/ca.pem".into()),
            identity: None
        }
    );
    assert_eq!(c.config.get_password(), Some(&b"s3cr@t"[..]));
    assert_eq!(c.config.get_application_name(), Some("x"));
    assert_eq!(describe_target(&c.config), "db.example:6432/ids");
    let shown = format!("{c:?}");
    assert!(
        !shown.contains("s3cr") && !shown.contains("ids:"),
        "{shown}"
    );
}

#[test]
fn key_values_are_read_too_with_quotes_and_escapes() {
    let c = parse(
        "host=127.0.0.1 port=5433 user=ids password='a \\'b\\' c' dbname=x sslmode=disable",
        T,
    )
    .unwrap();
    assert_eq!(c.tls, Tls::Disable);
    assert_eq!(c.config.get_password(), Some(&b"a 'b' c"[..]));
    assert_eq!(describe_target(&c.config), "127.0.0.1:5433/x");
}

#[test]
fn plain_text_is_the_default_only_on_this_machine() {
    for local in [
        "postgres://u@127.0.0.1/db",
        "postgres://u@localhost:5433/db",
        "postgres://u@[::1]/db",
        "host=/run/postgresql user=u",
    ] {
        assert_eq!(parse(local, T).unwrap().tls, Tls::Disable, "{local}");
    }
    // An IPv6 address is bracketed in messages, so its port stays readable.
    let v6 = parse("postgres://u@[::1]:5433/db", T).unwrap();
    assert_eq!(describe_target(&v6.config), "[::1]:5433/db");
    let e = parse("postgres://u:pw@db.example/db", T).unwrap_err();
    assert!(e.contains("sslmode=verify-full"), "{e}");
}

#[test]
fn modes_that_check_nothing_are_refused_and_the_string_is_never_repeated() {
    for mode in ["prefer", "require", "verify-ca", "allow"] {
        let e = parse(&format!("postgres://u:hunter2@h/db?sslmode={mode}"), T).unwrap_err();
        assert!(e.contains("refused") && !e.contains("hunter2"), "{e}");
    }
    for bad in [
        "postgres://u:hunter2@h:notaport/db?sslmode=disable",
        "postgres://u:hunter2@h/db?sslmode=disable&bogus=hunter2",
        "user=u password=hunter2 =oops",
        "postgres://u:hunter2@h/db?sslmode=%zz",
    ] {
        let e = parse(bad, T).unwrap_err();
        assert!(!e.contains("hunter2"), "{bad}: {e}");
    }
    let e = parse("postgres://u@h/db?sslmode=verify-full&sslcert=/c.pem", T).unwrap_err();
    assert!(e.contains("go together"), "{e}");
}

#[test]
fn table_names_are_plain_identifiers() {
    for good in ["t", "monoflake_nodes", "ids.nodes_2"] {
        assert!(PgOptions::new().table(good).is_ok(), "{good}");
    }
    for bad in ["", "Nodes", "1t", "a.b.c", "a-b", "a\"b", &"x".repeat(64)] {
        assert!(PgOptions::new().table(bad).is_err(), "{bad}");
    }
}
