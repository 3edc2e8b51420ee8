//! `monoflake.Generator`: a leased generator (or, by `Generator.unleased`, a plain one),
//! shared between threads, released by `close()` or at the end of a `with` block.
//!
//! * **The common path holds the GIL**: a call first tries the library's non-waiting call
//!   (`try_next_id`), which answers in nanoseconds; only when it says `WouldBlock` (the lead
//!   limit) does the call wait, the GIL released, in slices that come back for signals
//!   (`crate::wait`).
//! * **No lock at all.** The generator is kept in a one-item Python list (`slot`), as a
//!   `Core` object: a call reads the item with the GIL held, as any Python code reads a list,
//!   and `close()` replaces it by `None` the same way. The interpreter orders the two (the
//!   GIL, or the list's own lock on a free-threaded build); a call that holds the item keeps
//!   the generator alive, an `Arc`, which is what `close()` waits for. A mutex here cost two
//!   locked instructions per ID, about 10 ns, which made an explicit `Generator.next_id()`
//!   1.2× the default `next_id()`. A waiting call holds the generator only inside its
//!   slices, the GIL released (a `Weak` between them, while signal handlers run, so that a
//!   handler's `close()` on the same thread does not wait for its own caller). `closed`,
//!   `repr()` and the other getters read atomics.
//! * **Closing** marks the generator closed (an atomic), takes it out of the slot, then
//!   waits, the GIL released and signals checked, until calls waiting on other threads have
//!   seen the mark (within one slice) and let go; then it releases the lease. Those calls,
//!   and every later one, raise `LeaseLost`.
//! * **In a forked child** (counted by `os.register_at_fork`) no call reads the slot:
//!   issuing raises `Forked`, `close()` only marks the generator closed (the node is the
//!   parent's).
//! * **The common path moves only the answer**: the library's `Error` is large, so a first
//!   attempt's error is boxed (`Slow`) before it leaves the call; copying the full
//!   `Result<Id, Error>` through the layers cost several ns per ID.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use monoflake::{Error, Generator, Id, IdGenerator, Ids, Leased};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::convert::uint;
use crate::convert::{batch_error, count};
use crate::errors::{Attr, Kind, forked, raise, to_py};
use crate::layout::{LayoutArg, PyLayout};
use crate::options::{Args, NodeArg, Options, Tuning};
use crate::stats::PyStats;
use crate::wait::{Waited, wait};

/// The two flavours behind one Python class.
pub(crate) enum Flavour {
    Leased(Leased),
    Plain(Box<Generator>),
}

impl Flavour {
    /// The library's shared contract (`IdGenerator`), for everything but the hot call.
    fn contract(&self) -> &dyn IdGenerator {
        match self {
            Flavour::Leased(g) => g,
            Flavour::Plain(g) => &**g,
        }
    }

    /// The hot call, dispatched statically so it inlines.
    #[inline]
    fn try_next_id(&self) -> Result<Id, Error> {
        match self {
            Flavour::Leased(g) => g.try_next_id(),
            Flavour::Plain(g) => g.try_next_id(),
        }
    }

    fn check(&self) -> Result<(), Error> {
        match self {
            Flavour::Leased(g) => g.check(),
            Flavour::Plain(g) => g.check(),
        }
    }

    pub(crate) fn layout(&self) -> &monoflake::Layout {
        self.contract().layout()
    }

    pub(crate) fn last_tick(&self) -> u64 {
        match self {
            Flavour::Leased(g) => g.last_tick(),
            Flavour::Plain(g) => g.last_tick(),
        }
    }

    /// Gives the node up (a leased generator: the final reservation written); the GIL is
    /// released meanwhile.
    pub(crate) fn release(self, py: Python<'_>) -> Result<(), Error> {
        match self {
            Flavour::Leased(leased) => py.detach(|| leased.release()),
            Flavour::Plain(_) => Ok(()),
        }
    }
}

