//! The extension's settings (GUCs). All are read once, when the server starts: one generator
//! per server needs one layout and one node for the server's life.

use std::ffi::CString;

use monoflake::Layout;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

/// `monoflake.layout`: a preset name or a layout spec (`monoflake layouts` lists both).
pub(crate) static LAYOUT: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"twitter"));

/// `monoflake.node`: the node every ID carries; -1 (the default) for none.
pub(crate) static NODE: GucSetting<i32> = GucSetting::<i32>::new(-1);

/// `monoflake.max_wait_ms`: how long a call may wait for its slot at the lead limit (IDs
/// asked for faster than the layout's cap) before it fails.
pub(crate) static MAX_WAIT_MS: GucSetting<i32> = GucSetting::<i32>::new(1_000);

/// Registers the settings.
pub(crate) fn define() {
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
        c"The node number every ID carries; -1 for none (calls then fail).",
        c"Two servers must never share a node number: each server's IDs are unique only among themselves otherwise.",
        &NODE,
        -1,
        i32::MAX,
        GucContext::Postmaster,
        GucFlags::default(),
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

/// The node setting, `None` when unset.
pub(crate) fn node() -> Option<u64> {
    u64::try_from(NODE.get()).ok()
}
