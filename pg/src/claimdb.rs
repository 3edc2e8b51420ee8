//! The claim database must not be this server, nor a copy of it, nor the server it was
//! copied from: claims kept in it would travel with a copy (`identity.rs`). Before each
//! claim the worker asks the claim database for its system identifier (`pg_control`'s,
//! which every copy and standby shares) through libpq — the library that defines the
//! connection string's syntax — and refuses one equal to this server's.
//!
//! The library's `PgStore` then connects on its own (TLS as it requires); a name that
//! resolves elsewhere between the two connections is not guarded against.

use std::ffi::{CStr, CString, c_char, c_int};

/// libpq's connection handle (opaque).
#[repr(C)]
struct PgConn {
    _private: [u8; 0],
}

/// libpq's query result (opaque).
#[repr(C)]
struct PgResult {
    _private: [u8; 0],
}

/// `CONNECTION_OK`.
const CONNECTION_OK: c_int = 0;
/// `PGRES_TUPLES_OK`.
const PGRES_TUPLES_OK: c_int = 2;

#[link(name = "pq")]
unsafe extern "C" {
    fn PQconnectdbParams(
        keywords: *const *const c_char,
        values: *const *const c_char,
        expand_dbname: c_int,
    ) -> *mut PgConn;
    fn PQstatus(conn: *const PgConn) -> c_int;
    fn PQerrorMessage(conn: *const PgConn) -> *const c_char;
    fn PQhost(conn: *const PgConn) -> *const c_char;
    fn PQexec(conn: *mut PgConn, query: *const c_char) -> *mut PgResult;
    fn PQresultStatus(res: *const PgResult) -> c_int;
    fn PQresultErrorMessage(res: *const PgResult) -> *const c_char;
    fn PQntuples(res: *const PgResult) -> c_int;
    fn PQgetvalue(res: *const PgResult, row: c_int, column: c_int) -> *const c_char;
    fn PQclear(res: *mut PgResult);
    fn PQfinish(conn: *mut PgConn);
}

/// What the claim database said about itself.
#[derive(Debug)]
pub(crate) struct Seen {
    /// Its system identifier.
    pub(crate) system_identifier: u64,
    /// Whether it was reached on this machine (a Unix socket, `localhost`, a loopback
    /// address): a copy of the whole machine would take it along.
    pub(crate) on_this_machine: bool,
}

/// Connects to `url`, reads the server's system identifier, disconnects. Errors are
/// libpq's messages (the connection string is never repeated: it may hold a password).
pub(crate) fn look(url: &str) -> Result<Seen, String> {
    let url = CString::new(url).map_err(|_| "monoflake.claim_url holds a NUL byte".to_owned())?;
    // (Given first, so that the connection string's own values win: `dbname` is expanded
    // in place, as a connection string or URL.)
    let keywords = [
        c"connect_timeout".as_ptr(),
        c"application_name".as_ptr(),
        c"dbname".as_ptr(),
        std::ptr::null(),
    ];
    let values = [
        c"10".as_ptr(),
        c"monoflake claim check".as_ptr(),
        url.as_ptr(),
        std::ptr::null(),
    ];
    // SAFETY: both arrays are NULL-terminated and point to NUL-terminated strings that
    // outlive the call; libpq copies what it keeps. The handle is always finished below.
    let conn = unsafe { PQconnectdbParams(keywords.as_ptr(), values.as_ptr(), 1) };
    if conn.is_null() {
        return Err("libpq could not allocate a connection".into());
    }
    let out = query(conn);
    // SAFETY: `conn` came from PQconnectdbParams and is finished once, here.
    unsafe { PQfinish(conn) };
    out
}

/// The query on an open (or failed) connection.
fn query(conn: *mut PgConn) -> Result<Seen, String> {
    // SAFETY: `conn` is a live handle (finished by the caller after this returns); the
    // strings libpq returns live as long as the handle or the result they came from, and
    // are copied out before either is freed.
    unsafe {
        if PQstatus(conn) != CONNECTION_OK {
            return Err(text(PQerrorMessage(conn)));
        }
        let host = text(PQhost(conn));
        let res = PQexec(
            conn,
            c"SELECT system_identifier::text FROM pg_catalog.pg_control_system()".as_ptr(),
        );
        if res.is_null() {
            return Err(text(PQerrorMessage(conn)));
        }
        let out = if PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 {
            Err(text(PQresultErrorMessage(res)))
        } else {
            let value = text(PQgetvalue(res, 0, 0));
            value
                .parse()
                .map_err(|_| format!("pg_control_system() answered {value:?}"))
        };
        PQclear(res);
        Ok(Seen {
            system_identifier: out?,
            on_this_machine: on_this_machine(&host),
        })
    }
}

/// A C string libpq returned, as text, trimmed ("" for NULL).
///
/// # Safety
///
/// `p` is NULL or points to a NUL-terminated string valid for the call.
unsafe fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: as the caller promises.
    unsafe { CStr::from_ptr(p) }
        .to_string_lossy()
        .trim()
        .to_owned()
}

/// Whether the host libpq reached is this machine: a socket directory, `localhost`, or a
/// loopback address.
fn on_this_machine(host: &str) -> bool {
    host.is_empty()
        || host.starts_with('/')
        || host.starts_with('@')
        || host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::on_this_machine;

    #[test]
    fn loopback_and_sockets_are_this_machine() {
        for host in [
            "",
            "/tmp",
            "@abstract",
            "localhost",
            "127.0.0.1",
            "127.9.9.9",
            "::1",
        ] {
            assert!(on_this_machine(host), "{host}");
        }
        for host in ["10.0.0.1", "db.internal", "192.168.1.2"] {
            assert!(!on_this_machine(host), "{host}");
        }
    }
}
