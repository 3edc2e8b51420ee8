//! `monoflake.encode` and `monoflake.parse`: the library's string forms of an ID.

use monoflake::{Encoding, Id};
use pyo3::prelude::*;

use crate::convert::id_arg;
use crate::errors::{Attr, Kind, raise, to_py};

/// The encoding named `name`, or `InvalidConfig` (a `ValueError`).
fn encoding(py: Python<'_>, name: &str) -> PyResult<Encoding> {
    name.parse().map_err(|message: String| {
        raise(
            py,
            Kind::InvalidConfig,
            "InvalidConfig",
            message,
            vec![
                ("setting", Attr::Str("encoding".into())),
                ("value", Attr::Str(name.to_owned())),
                (
                    "allowed",
                    Attr::Str("decimal, hex, base32 or base62".into()),
                ),
            ],
        )
    })
}

/// `id` as text: `"decimal"`, or the fixed-width, order-preserving `"hex"` (16 digits),
/// `"base32"` (13 characters of Crockford's base32, the default) or `"base62"` (11).
#[pyfunction]
#[pyo3(signature = (id, encoding = "base32"))]
pub(crate) fn encode(id: &Bound<'_, PyAny>, encoding: &str) -> PyResult<String> {
    let e = self::encoding(id.py(), encoding)?;
    Ok(Id::from_u64(id_arg(id)?).encode(e).to_string())
}

/// The ID written as `text` in `encoding` (see `encode`; hex with or without `0x`);
/// `InvalidId` if it is not one.
#[pyfunction]
#[pyo3(signature = (text, encoding = "decimal"))]
pub(crate) fn parse(py: Python<'_>, text: &str, encoding: &str) -> PyResult<u64> {
    let parsed = match self::encoding(py, encoding)? {
        // With or without 0x, 1 to 16 digits: as the CLI prints and reads hex.
        Encoding::Hex => Id::from_hex(text),
        e => Id::decode(text, e),
    };
    parsed.map(Id::as_u64).map_err(|err| to_py(py, err))
}
