//! How the 64 bits of an ID are split: time, node fields, sequence; the epoch and the tick.

mod spec;

use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::Error;

/// The names of the built-in presets, as [`Layout::preset`] takes them (from the one preset
/// table, `ALL_PRESETS`).
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

/// Names a node field may not take: the keys of a decoded ID, and the settings of a layout
/// spec (`epoch`, `tick`, `sign_bit`), so that every layout can be written as a spec.
const RESERVED_NAMES: &[&str] = &[
    "id", "unix_ms", "time", "node", "sequence", "epoch", "tick", "sign_bit",
];

/// One named part of the node value, e.g. `datacenter` or `worker`.
///
/// # Example
///
/// ```
/// let layout = monoflake::Layout::twitter();
/// let fields: Vec<(&str, u32)> = layout.node_fields().iter().map(|f| (f.name(), f.bits())).collect();
/// assert_eq!(fields, [("datacenter", 5), ("worker", 5)]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeField {
    name: Cow<'static, str>,
    bits: u32,
}

impl NodeField {
    /// The field's name.
    ///
    /// ```
    /// assert_eq!(monoflake::Layout::sonyflake().node_fields()[0].name(), "machine");
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The field's width in bits.
    ///
    /// ```
    /// assert_eq!(monoflake::Layout::sonyflake().node_fields()[0].bits(), 16);
    /// ```
    pub const fn bits(&self) -> u32 {
        self.bits
    }
}

/// A validated split of a 64-bit ID into a time field, node fields and a sequence, plus the
/// epoch the time counts from and the length of one tick.
///
/// Most layouts put the node between time and sequence (Twitter's order):
///
/// ```text
///  63  62                       22 21      17 16      12 11           0
/// +---+---------------------------+----------+----------+--------------+
/// | 0 |  time: 41 bits of 1 ms    | dc: 5    | worker: 5| sequence: 12 |
/// +---+---------------------------+----------+----------+--------------+
/// ```
///
/// Sonyflake puts the node lowest ([`LayoutBuilder::node_below_sequence`]):
///
/// ```text
///  63  62                       24 23        16 15                     0
/// +---+---------------------------+------------+------------------------+
/// | 0 |  time: 39 bits of 10 ms   | sequence: 8| machine: 16            |
/// +---+---------------------------+------------+------------------------+
/// ```
///
/// A layout is checked when it is built ([`LayoutBuilder::build`]): the widths must fit in 63
/// bits (64 when [`LayoutBuilder::allow_sign_bit`] is set), time and sequence need at least one
/// bit, the tick at least 1 ms, and the epoch must not lie in the future. Layouts are plain
/// values: any number of them can live in one process.
///
/// A layout is also one line of text, the spec the command line's `--layout` takes: `Display`
/// writes it and `FromStr` reads it (or a preset's name), so the library and the CLI agree:
///
/// ```
/// use monoflake::Layout;
///
/// let text = "time=41,datacenter=5,worker=5,sequence=12,epoch=2010-11-04T01:42:54.657Z,tick=1ms";
/// assert_eq!(Layout::twitter().to_string(), text);
/// assert_eq!(text.parse::<Layout>()?, Layout::twitter());
/// # Ok::<(), monoflake::Error>(())
/// ```
///
/// # Example
///
/// ```
/// use monoflake::Layout;
///
/// let layout = Layout::builder()
///     .time_bits(40)
///     .node_field("region", 4)
///     .node_field("host", 8)
///     .sequence_bits(11)
///     .epoch_ms(1_700_000_000_000)
///     .build()?;
/// assert_eq!(layout.total_bits(), 63);
/// assert_eq!(layout.max_node(), (1 << 12) - 1);
/// // 2^40 ms is about 34.8 years after the epoch.
/// assert_eq!(layout.expires_at_ms(), 1_700_000_000_000 + (1 << 40));
/// # Ok::<(), monoflake::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    name: Cow<'static, str>,
    time_bits: u32,
    node_bits: u32,
    sequence_bits: u32,
    fields: Vec<NodeField>,
    node_low: bool,
    epoch_ms: u64,
    tick_ms: u64,
    allow_sign_bit: bool,
}

