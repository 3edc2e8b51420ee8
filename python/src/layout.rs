//! `monoflake.Layout`: a preset or a spec, checked when made, and what a layout answers.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use monoflake::{Id, Layout, PRESETS};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

use crate::convert::{aware_datetime, uint};
use crate::errors::to_py;

/// A layout: bit widths, named node fields, epoch and tick, checked when made.
#[pyclass(frozen, module = "monoflake", name = "Layout")]
pub(crate) struct PyLayout {
    pub(crate) layout: Layout,
}

/// A `layout=` argument: a `Layout`, or a preset name or spec.
pub(crate) enum LayoutArg {
    Layout(Py<PyLayout>),
    Text(String),
}

impl<'a, 'py> FromPyObject<'a, 'py> for LayoutArg {
    type Error = PyErr;

    /// Anything else is a `TypeError` that names the argument (every argument of this type
    /// is called `layout`), what it got and what it takes.
    fn extract(arg: Borrowed<'a, 'py, PyAny>) -> Result<Self, Self::Error> {
        if let Ok(layout) = arg.cast::<PyLayout>() {
            return Ok(LayoutArg::Layout(layout.to_owned().unbind()));
        }
        if let Ok(text) = arg.cast::<PyString>() {
            return Ok(LayoutArg::Text(text.to_cow()?.into_owned()));
        }
        Err(PyTypeError::new_err(format!(
            "layout={} ({}) is not a layout: give a Layout, a preset name ({}) or a spec such as \
             \"time=41,worker=10,sequence=12,epoch=2024-01-01\"",
            arg.repr()?,
            arg.get_type().name()?,
            PRESETS.join(", ")
        )))
    }
}

impl LayoutArg {
    /// The layout object (made from the text when given text).
    pub(crate) fn into_py_layout(self, py: Python<'_>) -> PyResult<Py<PyLayout>> {
        match self {
            LayoutArg::Layout(l) => Ok(l),
            LayoutArg::Text(t) => Py::new(py, PyLayout::parse(py, &t)?),
        }
    }

    /// The Rust layout.
    pub(crate) fn into_layout(self, py: Python<'_>) -> PyResult<Layout> {
        match self {
            LayoutArg::Layout(l) => Ok(l.get().layout.clone()),
            LayoutArg::Text(t) => Ok(PyLayout::parse(py, &t)?.layout),
        }
    }
}

/// The node fields `(name, bits)`, from the most significant bit.
fn fields(layout: &Layout) -> Vec<(String, u32)> {
    layout
        .node_fields()
        .iter()
        .map(|f| (f.name().to_owned(), f.bits()))
        .collect()
}

impl PyLayout {
    pub(crate) fn parse(py: Python<'_>, text: &str) -> PyResult<PyLayout> {
        text.parse()
            .map(|layout| PyLayout { layout })
            .map_err(|e| to_py(py, e))
    }
}

#[pymethods]
impl PyLayout {
    /// A preset by name (`"twitter"`, `"discord"`, …) or a spec
    /// (`"time=41,worker=10,sequence=12,epoch=2024-01-01"`), named `name` when given.
    #[new]
    #[pyo3(signature = (spec = "twitter", name = None))]
    fn new(py: Python<'_>, spec: &str, name: Option<String>) -> PyResult<Self> {
        let layout = PyLayout::parse(py, spec)?.layout;
        match name {
            Some(name) if name != layout.name() => renamed(py, &layout, name),
            _ => Ok(PyLayout { layout }),
        }
    }

