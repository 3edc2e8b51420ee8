//! The extension's settings (GUCs). The layout and the node are read once, when the server
//! starts: one generator per server needs one layout and one node for the server's life. The
//! reservation's tolerance and trust are read from `postgresql.conf` (start or reload), by
//! the call that finds the reservation ahead of the clock.

use std::ffi::CString;

use monoflake::{DEFAULT_MAX_LEAD, DEFAULT_RESERVATION_WINDOW, Layout};
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

/// `monoflake.layout`: a preset name or a layout spec (`monoflake layouts` lists both).
pub(crate) static LAYOUT: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"twitter"));

/// `monoflake.node`: the node every ID carries; -1 (the default): claimed by the worker.
pub(crate) static NODE: GucSetting<i32> = GucSetting::<i32>::new(-1);

/// `monoflake.claim_url`: the claim database's connection string (libpq's `key=value` form
/// or a URL), where the worker claims the node when `monoflake.node` is not set. Unset (and
/// no node set): nothing is issued — a server never claims from itself (`identity.rs`).
pub(crate) static CLAIM_URL: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);

/// `monoflake.max_wait_ms`: how long a call may wait for its slot at the lead limit (IDs
/// asked for faster than the layout's cap) before it fails.
pub(crate) static MAX_WAIT_MS: GucSetting<i32> = GucSetting::<i32>::new(1_000);

/// The library's default tolerance for a reservation ahead of the clock
/// (`handover::default_tolerance_ms`): the reservation window plus the lead, what a server
/// stopped moments ago leaves behind, plus a PostgreSQL store's check interval (500 ms) for
/// the two clocks' skew — 5.6 s.
pub(crate) const DEFAULT_TOLERANCE_MS: i32 = monoflake::handover::default_tolerance_ms(
    DEFAULT_RESERVATION_WINDOW.as_millis() as u64,
    DEFAULT_MAX_LEAD.as_millis() as u64,
    500,
) as i32;

/// `monoflake.tolerance_ms`: how far the reservation may be ahead of the server's clock and
/// still be issued from at once (the line moves up to it).
pub(crate) static TOLERANCE_MS: GucSetting<i32> = GucSetting::<i32>::new(DEFAULT_TOLERANCE_MS);

/// `monoflake.trust_reservation`: issue above a reservation however far ahead of the clock
/// (the IDs then carry the reservation's time, not the clock's), instead of refusing.
pub(crate) static TRUST_RESERVATION: GucSetting<bool> = GucSetting::<bool>::new(false);

/// `monoflake.test_clock_offset_ms` (test builds only, feature `test-clock`): moves this
/// server's wall clock, as the extension reads it, by this many ms — in every process,
/// the postmaster included (it reads postgresql.conf on reload), so that a test can step
/// the clock back around a crash restart, where the postmaster sets shared memory up again.
#[cfg(feature = "test-clock")]
pub(crate) static TEST_CLOCK_OFFSET_MS: GucSetting<i32> = GucSetting::<i32>::new(0);

/// `monoflake.test_clock_offset_ms`'s assign hook: the clock reads an atomic, not the setting
/// (`clock.rs`).
#[cfg(feature = "test-clock")]
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn assign_test_clock_offset(
    ms: std::ffi::c_int,
    _extra: *mut std::ffi::c_void,
) {
    crate::clock::set_test_offset_ms(ms);
}

