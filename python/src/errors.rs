//! The exception hierarchy: one Python class per kind of `monoflake::Error`, made once when
//! the module is imported, and the conversion of an error into one of them.
//!
//! ```text
//! Error(Exception)
//! ├── WouldBlock            retry_after (s)
//! │   └── TimedOut          waited (s), retry_after (s)
//! ├── Exhausted             expired_at_ms
//! ├── LeaseLost             node, reason
//! ├── Forked                node
//! ├── NodeUnavailable       AllNodesHeld, NodeHeld, ReservationAhead
//! ├── StoreError            StateDir, UntrustedState, DamagedReservation, LegacyReservation,
//! │                         Store, ReservationUnavailable
//! ├── InvalidLayout(ValueError)
//! ├── InvalidId(ValueError)
//! ├── OutOfRange(ValueError) field, value, max
//! ├── BatchTooLarge(ValueError) requested, limit
//! ├── InvalidKey(ValueError)
//! └── InvalidConfig(ValueError) setting, value, allowed
//!
//! LeaseWarning(UserWarning)   a note about where and how a node is held
//! ```
//!
//! Every instance also carries `kind`, the name of the Rust variant (`"AllNodesHeld"`), and
//! the variant's numbers as attributes; durations are float seconds, as `time.sleep` takes.

use std::borrow::Cow;
use std::time::Duration;

use monoflake::Error;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{IntoPyDict, PyDict, PyList, PyTuple, PyType};

/// The exception classes, made at import.
pub(crate) struct Classes {
    error: Py<PyType>,
    would_block: Py<PyType>,
    timed_out: Py<PyType>,
    exhausted: Py<PyType>,
    lease_lost: Py<PyType>,
    forked: Py<PyType>,
    node_unavailable: Py<PyType>,
    store_error: Py<PyType>,
    invalid_layout: Py<PyType>,
    invalid_id: Py<PyType>,
    out_of_range: Py<PyType>,
    batch_too_large: Py<PyType>,
    invalid_key: Py<PyType>,
    invalid_config: Py<PyType>,
    lease_warning: Py<PyType>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

/// A class `name(*bases)` in module `monoflake`, made with `type()` (a class with two bases,
/// such as `InvalidId(Error, ValueError)`, cannot be made otherwise).
fn class<'py>(
    py: Python<'py>,
    name: &str,
    bases: &[&Bound<'py, PyType>],
    doc: &str,
) -> PyResult<Bound<'py, PyType>> {
    let dict = PyDict::new(py);
    dict.set_item("__module__", "monoflake")?;
    dict.set_item("__doc__", doc)?;
    // An instance made by hand (`monoflake.TimedOut("x")`) has the attributes the stubs
    // declare: `kind` the class's name, the numbers their zero values. Raised ones set them.
    dict.set_item("kind", name)?;
    for ((_, attr), default) in DEFAULTS.iter().filter(|((class, _), _)| *class == name) {
        match default {
            Default::Int => dict.set_item(attr, 0)?,
            Default::Float => dict.set_item(attr, 0.0)?,
            Default::Str => dict.set_item(attr, "")?,
        }
    }
    let bases = PyTuple::new(py, bases)?;
    py.get_type::<PyType>()
        .call1((name, bases, dict))?
        .cast_into::<PyType>()
        .map_err(Into::into)
}

/// The zero value of an attribute an instance made by hand lacks.
enum Default {
    Int,
    Float,
    Str,
}

/// The attributes each class declares in the stubs, beyond `kind`.
const DEFAULTS: &[((&str, &str), Default)] = &[
    (("WouldBlock", "retry_after"), Default::Float),
    (("TimedOut", "waited"), Default::Float),
    (("Exhausted", "expired_at_ms"), Default::Int),
    (("LeaseLost", "node"), Default::Int),
    (("LeaseLost", "reason"), Default::Str),
    (("Forked", "node"), Default::Int),
    (("OutOfRange", "field"), Default::Str),
    (("OutOfRange", "value"), Default::Int),
    (("OutOfRange", "max"), Default::Int),
    (("BatchTooLarge", "requested"), Default::Int),
    (("BatchTooLarge", "limit"), Default::Int),
    (("InvalidConfig", "setting"), Default::Str),
    (("InvalidConfig", "value"), Default::Str),
    (("InvalidConfig", "allowed"), Default::Str),
];