    /// A custom layout from its parts; `node_fields` in order from the most significant bit.
    /// A width above 64 bits, a negative int or one beyond 64 bits is `OutOfRange`.
    // `tick_ms` is taken as any object (`None` for 1) so that an int of any size gets the one
    // error `uint` gives; the signature Python shows says 1.
    #[staticmethod]
    #[pyo3(
        signature = (*, time_bits, sequence_bits, node_fields, epoch_ms, tick_ms = None,
                     node_below_sequence = false, allow_sign_bit = false, name = None),
        text_signature = "(*, time_bits, sequence_bits, node_fields, epoch_ms, tick_ms=1, \
                          node_below_sequence=False, allow_sign_bit=False, name=None)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn custom(
        py: Python<'_>,
        time_bits: &Bound<'_, PyAny>,
        sequence_bits: &Bound<'_, PyAny>,
        node_fields: Vec<(String, Bound<'_, PyAny>)>,
        epoch_ms: &Bound<'_, PyAny>,
        tick_ms: Option<&Bound<'_, PyAny>>,
        node_below_sequence: bool,
        allow_sign_bit: bool,
        name: Option<String>,
    ) -> PyResult<Self> {
        // A width is at most 64, so it fits a u32.
        let width = |value: &Bound<'_, PyAny>, field: &str| -> PyResult<u32> {
            uint(value, field, u64::from(u64::BITS)).map(|bits| bits as u32)
        };
        let mut builder = Layout::builder()
            .time_bits(width(time_bits, "time_bits")?)
            .sequence_bits(width(sequence_bits, "sequence_bits")?)
            .epoch_ms(uint(epoch_ms, "epoch_ms", u64::MAX)?)
            .tick_ms(tick_ms.map_or(Ok(1), |t| uint(t, "tick_ms", u64::MAX))?)
            .node_below_sequence(node_below_sequence)
            .allow_sign_bit(allow_sign_bit);
        for (field, bits) in node_fields {
            let bits = width(&bits, &field)?;
            builder = builder.node_field(field, bits);
        }
        if let Some(name) = name {
            builder = builder.name(name);
        }
        builder
            .build()
            .map(|layout| PyLayout { layout })
            .map_err(|e| to_py(py, e))
    }

    /// The preset names.
    #[staticmethod]
    fn presets() -> Vec<&'static str> {
        PRESETS.to_vec()
    }

    /// The layout's name (`"twitter"`, `"custom"`, or the name given).
    #[getter]
    fn name(&self) -> &str {
        self.layout.name()
    }

    /// The spec text, as `Layout(spec)` and the CLI's `--layout` take it.
    #[getter]
    fn spec(&self) -> String {
        self.layout.to_string()
    }

    /// The name node stores kept this layout's claims under before they were kept by bit
    /// shape (still read as a floor).
    #[getter]
    fn state_name(&self) -> String {
        self.layout.state_name().into_owned()
    }

    /// The key node stores keep this layout's claims and reservations under: its bit shape,
    /// shared by every layout whose IDs can be equal (`Layout::shape_key`).
    #[getter]
    fn shape_key(&self) -> String {
        self.layout.shape_key().into_owned()
    }

    #[getter]
    fn time_bits(&self) -> u32 {
        self.layout.time_bits()
    }

    #[getter]
    fn node_bits(&self) -> u32 {
        self.layout.node_bits()
    }

    #[getter]
    fn sequence_bits(&self) -> u32 {
        self.layout.sequence_bits()
    }

    #[getter]
    fn total_bits(&self) -> u32 {
        self.layout.total_bits()
    }

    /// The node fields `(name, bits)`, from the most significant bit.
    #[getter]
    fn node_fields(&self) -> Vec<(String, u32)> {
        fields(&self.layout)
    }

    #[getter]
    fn node_below_sequence(&self) -> bool {
        self.layout.node_below_sequence()
    }

    #[getter]
    fn allows_sign_bit(&self) -> bool {
        self.layout.allows_sign_bit()
    }

    #[getter]
    fn epoch_ms(&self) -> u64 {
        self.layout.epoch_ms()
    }

    #[getter]
    fn tick_ms(&self) -> u64 {
        self.layout.tick_ms()
    }

    #[getter]
    fn max_tick(&self) -> u64 {
        self.layout.max_tick()
    }

    #[getter]
    fn max_node(&self) -> u64 {
        self.layout.max_node()
    }

    #[getter]
    fn max_sequence(&self) -> u64 {
        self.layout.max_sequence()
    }

    /// When the time field runs out, in Unix milliseconds.
    #[getter]
    fn expires_at_ms(&self) -> u64 {
        self.layout.expires_at_ms()
    }

    /// When the time field runs out, as an aware `datetime` (UTC).
    #[getter]
    fn expires_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        aware_datetime(py, self.layout.expires_at_ms())
    }

    /// The tick (time-field value) at `unix_ms`.
    fn tick_at(&self, unix_ms: &Bound<'_, PyAny>) -> PyResult<u64> {
        Ok(self.layout.tick_at(uint(unix_ms, "unix_ms", u64::MAX)?))
    }

    /// The Unix milliseconds at which `tick` starts; `OutOfRange` (field `"time"`, as
    /// `compose` says) for a tick past the time field.
    fn unix_ms_of_tick(&self, tick: &Bound<'_, PyAny>) -> PyResult<u64> {
        let tick = uint(tick, "time", self.layout.max_tick())?;
        Ok(self.layout.unix_ms_of_tick(tick))
    }

    /// The ID with these parts (`tick` is the time-field value).
    fn compose(
        &self,
        py: Python<'_>,
        tick: &Bound<'_, PyAny>,
        node: &Bound<'_, PyAny>,
        sequence: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        let layout = &self.layout;
        let tick = uint(tick, "time", layout.max_tick())?;
        let node = uint(node, "node", layout.max_node())?;
        let sequence = uint(sequence, "sequence", layout.max_sequence())?;
        layout
            .compose(tick, node, sequence)
            .map(Id::as_u64)
            .map_err(|e| to_py(py, e))
    }

    /// The ID with these parts, its time given in Unix milliseconds.
    fn compose_at(
        &self,
        py: Python<'_>,
        unix_ms: &Bound<'_, PyAny>,
        node: &Bound<'_, PyAny>,
        sequence: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        let layout = &self.layout;
        let unix_ms = uint(unix_ms, "unix_ms", u64::MAX)?;
        let node = uint(node, "node", layout.max_node())?;
        let sequence = uint(sequence, "sequence", layout.max_sequence())?;
        layout
            .compose_at(unix_ms, node, sequence)
            .map(Id::as_u64)
            .map_err(|e| to_py(py, e))
    }

    /// The node value made of named fields: `layout.node_from_fields(datacenter=1, worker=3)`.
    #[pyo3(signature = (**fields))]
    fn node_from_fields(
        &self,
        py: Python<'_>,
        fields: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<u64> {
        let mut values = Vec::new();
        if let Some(fields) = fields {
            for (k, v) in fields {
                let name = k.extract::<String>()?;
                // A field the layout has is checked here, as the library would check it, so
                // that an int of any size gets its `OutOfRange`; an unknown name is the
                // library's `InvalidFieldName`.
                let bits = self.layout.node_fields().iter().find(|f| f.name() == name);
                let value = match bits {
                    Some(f) => uint(&v, &name, mask(f.bits()))?,
                    None => 0,
                };
                values.push((name, value));
            }
        }
        let borrowed: Vec<(&str, u64)> = values.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        self.layout
            .node_from_fields(&borrowed)
            .map_err(|e| to_py(py, e))
    }

    /// The named fields of a node value, as a dict.
    fn node_fields_of<'py>(
        &self,
        py: Python<'py>,
        node: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        // The library masks a node too wide; here it is refused, as `check_node` does.
        let node = uint(node, "node", self.layout.max_node())?;
        let dict = PyDict::new(py);
        for (k, v) in self.layout.node_fields_of(node) {
            dict.set_item(k, v)?;
        }
        Ok(dict)
    }

    /// `node` if it fits the layout, else `OutOfRange`.
    fn check_node(&self, node: &Bound<'_, PyAny>) -> PyResult<u64> {
        uint(node, "node", self.layout.max_node())
    }

    fn __str__(&self) -> String {
        self.layout.to_string()
    }

    /// `Layout("twitter")` for a preset; else `Layout("<spec>")`, with `name=` when the spec
    /// alone would name it otherwise: what `eval` makes back, name included.
    fn __repr__(&self) -> String {
        let layout = &self.layout;
        if Layout::preset(layout.name()).is_ok_and(|preset| preset == *layout) {
            return format!("Layout({:?})", layout.name());
        }
        let spec = layout.to_string();
        match spec.parse::<Layout>() {
            Ok(plain) if plain.name() == layout.name() => format!("Layout({spec:?})"),
            _ => format!("Layout({spec:?}, name={:?})", layout.name()),
        }
    }

    /// Equal when they split IDs alike: the spec (widths, node field names, order, epoch,
    /// tick, sign bit). The name is a label, not compared: `Layout(odd.spec) == odd`.
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyLayout>()
            .is_ok_and(|o| shape(&o.get().layout) == shape(&self.layout))
    }

    fn __hash__(&self) -> u64 {
        let mut h = DefaultHasher::new();
        shape(&self.layout).hash(&mut h);
        h.finish()
    }

    /// Pickles as `Layout(spec, name)`.
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let layout = &slf.get().layout;
        Ok((
            slf.get_type().into_any(),
            PyTuple::new(slf.py(), [layout.to_string(), layout.name().to_owned()])?,
        ))
    }
}

