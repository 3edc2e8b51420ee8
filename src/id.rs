//! The ID type and its decoded parts.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::{Error, Layout};

/// A 64-bit ID. Which bits mean what is told by a [`Layout`]; the ID itself is just the number.
///
/// IDs compare as their numbers: IDs from one generator are strictly increasing, and IDs from
/// different nodes are ordered by time first (k-sorted).
///
/// With the `serde` feature an `Id` implements `Serialize` and `Deserialize`: a decimal string
/// in human-readable formats (JSON; JavaScript numbers lose precision above 2^53), read back
/// from a string or from a number up to 2^53 − 1, and a `u64` in binary formats (bincode,
/// postcard); `#[serde(with = "monoflake::as_u64")]` keeps plain numbers.
///
/// # Example
///
/// ```
/// use monoflake::{Id, Layout};
///
/// // Discord's documentation: this snowflake was made 2016-04-30T11:18:25.796Z by
/// // worker 1, process 0, as increment 7.
/// let id: Id = "175928847299117063".parse()?;
/// let discord = Layout::discord();
/// let parts = id.parts(&discord)?;
/// assert_eq!(parts.unix_ms(), 1_462_015_105_796);
/// assert_eq!(parts.to_string(), "2016-04-30T11:18:25.796Z worker=1 process=0 sequence=7");
/// assert_eq!(parts.field("worker"), Some(1));
/// assert_eq!(parts.sequence(), 7);
/// # Ok::<(), monoflake::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Id(u64);

impl Id {
    /// Wraps a number as an ID.
    ///
    /// ```
    /// assert_eq!(monoflake::Id::from_u64(42).as_u64(), 42);
    /// ```
    pub const fn from_u64(value: u64) -> Id {
        Id(value)
    }

    /// The ID as a number.
    ///
    /// ```
    /// assert_eq!(monoflake::Id::from_u64(7).as_u64(), 7);
    /// ```
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// The ID as an `i64`, for databases with signed 64-bit keys.
    ///
    /// # Errors
    ///
    /// [`Error::SignBitSet`] when the top bit is set (only layouts that
    /// [allow the sign bit](Layout::allows_sign_bit) issue such IDs).
    ///
    /// ```
    /// use monoflake::{Error, Id};
    /// assert_eq!(Id::from_u64(5).to_i64()?, 5);
    /// assert!(matches!(Id::from_u64(1 << 63).to_i64(), Err(Error::SignBitSet { .. })));
    /// # Ok::<(), Error>(())
    /// ```
    pub const fn to_i64(self) -> Result<i64, Error> {
        if self.0 > i64::MAX as u64 {
            return Err(Error::SignBitSet { id: self.0 });
        }
        Ok(self.0 as i64)
    }

    /// Splits the ID into its parts under `layout`.
    ///
    /// # Errors
    ///
    /// [`Error::IdTooWide`] when the ID uses bits the layout does not have.
    ///
    /// ```
    /// use monoflake::{Id, Layout};
    /// // Discord's documentation: 90339695967350784 was made at unix ms 1441609061949
    /// // by process 3, increment 0.
    /// let discord = Layout::discord();
    /// let parts = Id::from_u64(90_339_695_967_350_784).parts(&discord)?;
    /// assert_eq!(parts.unix_ms(), 1_441_609_061_949);
    /// assert_eq!(parts.field("process"), Some(3));
    /// assert_eq!(parts.sequence(), 0);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn parts(self, layout: &Layout) -> Result<Parts<'_>, Error> {
        let bits = layout.total_bits();
        if bits < 64 && self.0 >> bits != 0 {
            return Err(Error::IdTooWide {
                id: self.0,
                layout_bits: bits,
            });
        }
        let tick = self.0 >> layout.time_shift();
        let node = (self.0 >> layout.node_shift()) & layout.max_node();
        let sequence = (self.0 >> layout.sequence_shift()) & layout.max_sequence();
        Ok(Parts {
            tick,
            unix_ms: layout.unix_ms_of_tick(tick),
            node,
            sequence,
            layout,
        })
    }
}