/// Makes the classes and adds them to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let exception = py.get_type::<pyo3::exceptions::PyException>();
    let value_error = py.get_type::<PyValueError>();
    let error = class(
        py,
        "Error",
        &[&exception],
        "Base class of every monoflake error. `kind` names the Rust variant; the message \
         gives the numbers.",
    )?;
    let would_block = class(
        py,
        "WouldBlock",
        &[&error],
        "Issuing now would run the time field further ahead of the clock than max_lead \
         allows. Nothing was issued; retry after `retry_after` seconds, or call next_id(), \
         which waits.",
    )?;
    let timed_out = class(
        py,
        "TimedOut",
        &[&would_block],
        "A waiting call waited its max_wait (`waited` seconds) at the lead limit and gave up. \
         Nothing was issued.",
    )?;
    let exhausted = class(
        py,
        "Exhausted",
        &[&error],
        "The layout's time field has run out (at `expired_at_ms`): no ID can be issued under \
         it again.",
    )?;
    let lease_lost = class(
        py,
        "LeaseLost",
        &[&error],
        "The claim on the node ID was lost or released, so issuing stopped. Make a new \
         Generator.",
    )?;
    let forked = class(
        py,
        "Forked",
        &[&error],
        "The process was forked after this Generator was made: the child refuses to issue \
         under the parent's node. Make a new Generator in the child, or use \
         monoflake.next_id(), which claims a new node after a fork.",
    )?;
    let node_unavailable = class(
        py,
        "NodeUnavailable",
        &[&error],
        "No node ID could be claimed: every one is held, the one asked for is held, or its \
         time reservation is too far ahead of this clock.",
    )?;
    let store_error = class(
        py,
        "StoreError",
        &[&error],
        "The node store (the state directory, etcd) cannot be used, or the time reservation \
         could not be written in time.",
    )?;
    let bad = |name: &str, doc: &str| class(py, name, &[&error, &value_error], doc);
    let invalid_layout = bad(
        "InvalidLayout",
        "A layout cannot be built or parsed: the message says which field and the numbers.",
    )?;
    let invalid_id = bad(
        "InvalidId",
        "A value is not an ID of the layout (unparsable, too wide, or sign bit set).",
    )?;
    let out_of_range = bad(
        "OutOfRange",
        "A value does not fit its field (`field`, `value`, `max`).",
    )?;
    let batch_too_large = bad(
        "BatchTooLarge",
        "A batch of `requested` IDs can never be issued at once: at most `limit` fit within \
         max_lead. Nothing was issued; ask for fewer at a time.",
    )?;
    let invalid_key = bad("InvalidKey", "A key for opaque IDs is malformed.")?;
    let invalid_config = bad(
        "InvalidConfig",
        "A generator setting is outside what can be kept safely (`setting`, `value`, \
         `allowed`).",
    )?;
    let lease_warning = py
        .get_type::<PyType>()
        .call1((
            "LeaseWarning",
            (py.get_type::<pyo3::exceptions::PyUserWarning>(),),
            [
                ("__module__", "monoflake"),
                (
                    "__doc__",
                    "A note about where and how a node is held, said once: the default state \
                     directory is this user's own (the host-wide one cannot be used), or the \
                     default generator claimed a node again after its lease was lost.",
                ),
            ]
            .into_py_dict(py)?,
        ))?
        .cast_into::<PyType>()?;
    for c in [
        &lease_warning,
        &error,
        &would_block,
        &timed_out,
        &exhausted,
        &lease_lost,
        &forked,
        &node_unavailable,
        &store_error,
        &invalid_layout,
        &invalid_id,
        &out_of_range,
        &batch_too_large,
        &invalid_key,
        &invalid_config,
    ] {
        m.add(c.name()?, c)?;
    }
    let _ = CLASSES.set(
        py,
        Classes {
            error: error.unbind(),
            would_block: would_block.unbind(),
            timed_out: timed_out.unbind(),
            exhausted: exhausted.unbind(),
            lease_lost: lease_lost.unbind(),
            forked: forked.unbind(),
            node_unavailable: node_unavailable.unbind(),
            store_error: store_error.unbind(),
            invalid_layout: invalid_layout.unbind(),
            invalid_id: invalid_id.unbind(),
            out_of_range: out_of_range.unbind(),
            batch_too_large: batch_too_large.unbind(),
            invalid_key: invalid_key.unbind(),
            invalid_config: invalid_config.unbind(),
            lease_warning: lease_warning.unbind(),
        },
    );
    Ok(())
}