/// Forks seen by `os.register_at_fork(after_in_child=...)` in this process's line: a
/// generator made at another count is its parent's.
// Ordering: Relaxed. It publishes nothing; each process reads its own copy, written before
// any of the child's Python code runs.
static FORKS: AtomicU64 = AtomicU64::new(0);

/// Run in a forked child, before its Python code: every generator from before is the
/// parent's.
pub(crate) fn after_fork_in_child() {
    FORKS.fetch_add(1, Ordering::Relaxed);
}

/// A generator of IDs on one node: leased from a node store (`Generator(...)`), or on a node
/// the caller assigns (`Generator.unleased(...)`). Thread-safe; a context manager that
/// releases its node on exit.
#[pyclass(frozen, module = "monoflake", name = "Generator")]
pub(crate) struct PyGenerator {
    /// `[Core]`, or `[None]` once `close()` has taken the generator. Read and replaced with
    /// the GIL held; never seen by Python code.
    slot: Py<PyList>,
    /// False once `close()` has begun.
    // Ordering: Relaxed. It publishes nothing (the interpreter orders the slot); a waiting
    // call sees it within a slice, and a stale `true` only sends a call to the slot, which
    // says `None`.
    open: AtomicBool,
    /// `FORKS` when it was made.
    born: u64,
    layout: Py<PyLayout>,
    node: u64,
    leased: bool,
    max_wait: Duration,
    /// The largest batch it can ever issue (`Generator::max_batch`), for the error of a
    /// negative count.
    max_batch: u64,
}

/// Why a first, non-waiting attempt did not issue; boxed, so that the common path moves only
/// the answer.
enum Slow {
    /// At the lead limit: wait on this generator, retrying after the duration.
    Wait(Arc<Flavour>, Duration),
    /// Any other error.
    Failed(Error),
}

/// The generator as a Python object, the slot's item while open.
#[pyclass(frozen, module = "monoflake", name = "_GeneratorCore")]
struct Core(Option<Arc<Flavour>>);

impl Drop for Core {
    /// The last holder of the generator (garbage collection without `close()`) drops it
    /// without the GIL: dropping a lease writes and fsyncs a file. `None` only here.
    fn drop(&mut self) {
        if let Some(shared) = self.0.take() {
            Python::attach(|py| py.detach(move || drop(shared)));
        }
    }
}

impl PyGenerator {
    /// `flavour` as a Python object; `max_batch` is its largest batch.
    pub(crate) fn wrap(py: Python<'_>, flavour: Flavour, max_batch: u64) -> PyResult<Self> {
        let max_wait = match &flavour {
            Flavour::Leased(g) => g.max_wait(),
            Flavour::Plain(g) => g.max_wait(),
        };
        let (layout, node) = (
            flavour.contract().layout().clone(),
            flavour.contract().node(),
        );
        let leased = matches!(flavour, Flavour::Leased(_));
        let core = Py::new(py, Core(Some(Arc::new(flavour))))?;
        Ok(PyGenerator {
            leased,
            slot: PyList::new(py, [core])?.unbind(),
            open: AtomicBool::new(true),
            born: FORKS.load(Ordering::Relaxed),
            layout: Py::new(py, PyLayout { layout })?,
            node,
            max_wait,
            max_batch,
        })
    }

