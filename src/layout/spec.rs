//! A layout as one line of text (`time=41,datacenter=5,worker=5,sequence=12,epoch=…,tick=1ms`):
//! `FromStr` and `Display` for [`Layout`], and the keys node stores keep its state under (its
//! bit shape, and the name of before).

use std::borrow::Cow;
use std::fmt;
use std::hash::Hasher;
use std::str::FromStr;

use siphasher::sip::SipHasher24;

use super::epoch::parse_epoch_text;
use super::{ALL_PRESETS, Layout};
use crate::Error;
use crate::id::Rfc3339;

/// What a spec is, for error messages.
const SPEC_HELP: &str = "a spec lists NAME=VALUE parts, bit fields from the most significant \
                         bit down, e.g. time=41,datacenter=5,worker=5,sequence=12,\
                         epoch=2010-11-04T01:42:54.657Z,tick=1ms";

/// The canonical spec text: bit fields from the most significant bit down, then the epoch
/// (RFC 3339, UTC, milliseconds), the tick (`Nms`, or `Ns` for whole seconds) and, only when
/// IDs may use the top bit, `sign_bit=yes`. [`Layout::from_str`] reads it back.
///
/// ```
/// use monoflake::Layout;
/// assert_eq!(
///     Layout::twitter().to_string(),
///     "time=41,datacenter=5,worker=5,sequence=12,epoch=2010-11-04T01:42:54.657Z,tick=1ms"
/// );
/// assert_eq!(
///     Layout::sonyflake().to_string(),
///     "time=39,sequence=8,machine=16,epoch=2014-09-01T00:00:00.000Z,tick=10ms"
/// );
/// assert!(Layout::discord().to_string().ends_with(",tick=1ms,sign_bit=yes"));
/// ```
impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "time={}", self.time_bits)?;
        let write_fields = |f: &mut fmt::Formatter<'_>| {
            self.fields
                .iter()
                .try_for_each(|field| write!(f, ",{}={}", field.name, field.bits))
        };
        if self.node_low {
            write!(f, ",sequence={}", self.sequence_bits)?;
            write_fields(f)?;
        } else {
            write_fields(f)?;
            write!(f, ",sequence={}", self.sequence_bits)?;
        }
        write!(f, ",epoch={}", Rfc3339(self.epoch_ms))?;
        if self.tick_ms.is_multiple_of(1000) {
            write!(f, ",tick={}s", self.tick_ms / 1000)?;
        } else {
            write!(f, ",tick={}ms", self.tick_ms)?;
        }
        if self.allow_sign_bit {
            f.write_str(",sign_bit=yes")?;
        }
        Ok(())
    }
}

/// Reads a preset name (`twitter`) or a spec: comma-separated `NAME=VALUE` parts.
///
/// * Bit fields, from the most significant bit down: `time=BITS` first, then the node fields
///   by name and `sequence=BITS` — node fields before the sequence (Twitter's order) or after
///   it (Sonyflake's), all on one side.
/// * `epoch=` RFC 3339 (`2024-01-01T00:00:00Z`, `2020-02-20T02:20:02+08:00`, `2024-01-01`)
///   or Unix milliseconds (`1288834974657`); required.
/// * `tick=` `1ms` (the default), `10ms`, `1s`…
/// * `sign_bit=yes` lets IDs use all 64 bits (default `no`: every ID fits an `i64`).
///
/// The layout is then checked as [`LayoutBuilder::build`](crate::LayoutBuilder::build) checks
/// it. A spec shaped exactly like a preset gives that preset (with its name); any other is
/// named `custom`.
///
/// # Errors
///
/// [`Error::UnknownPreset`] for a name that is not a preset, [`Error::InvalidLayoutSpec`]
/// naming the part that is wrong, and the builder's errors ([`Error::LayoutTooWide`] with
/// the bits the layout needs, [`Error::ZeroBits`], [`Error::InvalidFieldName`]…).
///
/// ```
/// use monoflake::{Error, Layout};
///
/// let layout: Layout = "time=39,region=4,host=8,sequence=12,epoch=2024-01-01,tick=10ms".parse()?;
/// assert_eq!((layout.name(), layout.total_bits(), layout.tick_ms()), ("custom", 63, 10));
/// assert_eq!(layout.epoch_ms(), 1_704_067_200_000);
/// // The text Display writes reads back to the same layout, presets included.
/// assert_eq!(layout.to_string().parse::<Layout>()?, layout);
/// assert_eq!(Layout::discord().to_string().parse::<Layout>()?, Layout::discord());
/// assert_eq!("sonyflake".parse::<Layout>()?, Layout::sonyflake());
/// // Exactly as written: no stray spaces.
/// assert!(matches!("twitter ".parse::<Layout>(), Err(Error::InvalidLayoutSpec { .. })));
///
/// // A write-up's game-server layout needs 73 bits.
/// let err = "time=37,server=20,sequence=16,epoch=2024-01-01".parse::<Layout>().unwrap_err();
/// assert!(matches!(err, Error::LayoutTooWide { total: 73, max: 63, .. }));
/// let err = "time=41,worker=10,sequence=12,epoch=2024-01-01,tick=10".parse::<Layout>().unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "invalid layout spec at \"tick=10\": a tick needs a unit: 10ms or 10s"
/// );
/// # Ok::<(), Error>(())
/// ```
impl FromStr for Layout {
    type Err = Error;

