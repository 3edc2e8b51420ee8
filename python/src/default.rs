//! `monoflake.next_id()`: the process-wide default generator, kept here as a `Generator`
//! (`generator.rs`) rather than in the library's own default (`monoflake::next_id`).
//!
//! The library's default is a static that lives as long as the process: it is never
//! released (a short-lived process leaves its node reserved up to a window ahead, so the next
//! one takes another node) and it cannot be replaced after its lease is lost. Python's is
//! the item of a one-item list ([`SLOT`]), read with the GIL held as a `Generator` reads its
//! own slot, and replaced:
//!
//! * **at exit** (`atexit`): taken out and closed — the final reservation written, the node
//!   given up — so that the next process takes the same node at once;
//! * **after a loss** (`LeaseLost`: the state directory removed, the store unreachable past
//!   the lease): the lost generator is taken out and released *first*, then a node is
//!   claimed again — what `monoflake serve` does after a lost lease, in the order that never
//!   has two generators of this process alive at once — and a `LeaseWarning` says so;
//! * **in a forked child**: the item made before the fork is the parent's; the child's first
//!   call claims a node of its own. The parent's is never closed or released in the child
//!   (`Generator` does nothing there, and neither does the library).
//!
//! Building one may wait (a claim, a file written and fsynced), so it runs with the GIL
//! released. One thread of a process builds; the others wait for it ([`BUILDING`], polled
//! with the GIL released between polls). No lock is taken: nothing a child forked during a
//! build could inherit held, nothing a thread could hold while it waits for the GIL.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use monoflake::{Error, Layout, Leased, TimeSource};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList};

use crate::convert::count;
use crate::errors::{Attr, Kind, is, raise, to_py, warn};
use crate::generator::{Flavour, PyGenerator, try_core};
use crate::layout::{LayoutArg, PyLayout};
use crate::options::{Args, NodeArg, Options, warn_fallback};
use crate::wait::SLICE;

/// `[Generator]` once this process (or, before a fork, its parent) has a default; `[None]`
/// before, and after it was given up at exit or after a loss, until the next one is built.
static SLOT: PyOnceLock<Py<PyList>> = PyOnceLock::new();

/// `[the default's generator]`, the item of its `Generator`'s own slot, while it may issue in
/// this process: the hot path's shortcut past the `Generator` (one list read instead of two).
/// `[None]` before, in a forked child (cleared by the fork hook) and from before the default
/// is closed or replaced (its `close()` waits for every holder of the generator to let go).
static FAST: PyOnceLock<Py<PyList>> = PyOnceLock::new();

/// How the default is built (`configure_default`); `None` for the embedded default (the
/// Twitter layout, a node from the host-wide file store). A forked child inherits it. Locked
/// only to copy or replace the `Arc`, with the GIL held and no Python code run meanwhile.
static CONFIG: Mutex<Option<Arc<Options>>> = Mutex::new(None);

/// True while a thread of this process builds the default; cleared in a forked child, where
/// that thread does not exist.
// Ordering: Relaxed. It is read and written with the GIL held, which orders it; it publishes
// nothing (the generator is published through `SLOT`).
static BUILDING: AtomicBool = AtomicBool::new(false);

/// True once the default was given up at exit: from then on only the thread that ran the
/// exit hooks (an `atexit` handler registered before `monoflake` was imported) may build one
/// again; any other (a daemon thread still issuing) gets `LeaseLost`, rather than claiming a
/// node that would outlive the release.
// Ordering: Relaxed, as `BUILDING`.
static EXITED: AtomicBool = AtomicBool::new(false);

/// The node the default held when it was given up at exit, for the `LeaseLost` above.
// Ordering: Relaxed, as `BUILDING`.
static EXIT_NODE: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Whether this thread ran the exit hook.
    static EXIT_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// How often a thread waiting for another's build looks again.
const POLL: Duration = Duration::from_millis(1);