    /// The item of its slot: the generator while open, for a caller that keeps it as a
    /// shortcut to [`try_core`] (the default's hot path). Such a caller must let it go before
    /// the generator is closed, or `close()` would wait for it forever.
    pub(crate) fn core_item<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.slot.bind(py).get_item(0)
    }

    /// Whether this is a forked child of the process that made the generator.
    #[inline]
    pub(crate) fn in_child(&self) -> bool {
        FORKS.load(Ordering::Relaxed) != self.born
    }

    /// Runs `f` on the generator, taken from the slot with the GIL held (`f` does not wait),
    /// or raises `Forked` in a forked child and `LeaseLost` once it is closed or being closed.
    #[inline]
    fn with<R>(&self, py: Python<'_>, f: impl FnOnce(&Arc<Flavour>) -> R) -> PyResult<R> {
        if self.in_child() {
            return Err(self.forked_error(py));
        }
        if !self.open.load(Ordering::Relaxed) {
            return Err(self.closed_error(py));
        }
        let item = self.slot.bind(py).get_item(0)?;
        match item.cast::<Core>().map(|core| core.get().0.as_ref().map(f)) {
            Ok(Some(answer)) => Ok(answer),
            _ => Err(self.closed_error(py)),
        }
    }

    /// Issues by `attempt`: once with the GIL held, then, at the lead limit, waiting in slices
    /// (`crate::wait`) for at most `max_wait`. The library's error becomes `fail`'s.
    #[inline]
    fn issue<T: Send>(
        &self,
        py: Python<'_>,
        attempt: impl Fn(&Flavour) -> Result<T, Error> + Sync,
        fail: impl FnOnce(Error) -> PyErr,
    ) -> PyResult<T> {
        let first = self.with(py, |g| {
            attempt(g).map_err(|e| {
                Box::new(match e {
                    Error::WouldBlock { retry_after, .. } => Slow::Wait(Arc::clone(g), retry_after),
                    other => Slow::Failed(other),
                })
            })
        })?;
        let (g, retry_after) = match first.map_err(|slow| *slow) {
            Ok(done) => return Ok(done),
            Err(Slow::Failed(e)) => return Err(fail(e)),
            Err(Slow::Wait(g, retry_after)) => (g, retry_after),
        };
        // Between slices the wait holds the GIL and runs signal handlers: it must not hold
        // the generator then, or a handler's close() (a SIGTERM handler on this very thread)
        // would wait for it forever. It keeps a `Weak` and holds the generator only inside a
        // slice, the GIL released; a temporary that turns out the last one is dropped there,
        // without the GIL, as dropping a lease (a file written) wants.
        let weak = Arc::downgrade(&g);
        py.detach(move || drop(g));
        let stopped = || !self.open.load(Ordering::Relaxed);
        let attempt = || weak.upgrade().map(|g| attempt(&g)).transpose();
        match wait(py, self.max_wait, retry_after, &stopped, &attempt)? {
            Waited::Done(Ok(Some(done))) => Ok(done),
            Waited::Done(Err(e)) => Err(fail(e)),
            // Gone: closed (and released) meanwhile.
            Waited::Done(Ok(None)) | Waited::Stopped => Err(self.closed_error(py)),
        }
    }

    /// `n` IDs, waiting (the GIL released) at the lead limit.
    fn ids(&self, py: Python<'_>, n: &Bound<'_, PyAny>) -> PyResult<Ids> {
        let count = count(n, self.max_batch)?;
        self.issue(
            py,
            |g| g.contract().try_next_ids(count),
            |e| batch_error(py, e, n),
        )
    }

    /// What `close()` does before it gives the node up: marks the generator closed, takes it
    /// out of the slot and waits (the GIL released, signals checked) until calls waiting on
    /// other threads have let go of it. `None` when it was closed already, or in a forked
    /// child (the node is the parent's: nothing to give up).
    pub(crate) fn shut(&self, py: Python<'_>) -> PyResult<Option<Flavour>> {
        let was_open = self.open.swap(false, Ordering::Relaxed);
        if !was_open || self.in_child() {
            return Ok(None);
        }
        let slot = self.slot.bind(py);
        let item = slot.get_item(0)?;
        slot.set_item(0, py.None())?;
        let taken = item
            .cast::<Core>()
            .ok()
            .and_then(|core| core.get().0.clone());
        // The `Core` goes (unless a call holds it), and with it its `Arc`.
        drop(item);
        let Some(mut shared) = taken else {
            return Ok(None);
        };
        // Waiting calls see `open` within a slice and drop their `Arc`.
        loop {
            match Arc::try_unwrap(shared) {
                Ok(flavour) => return Ok(Some(flavour)),
                Err(still_shared) => {
                    shared = still_shared;
                    py.detach(|| std::thread::sleep(Duration::from_millis(1)));
                    py.check_signals()?;
                }
            }
        }
    }

    #[cold]
    fn closed_error(&self, py: Python<'_>) -> PyErr {
        let node = self.node;
        raise(
            py,
            Kind::LeaseLost,
            "LeaseLost",
            format!("node {node}: the generator was closed; make a new one"),
            vec![
                ("node", Attr::Int(node)),
                ("reason", Attr::Str("closed".into())),
            ],
        )
    }

    #[cold]
    fn forked_error(&self, py: Python<'_>) -> PyErr {
        forked(py, self.node)
    }
}