/// Warns `message` as a `monoflake.LeaseWarning`, at the caller's line; an error when warnings
/// are errors (`-W error`).
pub(crate) fn warn(py: Python<'_>, message: &str) -> PyResult<()> {
    let Some(c) = CLASSES.get(py) else {
        return Ok(());
    };
    let message = std::ffi::CString::new(message.replace('\0', " "))?;
    PyErr::warn(py, c.lease_warning.bind(py), &message, 1)
}

/// Whether `err` is an exception of class `kind` (or of a subclass).
pub(crate) fn is(py: Python<'_>, err: &PyErr, kind: Kind) -> bool {
    let Some(c) = CLASSES.get(py) else {
        return false;
    };
    err.is_instance(py, c.class(kind).bind(py))
}

/// An attribute value of an exception.
pub(crate) enum Attr {
    Int(u64),
    Str(String),
    /// A Python value as given (an int beyond 64 bits, a negative one).
    Object(Py<PyAny>),
    List(Vec<String>),
    Secs(Duration),
}

impl<'py> IntoPyObject<'py> for Attr {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> Result<Bound<'py, PyAny>, Self::Error> {
        Ok(match self {
            Attr::Int(n) => n.into_pyobject(py)?.into_any(),
            Attr::Object(o) => o.into_bound(py),
            Attr::Str(s) => s.into_pyobject(py)?.into_any(),
            Attr::List(l) => PyList::new(py, l)?.into_any(),
            Attr::Secs(d) => d.as_secs_f64().into_pyobject(py)?.into_any(),
        })
    }
}

/// Which class an error is raised as.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Error,
    WouldBlock,
    TimedOut,
    Exhausted,
    LeaseLost,
    Forked,
    NodeUnavailable,
    StoreError,
    InvalidLayout,
    InvalidId,
    OutOfRange,
    BatchTooLarge,
    InvalidKey,
    InvalidConfig,
}