    fn from_str(text: &str) -> Result<Layout, Error> {
        // Written exactly, or refused: a stray space (`"twitter "` from a shell variable or a
        // config file) is a sign the text is not what was meant.
        if let Some(at) = text.find(char::is_whitespace) {
            return Err(spec_error(
                text,
                format!(
                    "a layout is a preset name or NAME=VALUE parts with no spaces; found one at \
                     byte {at}"
                ),
            ));
        }
        if !text.contains('=') {
            return Layout::preset(text);
        }
        let parsed = parse(text)?;
        Ok(
            match ALL_PRESETS
                .iter()
                .find(|p| same_shape(&p.layout(), &parsed))
            {
                Some(preset) => preset.layout(),
                None => parsed,
            },
        )
    }
}

impl Layout {
    /// The name node stores kept this layout's claims and time reservations under before they
    /// were kept by bit shape ([`Layout::shape_key`]), and still read, as a floor, after the
    /// upgrade (values under it are Unix ms of exactly this layout). It names the whole
    /// layout, epoch and tick included — which is why it was wrong as a key: layouts of one
    /// shape with different epochs make equal IDs, and did not see each other's records.
    /// One layout always finds its own name whatever it is called:
    ///
    /// * only what decides an ID's bits counts: the time, node and sequence widths, where the
    ///   node bits sit, the epoch and the tick — not field names, how the node bits are split
    ///   into fields, the sign-bit setting or the builder's name (layouts that differ only in
    ///   those make the same IDs, so they share node claims and reservations);
    /// * a layout that makes a preset's IDs uses the preset's name, however it was made;
    /// * any other layout uses `custom-` and 16 hex digits of SipHash-2-4 (keys 0, 0) of those
    ///   numbers.
    ///
    /// ```
    /// use monoflake::Layout;
    ///
    /// assert_eq!(Layout::twitter().state_name(), "twitter");
    /// let same: Layout = Layout::twitter().to_string().parse()?;
    /// assert_eq!(same.state_name(), "twitter");
    /// let custom: Layout = "time=41,worker=10,sequence=12,epoch=2024-01-01".parse()?;
    /// assert_eq!(custom.state_name(), "custom-851a7745362cec28");
    /// let renamed = Layout::builder().name("orders").time_bits(41).node_field("worker", 10)
    ///     .sequence_bits(12).epoch_ms(1_704_067_200_000).build()?;
    /// assert_eq!(renamed.state_name(), custom.state_name());
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn state_name(&self) -> Cow<'static, str> {
        if let Some(preset) = ALL_PRESETS.iter().find(|p| same_shape(&p.layout(), self)) {
            return Cow::Borrowed(preset.name);
        }
        let (time, node, sequence, node_low, epoch, tick) = id_shape(self);
        let mut hasher = SipHasher24::new_with_keys(0, 0);
        hasher.write(
            format!(
                "time={time},node={node},sequence={sequence},node_below_sequence={node_low},\
                 epoch_ms={epoch},tick_ms={tick}"
            )
            .as_bytes(),
        );
        Cow::Owned(format!("custom-{:016x}", hasher.finish()))
    }
}