/// Composing IDs: the reverse of [`Id::parts`]. (Defined here, beside `Id`, so that the layout
/// module does not depend on the ID module.)
impl Layout {
    /// Builds an ID from its time-field value, node value and sequence, each range-checked.
    ///
    /// ```
    /// let layout = monoflake::Layout::discord();
    /// let node = layout.node_from_fields(&[("worker", 1)])?;
    /// let id = layout.compose(layout.tick_at(1_462_015_105_796), node, 7)?;
    /// assert_eq!(id.as_u64(), 175_928_847_299_117_063);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn compose(&self, tick: u64, node: u64, sequence: u64) -> Result<Id, Error> {
        let tick = crate::layout::check("time", tick, self.max_tick())?;
        let node = self.check_node(node)?;
        let sequence = crate::layout::check("sequence", sequence, self.max_sequence())?;
        Ok(Id::from_u64(
            tick << self.time_shift()
                | node << self.node_shift()
                | sequence << self.sequence_shift(),
        ))
    }

    /// Like [`Layout::compose`], from a Unix millisecond instead of a time-field value.
    ///
    /// ```
    /// let layout = monoflake::Layout::twitter();
    /// let id = layout.compose_at(1_700_000_000_000, 5, 0)?;
    /// assert_eq!(id.parts(&layout)?.unix_ms(), 1_700_000_000_000);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn compose_at(&self, unix_ms: u64, node: u64, sequence: u64) -> Result<Id, Error> {
        if unix_ms < self.epoch_ms() {
            return Err(Error::OutOfRange {
                field: "time (unix ms before the epoch)".to_owned(),
                value: unix_ms,
                max: self.expires_at_ms().saturating_sub(1),
            });
        }
        self.compose(self.tick_at(unix_ms), node, sequence)
    }
}

impl From<u64> for Id {
    fn from(value: u64) -> Id {
        Id(value)
    }
}

impl From<Id> for u64 {
    fn from(id: Id) -> u64 {
        id.0
    }
}

impl fmt::Display for Id {
    /// Decimal.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::LowerHex for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

impl Id {
    /// Parses a hexadecimal ID of 1 to 16 digits, with or without a `0x` prefix (upper or
    /// lower case), as `monoflake decode` accepts and prints them.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`] naming the first character that is not a hex digit, or saying the
    /// number has no digits or more than 16.
    ///
    /// ```
    /// use monoflake::{Error, Id};
    /// assert_eq!(Id::from_hex("0x2a")?.as_u64(), 42);
    /// assert_eq!(Id::from_hex("FF")?.as_u64(), 255);
    /// assert!(matches!(Id::from_hex("0x2g"), Err(Error::InvalidId { position: Some(3), .. })));
    /// assert!(matches!(Id::from_hex("0x"), Err(Error::InvalidId { position: None, .. })));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn from_hex(input: &str) -> Result<Id, Error> {
        let digits = input
            .strip_prefix("0x")
            .or_else(|| input.strip_prefix("0X"))
            .unwrap_or(input);
        let offset = input.len() - digits.len();
        let invalid = |reason, position| Error::InvalidId {
            input: input.to_owned(),
            reason,
            position,
        };
        if let Some(p) = digits.find(|c: char| !c.is_ascii_hexdigit()) {
            return Err(invalid("not a hex digit", Some(p + offset)));
        }
        if digits.is_empty() || digits.len() > 16 {
            return Err(invalid("not a hex number of 1 to 16 digits", None));
        }
        u64::from_str_radix(digits, 16)
            .map(Id)
            .map_err(|_| invalid("not a hex number of 1 to 16 digits", None))
    }
}

impl FromStr for Id {
    type Err = Error;

    /// Parses a decimal ID (ASCII digits only, no sign, no spaces).
    ///
    /// ```
    /// use monoflake::{Error, Id};
    /// assert_eq!("42".parse::<Id>()?.as_u64(), 42);
    /// assert!(matches!("4x2".parse::<Id>(), Err(Error::InvalidId { position: Some(1), .. })));
    /// assert!(matches!("18446744073709551616".parse::<Id>(), Err(Error::InvalidId { .. })));
    /// # Ok::<(), Error>(())
    /// ```
    fn from_str(s: &str) -> Result<Id, Error> {
        let invalid = |reason, position| Error::InvalidId {
            input: s.to_owned(),
            reason,
            position,
        };
        if s.is_empty() {
            return Err(invalid("empty string", None));
        }
        let mut value: u64 = 0;
        for (i, b) in s.bytes().enumerate() {
            if !b.is_ascii_digit() {
                return Err(invalid("not a decimal digit", Some(i)));
            }
            value = value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(b - b'0')))
                .ok_or_else(|| invalid("larger than 18446744073709551615", None))?;
        }
        Ok(Id(value))
    }
}

/// An ID split into its parts by [`Id::parts`]. It borrows the layout, so taking an ID apart
/// allocates nothing.
///
/// Its `Display` is `<RFC 3339 time> <field>=<value>... sequence=<n>`.
///
/// ```
/// use monoflake::Layout;
/// let layout = Layout::twitter();
/// let id = layout.compose_at(1_700_000_000_123, 0b00001_00011, 9)?;
/// let parts = id.parts(&layout)?;
/// assert_eq!(parts.to_string(), "2023-11-14T22:13:20.123Z datacenter=1 worker=3 sequence=9");
/// assert_eq!(parts.node(), 35);
/// # Ok::<(), monoflake::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Parts<'a> {
    tick: u64,
    unix_ms: u64,
    node: u64,
    sequence: u64,
    layout: &'a Layout,
}