/// An exception of class `kind` with `message`, `kind` set to `variant` and these attributes.
pub(crate) fn raise(
    py: Python<'_>,
    kind: Kind,
    variant: &str,
    message: String,
    attrs: Vec<(&'static str, Attr)>,
) -> PyErr {
    match make(py, kind, variant, message, attrs) {
        Ok(err) | Err(err) => err,
    }
}

fn make(
    py: Python<'_>,
    kind: Kind,
    variant: &str,
    message: String,
    attrs: Vec<(&'static str, Attr)>,
) -> PyResult<PyErr> {
    let Some(c) = CLASSES.get(py) else {
        return Ok(pyo3::exceptions::PyRuntimeError::new_err(message));
    };
    let value = c.class(kind).bind(py).call1((message,))?;
    value.setattr("kind", variant)?;
    for (name, attr) in attrs {
        value.setattr(name, attr)?;
    }
    Ok(PyErr::from_value(value))
}

impl Classes {
    /// The class of `kind`.
    fn class(&self, kind: Kind) -> &Py<PyType> {
        let c = self;
        match kind {
            Kind::Error => &c.error,
            Kind::WouldBlock => &c.would_block,
            Kind::TimedOut => &c.timed_out,
            Kind::Exhausted => &c.exhausted,
            Kind::LeaseLost => &c.lease_lost,
            Kind::Forked => &c.forked,
            Kind::NodeUnavailable => &c.node_unavailable,
            Kind::StoreError => &c.store_error,
            Kind::InvalidLayout => &c.invalid_layout,
            Kind::InvalidId => &c.invalid_id,
            Kind::OutOfRange => &c.out_of_range,
            Kind::BatchTooLarge => &c.batch_too_large,
            Kind::InvalidKey => &c.invalid_key,
            Kind::InvalidConfig => &c.invalid_config,
        }
    }
}

/// The Python exception for `e`.
#[cold]
pub(crate) fn to_py(py: Python<'_>, e: Error) -> PyErr {
    use Attr::{Int, List, Secs, Str};
    let message = e.to_string();
    let (kind, variant, attrs, cause): (_, Cow<'static, str>, Vec<(&'static str, Attr)>, _) =
        match e {
            Error::WouldBlock { retry_after, .. } => (
                Kind::WouldBlock,
                "WouldBlock".into(),
                vec![("retry_after", Secs(retry_after))],
                None,
            ),
            Error::TimedOut {
                waited,
                retry_after,
                ..
            } => (
                Kind::TimedOut,
                "TimedOut".into(),
                vec![("waited", Secs(waited)), ("retry_after", Secs(retry_after))],
                None,
            ),
            Error::Exhausted { expired_at_ms, .. } => (
                Kind::Exhausted,
                "Exhausted".into(),
                vec![("expired_at_ms", Int(expired_at_ms))],
                None,
            ),
            Error::LeaseLost { node, reason, .. } => (
                Kind::LeaseLost,
                "LeaseLost".into(),
                vec![("node", Int(node)), ("reason", Str(reason))],
                None,
            ),
            Error::Forked { node, .. } => return forked_with(py, node, message),
            Error::AllNodesHeld {
                count,
                ahead,
                unusable,
                unusable_reasons,
                ..
            } => (
                Kind::NodeUnavailable,
                "AllNodesHeld".into(),
                vec![
                    ("count", Int(count)),
                    ("ahead", Int(ahead)),
                    ("unusable", Int(unusable)),
                    ("unusable_reasons", List(unusable_reasons)),
                ],
                None,
            ),
            Error::NodeHeld { node, .. } => (
                Kind::NodeUnavailable,
                "NodeHeld".into(),
                vec![("node", Int(node))],
                None,
            ),
            Error::ReservationAhead {
                node,
                reserved_until_ms,
                ahead,
                tolerance,
                ..
            } => (
                Kind::NodeUnavailable,
                "ReservationAhead".into(),
                vec![
                    ("node", Int(node)),
                    ("reserved_until_ms", Int(reserved_until_ms)),
                    ("ahead", Secs(ahead)),
                    ("tolerance", Secs(tolerance)),
                ],
                None,
            ),
            Error::ReservationUnavailable { node, reason, .. } => (
                Kind::StoreError,
                "ReservationUnavailable".into(),
                vec![("node", Int(node)), ("reason", Str(reason))],
                None,
            ),
            Error::StateDir {
                path,
                action,
                source,
                ..
            } => (
                Kind::StoreError,
                "StateDir".into(),
                vec![
                    ("path", Str(path.display().to_string())),
                    ("action", Str(action.to_owned())),
                ],
                Some(PyErr::from(source)),
            ),
            Error::UntrustedState { path, reason, .. } => (
                Kind::StoreError,
                "UntrustedState".into(),
                vec![
                    ("path", Str(path.display().to_string())),
                    ("reason", Str(reason)),
                ],
                None,
            ),
            Error::LegacyReservation { path, .. } => (
                Kind::StoreError,
                "LegacyReservation".into(),
                vec![("path", Str(path.display().to_string()))],
                None,
            ),
            Error::DamagedReservation { path, reason, .. } => (
                Kind::StoreError,
                "DamagedReservation".into(),
                vec![
                    ("path", Str(path.display().to_string())),
                    ("reason", Str(reason)),
                ],
                None,
            ),
            Error::Store { store, reason, .. } => (
                Kind::StoreError,
                "Store".into(),
                vec![("store", Str(store)), ("reason", Str(reason))],
                None,
            ),
            Error::OutOfRange {
                field, value, max, ..
            } => (
                Kind::OutOfRange,
                "OutOfRange".into(),
                vec![
                    ("field", Str(field)),
                    ("value", Int(value)),
                    ("max", Int(max)),
                ],
                None,
            ),
            Error::BatchTooLarge {
                requested, limit, ..
            } => (
                Kind::BatchTooLarge,
                "BatchTooLarge".into(),
                vec![("requested", Int(requested)), ("limit", Int(limit))],
                None,
            ),
            Error::InvalidId { input, .. } => (
                Kind::InvalidId,
                "InvalidId".into(),
                vec![("input", Str(input))],
                None,
            ),
            Error::IdTooWide {
                id, layout_bits, ..
            } => (
                Kind::InvalidId,
                "IdTooWide".into(),
                vec![("id", Int(id)), ("layout_bits", Int(layout_bits.into()))],
                None,
            ),
            Error::SignBitSet { id, .. } => (
                Kind::InvalidId,
                "SignBitSet".into(),
                vec![("id", Int(id))],
                None,
            ),
            Error::InvalidKey { .. } => (Kind::InvalidKey, "InvalidKey".into(), vec![], None),
            Error::InvalidConfig {
                setting,
                value,
                allowed,
                ..
            } => (
                Kind::InvalidConfig,
                "InvalidConfig".into(),
                vec![
                    ("setting", Str(setting.to_owned())),
                    ("value", Str(value)),
                    ("allowed", Str(allowed)),
                ],
                None,
            ),
            // The library's other bad-input variants are the layout's (too wide, a zero
            // width, a bad field or layout name, a zero tick, an epoch in the future, a bad
            // spec, an unknown preset): the classes above take the rest.
            other if other.is_bad_input() => (
                Kind::InvalidLayout,
                variant_name(&other).into(),
                vec![],
                None,
            ),
            other => (Kind::Error, variant_name(&other).into(), vec![], None),
        };
    let err = raise(py, kind, &variant, message, attrs);
    if let Some(cause) = cause {
        err.set_cause(py, Some(cause));
    }
    err
}

/// `Forked` for a generator on `node` used in a forked child, as the library words it.
#[cold]
pub(crate) fn forked(py: Python<'_>, node: u64) -> PyErr {
    forked_with(
        py,
        node,
        format!(
            "node {node}: this process was forked after the generator was built; the child \
             must not issue under the parent's node (build a new generator in the child)"
        ),
    )
}

/// `Forked` with the library's `message`, and what to do in Python.
fn forked_with(py: Python<'_>, node: u64, message: String) -> PyErr {
    let message = format!(
        "{message}; in Python: monoflake.Generator(...) in the child, or monoflake.next_id(), \
         which claims a new node after a fork"
    );
    raise(
        py,
        Kind::Forked,
        "Forked",
        message,
        vec![("node", Attr::Int(node))],
    )
}

/// The variant's name, from its derived `Debug` (`ZeroTick`, `LayoutTooWide { .. }`).
fn variant_name(e: &Error) -> String {
    let debug = format!("{e:?}");
    let end = debug
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(debug.len());
    debug[..end].to_owned()
}
