//! The publication: how the current piece of the line reaches every reader without a lock.
//! [`Line`] holds it twice over, in two sequence locks made only of atomics: the piece itself
//! in double-buffered slots, and its straight part in one place ([`Fast`]) that the hot path
//! reads first. Readers never wait for a writer, and a writer that stops half-way (in a forked
//! child) leaves the published piece intact.
//!
//! Touches only its own atomics, through `crate::sync` (the loom seam). Publishes only for a
//! caller that holds the writer lock (`writer.rs`); decides nothing about what it publishes.
//! The fields are `pub(super)` for the unit tests (`tests.rs`), which break a writer half-way;
//! the clock itself uses the methods.

use super::counter::Counter;
use super::segment::{Segment, Straight};
use crate::sync::{AtomicU64, Ordering};

/// A segment stored in atomics, with its own sequence number (even: complete).
pub(super) struct Slot {
    pub(super) seq: AtomicU64,
    start: AtomicU64,
    pub(super) at: AtomicU64,
    slew_for: AtomicU64,
    slew_from: AtomicU64,
    check_at: AtomicU64,
}

/// The current segment's [`Straight`] part, in one place with no indirection: the three
/// fields and a version, read together by the fast path. A reader that finds a write under
/// way (an odd version, or a different one after its loads) does not wait: it reads the
/// double-buffered slots instead.
pub(super) struct Fast {
    pub(super) version: AtomicU64,
    start: AtomicU64,
    at: AtomicU64,
    width: AtomicU64,
}

/// The current segment, double-buffered: a writer fills the slot readers are not using, then
/// publishes its generation. Readers never wait for a writer (a reader retries only if two
/// writes overlapped its read), and a writer that stops half-way — a forked child inherits a
/// writer that no longer exists — leaves the published slot intact.
///
/// Beside it, [`Fast`]: the current segment's straight part, which the writer closes (an odd
/// version) before it publishes a segment and opens (even) once the new one is published.
pub(super) struct Line {
    // Ordering: two sequence locks, with every field an atomic (no data race).
    //
    // Slots, the classic double-buffered one. Writer: slot.seq = odd (Relaxed),
    // fence(Release), fields (Relaxed), slot.seq = even (Release), current = generation
    // (Release). Reader: current (Acquire), slot.seq (Acquire), fields (Relaxed),
    // fence(Acquire), slot.seq again (Relaxed): equal and even → consistent.
    //
    // Fast, a single one. Writer: version = odd (Relaxed), fence(Release), then the slots as
    // above, then fields (Relaxed), version = even (Release). Reader: version (Acquire),
    // fields (Relaxed), fence(Acquire), version again (Relaxed): equal and even → consistent.
    // The odd version is stored before the new generation is released, so a thread that has
    // read the new segment (acquired `current`) finds the old straight part closed: it never
    // reads the old segment's straight part again after the new segment (a forward step).
    pub(super) fast: Fast,
    pub(super) current: AtomicU64,
    pub(super) slots: [Slot; 2],
}

impl Slot {
    fn new() -> Self {
        Slot {
            seq: AtomicU64::new(0),
            start: AtomicU64::new(0),
            at: AtomicU64::new(0),
            slew_for: AtomicU64::new(0),
            slew_from: AtomicU64::new(0),
            check_at: AtomicU64::new(0),
        }
    }
}

impl Line {
    pub(super) fn new(first: Segment, counter: &Counter) -> Self {
        let line = Line {
            fast: Fast {
                version: AtomicU64::new(1),
                start: AtomicU64::new(0),
                at: AtomicU64::new(0),
                width: AtomicU64::new(0),
            },
            current: AtomicU64::new(0),
            slots: [Slot::new(), Slot::new()],
        };
        line.store_slot(0, first);
        line.open(Straight::of(&first, counter));
        line
    }

    #[inline]
    pub(super) fn load(&self) -> Segment {
        loop {
            let generation = self.current.load(Ordering::Acquire);
            let slot = &self.slots[(generation & 1) as usize];
            let seq = slot.seq.load(Ordering::Acquire);
            let segment = Segment {
                start: slot.start.load(Ordering::Relaxed),
                at: slot.at.load(Ordering::Relaxed),
                slew_for: slot.slew_for.load(Ordering::Relaxed),
                slew_from: slot.slew_from.load(Ordering::Relaxed),
                check_at: slot.check_at.load(Ordering::Relaxed),
            };
            crate::sync::fence(Ordering::Acquire);
            if seq == generation * 2 && slot.seq.load(Ordering::Relaxed) == seq {
                return segment;
            }
            core::hint::spin_loop();
        }
    }

    /// The current segment's straight part, unless a writer is at work on it (see the
    /// ordering above): then `None`, and the caller reads [`Line::load`] instead.
    #[inline]
    pub(super) fn load_straight(&self) -> Option<Straight> {
        let fast = &self.fast;
        let version = fast.version.load(Ordering::Acquire);
        let straight = Straight {
            start: fast.start.load(Ordering::Relaxed),
            at: fast.at.load(Ordering::Relaxed),
            width: fast.width.load(Ordering::Relaxed),
        };
        crate::sync::fence(Ordering::Acquire);
        let again = fast.version.load(Ordering::Relaxed);
        (version == again && version & 1 == 0).then_some(straight)
    }

    /// Publishes the next segment. Callers hold the writer lock.
    pub(super) fn publish(&self, segment: Segment, counter: &Counter) {
        // Close the straight part first: see the ordering above.
        let version = self.fast.version.load(Ordering::Relaxed);
        self.fast.version.store(version | 1, Ordering::Relaxed);
        crate::sync::fence(Ordering::Release);
        let next = self.current.load(Ordering::Relaxed) + 1;
        self.store_slot(next, segment);
        self.current.store(next, Ordering::Release);
        self.open(Straight::of(&segment, counter));
    }

    /// Stores `straight` and opens it (an even version). The version is odd on entry.
    fn open(&self, straight: Straight) {
        let fast = &self.fast;
        let version = fast.version.load(Ordering::Relaxed);
        fast.start.store(straight.start, Ordering::Relaxed);
        fast.at.store(straight.at, Ordering::Relaxed);
        fast.width.store(straight.width, Ordering::Relaxed);
        fast.version.store(version + 1, Ordering::Release);
    }

    fn store_slot(&self, generation: u64, s: Segment) {
        let slot = &self.slots[(generation & 1) as usize];
        slot.seq.store(generation * 2 + 1, Ordering::Relaxed);
        crate::sync::fence(Ordering::Release);
        slot.start.store(s.start, Ordering::Relaxed);
        slot.at.store(s.at, Ordering::Relaxed);
        slot.slew_for.store(s.slew_for, Ordering::Relaxed);
        slot.slew_from.store(s.slew_from, Ordering::Relaxed);
        slot.check_at.store(s.check_at, Ordering::Relaxed);
        slot.seq.store(generation * 2, Ordering::Release);
    }
}
