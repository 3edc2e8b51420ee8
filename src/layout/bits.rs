//! The layout itself: [`Layout`] and its [`NodeField`]s — which bits of an ID hold the time,
//! the node fields and the sequence, from which epoch and in which ticks — and everything read
//! from a layout: widths, limits, its lifetime, ticks and milliseconds, the shifts the
//! generator places fields by, node values to and from their fields.
//!
//! Imports nothing else of the layout. The fields are `pub(super)`: the presets
//! (`presets.rs`), the builder (`builder.rs`) and the spec (`spec.rs`) make layouts; nothing
//! outside `layout/` sees them.

use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::Error;

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
    pub(super) name: Cow<'static, str>,
    pub(super) bits: u32,
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
///
/// [`LayoutBuilder::node_below_sequence`]: crate::LayoutBuilder::node_below_sequence
/// [`LayoutBuilder::build`]: crate::LayoutBuilder::build
/// [`LayoutBuilder::allow_sign_bit`]: crate::LayoutBuilder::allow_sign_bit
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    pub(super) name: Cow<'static, str>,
    pub(super) time_bits: u32,
    pub(super) node_bits: u32,
    pub(super) sequence_bits: u32,
    pub(super) fields: Vec<NodeField>,
    pub(super) node_low: bool,
    pub(super) epoch_ms: u64,
    pub(super) tick_ms: u64,
    pub(super) allow_sign_bit: bool,
}

impl Layout {
    /// The preset's name, or the name given to [`LayoutBuilder::name`] (default `"custom"`).
    ///
    /// ```
    /// assert_eq!(monoflake::Layout::js_safe().name(), "js-safe");
    /// ```
    ///
    /// [`LayoutBuilder::name`]: crate::LayoutBuilder::name
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

    /// How many time-field values start before the Unix millisecond `until_ms`: the first
    /// time-field value whose tick starts at or after it (0 up to the epoch). A reservation
    /// "no tick starting at or after `until_ms` was issued" is, as an ID value, "every time
    /// field issued is below `ticks_before(until_ms)`" — what node stores compare, so that
    /// layouts of one bit shape with different epochs or ticks never issue one ID value
    /// twice ([`Layout::shape_key`]). [`Layout::unix_ms_of_tick`] is the way back.
    ///
    /// ```
    /// let layout = monoflake::Layout::sonyflake(); // 10 ms ticks
    /// assert_eq!(layout.ticks_before(layout.epoch_ms() + 20), 2);
    /// assert_eq!(layout.ticks_before(layout.epoch_ms() + 21), 3);
    /// assert_eq!(layout.ticks_before(0), 0);
    /// assert_eq!(layout.unix_ms_of_tick(layout.ticks_before(layout.epoch_ms() + 21)), layout.epoch_ms() + 30);
    /// ```
    pub const fn ticks_before(&self, until_ms: u64) -> u64 {
        until_ms
            .saturating_sub(self.epoch_ms)
            .div_ceil(self.tick_ms)
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
