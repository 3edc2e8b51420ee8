//! The `monoflake._monoflake` extension module, which the `monoflake` package
//! (`python/monoflake/__init__.py`) re-exports: a thin layer over the `monoflake` crate's
//! public API. Every class says `module = "monoflake"`, where users (and pickle) find it.
//!
//! Types are converted at the boundary (IDs are `int`, durations float seconds, times aware
//! `datetime`s); every decision about an ID is the library's. Errors become the exception
//! classes of `errors.rs`. A call that may wait releases the GIL; the common path does not.
//!
//! * `default.rs`: `next_id()`, `next_ids()`, `configure_default()`: the process-wide default.
//! * `generator.rs`: `Generator`, leased or not; `options.rs`: its settings.
//! * `layout.rs`: `Layout`; `parts.rs`: `decode()` and `Parts`; `encoding.rs`: `encode()`,
//!   `parse()`; `opaque.rs`: `Opaque`; `stats.rs`: `Stats`.
//! * `convert.rs`: ID arguments and times; `errors.rs`: the exceptions. Both are used by the
//!   others and use none of them.

mod convert;
mod default;
mod encoding;
mod errors;
mod generator;
mod layout;
mod opaque;
mod options;
mod parts;
mod stats;
mod wait;

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Snowflake-style 64-bit IDs that are never issued twice, whatever the clock, a restart or a
/// fork does: node IDs leased from a node store, a time reservation that survives restarts,
/// a clock that never steps back.
///
/// `next_id()` for the process-wide default, `Generator` for your own, `decode()` to read an
/// ID back, `Layout` for the bit layout.
#[pymodule]
#[pyo3(name = "_monoflake")]
fn monoflake_python(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // Not `add`, which also lists the name in `__all__`.
    m.setattr("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    m.add_class::<layout::PyLayout>()?;
    m.add_class::<parts::PyParts>()?;
    m.add_class::<generator::PyGenerator>()?;
    m.add_class::<stats::PyStats>()?;
    m.add_class::<opaque::PyOpaque>()?;
    m.add_function(wrap_pyfunction!(default::next_id, m)?)?;
    m.add_function(wrap_pyfunction!(default::next_ids, m)?)?;
    m.add_function(wrap_pyfunction!(default::configure_default, m)?)?;
    m.add_function(wrap_pyfunction!(parts::decode, m)?)?;
    m.add_function(wrap_pyfunction!(encoding::encode, m)?)?;
    m.add_function(wrap_pyfunction!(encoding::parse, m)?)?;
    m.add(
        "PRESETS",
        pyo3::types::PyTuple::new(py, monoflake::PRESETS)?,
    )?;
    // A forked child's first `next_id()` claims a node of its own: this tells it that every
    // generator it has is its parent's.
    let kwargs = PyDict::new(py);
    kwargs.set_item(
        "after_in_child",
        wrap_pyfunction!(default::_after_fork_in_child, m)?,
    )?;
    py.import("os")?
        .call_method("register_at_fork", (), Some(&kwargs))?;
    // At a normal exit the default generator gives its node up, so that the next process
    // takes it at once.
    py.import("atexit")?.call_method1(
        "register",
        (wrap_pyfunction!(default::_release_at_exit, m)?,),
    )?;
    Ok(())
}
