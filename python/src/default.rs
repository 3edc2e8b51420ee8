//! `monoflake.next_id()`: the library's process-wide default generator, as in Rust
//! (`monoflake::next_id`), including what it does after a fork (a new claim in the child).
//!
//! The first call in a process builds the default (a claim in the state directory, a file
//! written and fsynced) and the first call in a forked child claims a new node: both can
//! wait, so they run with the GIL released. Knowing which call is a first one without asking
//! the library is the one thing kept here: `BUILT`, set once the library handed this process
//! its default, cleared in a child by `os.register_at_fork`. It decides only where the GIL is
//! released; which generator issues, and what a fork does to it, is the library's. (A child
//! made without Python's fork hooks, a raw `SYS_fork`, still gets its own node from the
//! library on its first call, with the GIL held during that claim.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use monoflake::{Error, Id, Leased};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::{batch_error, count};
use crate::errors::to_py;
use crate::layout::LayoutArg;
use crate::options::{Args, NodeArg, Options};
use crate::wait::{Waited, wait};

/// Whether this process has the default generator (built, or after a fork claimed anew).
// Ordering: Relaxed. It publishes nothing: the generator itself is reached through the
// library's own synchronised cell; a stale `false` only sends a call to the path that
// releases the GIL.
static BUILT: AtomicBool = AtomicBool::new(false);

/// The process-wide default generator: looked up with the GIL held once this process has one,
/// built (or, in a forked child, claimed anew) with the GIL released before that.
fn default(py: Python<'_>) -> PyResult<&'static Leased> {
    let generator = if BUILT.load(Ordering::Relaxed) {
        monoflake::default_generator()
    } else {
        let built = py.detach(monoflake::default_generator);
        BUILT.store(built.is_ok(), Ordering::Relaxed);
        built
    };
    generator.map_err(|e| to_py(py, e))
}

/// An ID from the process-wide default generator (Twitter layout, a node claimed from the
/// host-wide file store, unless `configure_default` said otherwise).
#[pyfunction]
pub(crate) fn next_id(py: Python<'_>) -> PyResult<u64> {
    let generator = default(py)?;
    match generator.try_next_id() {
        Ok(id) => Ok(id.as_u64()),
        Err(Error::WouldBlock { retry_after, .. }) => {
            let attempt = || generator.try_next_id();
            waiting(py, generator, retry_after, &attempt, |e| to_py(py, e)).map(Id::as_u64)
        }
        Err(e) => Err(to_py(py, e)),
    }
}

/// The default generator's wait at the lead limit, in slices that check signals; the
/// library's error becomes `fail`'s.
#[cold]
fn waiting<T: Send>(
    py: Python<'_>,
    generator: &Leased,
    retry_after: Duration,
    attempt: &(dyn Fn() -> Result<T, Error> + Sync),
    fail: impl FnOnce(Error) -> PyErr,
) -> PyResult<T> {
    match wait(py, generator.max_wait(), retry_after, &|| false, attempt)? {
        Waited::Done(done) => done.map_err(fail),
        Waited::Stopped => unreachable!("the default generator is never closed"),
    }
}

/// `n` consecutive IDs from the process-wide default generator, as a list.
#[pyfunction]
pub(crate) fn next_ids(py: Python<'_>, n: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    let count = count(n)?;
    let generator = default(py)?;
    let ids = match generator.try_next_ids(count) {
        Ok(ids) => ids,
        Err(Error::WouldBlock { retry_after, .. }) => {
            let attempt = || generator.try_next_ids(count);
            waiting(py, generator, retry_after, &attempt, |e| {
                batch_error(py, e, n)
            })?
        }
        Err(e) => return Err(batch_error(py, e, n)),
    };
    Ok(ids.map(Id::as_u64).collect())
}

/// Sets how the default generator is built (the settings of `Generator(...)`); call it before
/// the first `next_id()`. Bad settings are raised here; the claim itself happens at the first
/// `next_id()` (and again at the first in each forked child).
#[pyfunction]
#[pyo3(signature = (layout = None, node = None, **settings))]
pub(crate) fn configure_default(
    py: Python<'_>,
    layout: Option<LayoutArg>,
    node: Option<NodeArg>,
    settings: Option<&Bound<'_, PyDict>>,
) -> PyResult<()> {
    let options = Options::new(
        py,
        Args::new(py, "configure_default", layout, node, settings)?,
    )?;
    // The library's lock is held while a default is being built (a claim that may wait): not
    // with the GIL.
    py.detach(|| monoflake::configure_default(move || options.build()))
        .map_err(|e| to_py(py, e))
}

/// Run by `os.register_at_fork(after_in_child=...)`: the child's first call claims a node.
#[pyfunction]
pub(crate) fn _after_fork_in_child() {
    BUILT.store(false, Ordering::Relaxed);
    crate::generator::after_fork_in_child();
}
