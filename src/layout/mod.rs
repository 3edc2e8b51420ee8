//! How the 64 bits of an ID are split: time, node fields, sequence; the epoch and the tick.
//!
//! * `bits.rs`: [`Layout`] and [`NodeField`], and everything read from a layout;
//! * `presets.rs`: the preset table, checked when the crate compiles, and the constructors
//!   that read it;
//! * `builder.rs`: [`LayoutBuilder`] and the validation every layout passes;
//! * `epoch.rs`: an epoch as text (Unix ms or RFC 3339), for the builder and the spec;
//! * `spec.rs`: a layout as one line of text (`FromStr`, `Display`), and the key node stores
//!   keep its state under (`Layout::shape_key`; `Layout::state_name`, the key of before).
//!
//! This file only hands names on. The arrows run one way: `builder` uses `presets`, `bits`
//! and `epoch`, `presets` uses `bits`, `bits` and `epoch` use none of them; `spec` uses
//! `epoch` and takes the layout and the preset table through this file.

mod bits;
mod builder;
mod epoch;
mod presets;
mod spec;

pub use self::bits::{Layout, NodeField};
pub use self::builder::LayoutBuilder;
pub use self::presets::PRESETS;

pub(crate) use self::bits::{check, mask};
// For `spec.rs`, which maps a spec onto the preset whose IDs it makes.
use self::presets::ALL_PRESETS;
