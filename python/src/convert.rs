//! Conversions at the boundary that more than one class needs: an ID argument, an int
//! argument with its range, a count of IDs (and the error of a batch too large, which gives
//! that count back), and Unix milliseconds as an aware `datetime`. It raises through
//! `errors.rs`; `errors.rs` uses nothing of it.

use monoflake::Error;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyInt};

use crate::errors::{Attr, Kind, raise, to_py};

/// An ID argument: an `int` in `0..2**64`; anything else is `InvalidId` (a `ValueError`), or a
/// `TypeError` when it is not an `int` at all.
pub(crate) fn id_arg(value: &Bound<'_, PyAny>) -> PyResult<u64> {
    if value.cast::<PyInt>().is_err() {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "an ID is an int, not {}",
            value.get_type().name()?
        )));
    }
    value.extract::<u64>().map_err(|_| {
        raise(
            value.py(),
            Kind::InvalidId,
            "InvalidId",
            format!("{value} is not an ID: an ID is an int in 0..2**64"),
            vec![("input", Attr::Str(value.to_string()))],
        )
    })
}

/// An int argument `field` in `0..=max`: an `int`, or what `operator.index` takes (a numpy
/// integer). Any other int, negative or however large, is `OutOfRange` with `field`, the value
/// (as a Python int) and `max`: one error whatever the value, never `OverflowError`. What is
/// not an int at all (a `float`, a `str`) is `operator.index`'s `TypeError`.
pub(crate) fn uint(value: &Bound<'_, PyAny>, field: &str, max: u64) -> PyResult<u64> {
    match value.extract::<u64>() {
        Ok(n) if n <= max => Ok(n),
        _ => Err(out_of_range(&index(value)?, field, max)),
    }
}

/// `operator.index(value)`: the int it stands for, or a `TypeError`.
pub(crate) fn index<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyInt>> {
    if let Ok(int) = value.cast::<PyInt>() {
        return Ok(int.clone());
    }
    static INDEX: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let py = value.py();
    let index = INDEX.get_or_try_init(py, || -> PyResult<_> {
        Ok(py.import("operator")?.getattr("index")?.unbind())
    })?;
    Ok(index.bind(py).call1((value,))?.cast_into::<PyInt>()?)
}

/// `OutOfRange` for `value` (any Python int) in a field that holds `0..=max`.
#[cold]
pub(crate) fn out_of_range(value: &Bound<'_, PyInt>, field: &str, max: u64) -> PyErr {
    raise(
        value.py(),
        Kind::OutOfRange,
        "OutOfRange",
        format!("{field} {value} is out of range: the field holds 0..={max}"),
        vec![
            ("field", Attr::Str(field.to_owned())),
            ("value", Attr::Object(value.clone().into_any().unbind())),
            ("max", Attr::Int(max)),
        ],
    )
}

/// The last millisecond a `datetime` holds: 9999-12-31 23:59:59.999 UTC.
const DATETIME_MAX_MS: u64 = 253_402_300_799_999;

/// `unix_ms` as an aware `datetime` in UTC: the epoch plus a `timedelta` of milliseconds, so
/// the value is exact (no float seconds). Past the year 9999, which `datetime` cannot hold,
/// `OutOfRange` (a `ValueError`) with `field="unix_ms"`.
pub(crate) fn aware_datetime(py: Python<'_>, unix_ms: u64) -> PyResult<Bound<'_, PyAny>> {
    if unix_ms > DATETIME_MAX_MS {
        return Err(raise(
            py,
            Kind::OutOfRange,
            "OutOfRange",
            format!(
                "unix_ms {unix_ms} is past the year 9999, beyond what a datetime holds: \
                 read the milliseconds instead"
            ),
            vec![
                ("field", Attr::Str("unix_ms".into())),
                ("value", Attr::Int(unix_ms)),
                ("max", Attr::Int(DATETIME_MAX_MS)),
            ],
        ));
    }
    static EPOCH: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    static TIMEDELTA: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let epoch = EPOCH.get_or_try_init(py, || -> PyResult<_> {
        let datetime = py.import("datetime")?;
        let utc = datetime.getattr("timezone")?.getattr("utc")?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("tzinfo", utc)?;
        Ok(datetime
            .getattr("datetime")?
            .call((1970, 1, 1), Some(&kwargs))?
            .unbind())
    })?;
    let timedelta = TIMEDELTA.get_or_try_init(py, || -> PyResult<_> {
        Ok(py.import("datetime")?.getattr("timedelta")?.unbind())
    })?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("milliseconds", unix_ms)?;
    let delta = timedelta.bind(py).call((), Some(&kwargs))?;
    epoch.bind(py).add(delta)
}

/// `n` as a count of IDs for a generator whose largest batch is `max_batch`: an int; a
/// negative one is `OutOfRange` with `max` the real limit. One beyond 64 bits is taken as
/// `u64::MAX`, which no generator issues at once: the library refuses it with `BatchTooLarge`
/// as any other batch too large, and [`batch_error`] puts the `n` given back in the error.
pub(crate) fn count(n: &Bound<'_, PyAny>, max_batch: u64) -> PyResult<u64> {
    if let Ok(n) = n.extract::<u64>() {
        return Ok(n);
    }
    let int = index(n)?;
    if int.lt(0)? {
        return Err(raise(
            n.py(),
            Kind::OutOfRange,
            "OutOfRange",
            format!(
                "n {int} is out of range: a batch holds 0..={max_batch} IDs, what fits within \
                 max_lead"
            ),
            vec![
                ("field", Attr::Str("n".into())),
                ("value", Attr::Object(int.into_any().unbind())),
                ("max", Attr::Int(max_batch)),
            ],
        ));
    }
    Ok(u64::MAX)
}

/// The Python exception for `e`, from a batch of `n` IDs (as given: perhaps beyond 64 bits).
#[cold]
pub(crate) fn batch_error(py: Python<'_>, e: Error, n: &Bound<'_, PyAny>) -> PyErr {
    match (e, index(n)) {
        (Error::BatchTooLarge { limit, .. }, Ok(n)) => raise(
            py,
            Kind::BatchTooLarge,
            "BatchTooLarge",
            format!(
                "n {n} is too large: a batch holds 0..={limit} IDs, what fits within \
                 max_lead; ask for fewer at a time"
            ),
            vec![
                ("requested", Attr::Object(n.into_any().unbind())),
                ("limit", Attr::Int(limit)),
            ],
        ),
        (other, _) => to_py(py, other),
    }
}
