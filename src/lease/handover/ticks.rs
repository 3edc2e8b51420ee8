//! The fence's words and a holder's start, in the layout's own tick arithmetic: the one place
//! a store time (Unix ms) becomes a tick the hot path compares with. Pure; the holder
//! ([`Holder`](super::Holder)) and the model checker call these, nothing re-derives them.

use crate::Layout;

/// The first tick that starts at or after `unix_ms`: where a holder whose floor is `unix_ms`
/// starts ([`Layout::ticks_before`]).
///
/// ```
/// use monoflake::{Layout, handover::first_tick_from};
/// let layout = Layout::sonyflake(); // 10 ms ticks
/// assert_eq!(first_tick_from(&layout, layout.epoch_ms() + 20), 2);
/// assert_eq!(first_tick_from(&layout, layout.epoch_ms() + 21), 3);
/// ```
pub const fn first_tick_from(layout: &Layout, unix_ms: u64) -> u64 {
    layout.ticks_before(unix_ms)
}

/// The fence's limit for a reservation `until_ms` ("no tick starting at or after it is
/// issued"): the last tick that starts before it, 0 when none does. A successor that reads
/// the reservation starts at [`first_tick_from`] of it, the tick after this one.
///
/// ```
/// use monoflake::{Layout, handover::last_tick_before};
/// let layout = Layout::sonyflake(); // 10 ms ticks
/// assert_eq!(last_tick_before(&layout, layout.epoch_ms() + 20), 1);
/// assert_eq!(last_tick_before(&layout, layout.epoch_ms() + 21), 2);
/// ```
pub const fn last_tick_before(layout: &Layout, until_ms: u64) -> u64 {
    first_tick_from(layout, until_ms).saturating_sub(1)
}

/// The fence's deadline word for a deadline `deadline_ms` (the generator's clock, Unix ms):
/// the first clock tick at which nothing may be issued, the one after the tick holding the
/// deadline. An ID carries its tick's start, so every ID issued carries a time at or before
/// the deadline, which is what a successor's floor is above (an hour-long tick that began
/// before the deadline is not refused for the rest of the hour). `u64::MAX` for no deadline,
/// 0 for none left (lost, or never confirmed).
///
/// ```
/// use monoflake::{Layout, handover::deadline_tick};
/// let layout = Layout::sonyflake(); // 10 ms ticks
/// assert_eq!(deadline_tick(&layout, layout.epoch_ms() + 25), 3);
/// assert_eq!(deadline_tick(&layout, u64::MAX), u64::MAX);
/// assert_eq!(deadline_tick(&layout, 0), 0);
/// ```
pub const fn deadline_tick(layout: &Layout, deadline_ms: u64) -> u64 {
    match deadline_ms {
        u64::MAX => u64::MAX,
        0 => 0,
        ms => layout.tick_at(ms).saturating_add(1),
    }
}

/// The end of the tick `last_tick` (Unix ms): what a holder that issued in it used, and what
/// its final reservation or write-back covers.
///
/// ```
/// use monoflake::{Layout, handover::end_of_tick};
/// let layout = Layout::sonyflake(); // 10 ms ticks
/// assert_eq!(end_of_tick(&layout, 2), layout.epoch_ms() + 30);
/// ```
pub const fn end_of_tick(layout: &Layout, last_tick: u64) -> u64 {
    layout.unix_ms_of_tick(last_tick.saturating_add(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// For ticks of 1 ms to 1 s and every deadline and reservation in a few ticks around an
    /// epoch-aligned start: the last tick the deadline word lets through starts at or before
    /// the deadline and the first it refuses after it; the fence's limit is the last tick
    /// that starts before the reservation, and a successor's first tick the first that
    /// starts at or after it.
    #[test]
    fn each_word_is_the_exact_tick_of_its_time() {
        for tick_ms in [1, 2, 10, 40, 1_000] {
            let layout = Layout::builder()
                .epoch_ms(Layout::twitter().epoch_ms())
                .tick_ms(tick_ms)
                .build()
                .unwrap();
            let start = layout.unix_ms_of_tick(1_000);
            for ms in start..start + 3 * tick_ms {
                let deadline = deadline_tick(&layout, ms);
                assert!(
                    layout.unix_ms_of_tick(deadline - 1) <= ms,
                    "{tick_ms} ms: {ms}"
                );
                assert!(layout.unix_ms_of_tick(deadline) > ms, "{tick_ms} ms: {ms}");
                let limit = last_tick_before(&layout, ms);
                assert!(layout.unix_ms_of_tick(limit) < ms, "{tick_ms} ms: {ms}");
                assert!(
                    layout.unix_ms_of_tick(limit + 1) >= ms,
                    "{tick_ms} ms: {ms}"
                );
                let first = first_tick_from(&layout, ms);
                assert_eq!(first, limit + 1, "{tick_ms} ms: {ms}");
                assert!(layout.unix_ms_of_tick(first) >= ms, "{tick_ms} ms: {ms}");
                assert!(layout.unix_ms_of_tick(first - 1) < ms, "{tick_ms} ms: {ms}");
                assert_eq!(
                    end_of_tick(&layout, limit),
                    layout.unix_ms_of_tick(first),
                    "{tick_ms} ms: {ms}"
                );
            }
        }
    }
}