fn slot(py: Python<'_>) -> PyResult<&Bound<'_, PyList>> {
    SLOT.get_or_try_init(py, || {
        Ok::<_, PyErr>(PyList::new(py, [py.None()])?.unbind())
    })
    .map(|slot| slot.bind(py))
}

/// Forgets the shortcut (before the default is closed or replaced, and in a forked child).
fn forget_fast(py: Python<'_>) {
    if let Some(fast) = FAST.get(py) {
        let _ = fast.bind(py).set_item(0, py.None());
    }
}

/// The settings the default is built with.
fn config(py: Python<'_>) -> PyResult<Arc<Options>> {
    let set = CONFIG
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    match set {
        Some(options) => Ok(options),
        None => Ok(Arc::new(Options::new(
            py,
            Args::new(py, "configure_default", None, None, None)?,
        )?)),
    }
}

/// The layout of the default generator (`configure_default(layout=...)`, else Twitter's):
/// what `decode` and `Opaque` read IDs with when no layout is given.
pub(crate) fn default_layout(py: Python<'_>) -> PyResult<Py<PyLayout>> {
    let layout = match &*CONFIG.lock().unwrap_or_else(PoisonError::into_inner) {
        Some(options) => options.layout().clone(),
        None => Layout::twitter(),
    };
    Py::new(py, PyLayout { layout })
}

/// This process's default generator, built when there is none yet.
#[inline]
fn current(py: Python<'_>) -> PyResult<Bound<'_, PyGenerator>> {
    let item = slot(py)?.get_item(0)?;
    match item.cast_into::<PyGenerator>() {
        Ok(g) if !g.get().in_child() => Ok(g),
        _ => replace(py, None),
    }
}

/// Marks this thread as the one building; cleared when dropped.
struct Building;

impl Building {
    fn start() -> Option<Building> {
        // Not `then_some(Building)`: that makes (and drops, clearing the mark) a `Building`
        // also when another thread builds.
        (!BUILDING.swap(true, Ordering::Relaxed)).then(|| Building)
    }
}

impl Drop for Building {
    fn drop(&mut self) {
        BUILDING.store(false, Ordering::Relaxed);
    }
}

/// Builds the default: the first in this process (or in a forked child), or again after
/// `failed` (the generator and what it raised: `LeaseLost`, or `Forked` from a child made
/// without Python's fork hooks). Returns what another thread built meanwhile, if it did.
#[cold]
fn replace<'py>(
    py: Python<'py>,
    failed: Option<(&Bound<'py, PyGenerator>, &PyErr)>,
) -> PyResult<Bound<'py, PyGenerator>> {
    let slot = slot(py)?;
    let _building = loop {
        let item = slot.get_item(0)?;
        if let Ok(g) = item.cast_into::<PyGenerator>() {
            let failed_here = failed.is_some_and(|(f, _)| f.is(&g));
            if !g.get().in_child() && !failed_here {
                return Ok(g);
            }
        }
        if EXITED.load(Ordering::Relaxed) && !EXIT_THREAD.with(Cell::get) {
            return Err(exited(py));
        }
        if let Some(building) = Building::start() {
            break building;
        }
        py.detach(|| std::thread::sleep(POLL));
        py.check_signals()?;
    };
    // The one failed, if it is still there: out of the slot and released before anything is
    // claimed (the final reservation write may fail after a loss: nothing unsafe, the
    // reservation then stays at the last extension, which is later).
    let mut retired = None;
    forget_fast(py);
    if let Ok(old) = slot.get_item(0)?.cast_into::<PyGenerator>()
        && !old.get().in_child()
    {
        slot.set_item(0, py.None())?;
        if let Some(flavour) = old.get().shut(py)? {
            let (node, layout, last) = (
                old.get().node(),
                flavour.layout().clone(),
                flavour.last_tick(),
            );
            let _ = flavour.release(py);
            retired = Some((node, layout, last));
        }
    }
    let options = config(py)?;
    let built = py.detach(|| options.build()).map_err(|e| to_py(py, e))?;
    let (leased, note, caveats) = (built.leased, built.note, built.caveats);
    if let Some((_, layout, last)) = &retired
        && layout == leased.layout()
        && let Err(e) = wait_past(py, &leased, *last)
    {
        // Ctrl-C meanwhile: the new generator is given up (a file written), without the GIL.
        py.detach(move || drop(leased));
        return Err(e);
    }
    let node = leased.node();
    let g = Bound::new(
        py,
        PyGenerator::wrap(py, Flavour::Leased(leased), options.max_batch())?,
    )?;
    slot.set_item(0, &g)?;
    let fast = FAST.get_or_try_init(py, || {
        Ok::<_, PyErr>(PyList::new(py, [py.None()])?.unbind())
    })?;
    fast.bind(py).set_item(0, g.get().core_item(py)?)?;
    // Said once stored: a warning raised as an error (`-W error`) leaves the default built.
    warn_fallback(py, note.as_deref())?;
    crate::options::warn_caveats(py, &caveats)?;
    if let (Some((old, _, _)), Some((_, e))) = (retired, failed)
        && is(py, e, Kind::LeaseLost)
    {
        let reason = e.value(py).str()?;
        warn(
            py,
            &format!(
                "monoflake: the default generator lost its lease on node {old} ({reason}); it \
                 released it and claimed node {node}"
            ),
        )?;
    }
    Ok(g)
}

/// Waits (the GIL released, signals checked) until `leased`'s clock is past `last`, the last
/// tick its predecessor in this process issued, for at most `leased`'s `max_wait`: its IDs
/// are then above every ID of the one it replaces, whichever node it holds. (Not longer than
/// that: uniqueness does not depend on it, only the order across the replacement.) Raises
/// what a signal handler raises.
fn wait_past(py: Python<'_>, leased: &Leased, last: u64) -> PyResult<()> {
    let layout = leased.layout();
    let start = Instant::now();
    loop {
        let now = layout.tick_at(leased.clock().now_ms());
        if now > last || start.elapsed() >= leased.max_wait() {
            return Ok(());
        }
        let ahead = Duration::from_millis((last - now).saturating_mul(layout.tick_ms()));
        py.detach(|| std::thread::sleep(ahead.clamp(POLL, SLICE)));
        py.check_signals()?;
    }
}

/// `LeaseLost` for a thread other than the exiting one after the default was given up.
#[cold]
fn exited(py: Python<'_>) -> PyErr {
    let node = EXIT_NODE.load(Ordering::Relaxed);
    raise(
        py,
        Kind::LeaseLost,
        "LeaseLost",
        format!(
            "node {node}: the interpreter is exiting; the default generator gave its node up \
             at exit"
        ),
        vec![
            ("node", Attr::Int(node)),
            ("reason", Attr::Str("exiting".into())),
        ],
    )
}

/// After `e` from `g`: a lost lease (or a fork Python's hooks did not see) replaces the
/// default, once, and `call` runs on the new one; any other error is raised.
#[cold]
fn again<'py, T>(
    py: Python<'py>,
    g: &Bound<'py, PyGenerator>,
    e: PyErr,
    call: impl FnOnce(&PyGenerator) -> PyResult<T>,
) -> PyResult<T> {
    if !is(py, &e, Kind::LeaseLost) && !is(py, &e, Kind::Forked) {
        return Err(e);
    }
    let fresh = replace(py, Some((g, &e)))?;
    call(fresh.get())
}

