//! When a PostgreSQL server's acknowledgement is worth having: the session's
//! `synchronous_commit`, and the standbys a failover could promote. Pure decisions, no I/O:
//! the store reads the server's answers and passes them in.

use super::super::postgres_options::PgFailover;

/// The `synchronous_commit` levels at which a commit is acknowledged only once it is durable
/// on the primary and on every synchronous standby (`on`), or applied there too
/// (`remote_apply`). `off`, `local` and `remote_write` acknowledge a commit that a crash, or a
/// synchronous standby promoted in its place, can lose.
pub(super) fn durable_commit(level: &str) -> bool {
    #[cfg(monoflake_mutant_sync_commit_local)]
    if level == "local" {
        return true;
    }
    matches!(level, "on" | "remote_apply")
}

/// The levels a session raises to `on`, as an SQL list: every level but the durable ones.
pub(super) const RAISED_LEVELS: &str = if cfg!(monoflake_mutant_sync_commit_local) {
    "'off', 'remote_write'"
} else {
    "'off', 'local', 'remote_write'"
};

/// One row of the primary's `pg_stat_replication`, as a plain role sees it: without
/// `pg_monitor` (or `pg_read_all_stats`) every column but the pid is null.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Standby {
    /// `application_name`, when visible.
    pub(super) name: Option<String>,
    /// `sync_state` (`sync`, `quorum`, `potential`, `async`), when visible.
    pub(super) sync_state: Option<String>,
}

/// Whether a claim may go ahead on this server, and if not why: `None` to go ahead, or the
/// reason to refuse.
///
/// * A server in recovery (a standby) is refused: whatever it says can be overtaken by its
///   primary.
/// * A standby that is not synchronous (`async`, `potential`), or whose state this role cannot
///   see, can be promoted without the last acknowledged reservations and leases: refused
///   unless the operator says failover is manual ([`PgFailover::Manual`]: a standby is promoted
///   by hand, only once the old primary is fenced and every holder stopped).
pub(super) fn refusal(
    in_recovery: bool,
    standbys: &[Standby],
    failover: PgFailover,
) -> Option<String> {
    if in_recovery {
        return Some(
            "the server is a standby (pg_is_in_recovery() is true): connect to the primary".into(),
        );
    }
    if failover == PgFailover::Manual {
        return None;
    }
    let mut unsafe_ones = Vec::new();
    let mut unseen = 0;
    for s in standbys {
        match s.sync_state.as_deref() {
            Some("sync" | "quorum") => {}
            Some(state) => unsafe_ones.push(format!(
                "{} ({state})",
                s.name
                    .as_deref()
                    .filter(|n| !n.is_empty())
                    .unwrap_or("unnamed")
            )),
            None => unseen += 1,
        }
    }
    if unsafe_ones.is_empty() && unseen == 0 {
        return None;
    }
    let mut named = unsafe_ones.join(", ");
    if unseen > 0 {
        if !named.is_empty() {
            named.push_str(", and ");
        }
        named.push_str(&format!(
            "{unseen} whose state this role cannot see (grant it pg_monitor to let it look)"
        ));
    }
    Some(format!(
        "the server streams to standbys that are not synchronous: {named}. A standby promoted \
         while it lags loses the last leases and reservations, and a successor then issues IDs \
         a live holder issued. Make every standby synchronous (synchronous_standby_names), or, \
         if standbys are promoted only by hand once the old primary is fenced, say so with \
         failover=manual (PgOptions::failover, --pg-failover manual)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn standby(name: &str, state: Option<&str>) -> Standby {
        Standby {
            name: Some(name.into()),
            sync_state: state.map(Into::into),
        }
    }

    #[test]
    fn only_on_and_remote_apply_are_durable() {
        for good in ["on", "remote_apply"] {
            assert!(durable_commit(good), "{good}");
        }
        for bad in ["off", "local", "remote_write", "", "ON"] {
            assert!(!durable_commit(bad), "{bad}");
        }
        for level in ["off", "local", "remote_write"] {
            assert!(RAISED_LEVELS.contains(&format!("'{level}'")), "{level}");
        }
    }

    #[test]
    fn no_standby_or_only_synchronous_ones_may_claim() {
        let auto = PgFailover::Automatic;
        assert_eq!(refusal(false, &[], auto), None);
        let sync = [standby("a", Some("sync")), standby("b", Some("quorum"))];
        assert_eq!(refusal(false, &sync, auto), None);
    }

    #[test]
    fn an_asynchronous_potential_or_unseen_standby_is_refused_unless_failover_is_manual() {
        for (standbys, named) in [
            (vec![standby("replica1", Some("async"))], "replica1 (async)"),
            (
                vec![standby("a", Some("sync")), standby("b", Some("potential"))],
                "b (potential)",
            ),
            (
                vec![Standby {
                    name: None,
                    sync_state: None,
                }],
                "1 whose state this role cannot see",
            ),
        ] {
            let why = refusal(false, &standbys, PgFailover::Automatic).expect("refused");
            assert!(
                why.contains(named) && why.contains("failover=manual"),
                "{why}"
            );
            assert_eq!(refusal(false, &standbys, PgFailover::Manual), None);
        }
    }

    /// The standbys a refusal names: the unsafe ones by name, then those it cannot see,
    /// counted, joined by ", and " only when both are there.
    #[test]
    fn a_refusal_names_the_unsafe_standbys_then_counts_the_unseen() {
        let unseen = Standby {
            name: None,
            sync_state: None,
        };
        let see = "whose state this role cannot see (grant it pg_monitor to let it look)";
        for (standbys, named) in [
            (
                vec![standby("r1", Some("async")), standby("", Some("potential"))],
                "r1 (async), unnamed (potential)".to_owned(),
            ),
            (vec![unseen.clone(), unseen.clone()], format!("2 {see}")),
            (
                vec![standby("r1", Some("async")), unseen],
                format!("r1 (async), and 1 {see}"),
            ),
        ] {
            let why = refusal(false, &standbys, PgFailover::Automatic).expect("refused");
            let got = why
                .strip_prefix("the server streams to standbys that are not synchronous: ")
                .and_then(|rest| rest.split_once(". A standby promoted"))
                .map(|(got, _)| got);
            assert_eq!(got, Some(named.as_str()), "{why}");
        }
    }

    #[test]
    fn a_standby_server_is_refused_whatever_the_option() {
        for failover in [PgFailover::Automatic, PgFailover::Manual] {
            let why = refusal(true, &[], failover).expect("refused");
            assert!(why.contains("pg_is_in_recovery"), "{why}");
        }
    }
}
