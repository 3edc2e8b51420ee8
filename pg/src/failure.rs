//! Why a call cannot issue, as a SQL error with a SQLSTATE. Every refusal goes through
//! [`Failure::raise`]: `ereport(ERROR)`, never a panic across the boundary.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};

/// A refusal: the SQLSTATE, the message, and what to do about it.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    pub(crate) code: PgSqlErrorCode,
    pub(crate) message: String,
    pub(crate) hint: Option<&'static str>,
    pub(crate) detail: Option<String>,
}

impl Failure {
    /// A refusal with no hint.
    pub(crate) fn new(code: PgSqlErrorCode, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
            hint: None,
            detail: None,
        }
    }

    /// The same, with a hint.
    pub(crate) fn hint(mut self, hint: &'static str) -> Failure {
        self.hint = Some(hint);
        self
    }

    /// The same, with a detail.
    pub(crate) fn detail(mut self, detail: String) -> Failure {
        self.detail = Some(detail);
        self
    }

    /// The extension is not preloaded: no shared state (SQLSTATE 55000).
    pub(crate) fn not_preloaded() -> Failure {
        Failure::new(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "monoflake is not loaded at server start: no shared generator",
        )
        .hint("add monoflake to shared_preload_libraries in postgresql.conf and restart the server")
    }

    /// The reservation is further ahead of the server's clock than the tolerance, and not
    /// trusted (SQLSTATE 55000): issuing would stamp IDs far ahead of the clock.
    pub(crate) fn reservation_ahead(message: String) -> Failure {
        Failure::new(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            message,
        )
        .hint(
            "check the server's clock (NTP) and wait for it; if it is wrong now and was right \
             when the IDs were issued, set monoflake.trust_reservation = on in postgresql.conf \
             and reload (IDs then carry the reservation's time), or raise monoflake.tolerance_ms",
        )
    }

    /// The server is in recovery (SQLSTATE 55000, as PostgreSQL's own "recovery is in
    /// progress"): a standby's data is its primary's, and so would its node be.
    pub(crate) fn in_recovery() -> Failure {
        Failure::new(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "monoflake: this server is in recovery (a standby, or a start still replaying \
             WAL): it issues no IDs",
        )
        .hint(
            "issue IDs on the primary; once promoted, this server issues under a node of its \
             own (a node claimed from monoflake.claim_url; a configured monoflake.node must be \
             a number no other server uses)",
        )
    }

    /// The configured node is the one of the server this data directory was copied from
    /// (SQLSTATE 55000): `reason` says what shows it (`identity::copied`).
    pub(crate) fn copied(node: u64, reason: String) -> Failure {
        Failure::new(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("monoflake: monoflake.node = {node} belongs to the server this one was copied from: {reason}"),
        )
        .hint(
            "give this server a node of its own: set monoflake.node to a number no other \
             server uses and restart, or unset it and set monoflake.claim_url to claim one \
             from a claim database",
        )
    }

    /// The invariant that would break, as a library error.
    pub(crate) fn from_error(e: &monoflake::Error) -> Failure {
        let code = match e {
            monoflake::Error::Exhausted { .. } => PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            monoflake::Error::WouldBlock { .. } | monoflake::Error::TimedOut { .. } => {
                PgSqlErrorCode::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED
            }
            _ => PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        };
        Failure::new(code, format!("monoflake: {e}"))
    }

    /// Raises the error: does not return.
    pub(crate) fn raise(self) -> ! {
        let mut report = ErrorReport::new(self.code, self.message, "monoflake");
        if let Some(hint) = self.hint {
            report = report.set_hint(hint);
        }
        if let Some(detail) = self.detail {
            report = report.set_detail(detail);
        }
        report.report(PgLogLevel::ERROR);
        unreachable!("ereport(ERROR) returns no more")
    }
}
