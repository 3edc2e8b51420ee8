//! Making a custom layout, and the checks every layout passes: [`LayoutBuilder`]
//! (`Layout::builder`) and its validation — a name a store can use, field names a spec can
//! carry, widths that fit in 63 or 64 bits, a tick, an epoch chosen and not in the future.
//!
//! Imports the layout type (`bits.rs`), Twitter's preset (`presets.rs`), where a builder's
//! widths start, and the epoch reader (`epoch.rs`).

use std::borrow::Cow;
use std::time::{SystemTime, UNIX_EPOCH};

use super::bits::{Layout, NodeField};
use super::epoch::parse_epoch_text;
use super::presets::TWITTER;
use crate::Error;

impl Layout {
    /// Starts a custom layout: Twitter's widths (time 41, sequence 12) and a 1 ms tick, no
    /// node fields, and **no epoch** — [`LayoutBuilder::build`] refuses a layout whose epoch
    /// was not chosen ([`Error::MissingEpoch`]). Set the epoch (as text, a `SystemTime` or
    /// Unix ms) and what differs.
    ///
    /// ```
    /// let layout = monoflake::Layout::builder()
    ///     .epoch("2024-01-01")
    ///     .node_field("worker", 10)
    ///     .build()?;
    /// assert_eq!(layout.total_bits(), 63);
    /// assert_eq!(layout.epoch_ms(), 1_704_067_200_000);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn builder() -> LayoutBuilder {
        LayoutBuilder::new()
    }
}

/// Names a node field may not take: the keys of a decoded ID, and the settings of a layout
/// spec (`epoch`, `tick`, `sign_bit`), so that every layout can be written as a spec.
const RESERVED_NAMES: &[&str] = &[
    "id", "unix_ms", "time", "node", "sequence", "epoch", "tick", "sign_bit",
];

/// Builds a custom [`Layout`]; see [`Layout::builder`].
///
/// # Example
///
/// ```
/// use monoflake::{Error, Layout};
///
/// // The layout one game-server write-up proposes does not fit in 64 bits.
/// let err = Layout::builder().epoch("2024-01-01")
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
    epoch: Epoch,
}

/// The epoch a builder was given, checked when the layout is built.
#[derive(Clone, Debug)]
enum Epoch {
    /// None yet: [`Error::MissingEpoch`].
    Missing,
    /// Unix milliseconds.
    Ms(u64),
    /// Not an epoch: [`Error::InvalidEpoch`].
    Invalid { input: String, reason: String },
}

impl LayoutBuilder {
    fn new() -> Self {
        let mut layout = TWITTER.layout();
        layout.name = Cow::Borrowed("custom");
        layout.fields.clear();
        layout.node_bits = 0;
        LayoutBuilder {
            layout,
            epoch: Epoch::Missing,
        }
    }

    /// Names the layout (shown by the CLI and in `Debug`).
    ///
    /// ```
    /// let l = monoflake::Layout::builder().epoch("2024-01-01").name("orders").build()?;
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
    /// let l = monoflake::Layout::builder().epoch("2024-01-01").time_bits(40).build()?;
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
    /// let l = monoflake::Layout::builder().epoch("2024-01-01").sequence_bits(22).build()?;
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
    /// let l = monoflake::Layout::builder().epoch("2024-01-01").node_field("dc", 3).node_field("host", 7).build()?;
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
    /// let l = monoflake::Layout::builder().epoch("2024-01-01").node_field("m", 8).node_below_sequence(true).build()?;
    /// assert!(l.node_below_sequence());
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn node_below_sequence(mut self, yes: bool) -> Self {
        self.layout.node_low = yes;
        self
    }

    /// The instant time 0 stands for, as text: RFC 3339 (`2024-01-01T00:00:00Z`,
    /// `2020-02-20T02:20:02+08:00`, milliseconds at most), a date alone (`2024-01-01`,
    /// midnight UTC) or Unix milliseconds — what a spec's `epoch=` takes. Required (or
    /// [`LayoutBuilder::epoch_at`], [`LayoutBuilder::epoch_ms`]): choose one close to the
    /// first ID you will issue, since the layout's lifetime counts from it. It must not lie
    /// in the future.
    ///
    /// Text that is no epoch is reported by [`LayoutBuilder::build`]
    /// ([`Error::InvalidEpoch`], saying why).
    ///
    /// ```
    /// use monoflake::{Error, Layout};
    ///
    /// let l = Layout::builder().epoch("2020-02-20T02:20:02+08:00").build()?;
    /// assert_eq!(l.epoch_ms(), 1_582_136_402_000);
    /// let err = Layout::builder().epoch("2024-02-30").build().unwrap_err();
    /// assert!(matches!(err, Error::InvalidEpoch { .. }));
    /// assert!(err.to_string().contains("day 30 is not 1..=29 in 2024-02"), "{err}");
    /// # Ok::<(), Error>(())
    /// ```
    pub fn epoch(mut self, text: &str) -> Self {
        self.epoch = match parse_epoch_text(text.trim()) {
            Ok(ms) => Epoch::Ms(ms),
            Err(reason) => Epoch::Invalid {
                input: text.to_owned(),
                reason,
            },
        };
        self
    }