/// An ID from the process-wide default generator (Twitter layout, a node claimed from the
/// host-wide file store, unless `configure_default` said otherwise).
#[pyfunction]
pub(crate) fn next_id(py: Python<'_>) -> PyResult<u64> {
    if let Some(fast) = FAST.get(py)
        && let Ok(item) = fast.bind(py).get_item(0)
        && let Some(id) = try_core(&item)
    {
        return Ok(id);
    }
    next_id_slow(py)
}

/// `next_id()` past the shortcut: the first call, a wait, an error, a replacement.
#[cold]
fn next_id_slow(py: Python<'_>) -> PyResult<u64> {
    let g = current(py)?;
    match g.get().next_id(py) {
        Ok(id) => Ok(id),
        Err(e) => again(py, &g, e, |g| g.next_id(py)),
    }
}

/// `n` consecutive IDs from the process-wide default generator, as a list.
#[pyfunction]
pub(crate) fn next_ids<'py>(
    py: Python<'py>,
    n: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    if n.extract::<u64>().is_err() {
        // A negative count is refused before anything is claimed.
        count(n, config(py)?.max_batch())?;
    }
    let g = current(py)?;
    match g.get().next_ids(py, n) {
        Ok(ids) => Ok(ids),
        Err(e) => again(py, &g, e, |g| g.next_ids(py, n)),
    }
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
    let item = slot(py)?.get_item(0)?;
    let built = item
        .cast::<PyGenerator>()
        .is_ok_and(|g| !g.get().in_child());
    if built || BUILDING.load(Ordering::Relaxed) {
        return Err(to_py(py, Error::DefaultAlreadyBuilt));
    }
    let old = CONFIG
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .replace(Arc::new(options));
    drop(old);
    Ok(())
}

/// Run by `os.register_at_fork(after_in_child=...)`: the thread that may have been building
/// in the parent does not exist here, and every generator from before is the parent's.
#[pyfunction]
pub(crate) fn _after_fork_in_child(py: Python<'_>) {
    BUILDING.store(false, Ordering::Relaxed);
    forget_fast(py);
    crate::generator::after_fork_in_child();
}

/// Run by `atexit`: gives this process's default up (the final reservation written, the node
/// freed), so that the next process takes the node at once. In a forked child whose default
/// is still the parent's, nothing. A failure to write the final reservation is not raised:
/// the reservation then stays at the last extension, which is later, and an exiting process
/// can do nothing else about it.
#[pyfunction]
pub(crate) fn _release_at_exit(py: Python<'_>) {
    EXITED.store(true, Ordering::Relaxed);
    EXIT_THREAD.with(|t| t.set(true));
    let Some(slot) = SLOT.get(py).map(|s| s.bind(py)) else {
        return;
    };
    let Ok(g) = slot
        .get_item(0)
        .and_then(|i| Ok(i.cast_into::<PyGenerator>()?))
    else {
        return;
    };
    if g.get().in_child() {
        return;
    }
    forget_fast(py);
    if slot.set_item(0, py.None()).is_err() {
        return;
    }
    EXIT_NODE.store(g.get().node(), Ordering::Relaxed);
    let _ = g.get().close(py);
}