impl Layout {
    /// The key node stores keep this layout's node claims and time reservations under: its
    /// **bit shape** — the time, node and sequence widths and where the node bits sit — and
    /// nothing else. Layouts of one shape can make equal IDs whatever their epochs, ticks or
    /// names (an ID of one is an ID of the other at another instant), so they are one node
    /// space: they share claims, and their reservations compare as ID values
    /// ([`Layout::ticks_before`]), not as times.
    ///
    /// * a layout shaped as a preset uses the preset's name (`twitter`, …), as its
    ///   [`state_name`](Layout::state_name) did before, so a preset's records stay where they
    ///   were;
    /// * any other, `t<time>-n<node>-s<sequence>-node-high` (or `-node-low`, for node bits
    ///   below the sequence), the shape itself.
    ///
    /// ```
    /// use monoflake::Layout;
    ///
    /// assert_eq!(Layout::twitter().shape_key(), "twitter");
    /// // Twitter's bit shape with another epoch: IDs that can equal Twitter's, one node space.
    /// let moved: Layout = "time=41,worker=10,sequence=12,epoch=2024-01-01".parse()?;
    /// assert_eq!(moved.shape_key(), "twitter");
    /// assert_ne!(moved.state_name(), moved.shape_key());
    /// let custom: Layout = "time=40,worker=11,sequence=12,epoch=2024-01-01".parse()?;
    /// assert_eq!(custom.shape_key(), "t40-n11-s12-node-high");
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn shape_key(&self) -> Cow<'static, str> {
        if let Some(preset) = ALL_PRESETS.iter().find(|p| same_bits(&p.layout(), self)) {
            return Cow::Borrowed(preset.name);
        }
        let (time, node, sequence, node_low, _, _) = id_shape(self);
        let order = if node_low { "node-low" } else { "node-high" };
        Cow::Owned(format!("t{time}-n{node}-s{sequence}-{order}"))
    }

    /// The clock the values stored under [`Layout::shape_key`] are written in, as
    /// `(epoch_ms, tick_ms)`: the preset's, for a preset's shape (so a preset's records read
    /// as they always did), else epoch 0 and 1 ms (the value is the time-field value).
    pub(crate) fn shape_clock(&self) -> (u64, u64) {
        ALL_PRESETS
            .iter()
            .find(|p| same_bits(&p.layout(), self))
            .map_or((0, 1), |p| {
                let l = p.layout();
                (l.epoch_ms(), l.tick_ms())
            })
    }
}

/// The same bit shape (widths and order; epoch and tick aside): see [`Layout::shape_key`].
fn same_bits(a: &Layout, b: &Layout) -> bool {
    let (x, y) = (id_shape(a), id_shape(b));
    (x.0, x.1, x.2, x.3) == (y.0, y.1, y.2, y.3)
}

/// What decides an ID's bits: the widths, where the node bits sit, the epoch and the tick.
/// Not the field names, how the node bits are split into fields, nor the sign-bit setting:
/// layouts that differ only in those make the same IDs, so they must share node claims.
fn id_shape(l: &Layout) -> (u32, u32, u32, bool, u64, u64) {
    let node_bits: u32 = l.fields.iter().map(|f| f.bits).sum();
    (
        l.time_bits,
        node_bits,
        l.sequence_bits,
        l.node_low && node_bits > 0,
        l.epoch_ms,
        l.tick_ms,
    )
}

/// The same IDs: see [`id_shape`].
fn same_shape(a: &Layout, b: &Layout) -> bool {
    id_shape(a) == id_shape(b)
}

fn spec_error(part: &str, reason: impl Into<String>) -> Error {
    Error::InvalidLayoutSpec {
        part: part.to_owned(),
        reason: reason.into(),
    }
}

