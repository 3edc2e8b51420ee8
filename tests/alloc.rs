//! No allocation per ID: a counting global allocator around a million calls.
//!
//! A global allocator is an `unsafe` trait, so this one test file allows `unsafe`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
use std::cell::Cell;

use monoflake::{CoarseClock, DEFAULT_TICKER_INTERVAL, Encoding, Generator, Layout};

struct Counting;

thread_local! {
    /// Allocations made by this thread (other threads — the test harness, the ticker — are
    /// not counted).
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: AllocLayout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: forwards the caller's layout to the system allocator unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: AllocLayout) {
        // SAFETY: `ptr` came from `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_during(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

#[test]
fn issuing_ids_allocates_nothing() {
    let wide = Layout::builder()
        .epoch_ms(Layout::twitter().epoch_ms())
        .node_field("n", 1)
        .sequence_bits(21)
        .build()
        .unwrap();
    let locked = Generator::new(wide.clone(), 1).unwrap();
    let (clock, _ticker) = CoarseClock::start(DEFAULT_TICKER_INTERVAL).unwrap();
    let coarse = Generator::builder(wide)
        .node(1)
        .clock(clock)
        .build()
        .unwrap();
    let twitter = Generator::new(Layout::twitter(), 1).unwrap();
    locked.next_id().unwrap(); // first-use work (thread locals, lazy statics) happens here
    coarse.next_id().unwrap();
    let n = allocations_during(|| {
        for _ in 0..1_000_000 {
            std::hint::black_box(locked.try_next_id().unwrap());
            std::hint::black_box(coarse.try_next_id().unwrap());
        }
        for _ in 0..1000 {
            for id in twitter.next_ids(4096).unwrap() {
                std::hint::black_box(id.encode(Encoding::Base62));
            }
        }
    });
    assert_eq!(n, 0, "{n} allocations while issuing 3 million IDs");
}