/// What a layout's equality and hash compare: everything its spec says, not its name.
type Shape<'a> = (u32, u32, Vec<(&'a str, u32)>, bool, u64, u64, bool);

fn shape(layout: &Layout) -> Shape<'_> {
    (
        layout.time_bits(),
        layout.sequence_bits(),
        layout
            .node_fields()
            .iter()
            .map(|f| (f.name(), f.bits()))
            .collect(),
        layout.node_below_sequence(),
        layout.epoch_ms(),
        layout.tick_ms(),
        layout.allows_sign_bit(),
    )
}

/// `layout` named `name`: built again from its parts, as `Layout.custom(name=...)` would.
fn renamed(py: Python<'_>, layout: &Layout, name: String) -> PyResult<PyLayout> {
    let mut builder = Layout::builder()
        .time_bits(layout.time_bits())
        .sequence_bits(layout.sequence_bits())
        .epoch_ms(layout.epoch_ms())
        .tick_ms(layout.tick_ms())
        .node_below_sequence(layout.node_below_sequence())
        .allow_sign_bit(layout.allows_sign_bit())
        .name(name);
    for f in layout.node_fields() {
        builder = builder.node_field(f.name().to_owned(), f.bits());
    }
    builder
        .build()
        .map(|layout| PyLayout { layout })
        .map_err(|e| to_py(py, e))
}

/// `bits` ones, for `bits` in `0..=64`.
fn mask(bits: u32) -> u64 {
    u64::MAX.checked_shr(64 - bits.min(64)).unwrap_or(0)
}
