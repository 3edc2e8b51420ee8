//! `monoflake.Opaque`: IDs mapped through a keyed permutation, and back.

use monoflake::{Id, Opaque, OpaqueId, OpaqueKey};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::convert::id_arg;
use crate::errors::to_py;
use crate::layout::LayoutArg;

/// A key for opaque IDs: 16 raw bytes or 32 hex digits, as bytes (a key file's contents) or
/// as text.
#[derive(FromPyObject)]
enum KeyArg<'py> {
    Bytes(Bound<'py, PyBytes>),
    Text(String),
}

/// A keyed permutation of a layout's IDs: `encrypt` hides the time, node and order of an ID,
/// `decrypt` gives it back. Without the key the mapping cannot be undone.
#[pyclass(frozen, module = "monoflake", name = "Opaque")]
pub(crate) struct PyOpaque {
    opaque: Opaque,
}

#[pymethods]
impl PyOpaque {
    /// The permutation of `layout`'s IDs under `key` (16 raw bytes, or 32 hex digits as text
    /// or bytes).
    #[new]
    #[pyo3(signature = (key, layout = None))]
    fn new(py: Python<'_>, key: KeyArg<'_>, layout: Option<LayoutArg>) -> PyResult<Self> {
        let key = match key {
            KeyArg::Bytes(b) => OpaqueKey::from_file_contents(b.as_bytes()),
            KeyArg::Text(t) => OpaqueKey::from_hex(&t),
        }
        .map_err(|e| to_py(py, e))?;
        let layout = match layout {
            Some(l) => l.into_layout(py)?,
            None => crate::default::default_layout(py)?.get().layout.clone(),
        };
        Ok(PyOpaque {
            opaque: Opaque::new(&layout, key),
        })
    }

    /// The permutation under the key in the file at `path` (as `monoflake keygen -o FILE`
    /// writes it).
    #[staticmethod]
    #[pyo3(signature = (path, layout = None))]
    fn from_key_file(
        py: Python<'_>,
        path: std::path::PathBuf,
        layout: Option<LayoutArg>,
    ) -> PyResult<Self> {
        let contents = std::fs::read(&path)?;
        let key = PyBytes::new(py, &contents);
        PyOpaque::new(py, KeyArg::Bytes(key), layout)
    }

    /// How many low bits of an ID the permutation mixes (the layout's width).
    #[getter]
    fn bits(&self) -> u32 {
        self.opaque.bits()
    }

    /// The opaque form of `id`.
    fn encrypt(&self, id: &Bound<'_, PyAny>) -> PyResult<u64> {
        self.opaque
            .encrypt(Id::from_u64(id_arg(id)?))
            .map(OpaqueId::as_u64)
            .map_err(|e| to_py(id.py(), e))
    }

    /// The ID whose opaque form is `opaque`.
    fn decrypt(&self, opaque: &Bound<'_, PyAny>) -> PyResult<u64> {
        self.opaque
            .decrypt(OpaqueId::from_u64(id_arg(opaque)?))
            .map(Id::as_u64)
            .map_err(|e| to_py(opaque.py(), e))
    }

    fn __repr__(&self) -> String {
        format!("Opaque(<key>, bits={})", self.opaque.bits())
    }
}