/// A preset as constant data, checked when the crate compiles.
struct Preset {
    name: &'static str,
    time_bits: u32,
    fields: &'static [(&'static str, u32)],
    sequence_bits: u32,
    node_low: bool,
    epoch_ms: u64,
    tick_ms: u64,
    allow_sign_bit: bool,
}

impl Preset {
    /// The checks of [`LayoutBuilder::build`] that do not depend on the current time.
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

    fn layout(&self) -> Layout {
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

const TWITTER: Preset = Preset {
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
const ALL_PRESETS: [&Preset; 6] = [
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
    /// Starts a custom layout. The builder starts from Twitter's widths, epoch and tick with no
    /// node fields; set what differs.
    ///
    /// ```
    /// let layout = monoflake::Layout::builder().node_field("worker", 10).build()?;
    /// assert_eq!(layout.total_bits(), 63);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn builder() -> LayoutBuilder {
        LayoutBuilder::new()
    }

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

    /// The preset's name, or the name given to [`LayoutBuilder::name`] (default `"custom"`).
    ///
    /// ```
    /// assert_eq!(monoflake::Layout::js_safe().name(), "js-safe");
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Width of the time field.
    ///
    /// ```
    /// assert_eq!(monoflake::Layout::twitter().time_bits(), 41);
    /// ```
    pub const fn time_bits(&self) -> u32 {
        self.time_bits
    }

    /// Width of all node fields together.
    ///
    /// ```
    /// assert_eq!(monoflake::Layout::twitter().node_bits(), 10);
    /// ```
    pub const fn node_bits(&self) -> u32 {
        self.node_bits
    }

    /// Width of the sequence field.
    ///
    /// ```
    /// assert_eq!(monoflake::Layout::twitter().sequence_bits(), 12);
    /// ```
    pub const fn sequence_bits(&self) -> u32 {
        self.sequence_bits
    }

    /// `time_bits + node_bits + sequence_bits`.
    ///
    /// ```
    /// assert_eq!(monoflake::Layout::twitter().total_bits(), 63);
    /// ```
    pub const fn total_bits(&self) -> u32 {
        self.time_bits + self.node_bits + self.sequence_bits
    }

    /// The node fields, highest first.
    ///
    /// ```
    /// assert_eq!(monoflake::Layout::discord().node_fields()[1].name(), "process");
    /// ```
    pub fn node_fields(&self) -> &[NodeField] {
        &self.fields
    }

    /// Whether the node sits below the sequence (`time | sequence | node`, as in Sonyflake)
    /// rather than between time and sequence.
    ///
    /// ```
    /// assert!(!monoflake::Layout::twitter().node_below_sequence());
    /// ```
    pub const fn node_below_sequence(&self) -> bool {
        self.node_low
    }

    /// Whether IDs may use the top bit (then they do not always fit an `i64`).
    ///
    /// ```
    /// assert!(monoflake::Layout::discord().allows_sign_bit());
    /// ```
    pub const fn allows_sign_bit(&self) -> bool {
        self.allow_sign_bit
    }

    /// The instant time 0 stands for, in Unix milliseconds.
    ///
    /// ```
    /// assert_eq!(monoflake::Layout::sonyflake().epoch_ms(), 1_409_529_600_000);
    /// ```
    pub const fn epoch_ms(&self) -> u64 {
        self.epoch_ms
    }

    /// The length of one unit of the time field, in milliseconds.
    ///
    /// ```
    /// assert_eq!(monoflake::Layout::baidu().tick_ms(), 1000);
    /// ```
    pub const fn tick_ms(&self) -> u64 {
        self.tick_ms
    }

    /// The length of one unit of the time field.
    ///
    /// ```
    /// assert_eq!(monoflake::Layout::baidu().tick(), std::time::Duration::from_secs(1));
    /// ```
    pub const fn tick(&self) -> Duration {
        Duration::from_millis(self.tick_ms)
    }

    /// The largest value of the time field.
    ///
    /// ```
    /// assert_eq!(monoflake::Layout::twitter().max_tick(), (1 << 41) - 1);
    /// ```
    pub const fn max_tick(&self) -> u64 {
        mask(self.time_bits)
    }

    /// The largest node value (all node fields together).
    ///
    /// ```
    /// assert_eq!(monoflake::Layout::twitter().max_node(), 1023);
    /// ```
    pub const fn max_node(&self) -> u64 {
        mask(self.node_bits)
    }

    /// The largest sequence value; one tick holds `max_sequence() + 1` IDs per node.
    ///
    /// ```
    /// assert_eq!(monoflake::Layout::twitter().max_sequence(), 4095);
    /// ```
    pub const fn max_sequence(&self) -> u64 {
        mask(self.sequence_bits)
    }

    /// The Unix millisecond at which the time field runs out: the first instant no ID can
    /// carry (saturates at `u64::MAX`).
    ///
    /// ```
    /// // Twitter's layout lasts 2^41 ms, until 2080-07-10.
    /// let layout = monoflake::Layout::twitter();
    /// assert_eq!(monoflake::rfc3339(layout.expires_at_ms()), "2080-07-10T17:30:30.209Z");
    /// ```
    pub fn expires_at_ms(&self) -> u64 {
        let span = (u128::from(self.max_tick()) + 1) * u128::from(self.tick_ms);
        u64::try_from(u128::from(self.epoch_ms) + span).unwrap_or(u64::MAX)
    }

    /// [`Layout::expires_at_ms`] as a [`SystemTime`]: the layout's lifetime.
    ///
    /// ```
    /// use std::time::SystemTime;
    /// assert!(monoflake::Layout::twitter().expires_at() > SystemTime::now());
    /// assert!(monoflake::Layout::baidu().expires_at() < SystemTime::now());
    /// ```
    pub fn expires_at(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.expires_at_ms())
    }

    /// The time-field value for a Unix millisecond (0 before the epoch; may exceed
    /// [`Layout::max_tick`] after the layout's lifetime).
    ///
    /// ```
    /// let layout = monoflake::Layout::sonyflake();
    /// assert_eq!(layout.tick_at(layout.epoch_ms() + 25), 2);
    /// ```
    pub const fn tick_at(&self, unix_ms: u64) -> u64 {
        unix_ms.saturating_sub(self.epoch_ms) / self.tick_ms
    }

    /// The Unix millisecond at which a time-field value starts.
    ///
    /// ```
    /// let layout = monoflake::Layout::sonyflake();
    /// assert_eq!(layout.unix_ms_of_tick(2), layout.epoch_ms() + 20);
    /// ```
    pub const fn unix_ms_of_tick(&self, tick: u64) -> u64 {
        self.epoch_ms
            .saturating_add(tick.saturating_mul(self.tick_ms))
    }

    /// Shift of the time field.
    pub(crate) const fn time_shift(&self) -> u32 {
        self.node_bits + self.sequence_bits
    }

    /// Shift of the node value.
    pub(crate) const fn node_shift(&self) -> u32 {
        if self.node_low { 0 } else { self.sequence_bits }
    }

    /// Shift of the sequence.
    pub(crate) const fn sequence_shift(&self) -> u32 {
        if self.node_low { self.node_bits } else { 0 }
    }

    /// Builds the node value from named field values; fields not named are 0.
    ///
    /// ```
    /// use monoflake::{Error, Layout};
    ///
    /// let layout = Layout::twitter();
    /// assert_eq!(layout.node_from_fields(&[("datacenter", 1), ("worker", 3)])?, (1 << 5) | 3);
    /// assert!(matches!(
    ///     layout.node_from_fields(&[("worker", 32)]),
    ///     Err(Error::OutOfRange { value: 32, max: 31, .. })
    /// ));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn node_from_fields(&self, values: &[(&str, u64)]) -> Result<u64, Error> {
        let mut node = 0;
        for &(name, value) in values {
            let mut shift = self.node_bits;
            let mut found = false;
            for f in &self.fields {
                shift -= f.bits;
                if f.name == name {
                    if value > mask(f.bits) {
                        return Err(Error::OutOfRange {
                            field: name.to_owned(),
                            value,
                            max: mask(f.bits),
                        });
                    }
                    node |= value << shift;
                    found = true;
                }
            }
            if !found {
                return Err(Error::InvalidFieldName {
                    name: name.to_owned(),
                    reason: "the layout has no node field of that name",
                });
            }
        }
        Ok(node)
    }