    /// The instant time 0 stands for, as a [`SystemTime`] (rounded down to the millisecond).
    /// It must not lie in the future, nor before 1970.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime, UNIX_EPOCH};
    ///
    /// let launch = UNIX_EPOCH + Duration::from_millis(1_700_000_000_000);
    /// let l = monoflake::Layout::builder().epoch_at(launch).build()?;
    /// assert_eq!(l.epoch_ms(), 1_700_000_000_000);
    /// // A layout that starts now.
    /// let fresh = monoflake::Layout::builder().epoch_at(SystemTime::now()).build()?;
    /// assert!(fresh.expires_at_ms() > l.expires_at_ms());
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn epoch_at(mut self, time: SystemTime) -> Self {
        self.epoch = match time.duration_since(UNIX_EPOCH) {
            Ok(since) => Epoch::Ms(u64::try_from(since.as_millis()).unwrap_or(u64::MAX)),
            Err(before) => Epoch::Invalid {
                input: format!("{time:?}"),
                reason: format!(
                    "{} ms before 1970-01-01T00:00:00Z",
                    before.duration().as_millis()
                ),
            },
        };
        self
    }

    /// The instant time 0 stands for, in Unix milliseconds. It must not lie in the future.
    /// (Twitter's is `1288834974657`: [`Layout::twitter`]`().epoch_ms()`.)
    ///
    /// ```
    /// let l = monoflake::Layout::builder().epoch_ms(1_700_000_000_000).build()?;
    /// assert_eq!(l.epoch_ms(), 1_700_000_000_000);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn epoch_ms(mut self, epoch_ms: u64) -> Self {
        self.epoch = Epoch::Ms(epoch_ms);
        self
    }

    /// The length of one unit of the time field in milliseconds (default 1, at least 1).
    ///
    /// ```
    /// let l = monoflake::Layout::builder().epoch("2024-01-01").tick_ms(10).build()?;
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
    /// let l = monoflake::Layout::builder().epoch("2024-01-01").time_bits(42).node_field("n", 10).allow_sign_bit(true).build()?;
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
    /// In this order: [`Error::InvalidLayoutName`], [`Error::ZeroTick`], [`Error::ZeroBits`]
    /// (time, sequence or a node field), [`Error::InvalidFieldName`],
    /// [`Error::LayoutTooWide`], then the epoch: [`Error::MissingEpoch`],
    /// [`Error::InvalidEpoch`], [`Error::EpochInFuture`], [`Error::TickTooLong`].
    ///
    /// ```
    /// use monoflake::{Error, Layout};
    /// assert!(matches!(Layout::builder().epoch("2024-01-01").tick_ms(0).build(), Err(Error::ZeroTick)));
    /// assert!(matches!(
    ///     Layout::builder().epoch("2024-01-01").sequence_bits(0).build(),
    ///     Err(Error::ZeroBits { field, .. }) if field == "sequence"
    /// ));
    /// assert!(matches!(Layout::builder().build(), Err(Error::MissingEpoch)));
    /// assert!(matches!(
    ///     Layout::builder().epoch("2024-01-01").tick_ms(u64::MAX).build(),
    ///     Err(Error::TickTooLong { tick_ms: u64::MAX, .. })
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
        l.epoch_ms = match self.epoch {
            Epoch::Missing => return Err(Error::MissingEpoch),
            Epoch::Invalid { input, reason } => {
                return Err(Error::InvalidEpoch { input, reason });
            }
            Epoch::Ms(ms) => ms,
        };
        let now_ms = crate::clock::wall_clock_ms();
        if l.epoch_ms > now_ms {
            return Err(Error::EpochInFuture {
                epoch_ms: l.epoch_ms,
                now_ms,
            });
        }
        let max_ms = longest_tick_ms(l.time_bits, l.epoch_ms);
        if l.tick_ms > max_ms {
            return Err(Error::TickTooLong {
                tick_ms: l.tick_ms,
                max_ms,
            });
        }
        Ok(l)
    }
}

/// The longest tick whose nanoseconds fit in a `u64` and with which the end of the time
/// field, `epoch_ms + 2^time_bits * tick_ms`, does too.
fn longest_tick_ms(time_bits: u32, epoch_ms: u64) -> u64 {
    let ticks = 1u128 << time_bits.min(64);
    let by_field = u128::from(u64::MAX - epoch_ms) / ticks;
    let by_ns = u64::MAX / 1_000_000;
    u64::try_from(by_field).map_or(by_ns, |f| f.min(by_ns))
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
