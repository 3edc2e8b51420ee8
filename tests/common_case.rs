//! The common case of `try_next_id` (the clock inside the state's tick, room in its sequence)
//! under real clocks and threads: unique, increasing per thread, never ahead of the clock by
//! more than the lead — on layouts where the common case meets borrows, start offsets,
//! floors, per-core slots, long ticks and a coarse clock.

use std::time::Duration;

use monoflake::{CoarseClock, Error, Generator, Id, IdGenerator, Layout, LockedClock, TimeSource};

/// `threads` threads each take `per_thread` IDs with `try_next_id` (retrying `WouldBlock`);
/// after each ID the thread reads `clock` and checks the ID's tick is at most `lead_ticks`
/// ahead of it. Returns every ID, checked distinct and increasing per thread.
fn run<G: IdGenerator + Sync, C: TimeSource>(
    g: &G,
    clock: &C,
    layout: &Layout,
    lead_ticks: u64,
    threads: usize,
    per_thread: usize,
) -> Vec<Id> {
    let runs: Vec<Vec<Id>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut ids = Vec::with_capacity(per_thread);
                    while ids.len() < per_thread {
                        match g.try_next_id() {
                            Ok(id) => {
                                let tick = id.parts(layout).unwrap().tick();
                                let now = layout.tick_at(clock.precise_now_ms());
                                assert!(
                                    tick <= now + lead_ticks,
                                    "tick {tick} is more than {lead_ticks} ahead of {now}"
                                );
                                ids.push(id);
                            }
                            Err(Error::WouldBlock { .. }) => std::thread::yield_now(),
                            Err(e) => panic!("{e}"),
                        }
                    }
                    ids
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for run in &runs {
        assert!(
            run.windows(2).all(|w| w[0] < w[1]),
            "a thread's IDs went back"
        );
    }
    let mut all: Vec<Id> = runs.into_iter().flatten().collect();
    all.sort_unstable();
    let before = all.len();
    all.dedup();
    assert_eq!(all.len(), before, "duplicate IDs");
    all
}

fn small(sequence_bits: u32, tick_ms: u64) -> Layout {
    Layout::builder()
        .epoch_ms(Layout::twitter().epoch_ms())
        .sequence_bits(sequence_bits)
        .node_field("n", 4)
        .tick_ms(tick_ms)
        .build()
        .unwrap()
}

#[test]
fn small_sequences_with_start_offsets_and_a_lead_of_one_tick() {
    let layout = small(3, 1);
    let clock = LockedClock::new();
    let g = Generator::builder(layout.clone())
        .clock(clock.clone())
        .node(3)
        .start_offset_bits(2)
        .max_lead(Duration::from_millis(1))
        .build()
        .unwrap();
    assert_eq!(run(&g, &clock, &layout, 1, 2, 20_000).len(), 40_000);
}

#[test]
fn a_zero_lead_never_borrows() {
    let layout = small(6, 1);
    let clock = LockedClock::new();
    let g = Generator::builder(layout.clone())
        .clock(clock.clone())
        .start_offset_bits(5)
        .max_lead(Duration::ZERO)
        .build()
        .unwrap();
    assert_eq!(run(&g, &clock, &layout, 0, 2, 100_000).len(), 200_000);
}

#[test]
fn a_floor_ahead_of_the_clock_then_the_clock_catches_up() {
    let layout = small(4, 1);
    let clock = LockedClock::new();
    // A reservation 3 ticks ahead: the first IDs are issued from the floor, ahead of the
    // clock by the reservation (allowed), then the clock reaches it.
    let reserved = layout.tick_at(clock.now_ms()) + 3;
    let g = Generator::builder(layout.clone())
        .clock(clock.clone())
        .start_offset_bits(3)
        .resume_after(reserved)
        .max_lead(Duration::from_millis(2))
        .build()
        .unwrap();
    let ids = run(&g, &clock, &layout, 2 + 4, 2, 20_000);
    assert!(
        ids.iter()
            .all(|id| id.parts(&layout).unwrap().tick() > reserved)
    );
}

#[test]
fn per_core_slots_in_a_sequence_of_four_bits() {
    let layout = small(4, 1);
    let clock = LockedClock::new();
    let g = Generator::builder(layout.clone())
        .clock(clock.clone())
        .start_offset_bits(1)
        .max_lead(Duration::from_millis(1))
        .build_per_core(4)
        .unwrap();
    assert_eq!(run(&g, &clock, &layout, 1, 3, 20_000).len(), 60_000);
}

#[test]
fn one_second_ticks_with_room_for_many_ids_per_tick() {
    let layout = small(16, 1_000);
    let clock = LockedClock::new();
    let g = Generator::builder(layout.clone())
        .clock(clock.clone())
        .start_offset_bits(8)
        .max_lead(Duration::from_secs(1))
        .build()
        .unwrap();
    assert_eq!(run(&g, &clock, &layout, 1, 2, 100_000).len(), 200_000);
}

#[test]
fn sixty_second_ticks_far_epoch() {
    let layout = Layout::builder()
        .sequence_bits(20)
        .node_field("n", 2)
        .time_bits(30)
        .tick_ms(60_000)
        .epoch_ms(0)
        .build()
        .unwrap();
    let clock = LockedClock::new();
    let g = Generator::builder(layout.clone())
        .clock(clock.clone())
        .start_offset_bits(3)
        .build()
        .unwrap();
    assert_eq!(run(&g, &clock, &layout, 0, 2, 200_000).len(), 400_000);
}

#[test]
fn a_coarse_clock_with_small_sequences() {
    let layout = small(3, 1);
    let (clock, _ticker) = CoarseClock::start(Duration::from_micros(200)).unwrap();
    let g = Generator::builder(layout.clone())
        .clock(clock.clone())
        .start_offset_bits(2)
        .max_lead(Duration::from_millis(1))
        .build()
        .unwrap();
    assert_eq!(run(&g, &clock, &layout, 1, 2, 10_000).len(), 20_000);
}