fn parse(text: &str) -> Result<Layout, Error> {
    let mut builder = Layout::builder();
    let (mut time, mut sequence) = (None::<u32>, None::<u32>);
    let (mut epoch, mut tick, mut sign_bit) = (None::<u64>, None::<u64>, None::<bool>);
    let (mut above, mut below) = (0usize, 0usize);
    for part in text.split(',') {
        let Some((key, value)) = part.split_once('=') else {
            let reason = if part.is_empty() {
                format!("an empty part; {SPEC_HELP}")
            } else {
                format!("expected NAME=VALUE; {SPEC_HELP}")
            };
            return Err(spec_error(part, reason));
        };
        let twice = || spec_error(part, format!("{key} is given twice"));
        match key {
            "epoch" => {
                if epoch.replace(parse_epoch(part, value)?).is_some() {
                    return Err(twice());
                }
            }
            "tick" => {
                if tick.replace(parse_tick(part, value)?).is_some() {
                    return Err(twice());
                }
            }
            "sign_bit" => {
                let yes = match value {
                    "yes" | "true" => true,
                    "no" | "false" => false,
                    _ => {
                        return Err(spec_error(
                            part,
                            "sign_bit is yes (IDs may use all 64 bits) or no (the default: \
                             every ID fits an i64)",
                        ));
                    }
                };
                if sign_bit.replace(yes).is_some() {
                    return Err(twice());
                }
            }
            _ => {
                let bits = parse_bits(part, key, value)?;
                match key {
                    "time" if time.is_some() => return Err(twice()),
                    "time" => time = Some(bits),
                    _ if time.is_none() => {
                        return Err(spec_error(
                            part,
                            "the time field comes first (fields go from the most significant \
                             bit down)",
                        ));
                    }
                    "sequence" if sequence.is_some() => return Err(twice()),
                    "sequence" => sequence = Some(bits),
                    name => {
                        if sequence.is_some() {
                            below += 1;
                        } else {
                            above += 1;
                        }
                        builder = builder.node_field(name.to_owned(), bits);
                    }
                }
            }
        }
    }
    let Some(time) = time else {
        return Err(spec_error("", format!("no time=BITS field; {SPEC_HELP}")));
    };
    let Some(sequence) = sequence else {
        return Err(spec_error(
            "",
            format!("no sequence=BITS field; {SPEC_HELP}"),
        ));
    };
    let Some(epoch) = epoch else {
        return Err(spec_error(
            "",
            "no epoch (RFC 3339 such as epoch=2024-01-01T00:00:00Z, or Unix milliseconds)",
        ));
    };
    if above > 0 && below > 0 {
        return Err(spec_error(
            "",
            format!(
                "node fields sit all between time and sequence (as twitter) or all below the \
                 sequence (as sonyflake); this spec has {above} above the sequence and {below} \
                 below it"
            ),
        ));
    }
    builder
        .time_bits(time)
        .sequence_bits(sequence)
        .node_below_sequence(below > 0)
        .epoch_ms(epoch)
        .tick_ms(tick.unwrap_or(1))
        .allow_sign_bit(sign_bit.unwrap_or(false))
        .build()
}

fn parse_bits(part: &str, key: &str, value: &str) -> Result<u32, Error> {
    match value.parse::<u32>() {
        Ok(bits) if bits <= 64 => Ok(bits),
        Ok(bits) => Err(spec_error(
            part,
            format!("{key} has {bits} bits; an ID holds at most 64"),
        )),
        Err(_) => Err(spec_error(
            part,
            format!(
                "the width of {key} is a number of bits, got {value:?} (the other settings \
                 are epoch=, tick= and sign_bit=)"
            ),
        )),
    }
}

fn parse_tick(part: &str, value: &str) -> Result<u64, Error> {
    let (number, scale) = if let Some(n) = value.strip_suffix("ms") {
        (n, 1)
    } else if let Some(n) = value.strip_suffix('s') {
        (n, 1000)
    } else if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(spec_error(
            part,
            format!("a tick needs a unit: {value}ms or {value}s"),
        ));
    } else {
        return Err(spec_error(
            part,
            format!("a tick is a whole number of ms or s, e.g. 1ms, 10ms, 1s; got {value:?}"),
        ));
    };
    number
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| {
            spec_error(
                part,
                format!("a tick is a whole number of ms or s, e.g. 1ms, 10ms, 1s; got {value:?}"),
            )
        })
}

