//! Where every store keeps a node's records, and in what unit: by the layout's **bit shape**,
//! as ID values.
//!
//! Two layouts of one bit shape ([`Layout::shape_key`]) make equal IDs at different instants
//! when their epochs or ticks differ: Twitter's layout and the same widths with an epoch 1 s
//! later issue, at one Unix millisecond, time fields 1,000 apart — IDs the other issued a
//! second earlier (issue 34, case 3: 2,729,664 of 3,000,000 IDs issued again after an epoch
//! was moved). So node claims and reservations are kept per shape, and a reservation is
//! stored as an ID value: the time field below which every ID of the node was issued, written
//! in the shape's clock ([`Layout::shape_clock`]: a preset's own for a preset's shape, so its
//! records read as they always did; epoch 0 and 1 ms otherwise, the time-field value itself).
//! A store compares stored values as numbers (the largest wins), which is comparing ID values.
//!
//! Records of before (kept under [`Layout::state_name`], in the Unix ms of exactly that
//! layout — the name includes the epoch and the tick) are read too, as floors, by
//! [`legacy_key`]; they are never written again.
//!
//! The mutant `monoflake_mutant_epoch_blind` (scripts/mutants.sh) restores the old keying and
//! units: every record under the layout's state name, in its own Unix ms.

use std::borrow::Cow;

use crate::Layout;

/// The key (file store: the directory; etcd: the key prefix; PostgreSQL: the `layout`
/// column) a node's records of `layout` are kept under: its shape key.
pub(crate) fn key(layout: &Layout) -> Cow<'static, str> {
    if cfg!(monoflake_mutant_epoch_blind) {
        return layout.state_name();
    }
    layout.shape_key()
}

/// The key the records of `layout` were kept under before they were kept by shape, when it
/// is another one: its state name. Values under it are Unix ms of `layout` itself.
pub(crate) fn legacy_key(layout: &Layout) -> Option<Cow<'static, str>> {
    let old = layout.state_name();
    (old != key(layout)).then_some(old)
}

/// The value stored for a reservation until `until_ms` (Unix ms of `layout`'s clock: no tick
/// starting at or after it was issued): the same ID-value bound in the shape's clock, the
/// start of the first time-field value not issued.
///
/// ```
/// use monoflake::{Layout, handover::{from_stored, to_stored}};
/// let layout = Layout::builder().node_field("n", 9).epoch_ms(1_000).tick_ms(10).build()?;
/// // A shape no preset has: its clock is the time-field value itself. 1,021 ms is field 2.1,
/// // so the first field value not issued is 3.
/// assert_eq!(to_stored(&layout, 1_021), 3);
/// assert_eq!(from_stored(&layout, 3), 1_030);
/// # Ok::<(), monoflake::Error>(())
/// ```
pub fn to_stored(layout: &Layout, until_ms: u64) -> u64 {
    let (epoch, tick) = layout.shape_clock();
    if cfg!(monoflake_mutant_epoch_blind) || (epoch, tick) == (layout.epoch_ms(), layout.tick_ms())
    {
        return until_ms;
    }
    epoch.saturating_add(layout.ticks_before(until_ms).saturating_mul(tick))
}

/// The reservation a stored value means for `layout`, in Unix ms of its clock: the start of
/// the first time-field value not issued under any layout of its shape. Rounded up to a
/// whole time-field value, never down: no ID value at or above what was stored is issued.
///
/// ```
/// use monoflake::{Layout, handover::from_stored};
/// // Twitter's preset is its own shape clock: its values are its Unix ms.
/// assert_eq!(from_stored(&Layout::twitter(), 1_700_000_000_123), 1_700_000_000_123);
/// ```
pub fn from_stored(layout: &Layout, stored: u64) -> u64 {
    let (epoch, tick) = layout.shape_clock();
    if cfg!(monoflake_mutant_epoch_blind) || (epoch, tick) == (layout.epoch_ms(), layout.tick_ms())
    {
        return stored;
    }
    layout.unix_ms_of_tick(stored.saturating_sub(epoch).div_ceil(tick))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn twitter_at(epoch_ms: u64, tick_ms: u64) -> Layout {
        Layout::builder()
            .node_field("datacenter", 5)
            .node_field("worker", 5)
            .epoch_ms(epoch_ms)
            .tick_ms(tick_ms)
            .build()
            .unwrap()
    }

    #[test]
    fn a_preset_s_values_are_its_unix_ms() {
        let t = Layout::twitter();
        assert_eq!(key(&t), "twitter");
        assert_eq!(legacy_key(&t), None);
        for ms in [0, 5_000, 1_700_000_000_123] {
            assert_eq!(to_stored(&t, ms), ms);
            assert_eq!(from_stored(&t, ms), ms);
        }
    }

    /// An epoch one second later: the same Unix ms is a time field 1,000 lower, so what was
    /// reserved until `r` under Twitter's epoch is, for the later epoch, reserved until
    /// `r + 1000` — the same ID values.
    #[test]
    fn a_later_epoch_reads_the_same_id_values_later() {
        let t = Layout::twitter();
        let later = twitter_at(t.epoch_ms() + 1_000, 1);
        assert_eq!(key(&later), "twitter");
        assert!(legacy_key(&later).is_some_and(|k| k.starts_with("custom-")));
        let r = 1_700_000_000_000;
        assert_eq!(from_stored(&later, to_stored(&t, r)), r + 1_000);
        assert_eq!(from_stored(&t, to_stored(&later, r)), r - 1_000);
        assert_eq!(later.ticks_before(r + 1_000), t.ticks_before(r));
    }

    /// A tick of 10 ms on a 1 ms shape: the time field counts tens of ms, and a reservation
    /// of the 1 ms layout is far ahead in it (refused, or waited out), never below.
    #[test]
    fn another_tick_compares_time_fields_and_rounds_up() {
        let t = Layout::twitter();
        let slow = twitter_at(t.epoch_ms(), 10);
        let r = t.epoch_ms() + 12_345;
        assert_eq!(from_stored(&slow, to_stored(&t, r)), t.epoch_ms() + 123_450);
        // 10 ms ticks: a reservation inside a tick covers the whole tick.
        assert_eq!(
            from_stored(&t, to_stored(&slow, t.epoch_ms() + 1_001)),
            t.epoch_ms() + 101
        );
        // A shape of no preset: time-field values stored.
        let odd = Layout::builder()
            .time_bits(40)
            .node_field("n", 11)
            .epoch_ms(1_000)
            .tick_ms(10)
            .build()
            .unwrap();
        assert_eq!(key(&odd), "t40-n11-s12-node-high");
        assert_eq!(to_stored(&odd, 1_001), 1);
        assert_eq!(from_stored(&odd, 1), 1_010);
        assert_eq!(from_stored(&odd, u64::MAX), u64::MAX);
    }
}