    /// Splits a node value into its named fields, highest first.
    ///
    /// ```
    /// let layout = monoflake::Layout::twitter();
    /// assert_eq!(layout.node_fields_of((1 << 5) | 3), vec![("datacenter", 1), ("worker", 3)]);
    /// ```
    pub fn node_fields_of(&self, node: u64) -> Vec<(&str, u64)> {
        let mut shift = self.node_bits;
        self.fields
            .iter()
            .map(|f| {
                shift -= f.bits;
                (f.name(), (node >> shift) & mask(f.bits))
            })
            .collect()
    }

    /// Checks that a node value fits the layout.
    ///
    /// ```
    /// use monoflake::{Error, Layout};
    /// assert!(Layout::twitter().check_node(1023).is_ok());
    /// assert!(matches!(
    ///     Layout::twitter().check_node(1024),
    ///     Err(Error::OutOfRange { value: 1024, max: 1023, .. })
    /// ));
    /// ```
    pub fn check_node(&self, node: u64) -> Result<u64, Error> {
        check("node", node, self.max_node())
    }
}

impl Default for Layout {
    /// The Twitter layout.
    fn default() -> Self {
        Layout::twitter()
    }
}

pub(crate) fn check(field: &str, value: u64, max: u64) -> Result<u64, Error> {
    if value > max {
        return Err(Error::OutOfRange {
            field: field.to_owned(),
            value,
            max,
        });
    }
    Ok(value)
}

