//! The built-in layouts: one table of presets as constant data, every one checked when the
//! crate compiles, and what reads the table: [`PRESETS`], `Layout::preset`, `Layout::twitter`
//! and the other named constructors, and `Default`.
//!
//! Imports the layout type (`bits.rs`) and nothing else of the layout.

use std::borrow::Cow;

use super::bits::{Layout, NodeField};
use crate::Error;

/// The names of the built-in presets, as [`Layout::preset`] takes them.
///
/// ```
/// assert_eq!(monoflake::PRESETS[0], "twitter");
/// assert!(monoflake::PRESETS.iter().all(|name| monoflake::Layout::preset(name).is_ok()));
/// ```
pub const PRESETS: &[&str] = &{
    let mut names = [""; ALL_PRESETS.len()];
    let mut i = 0;
    while i < ALL_PRESETS.len() {
        names[i] = ALL_PRESETS[i].name;
        i += 1;
    }
    names
};

/// A preset as constant data, checked when the crate compiles.
pub(super) struct Preset {
    pub(super) name: &'static str,
    time_bits: u32,
    fields: &'static [(&'static str, u32)],
    sequence_bits: u32,
    node_low: bool,
    epoch_ms: u64,
    tick_ms: u64,
    allow_sign_bit: bool,
}

impl Preset {
    /// The checks of [`LayoutBuilder::build`] that do not depend on
    /// the current time.
    ///
    /// [`LayoutBuilder::build`]: crate::LayoutBuilder::build
    const fn is_valid(&self) -> bool {
        let mut total = self.time_bits + self.sequence_bits;
        let mut i = 0;
        while i < self.fields.len() {
            if self.fields[i].1 == 0 {
                return false;
            }
            total += self.fields[i].1;
            i += 1;
        }
        let max = if self.allow_sign_bit { 64 } else { 63 };
        self.time_bits > 0 && self.sequence_bits > 0 && self.tick_ms > 0 && total <= max
    }

    pub(super) fn layout(&self) -> Layout {
        let fields: Vec<NodeField> = self
            .fields
            .iter()
            .map(|&(n, bits)| NodeField {
                name: Cow::Borrowed(n),
                bits,
            })
            .collect();
        Layout {
            name: Cow::Borrowed(self.name),
            time_bits: self.time_bits,
            node_bits: fields.iter().map(|f| f.bits).sum(),
            sequence_bits: self.sequence_bits,
            fields,
            node_low: self.node_low,
            epoch_ms: self.epoch_ms,
            tick_ms: self.tick_ms,
            allow_sign_bit: self.allow_sign_bit,
        }
    }
}

pub(super) const TWITTER: Preset = Preset {
    name: "twitter",
    time_bits: 41,
    fields: &[("datacenter", 5), ("worker", 5)],
    sequence_bits: 12,
    node_low: false,
    epoch_ms: 1_288_834_974_657,
    tick_ms: 1,
    allow_sign_bit: false,
};
const DISCORD: Preset = Preset {
    name: "discord",
    time_bits: 42,
    fields: &[("worker", 5), ("process", 5)],
    sequence_bits: 12,
    node_low: false,
    epoch_ms: 1_420_070_400_000,
    tick_ms: 1,
    allow_sign_bit: true,
};
const SONYFLAKE: Preset = Preset {
    name: "sonyflake",
    time_bits: 39,
    fields: &[("machine", 16)],
    sequence_bits: 8,
    node_low: true,
    epoch_ms: 1_409_529_600_000,
    tick_ms: 10,
    allow_sign_bit: false,
};
const BAIDU: Preset = Preset {
    name: "baidu",
    time_bits: 28,
    fields: &[("worker", 22)],
    sequence_bits: 13,
    node_low: false,
    epoch_ms: 1_463_673_600_000,
    tick_ms: 1000,
    allow_sign_bit: false,
};
const JS_SAFE: Preset = Preset {
    name: "js-safe",
    time_bits: 41,
    fields: &[("worker", 6)],
    sequence_bits: 6,
    node_low: false,
    epoch_ms: 1_582_136_402_000,
    tick_ms: 1,
    allow_sign_bit: false,
};
const GAME_SERVER: Preset = Preset {
    name: "game-server",
    time_bits: 31,
    fields: &[("server", 16)],
    sequence_bits: 16,
    node_low: false,
    epoch_ms: 1_704_067_200_000,
    tick_ms: 1000,
    allow_sign_bit: false,
};