impl<'a> Parts<'a> {
    /// The raw time field: ticks since the layout's epoch.
    ///
    /// ```
    /// let l = monoflake::Layout::sonyflake();
    /// let parts = l.compose(12, 0, 0)?.parts(&l)?;
    /// assert_eq!(parts.tick(), 12);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub const fn tick(&self) -> u64 {
        self.tick
    }

    /// The time of issue in Unix milliseconds (the start of its tick).
    ///
    /// ```
    /// let l = monoflake::Layout::sonyflake();
    /// let parts = l.compose(12, 0, 0)?.parts(&l)?;
    /// assert_eq!(parts.unix_ms(), l.epoch_ms() + 120);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub const fn unix_ms(&self) -> u64 {
        self.unix_ms
    }

    /// The time of issue as a [`SystemTime`].
    ///
    /// ```
    /// use std::time::{Duration, UNIX_EPOCH};
    /// let l = monoflake::Layout::twitter();
    /// let parts = l.compose_at(1_700_000_000_000, 0, 0)?.parts(&l)?;
    /// assert_eq!(parts.time(), UNIX_EPOCH + Duration::from_millis(1_700_000_000_000));
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn time(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.unix_ms)
    }

    /// The time of issue as RFC 3339 in UTC with milliseconds, e.g.
    /// `2016-04-30T11:18:25.796Z`.
    ///
    /// ```
    /// let l = monoflake::Layout::discord();
    /// let parts = monoflake::Id::from_u64(175_928_847_299_117_063).parts(&l)?;
    /// assert_eq!(parts.rfc3339(), "2016-04-30T11:18:25.796Z");
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn rfc3339(&self) -> String {
        rfc3339(self.unix_ms)
    }

    /// The whole node value (all node fields together).
    ///
    /// ```
    /// let l = monoflake::Layout::twitter();
    /// assert_eq!(l.compose(0, 1000, 0)?.parts(&l)?.node(), 1000);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub const fn node(&self) -> u64 {
        self.node
    }

    /// The sequence number within the tick.
    ///
    /// ```
    /// let l = monoflake::Layout::twitter();
    /// assert_eq!(l.compose(0, 0, 4095)?.parts(&l)?.sequence(), 4095);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub const fn sequence(&self) -> u64 {
        self.sequence
    }

    /// The named node fields with their values, highest first.
    ///
    /// ```
    /// let l = monoflake::Layout::twitter();
    /// let parts = l.compose(0, 33, 0)?.parts(&l)?;
    /// assert!(parts.fields().eq([("datacenter", 1), ("worker", 1)]));
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn fields(&self) -> impl Iterator<Item = (&'a str, u64)> + use<'a> {
        let node = self.node;
        let mut shift = self.layout.node_bits();
        self.layout.node_fields().iter().map(move |f| {
            shift -= f.bits();
            (f.name(), (node >> shift) & crate::layout::mask(f.bits()))
        })
    }

    /// The layout the ID was taken apart with.
    ///
    /// ```
    /// let l = monoflake::Layout::discord();
    /// assert_eq!(l.compose(0, 1, 0)?.parts(&l)?.layout().name(), "discord");
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub const fn layout(&self) -> &'a Layout {
        self.layout
    }

    /// One node field's value by name.
    ///
    /// ```
    /// let l = monoflake::Layout::twitter();
    /// let parts = l.compose(0, 33, 0)?.parts(&l)?;
    /// assert_eq!(parts.field("worker"), Some(1));
    /// assert_eq!(parts.field("rack"), None);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn field(&self, name: &str) -> Option<u64> {
        self.fields().find(|&(n, _)| n == name).map(|(_, v)| v)
    }
}

impl fmt::Display for Parts<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", Rfc3339(self.unix_ms))?;
        for (name, value) in self.fields() {
            write!(f, " {name}={value}")?;
        }
        write!(f, " sequence={}", self.sequence)
    }
}

/// Formats a Unix millisecond as RFC 3339 in UTC with milliseconds
/// (`YYYY-MM-DDTHH:MM:SS.mmmZ`).
///
/// ```
/// assert_eq!(monoflake::rfc3339(0), "1970-01-01T00:00:00.000Z");
/// assert_eq!(monoflake::rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
/// ```
pub fn rfc3339(unix_ms: u64) -> String {
    Rfc3339(unix_ms).to_string()
}

/// Writes a Unix millisecond as RFC 3339 without allocating.
pub(crate) struct Rfc3339(pub(crate) u64);

impl fmt::Display for Rfc3339 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unix_ms = self.0;
        let secs = unix_ms / 1000;
        let (days, rem) = (secs / 86_400, secs % 86_400);
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm, era of 400 years).
        let z = days + 719_468;
        let era = z / 146_097;
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + u64::from(month <= 2);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
            rem / 3600,
            rem / 60 % 60,
            rem % 60,
            unix_ms % 1000
        )
    }
}