/// `bits` ones, for `bits` in `0..=64`.
pub(crate) const fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Builds a custom [`Layout`]; see [`Layout::builder`].
///
/// # Example
///
/// ```
/// use monoflake::{Error, Layout};
///
/// // The layout one game-server write-up proposes does not fit in 64 bits.
/// let err = Layout::builder()
///     .time_bits(37)
///     .node_field("server", 20)
///     .sequence_bits(16)
///     .build()
///     .unwrap_err();
/// assert!(matches!(err, Error::LayoutTooWide { total: 73, .. }));
/// ```
#[derive(Clone, Debug)]
pub struct LayoutBuilder {
    layout: Layout,
}

impl LayoutBuilder {
    fn new() -> Self {
        let mut layout = TWITTER.layout();
        layout.name = Cow::Borrowed("custom");
        layout.fields.clear();
        layout.node_bits = 0;
        LayoutBuilder { layout }
    }

    /// Names the layout (shown by the CLI and in `Debug`).
    ///
    /// ```
    /// let l = monoflake::Layout::builder().name("orders").build()?;
    /// assert_eq!(l.name(), "orders");
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.layout.name = name.into();
        self
    }

    /// Width of the time field (default 41).
    ///
    /// ```
    /// let l = monoflake::Layout::builder().time_bits(40).build()?;
    /// assert_eq!(l.time_bits(), 40);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn time_bits(mut self, bits: u32) -> Self {
        self.layout.time_bits = bits;
        self
    }

    /// Width of the sequence field (default 12).
    ///
    /// ```
    /// let l = monoflake::Layout::builder().sequence_bits(22).build()?;
    /// assert_eq!(l.max_sequence(), (1 << 22) - 1);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn sequence_bits(mut self, bits: u32) -> Self {
        self.layout.sequence_bits = bits;
        self
    }

    /// Appends a node field below those already added (default: none).
    ///
    /// ```
    /// let l = monoflake::Layout::builder().node_field("dc", 3).node_field("host", 7).build()?;
    /// assert_eq!(l.node_bits(), 10);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn node_field(mut self, name: impl Into<Cow<'static, str>>, bits: u32) -> Self {
        self.layout.fields.push(NodeField {
            name: name.into(),
            bits,
        });
        self
    }

    /// Puts the node below the sequence, as Sonyflake does (default: above it).
    ///
    /// ```
    /// let l = monoflake::Layout::builder().node_field("m", 8).node_below_sequence(true).build()?;
    /// assert!(l.node_below_sequence());
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn node_below_sequence(mut self, yes: bool) -> Self {
        self.layout.node_low = yes;
        self
    }

    /// The instant time 0 stands for, in Unix milliseconds (default Twitter's,
    /// 1288834974657). It must not lie in the future.
    ///
    /// ```
    /// let l = monoflake::Layout::builder().epoch_ms(1_700_000_000_000).build()?;
    /// assert_eq!(l.epoch_ms(), 1_700_000_000_000);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn epoch_ms(mut self, epoch_ms: u64) -> Self {
        self.layout.epoch_ms = epoch_ms;
        self
    }

    /// The length of one unit of the time field in milliseconds (default 1, at least 1).
    ///
    /// ```
    /// let l = monoflake::Layout::builder().tick_ms(10).build()?;
    /// assert_eq!(l.tick_ms(), 10);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn tick_ms(mut self, tick_ms: u64) -> Self {
        self.layout.tick_ms = tick_ms;
        self
    }

    /// Lets IDs use the top bit, for 64-bit layouts such as Discord's (default: off, so
    /// every ID fits an `i64`).
    ///
    /// ```
    /// let l = monoflake::Layout::builder().time_bits(42).node_field("n", 10).allow_sign_bit(true).build()?;
    /// assert_eq!(l.total_bits(), 64);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn allow_sign_bit(mut self, yes: bool) -> Self {
        self.layout.allow_sign_bit = yes;
        self
    }

    /// Checks the layout and returns it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidLayoutName`], [`Error::ZeroTick`], [`Error::ZeroBits`] (time, sequence
    /// or a node field), [`Error::InvalidFieldName`], [`Error::LayoutTooWide`],
    /// [`Error::EpochInFuture`].
    ///
    /// ```
    /// use monoflake::{Error, Layout};
    /// assert!(matches!(Layout::builder().tick_ms(0).build(), Err(Error::ZeroTick)));
    /// assert!(matches!(
    ///     Layout::builder().sequence_bits(0).build(),
    ///     Err(Error::ZeroBits { field, .. }) if field == "sequence"
    /// ));
    /// ```
    pub fn build(self) -> Result<Layout, Error> {
        let mut l = self.layout;
        let name_ok = (1..=64).contains(&l.name.len())
            && l.name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
            && l.name != "."
            && l.name != "..";
        if !name_ok {
            return Err(Error::InvalidLayoutName {
                name: l.name.to_string(),
            });
        }
        if l.tick_ms == 0 {
            return Err(Error::ZeroTick);
        }
        for (field, bits) in [("time", l.time_bits), ("sequence", l.sequence_bits)] {
            if bits == 0 {
                return Err(Error::ZeroBits {
                    field: field.to_owned(),
                });
            }
        }
        for (i, f) in l.fields.iter().enumerate() {
            check_field_name(&f.name, &l.fields[..i])?;
            if f.bits == 0 {
                return Err(Error::ZeroBits {
                    field: f.name.to_string(),
                });
            }
        }
        let node_bits = l
            .fields
            .iter()
            .fold(0u32, |acc, f| acc.saturating_add(f.bits));
        let total = l
            .time_bits
            .saturating_add(node_bits)
            .saturating_add(l.sequence_bits);
        let max = if l.allow_sign_bit { 64 } else { 63 };
        if total > max {
            return Err(Error::LayoutTooWide {
                time_bits: l.time_bits,
                node_bits,
                sequence_bits: l.sequence_bits,
                total,
                max,
            });
        }
        l.node_bits = node_bits;
        // Without node bits the node's place makes no difference to any ID: one form, so that
        // equal layouts compare equal and read back from their spec.
        l.node_low &= node_bits > 0;
        let now_ms = crate::clock::wall_clock_ms();
        if l.epoch_ms > now_ms {
            return Err(Error::EpochInFuture {
                epoch_ms: l.epoch_ms,
                now_ms,
            });
        }
        Ok(l)
    }
}

fn check_field_name(name: &str, earlier: &[NodeField]) -> Result<(), Error> {
    let refuse = |reason| {
        Err(Error::InvalidFieldName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return refuse("the name is empty");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        || !name.as_bytes()[0].is_ascii_lowercase()
    {
        return refuse("a name is a lowercase letter followed by [a-z0-9_]");
    }
    if RESERVED_NAMES.contains(&name) {
        return refuse(
            "the name is reserved (id, unix_ms, time, node, sequence, epoch, tick, sign_bit)",
        );
    }
    if earlier.iter().any(|f| f.name == name) {
        return refuse("two node fields have this name");
    }
    Ok(())
}
