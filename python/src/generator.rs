//! `monoflake.Generator`: a leased generator (or, by `Generator.unleased`, a plain one),
//! shared between threads, released by `close()` or at the end of a `with` block.
//!
//! * **The common path holds the GIL**: a call first tries the library's non-waiting call
//!   (`try_next_id`), which answers in nanoseconds; only when it says `WouldBlock` (the lead
//!   limit) does the call release the GIL and wait in the library's waiting call.
//! * **Closing** takes the generator out under a write lock, with the GIL released, so it
//!   waits for calls waiting on other threads; a call that finds it closed, or being closed,
//!   raises `LeaseLost`. A call never waits for the lock with the GIL held (`try_read`): a
//!   waiting caller needs the GIL back to finish, so blocking there could deadlock.

use std::sync::{PoisonError, RwLock, TryLockError};

use monoflake::{Error, Generator, Id, IdGenerator, Ids, Leased};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::errors::{Attr, Kind, count, raise, to_py};
use crate::layout::{LayoutArg, PyLayout};
use crate::options::{Args, NodeArg, Options, Tuning};
use crate::stats::PyStats;

/// The two flavours behind one Python class.
enum Flavour {
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

    fn last_tick(&self) -> u64 {
        match self {
            Flavour::Leased(g) => g.last_tick(),
            Flavour::Plain(g) => g.last_tick(),
        }
    }
}

/// A generator of IDs on one node: leased from a node store (`Generator(...)`), or on a node
/// the caller assigns (`Generator.unleased(...)`). Thread-safe; a context manager that
/// releases its node on exit.
#[pyclass(frozen, module = "monoflake", name = "Generator")]
pub(crate) struct PyGenerator {
    inner: RwLock<Option<Flavour>>,
    layout: Py<PyLayout>,
    node: u64,
    leased: bool,
    max_wait: f64,
}

impl PyGenerator {
    fn wrap(py: Python<'_>, flavour: Flavour) -> PyResult<Self> {
        let max_wait = match &flavour {
            Flavour::Leased(g) => g.max_wait(),
            Flavour::Plain(g) => g.max_wait(),
        };
        let (layout, node) = (
            flavour.contract().layout().clone(),
            flavour.contract().node(),
        );
        Ok(PyGenerator {
            leased: matches!(flavour, Flavour::Leased(_)),
            inner: RwLock::new(Some(flavour)),
            layout: Py::new(py, PyLayout { layout })?,
            node,
            max_wait: max_wait.as_secs_f64(),
        })
    }

    /// Runs `f` on the generator, or raises `LeaseLost` when it is closed or being closed.
    #[inline]
    fn with<R>(&self, py: Python<'_>, f: impl FnOnce(&Flavour) -> PyResult<R>) -> PyResult<R> {
        let guard = match self.inner.try_read() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return Err(self.closed_error(py)),
        };
        match &*guard {
            Some(g) => f(g),
            None => Err(self.closed_error(py)),
        }
    }

    /// `n` IDs, waiting (the GIL released) at the lead limit.
    fn ids(&self, py: Python<'_>, n: i64) -> PyResult<Ids> {
        let n = count(py, n)?;
        self.with(py, |g| match g.contract().try_next_ids(n) {
            Ok(ids) => Ok(ids),
            Err(Error::WouldBlock { .. }) => py
                .detach(|| g.contract().next_ids(n))
                .map_err(|e| to_py(py, e)),
            Err(e) => Err(to_py(py, e)),
        })
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
        let leased = py.detach(|| options.build()).map_err(|e| to_py(py, e))?;
        PyGenerator::wrap(py, Flavour::Leased(leased))
    }

    /// A generator on `node`, which the caller guarantees no other live generator of this
    /// layout uses: no lease, no time reservation.
    #[staticmethod]
    #[pyo3(signature = (layout, node, *, max_lead = None, max_wait = None, start_offset_bits = 0))]
    fn unleased(
        py: Python<'_>,
        layout: LayoutArg,
        node: u64,
        max_lead: Option<f64>,
        max_wait: Option<f64>,
        start_offset_bits: u32,
    ) -> PyResult<Self> {
        let tuning = Tuning::new(py, max_lead, max_wait, start_offset_bits)?;
        let builder = Generator::builder(layout.into_layout(py)?).node(node);
        let generator = tuning.apply(builder).build().map_err(|e| to_py(py, e))?;
        PyGenerator::wrap(py, Flavour::Plain(Box::new(generator)))
    }

    /// One ID, waiting (the GIL released) at the lead limit, for at most `max_wait`.
    fn next_id(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |g| match g.try_next_id() {
            Ok(id) => Ok(id.as_u64()),
            Err(Error::WouldBlock { .. }) => py
                .detach(|| g.contract().next_id())
                .map(Id::as_u64)
                .map_err(|e| to_py(py, e)),
            Err(e) => Err(to_py(py, e)),
        })
    }

    /// One ID without waiting: `WouldBlock` (with `retry_after`) at the lead limit.
    fn try_next_id(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |g| {
            g.try_next_id().map(Id::as_u64).map_err(|e| to_py(py, e))
        })
    }

    /// `n` consecutive IDs, reserved at once, as a list; waits as `next_id`.
    fn next_ids<'py>(&self, py: Python<'py>, n: i64) -> PyResult<Bound<'py, PyList>> {
        list(py, self.ids(py, n)?)
    }

    /// `n` consecutive IDs as an `array.array("Q")` (unsigned 64-bit, native order): what
    /// `next_ids` does without making `n` int objects; waits as `next_id`.
    fn next_ids_array<'py>(&self, py: Python<'py>, n: i64) -> PyResult<Bound<'py, PyAny>> {
        array(py, self.ids(py, n)?)
    }

    /// `n` consecutive IDs without waiting: `WouldBlock` when they do not fit the lead.
    fn try_next_ids<'py>(&self, py: Python<'py>, n: i64) -> PyResult<Bound<'py, PyList>> {
        let n = count(py, n)?;
        let ids = self.with(py, |g| {
            g.contract().try_next_ids(n).map_err(|e| to_py(py, e))
        })?;
        list(py, ids)
    }

    /// Whether a call could issue now, without issuing: `None`, or the error it would raise
    /// (`LeaseLost` once the lease is lost or released).
    fn check(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |g| g.check().map_err(|e| to_py(py, e)))
    }

    /// The generator's counters.
    fn stats(&self, py: Python<'_>) -> PyResult<PyStats> {
        self.with(py, |g| Ok(PyStats::from(g.contract().stats())))
    }

    /// The time-field value of the last ID issued (or of the start point).
    #[getter]
    fn last_tick(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |g| Ok(g.last_tick()))
    }

    /// The node value every ID carries.
    #[getter]
    fn node(&self) -> u64 {
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
        self.max_wait
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none()
    }

    /// Stops issuing, writes the final reservation and gives the node up (once calls waiting
    /// on other threads return). Later calls raise `LeaseLost`. Closing twice does nothing;
    /// in a forked child it gives nothing up (the node is the parent's).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = py.detach(|| {
            self.inner
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
        });
        match taken {
            Some(Flavour::Leased(leased)) => {
                py.detach(|| leased.release()).map_err(|e| to_py(py, e))
            }
            _ => Ok(()),
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

impl Drop for PyGenerator {
    /// Dropped by the garbage collector: releasing a lease writes and fsyncs a file, so the GIL
    /// is released meanwhile.
    fn drop(&mut self) {
        if let Some(flavour) = self
            .inner
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            Python::attach(|py| py.detach(move || drop(flavour)));
        }
    }
}