/// The one preset table: every name, lookup and check goes through it.
pub(super) const ALL_PRESETS: [&Preset; 6] = [
    &TWITTER,
    &DISCORD,
    &SONYFLAKE,
    &BAIDU,
    &JS_SAFE,
    &GAME_SERVER,
];

// Every preset is a valid layout: checked when the crate compiles, not when it is used.
const _: () = {
    let mut i = 0;
    while i < ALL_PRESETS.len() {
        assert!(ALL_PRESETS[i].is_valid());
        i += 1;
    }
    // js-safe IDs must stay below 2^53.
    assert!(JS_SAFE.time_bits + JS_SAFE.fields[0].1 + JS_SAFE.sequence_bits <= 53);
};

impl Layout {
    /// Looks a preset up by name (see [`PRESETS`]).
    ///
    /// ```
    /// use monoflake::{Error, Layout};
    ///
    /// assert_eq!(Layout::preset("discord")?, Layout::discord());
    /// assert!(matches!(Layout::preset("flickr"), Err(Error::UnknownPreset { .. })));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn preset(name: &str) -> Result<Layout, Error> {
        ALL_PRESETS
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.layout())
            .ok_or_else(|| Error::UnknownPreset {
                name: name.to_owned(),
                known: PRESETS,
            })
    }

    /// Twitter's Snowflake, the default: 41 bits of milliseconds since 2010-11-04T01:42:54.657Z,
    /// datacenter 5 + worker 5 bits, 12 bits of sequence (4096 IDs per ms). Runs out in 2080.
    ///
    /// ```
    /// let layout = monoflake::Layout::twitter();
    /// assert_eq!((layout.time_bits(), layout.node_bits(), layout.sequence_bits()), (41, 10, 12));
    /// assert_eq!(layout.epoch_ms(), 1_288_834_974_657);
    /// ```
    pub fn twitter() -> Layout {
        TWITTER.layout()
    }

    /// Discord's snowflake: 42 bits of milliseconds since 2015-01-01, worker 5 + process 5
    /// bits, 12 bits of increment. It uses all 64 bits (an unsigned ID).
    ///
    /// ```
    /// let layout = monoflake::Layout::discord();
    /// assert_eq!(layout.total_bits(), 64);
    /// assert_eq!(layout.epoch_ms(), 1_420_070_400_000);
    /// ```
    pub fn discord() -> Layout {
        DISCORD.layout()
    }

    /// Sonyflake: 39 bits of 10 ms units since 2014-09-01, 8 bits of sequence, and a 16-bit
    /// machine ID placed *below* the sequence. 256 IDs per 10 ms per machine.
    ///
    /// ```
    /// let layout = monoflake::Layout::sonyflake();
    /// assert!(layout.node_below_sequence());
    /// assert_eq!(layout.tick(), std::time::Duration::from_millis(10));
    /// ```
    pub fn sonyflake() -> Layout {
        SONYFLAKE.layout()
    }

    /// Baidu uid-generator's default: 28 bits of seconds since 2016-05-20 00:00 China Standard
    /// Time, a 22-bit worker, 13 bits of sequence. Its time field ran out in November 2024:
    /// it decodes old IDs, and generating with it fails with [`Error::Exhausted`].
    ///
    /// ```
    /// let layout = monoflake::Layout::baidu();
    /// assert_eq!(monoflake::rfc3339(layout.expires_at_ms()), "2024-11-20T13:24:16.000Z");
    /// ```
    pub fn baidu() -> Layout {
        BAIDU.layout()
    }

    /// A layout whose IDs stay below 2^53, so a JavaScript number holds them exactly: 41 bits
    /// of milliseconds since yitter's base time (2020-02-19T18:20:02Z), node 6, sequence 6.
    ///
    /// ```
    /// let layout = monoflake::Layout::js_safe();
    /// assert_eq!(layout.total_bits(), 53);
    /// ```
    pub fn js_safe() -> Layout {
        JS_SAFE.layout()
    }

    /// For game servers: 31 bits of seconds, 16 bits of server, 16 bits of sequence (65536 IDs
    /// per second per server), counted from 2024-01-01T00:00:00Z; good until 2092. Use
    /// [`Layout::builder`] for another epoch.
    ///
    /// ```
    /// let layout = monoflake::Layout::game_server();
    /// assert_eq!(layout.max_node(), 65_535);
    /// ```
    pub fn game_server() -> Layout {
        GAME_SERVER.layout()
    }
}

impl Default for Layout {
    /// The Twitter layout.
    fn default() -> Self {
        Layout::twitter()
    }
}