/// Registers the settings.
pub(crate) fn define() {
    // SAFETY: the assign hook is a `pg_guard`ed function that cannot fail (it stores an
    // atomic); no check or show hook.
    #[cfg(feature = "test-clock")]
    unsafe {
        GucRegistry::define_int_guc_with_hooks(
            c"monoflake.test_clock_offset_ms",
            c"Test builds only: moves the wall clock the extension reads by this many ms.",
            c"For the extension's tests (a clock stepped around a crash restart); a build without the feature test-clock has no such setting.",
            &TEST_CLOCK_OFFSET_MS,
            i32::MIN + 1,
            i32::MAX,
            GucContext::Sighup,
            GucFlags::SUPERUSER_ONLY,
            None,
            Some(assign_test_clock_offset),
            None,
        );
    }
    GucRegistry::define_string_guc(
        c"monoflake.layout",
        c"The ID layout: a preset name (twitter, discord, sonyflake, js-safe, ...) or a spec.",
        c"Read when the server starts. The layout's IDs are what monoflake.decode and the CLI's `monoflake decode --layout` read.",
        &LAYOUT,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"monoflake.node",
        c"The node number every ID carries; -1 (the default): claimed from the claim database (monoflake.claim_url) by the monoflake claim worker.",
        c"Two servers must never share a node number, and a copy of this server (pg_basebackup, a snapshot) keeps the setting: give it a node of its own before it starts. A promoted standby or a data directory restored from a base backup is refused until it has one. Unset, the node is claimed from monoflake.claim_url, which a copy cannot take along.",
        &NODE,
        -1,
        i32::MAX,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"monoflake.claim_url",
        c"The claim database (a libpq connection string or URL) the node is claimed from when monoflake.node is not set.",
        c"It must be a database on another server: a copy of this server's data directory would take claims kept in it along (one with this server's system identifier is refused). Every server claiming from one claim database gets a node of its own. Unset, with monoflake.node unset too: nothing is issued.",
        &CLAIM_URL,
        GucContext::Postmaster,
        // It may hold a password: only superusers read it.
        GucFlags::SUPERUSER_ONLY,
    );
    GucRegistry::define_int_guc(
        c"monoflake.max_wait_ms",
        c"How long a call waits for its slot when IDs are asked for faster than the layout's cap.",
        c"Past it the call fails with SQLSTATE 53400.",
        &MAX_WAIT_MS,
        0,
        60_000,
        GucContext::Suset,
        GucFlags::default(),
    );
    // Both below are server-wide decisions (the line they move is every backend's, and is
    // never moved back): postgresql.conf only, read at start and on reload, never a session's
    // SET. Neither can cause a duplicate; they choose between refusing and issuing IDs
    // stamped ahead of the clock.
    GucRegistry::define_int_guc(
        c"monoflake.tolerance_ms",
        c"How far the reservation may be ahead of the server's clock before calls are refused.",
        c"Within it a call waits for the clock; beyond it (a clock set back, or behind) calls fail with SQLSTATE 55000 until the clock catches up, unless monoflake.trust_reservation is on.",
        &TOLERANCE_MS,
        0,
        60_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_bool_guc(
        c"monoflake.trust_reservation",
        c"Issue above a reservation however far ahead of the server's clock, instead of refusing.",
        c"For a clock that is wrong now and was right when the reservation was written: IDs stay above every ID issued before but carry the reservation's time.",
        &TRUST_RESERVATION,
        GucContext::Sighup,
        GucFlags::default(),
    );
}

/// The tolerance setting, in nanoseconds.
pub(crate) fn tolerance_ns() -> u64 {
    u64::try_from(TOLERANCE_MS.get()).unwrap_or(0) * 1_000_000
}

/// The layout setting, parsed (a preset name or a spec).
pub(crate) fn layout() -> Result<Layout, String> {
    let text = LAYOUT
        .get()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "twitter".into());
    text.parse::<Layout>()
        .map_err(|e| format!("monoflake.layout = '{text}': {e}"))
}

/// The claim database's connection string (`monoflake.claim_url`), `None` when unset.
pub(crate) fn claim_url() -> Option<String> {
    CLAIM_URL
        .get()
        .map(|url| url.to_string_lossy().into_owned())
        .filter(|url| !url.trim().is_empty())
}

/// The node setting, `None` when unset.
pub(crate) fn node() -> Option<u64> {
    u64::try_from(NODE.get()).ok()
}