/// One ID from a slot item taken by [`PyGenerator::core_item`], when the generator issues it
/// at once; `None` for anything else (closed, at the lead limit, an error), which the caller
/// then asks of the generator itself. It does not check for a fork: the library does (the
/// call then fails), and the caller forgets its shortcut in a child made by Python's fork.
#[inline]
pub(crate) fn try_core(item: &Bound<'_, PyAny>) -> Option<u64> {
    let core = item.cast::<Core>().ok()?;
    core.get().0.as_ref()?.try_next_id().ok().map(Id::as_u64)
}

/// `ids` as a list of ints.
fn list(py: Python<'_>, ids: Ids) -> PyResult<Bound<'_, PyList>> {
    PyList::new(py, ids.map(Id::as_u64))
}

/// `ids` as an `array.array("Q")`: 8 bytes each in native order, no int objects made.
fn array(py: Python<'_>, ids: Ids) -> PyResult<Bound<'_, PyAny>> {
    static ARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let array = ARRAY.get_or_try_init(py, || -> PyResult<_> {
        Ok(py.import("array")?.getattr("array")?.unbind())
    })?;
    let bytes = PyBytes::new_with(py, ids.len() * 8, |buf| {
        for (chunk, id) in buf.chunks_exact_mut(8).zip(ids) {
            chunk.copy_from_slice(&id.as_u64().to_ne_bytes());
        }
        Ok(())
    })?;
    array.bind(py).call1(("Q", bytes))
}

#[pymethods]
impl PyGenerator {
    /// Claims a node from the node store and starts the keeper that renews the claim and
    /// extends the time reservation (the GIL is released meanwhile).
    #[new]
    #[pyo3(signature = (layout = None, node = None, **settings))]
    fn new(
        py: Python<'_>,
        layout: Option<LayoutArg>,
        node: Option<NodeArg>,
        settings: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let options = Options::new(py, Args::new(py, "Generator", layout, node, settings)?)?;
        let built = py.detach(|| options.build()).map_err(|e| to_py(py, e))?;
        let generator = PyGenerator::wrap(py, Flavour::Leased(built.leased), options.max_batch())?;
        crate::options::warn_fallback(py, built.note.as_deref())?;
        crate::options::warn_caveats(py, &built.caveats)?;
        Ok(generator)
    }

    /// A generator on `node`, which the caller guarantees no other live generator of this
    /// layout uses: no lease, no time reservation.
    // `start_offset_bits` is taken as any object (`None` for 0) so that an int of any size
    // gets the one error `Tuning::new` gives; the signature Python shows says 0.
    #[staticmethod]
    #[pyo3(
        signature = (layout, node, *, max_lead = None, max_wait = None, start_offset_bits = None),
        text_signature = "(layout, node, *, max_lead=None, max_wait=None, start_offset_bits=0)"
    )]
    fn unleased(
        py: Python<'_>,
        layout: LayoutArg,
        node: &Bound<'_, PyAny>,
        max_lead: Option<f64>,
        max_wait: Option<f64>,
        start_offset_bits: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let layout = layout.into_layout(py)?;
        let node = uint(node, "node", layout.max_node())?;
        let tuning = Tuning::new(py, &layout, max_lead, max_wait, start_offset_bits)?;
        let builder = Generator::builder(layout).node(node);
        let generator = tuning.apply(builder).build().map_err(|e| to_py(py, e))?;
        let max_batch = generator.max_batch();
        PyGenerator::wrap(py, Flavour::Plain(Box::new(generator)), max_batch)
    }

    /// One ID, waiting (the GIL released, signals checked) at the lead limit, for at most
    /// `max_wait`.
    pub(crate) fn next_id(&self, py: Python<'_>) -> PyResult<u64> {
        self.issue(py, |g| g.try_next_id().map(Id::as_u64), |e| to_py(py, e))
    }

    /// One ID without waiting: `WouldBlock` (with `retry_after`) at the lead limit.
    fn try_next_id(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |g| g.try_next_id().map(Id::as_u64).map_err(Box::new))?
            .map_err(|e| to_py(py, *e))
    }

    /// `n` consecutive IDs, reserved at once, as a list; waits as `next_id`.
    pub(crate) fn next_ids<'py>(
        &self,
        py: Python<'py>,
        n: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        list(py, self.ids(py, n)?)
    }

    /// `n` consecutive IDs as an `array.array("Q")` (unsigned 64-bit, native order): what
    /// `next_ids` does without making `n` int objects; waits as `next_id`.
    fn next_ids_array<'py>(
        &self,
        py: Python<'py>,
        n: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        array(py, self.ids(py, n)?)
    }

    /// `n` consecutive IDs without waiting: `WouldBlock` when they do not fit the lead now,
    /// `BatchTooLarge` when they never can.
    fn try_next_ids<'py>(
        &self,
        py: Python<'py>,
        n: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let count = count(n, self.max_batch)?;
        let ids = self
            .with(py, |g| g.contract().try_next_ids(count))?
            .map_err(|e| batch_error(py, e, n))?;
        list(py, ids)
    }

    /// Whether a call could issue now, without issuing: `None`, or the error it would raise
    /// (`LeaseLost` once the lease is lost or released).
    fn check(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |g| g.check())?.map_err(|e| to_py(py, e))
    }

    /// The generator's counters.
    fn stats(&self, py: Python<'_>) -> PyResult<PyStats> {
        self.with(py, |g| PyStats::from(g.contract().stats()))
    }

    /// The time-field value of the last ID issued (or of the start point).
    #[getter]
    fn last_tick(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |g| g.last_tick())
    }

    /// The node value every ID carries.
    #[getter]
    pub(crate) fn node(&self) -> u64 {
        self.node
    }

    /// The layout IDs are issued under.
    #[getter]
    fn layout(&self, py: Python<'_>) -> Py<PyLayout> {
        self.layout.clone_ref(py)
    }

    /// Whether the node is leased from a node store.
    #[getter]
    fn leased(&self) -> bool {
        self.leased
    }

    /// How long `next_id` waits at most at the lead limit, in seconds.
    #[getter]
    fn max_wait(&self) -> f64 {
        self.max_wait.as_secs_f64()
    }

    /// Whether `close()` was called (in this process or, before a fork, the parent).
    #[getter]
    fn closed(&self) -> bool {
        !self.open.load(Ordering::Relaxed)
    }

    /// Stops issuing, writes the final reservation and gives the node up, once calls waiting
    /// on other threads have seen the close (they raise `LeaseLost`, within 20 ms). Later calls
    /// raise `LeaseLost`. Closing twice does nothing; in a forked child it gives nothing up
    /// (the node is the parent's) and waits for nothing.
    pub(crate) fn close(&self, py: Python<'_>) -> PyResult<()> {
        match self.shut(py)? {
            Some(flavour) => flavour.release(py).map_err(|e| to_py(py, e)),
            None => Ok(()),
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "Generator(layout={:?}, node={}, leased={}{})",
            self.layout.get().layout.name(),
            self.node,
            if self.leased { "True" } else { "False" },
            if self.closed() { ", closed" } else { "" }
        )
    }
}
