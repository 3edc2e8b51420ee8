//! `monoflake.Stats`: a snapshot of a generator's counters.

use monoflake::Stats;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Defines the class, its conversion and `as_dict` from one list of fields (the library's
/// `Stats`, which documents each).
macro_rules! stats_class {
    ($($field:ident: $ty:ty),* $(,)?) => {
        /// What a generator has been doing (see the Rust `Stats` for each counter).
        #[pyclass(frozen, get_all, module = "monoflake", name = "Stats")]
        pub(crate) struct PyStats {
            $($field: $ty,)*
        }

        impl From<Stats> for PyStats {
            fn from(s: Stats) -> Self {
                PyStats { $($field: s.$field,)* }
            }
        }

        #[pymethods]
        impl PyStats {
            /// The counters as a dict.
            fn as_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                let dict = PyDict::new(py);
                $(dict.set_item(stringify!($field), self.$field)?;)*
                Ok(dict)
            }

            fn __repr__(&self) -> String {
                let fields: Vec<String> =
                    vec![$(format!("{}={}", stringify!($field), self.$field)),*];
                format!("Stats({})", fields.join(", "))
            }
        }
    };
}

stats_class! {
    issued: u64,
    borrowed_ticks: u64,
    max_lead_ticks: u64,
    would_block_returned: u64,
    waiting_calls: u64,
    wait_retries: u64,
    wait_spins: u64,
    wait_yields: u64,
    wait_sleeps: u64,
    timed_out: u64,
    reanchors: u64,
    max_skew_ns: u64,
    skew_ns: i64,
    slew_left_ns: u64,
    clock_held_back_ns: u64,
    nodes_skipped_ahead: u64,
    claim_wait_ms: u64,
    reservation_writes: u64,
    reservation_failures: u64,
    lease_renewals: u64,
    lease_losses: u64,
}
