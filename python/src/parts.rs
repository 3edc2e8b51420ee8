//! `monoflake.decode` and `monoflake.Parts`: an ID read back into its time, node and sequence.

use monoflake::{Id, rfc3339};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::{aware_datetime, id_arg};
use crate::errors::to_py;
use crate::layout::{LayoutArg, PyLayout};

/// The parts of an ID, as its layout reads them.
#[pyclass(frozen, module = "monoflake", name = "Parts")]
pub(crate) struct PyParts {
    /// The ID.
    #[pyo3(get)]
    id: u64,
    /// The time-field value (ticks since the layout's epoch).
    #[pyo3(get)]
    tick: u64,
    /// The time, in Unix milliseconds.
    #[pyo3(get)]
    unix_ms: u64,
    /// The node value (all node fields together).
    #[pyo3(get)]
    node: u64,
    /// The sequence within the tick.
    #[pyo3(get)]
    sequence: u64,
    /// The layout that read it.
    #[pyo3(get)]
    layout: Py<PyLayout>,
    named: Vec<(String, u64)>,
}

impl PyParts {
    /// The parts of `id` under `layout`, read by the library.
    pub(crate) fn new(py: Python<'_>, id: u64, layout: Py<PyLayout>) -> PyResult<PyParts> {
        let l = &layout.get().layout;
        let parts = Id::from_u64(id).parts(l).map_err(|e| to_py(py, e))?;
        Ok(PyParts {
            id,
            tick: parts.tick(),
            unix_ms: parts.unix_ms(),
            node: parts.node(),
            sequence: parts.sequence(),
            named: parts.fields().map(|(k, v)| (k.to_owned(), v)).collect(),
            layout: layout.clone_ref(py),
        })
    }
}

#[pymethods]
impl PyParts {
    /// The time, as an aware `datetime` in UTC (millisecond precision).
    #[getter]
    fn time<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        aware_datetime(py, self.unix_ms)
    }

    /// The time as RFC 3339 text, e.g. `2016-04-30T11:18:25.796Z`.
    #[getter]
    fn rfc3339(&self) -> String {
        rfc3339(self.unix_ms)
    }

    /// The named node fields, e.g. `{"datacenter": 1, "worker": 3}`.
    #[getter]
    fn fields<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for (k, v) in &self.named {
            dict.set_item(k, v)?;
        }
        Ok(dict)
    }

    /// One named node field, or `None` when the layout has no field of that name.
    fn field(&self, name: &str) -> Option<u64> {
        self.named.iter().find(|(k, _)| k == name).map(|&(_, v)| v)
    }

    /// The parts as a dict, with the keys of `monoflake decode --json` (the ID as an int).
    fn as_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        dict.set_item("id", self.id)?;
        dict.set_item("unix_ms", self.unix_ms)?;
        dict.set_item("time", self.rfc3339())?;
        dict.set_item("node", self.node)?;
        dict.set_item("sequence", self.sequence)?;
        for (k, v) in &self.named {
            dict.set_item(k, v)?;
        }
        Ok(dict)
    }

    /// One line, as `monoflake decode` prints it.
    fn __str__(&self, py: Python<'_>) -> PyResult<String> {
        let layout = &self.layout.get().layout;
        let parts = Id::from_u64(self.id)
            .parts(layout)
            .map_err(|e| to_py(py, e))?;
        Ok(format!("{} {parts}", self.id))
    }

    fn __repr__(&self) -> String {
        let named: String = self
            .named
            .iter()
            .map(|(k, v)| format!(", {k}={v}"))
            .collect();
        format!(
            "Parts(id={}, time={:?}, node={}{named}, sequence={})",
            self.id,
            self.rfc3339(),
            self.node,
            self.sequence
        )
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<PyParts>().is_ok_and(|o| {
            let o = o.get();
            o.id == self.id && o.layout.get().layout == self.layout.get().layout
        })
    }

    fn __hash__(&self) -> u64 {
        self.id
    }
}

/// The parts of `id` under `layout` (a `Layout`, a preset name or a spec); by default the
/// default generator's layout (`configure_default(layout=...)`, else Twitter's).
#[pyfunction]
#[pyo3(signature = (id, layout = None))]
pub(crate) fn decode(
    py: Python<'_>,
    id: &Bound<'_, PyAny>,
    layout: Option<LayoutArg>,
) -> PyResult<PyParts> {
    let id = id_arg(id)?;
    let layout = match layout {
        Some(layout) => layout.into_py_layout(py)?,
        None => crate::default::default_layout(py)?,
    };
    PyParts::new(py, id, layout)
}