/// Unix milliseconds, or RFC 3339 (a date alone is midnight UTC).
fn parse_epoch(part: &str, value: &str) -> Result<u64, Error> {
    parse_epoch_text(value).map_err(|reason| spec_error(part, reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_round_trips_through_its_spec() {
        for name in crate::PRESETS {
            let layout = Layout::preset(name).unwrap();
            let text = layout.to_string();
            assert_eq!(text.parse::<Layout>().unwrap(), layout, "{text}");
            assert_eq!(layout.state_name(), *name);
        }
    }

    #[test]
    fn spec_errors_name_the_part_and_the_numbers() {
        let cases: &[(&str, &str)] = &[
            (
                "time=41,worker=10,sequence=12",
                "invalid layout spec: no epoch",
            ),
            (
                "worker=10,time=41,sequence=12,epoch=0",
                "invalid layout spec at \"worker=10\": the time field comes first",
            ),
            (
                "time=41,sequence=12,worker=10,time=3,epoch=0",
                "invalid layout spec at \"time=3\": time is given twice",
            ),
            (
                "time=41,a=5,sequence=12,b=5,epoch=0",
                "1 above the sequence and 1 below it",
            ),
            (
                "time=41,worker=x,sequence=12,epoch=0",
                "the width of worker is a number of bits, got \"x\"",
            ),
            (
                "time=41,worker=10,sequence=12,epoch=0,tick=fast",
                "a tick is a whole number of ms or s",
            ),
            (
                "time=41,worker=10,sequence=12,epoch=0,sign_bit=maybe",
                "sign_bit is yes",
            ),
            ("time=41,,sequence=12,epoch=0", "an empty part"),
            ("time=41,worker,sequence=12,epoch=0", "expected NAME=VALUE"),
            ("time=41,sequence=12,epoch=0,time", "expected NAME=VALUE"),
            (
                "time=41,worker=10,epoch=0",
                "invalid layout spec: no sequence=BITS field",
            ),
            (
                "time=41,worker=10,sequence=12,epoch=2024-13-01",
                "month 13 is not 1..=12",
            ),
            (
                "time=41,Worker=10,sequence=12,epoch=0",
                "invalid node field name \"Worker\"",
            ),
            (
                "time=41,tick2=10,sequence=12,epoch=0,tick=0ms",
                "the tick must be at least 1 ms, got 0",
            ),
            (
                "time=37,server=20,sequence=16,epoch=2024-01-01",
                "layout needs 73 bits (time 37 + node 20 + sequence 16) but an ID holds at most 63",
            ),
            (
                "time=41,worker=10,sequence=12,epoch=4102444800000",
                "in the future",
            ),
            (
                "time=99,sequence=12,epoch=0",
                "time has 99 bits; an ID holds at most 64",
            ),
        ];
        for (spec, message) in cases {
            let err = spec.parse::<Layout>().unwrap_err();
            assert!(err.is_bad_input(), "{spec}: {err}");
            assert!(err.to_string().contains(message), "{spec}: {err}");
        }
    }

    #[test]
    fn state_names_differ_for_layouts_that_differ() {
        let a: Layout = "time=41,worker=10,sequence=12,epoch=2024-01-01"
            .parse()
            .unwrap();
        let b: Layout = "time=41,worker=10,sequence=12,epoch=2024-01-01,tick=2ms"
            .parse()
            .unwrap();
        let c: Layout = "time=41,sequence=12,worker=10,epoch=2024-01-01"
            .parse()
            .unwrap();
        let names = [a.state_name(), b.state_name(), c.state_name()];
        assert!(
            names
                .iter()
                .all(|n| n.starts_with("custom-") && n.len() == 23)
        );
        assert_ne!(names[0], names[1]);
        assert_ne!(names[0], names[2]);
        assert_ne!(names[1], names[2]);
    }

    #[test]
    fn layouts_that_make_the_same_ids_share_a_state_name() {
        let twitter = Layout::twitter().state_name();
        for spec in [
            "time=41,datacenter=5,worker=5,sequence=12,epoch=2010-11-04T01:42:54.657Z,tick=1ms,sign_bit=yes",
            "time=41,dc=5,worker=5,sequence=12,epoch=2010-11-04T01:42:54.657Z",
            "time=41,worker=10,sequence=12,epoch=2010-11-04T01:42:54.657Z",
        ] {
            let layout: Layout = spec.parse().unwrap();
            assert_eq!(layout.state_name(), twitter, "{spec}");
        }
        let a: Layout = "time=41,a=3,b=7,sequence=12,epoch=2024-01-01"
            .parse()
            .unwrap();
        let b: Layout = "time=41,n=10,sequence=12,epoch=2024-01-01,sign_bit=yes"
            .parse()
            .unwrap();
        assert_eq!(a.state_name(), b.state_name());
    }

    proptest::proptest! {
        /// Every layout the builder accepts is written as a spec that reads back to the same
        /// layout, with the same state name.
        #[test]
        fn every_built_layout_round_trips(
            time in 1u32..45,
            fields in proptest::collection::vec((0usize..6, 0u32..12), 0..4),
            sequence in 1u32..20,
            node_low: bool,
            epoch in 0u64..1_700_000_000_000,
            tick in proptest::sample::select(vec![1u64, 2, 10, 999, 1000, 60_000]),
            sign_bit: bool,
        ) {
            let names = ["worker", "dc", "host", "region", "m0", "shard_id"];
            let mut builder = Layout::builder()
                .time_bits(time)
                .sequence_bits(sequence)
                .node_below_sequence(node_low)
                .epoch_ms(epoch)
                .tick_ms(tick)
                .allow_sign_bit(sign_bit);
            for (name, bits) in fields {
                builder = builder.node_field(names[name], bits);
            }
            if let Ok(layout) = builder.build() {
                let text = layout.to_string();
                let back: Layout = text.parse().unwrap();
                proptest::prop_assert!(same_shape(&back, &layout), "{}", text);
                proptest::prop_assert_eq!(back.to_string(), text);
                proptest::prop_assert_eq!(back.state_name(), layout.state_name());
            }
        }

        /// Two layouts share a shape key exactly when their IDs can be equal: the same time,
        /// node and sequence widths in the same order, whatever their epochs, ticks, names
        /// and field splits.
        #[test]
        fn equal_shapes_share_a_key_and_different_shapes_never(
            a in (1u32..43, 0u32..12, 1u32..14, proptest::bool::ANY),
            b in (1u32..43, 0u32..12, 1u32..14, proptest::bool::ANY),
            same: bool,
            epochs in (0u64..1_700_000_000_000, 0u64..1_700_000_000_000),
            ticks in (proptest::sample::select(vec![1u64, 10, 1000]), proptest::sample::select(vec![1u64, 10, 1000])),
            split: u32,
        ) {
            let b = if same { a } else { b };
            let build = |(time, node, sequence, low): (u32, u32, u32, bool), epoch, tick, split: u32| {
                let mut builder = Layout::builder()
                    .time_bits(time)
                    .sequence_bits(sequence)
                    .node_below_sequence(low)
                    .epoch_ms(epoch)
                    .tick_ms(tick)
                    .allow_sign_bit(true);
                // The node bits in one field or two: how they are split never counts.
                let first = if node == 0 { 0 } else { split % (node + 1) };
                for (name, bits) in [("hi", first), ("lo", node - first)] {
                    if bits > 0 {
                        builder = builder.node_field(name, bits);
                    }
                }
                builder.build()
            };
            if let (Ok(x), Ok(y)) = (
                build(a, epochs.0, ticks.0, split),
                build(b, epochs.1, ticks.1, split / 7),
            ) {
                let equal = (x.time_bits(), x.node_bits(), x.sequence_bits(),
                             x.node_below_sequence() && x.node_bits() > 0)
                    == (y.time_bits(), y.node_bits(), y.sequence_bits(),
                        y.node_below_sequence() && y.node_bits() > 0);
                proptest::prop_assert_eq!(x.shape_key() == y.shape_key(), equal,
                    "{} / {}", x, y);
                if equal {
                    proptest::prop_assert_eq!(x.shape_clock(), y.shape_clock());
                }
            }
        }

        /// Reading any text never panics: it gives a layout or a bad-input error.
        #[test]
        fn any_text_gives_a_layout_or_a_bad_input_error(
            text in "((time|sequence|epoch|tick|sign_bit|worker|x)=[0-9a-zT:.+-]{0,12},?){0,6}",
        ) {
            if let Err(e) = text.parse::<Layout>() {
                proptest::prop_assert!(e.is_bad_input(), "{}", e);
            }
        }
    }
}
