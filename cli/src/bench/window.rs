//! One measurement: `n` threads let go from one gate on one generator for a fixed window,
//! through its phases (warm-up, counted, timed), giving a [`Row`]; and the burst that gives
//! the cost of the hot path alone.
//!
//! Imports the plan's warm-up, the flags' longest run, the failure type and the library.

use std::hint::black_box;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use monoflake::{DEFAULT_MAX_LEAD, Error, IdGenerator};

use super::plan::WARM_UP;
use crate::args::MAX_DURATION;
use crate::failure::Failure;

/// At most this many calls between two looks at the phase…
const MAX_STRIDE: u64 = 64;
/// … and at most this long at the layout's cap: a call at the cap waits for its slot, so on a
/// layout with a small cap 64 calls could take seconds (32 s at 2 IDs per second), overrunning
/// the phase and counting IDs by the stride.
const STRIDE_AT_CAP: Duration = Duration::from_micros(50);
/// The largest burst from a fresh generator.
const MAX_BURST: u64 = 2_000_000;
/// How long one `next_id` waits at the cap before the thread looks at the phase again: a
/// layout's tick can be longer than the generators' default wait (1 s), which failed the run
/// with `TimedOut`, and a thread waiting out a long tick overran its window.
pub const WAIT_SLICE: Duration = Duration::from_millis(50);

/// Calls between two looks at the phase, for a layout allowing `cap_per_s` IDs per second:
/// 64, or what the cap issues in [`STRIDE_AT_CAP`], at least 1.
pub fn stride(cap_per_s: f64) -> u64 {
    ((cap_per_s * STRIDE_AT_CAP.as_secs_f64()) as u64).clamp(1, MAX_STRIDE)
}

/// Which generator a row measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Shared,
    PerCore,
    /// A per-thread generator, called by `next_id`: each thread takes a slot of its own.
    PerThread,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Shared => "shared",
            Kind::PerCore => "per-core",
            Kind::PerThread => "per-thread",
        }
    }
}

/// One measured row.
pub struct Row {
    pub threads: usize,
    pub kind: Kind,
    /// A per-core or per-thread generator's slots (a power of two): its threads use
    /// `threads` of them.
    pub slots: Option<usize>,
    /// What this row's generator allows its threads: the layout's cap, or for a per-core or
    /// per-thread generator with more slots than threads, the share of the slots they use (each slot has
    /// its own slice of the sequence).
    pub cap_per_s: f64,
    /// Whether the generator refused a call at its lead limit during the warm-up: it had used
    /// up its lead before the count began. Demand only a little above the cap borrows slowly,
    /// and a count still borrowing reads above the cap (112% at 1.12× the cap).
    pub past_lead: bool,
    pub ids_per_s: f64,
    /// How long the counted part ran.
    pub counted_for: Duration,
    pub shares: Vec<f64>,
    pub latency: Histogram<u64>,
}

/// The phases a measurement's threads go through, in order.
const WARM: u8 = 0;
const COUNT: u8 = 1;
const TIMED: u8 = 2;
const STOP: u8 = 3;

/// The longest call a histogram holds: twice the longest run, so no call is ever dropped (a
/// call at the cap of a layout with long ticks waits up to a tick).
const LONGEST_CALL: Duration = MAX_DURATION.saturating_mul(2);

pub fn histogram() -> Histogram<u64> {
    // 1 ns to two hours, 3 significant digits; the bounds are valid, so this cannot fail.
    Histogram::new_with_bounds(1, LONGEST_CALL.as_nanos() as u64, 3)
        .expect("valid histogram bounds")
}

/// The timer's own cost: two `raw()` reads, p50.
pub fn timer_overhead(timer: &quanta::Clock) -> u64 {
    let mut h = histogram();
    for _ in 0..100_000 {
        let start = timer.raw();
        let _ = h.record(timer.delta_as_nanos(start, timer.raw()).max(1));
    }
    h.value_at_quantile(0.5)
}

/// The hot path alone: IDs from a fresh generator, back to back, half of what it issues without
/// waiting (so no cap binds): its lead, or on ticks longer than the lead its first tick (one
/// lead's worth of a tick of hours was one cold call). Returns (IDs, ns per ID).
pub fn burst(generator: &impl IdGenerator, cap_per_s: f64) -> Result<(u64, f64), Error> {
    let tick = (generator.layout().max_sequence() as f64 + 1.0) / 2.0;
    let allowed = (cap_per_s * DEFAULT_MAX_LEAD.as_secs_f64() / 2.0).max(tick);
    let n = (allowed as u64).clamp(1, MAX_BURST);
    let start = Instant::now();
    for _ in 0..n {
        black_box(generator.try_next_id()?);
    }
    Ok((n, start.elapsed().as_nanos() as f64 / n as f64))
}

/// One measurement: `n` threads on `generator` from one gate, through the phases.
pub fn window(
    generator: &(impl IdGenerator + Sync),
    n: usize,
    measured: Duration,
    timer: &quanta::Clock,
    stride: u64,
) -> Result<Row, Failure> {
    let phase = AtomicU8::new(WARM);
    let gate = Gate::default();
    let coordinator = std::thread::current();
    let (results, counted_for, past_lead, spawn_error) = std::thread::scope(|s| {
        let mut workers = Vec::with_capacity(n);
        let mut spawn_error = None;
        for _ in 0..n {
            let (phase, gate) = (&phase, &gate);
            let timer = timer.clone();
            let coordinator = coordinator.clone();
            let spawned = std::thread::Builder::new().spawn_scoped(s, move || {
                gate.arrive_and_wait();
                let result = calls(generator, phase, &timer, stride);
                if result.is_err() {
                    phase.store(STOP, Ordering::Relaxed);
                    coordinator.unpark();
                }
                result
            });
            match spawned {
                Ok(worker) => workers.push(worker),
                Err(e) => {
                    // The threads started wait at the gate: let them through to STOP (with a
                    // barrier they waited for the missing ones forever, after a panic).
                    spawn_error = Some(e);
                    phase.store(STOP, Ordering::Relaxed);
                    break;
                }
            }
        }
        if spawn_error.is_none() {
            gate.wait_for(n);
        }
        let waited = generator.stats().waiting_calls;
        gate.open();
        let advance = |to: u8, after: Duration| {
            // Until `after` has passed, or a thread that failed has stopped everyone.
            let until = Instant::now() + after;
            loop {
                if phase.load(Ordering::Relaxed) == STOP {
                    return;
                }
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                std::thread::park_timeout(left);
            }
            let _ = phase.compare_exchange(to - 1, to, Ordering::Relaxed, Ordering::Relaxed);
        };
        advance(COUNT, WARM_UP);
        let past_lead = generator.stats().waiting_calls > waited;
        let counting = Instant::now();
        advance(TIMED, measured / 2);
        let counted_for = counting.elapsed();
        advance(STOP, measured / 2);
        let results: Vec<_> = workers
            .into_iter()
            .map(|w| w.join().expect("a bench thread panicked"))
            .collect();
        (results, counted_for, past_lead, spawn_error)
    });
    if let Some(e) = spawn_error {
        return Err(Failure {
            code: 1,
            message: format!(
                "cannot start thread {} of {n} for the {n}-thread measurement: {e}; give fewer \
                 --threads",
                results.len() + 1
            ),
        });
    }
    let mut counts = Vec::with_capacity(n);
    let mut latency = histogram();
    for result in results {
        let (count, h) = result?;
        counts.push(count);
        // Same bounds on both sides: adding cannot fail.
        let _ = latency.add(h);
    }
    let total: u64 = counts.iter().sum();
    Ok(Row {
        threads: n,
        kind: Kind::Shared,
        slots: None,
        cap_per_s: 0.0,
        past_lead,
        ids_per_s: total as f64 / counted_for.as_secs_f64(),
        counted_for,
        shares: counts
            .iter()
            .map(|&c| c as f64 / total.max(1) as f64)
            .collect(),
        latency,
    })
}

/// Where a measurement's threads wait until all of them have started (or one could not be).
#[derive(Default)]
struct Gate {
    /// (threads arrived, open).
    state: Mutex<(usize, bool)>,
    changed: Condvar,
}

impl Gate {
    fn lock(&self) -> std::sync::MutexGuard<'_, (usize, bool)> {
        // Nothing panics while holding the lock: a poisoned one holds valid counts.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A thread has started; it waits until the gate opens.
    fn arrive_and_wait(&self) {
        let mut state = self.lock();
        state.0 += 1;
        self.changed.notify_all();
        while !state.1 {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// Until `n` threads have arrived.
    fn wait_for(&self, n: usize) {
        let mut state = self.lock();
        while state.0 < n {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    fn open(&self) {
        self.lock().1 = true;
        self.changed.notify_all();
    }
}

/// One thread's calls: untimed while counting, timed after. Returns (IDs counted, latencies).
fn calls(
    generator: &impl IdGenerator,
    phase: &AtomicU8,
    timer: &quanta::Clock,
    stride: u64,
) -> Result<(u64, Histogram<u64>), Error> {
    let mut counted = 0;
    let mut h = histogram();
    loop {
        match phase.load(Ordering::Relaxed) {
            WARM => {
                for _ in 0..stride {
                    if !one(generator, phase, WARM)? {
                        break;
                    }
                }
            }
            COUNT => {
                for _ in 0..stride {
                    if !one(generator, phase, COUNT)? {
                        break;
                    }
                    counted += 1;
                }
            }
            TIMED => {
                for _ in 0..stride {
                    let start = timer.raw();
                    if !one(generator, phase, TIMED)? {
                        break;
                    }
                    let _ = h.record(timer.delta_as_nanos(start, timer.raw()).max(1));
                }
            }
            _ => return Ok((counted, h)),
        }
    }
}

/// One ID by `next_id`, which waits at the cap for at most [`WAIT_SLICE`]; past that, while
/// the phase is still `from`, it is asked again. `false` when the phase moved on during a wait
/// (nothing was issued). The common case is the call alone: anything else is out of line.
#[inline(always)]
fn one(generator: &impl IdGenerator, phase: &AtomicU8, from: u8) -> Result<bool, Error> {
    match generator.next_id() {
        Ok(id) => {
            black_box(id);
            Ok(true)
        }
        Err(e) => after_an_error(generator, phase, from, e),
    }
}

/// [`one`] after `next_id` returned `e`: asked again while it is a `TimedOut` and the phase
/// is still `from`.
#[cold]
#[inline(never)]
fn after_an_error(
    generator: &impl IdGenerator,
    phase: &AtomicU8,
    from: u8,
    mut e: Error,
) -> Result<bool, Error> {
    loop {
        match e {
            Error::TimedOut { .. } if phase.load(Ordering::Relaxed) == from => {}
            Error::TimedOut { .. } => return Ok(false),
            e => return Err(e),
        }
        match generator.next_id() {
            Ok(id) => {
                black_box(id);
                return Ok(true);
            }
            Err(next) => e = next,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_as_long_as_a_whole_run_is_recorded() {
        // A call at the cap of a layout with long ticks waits up to a tick; the histogram's
        // old bound (100 s) dropped such a call, and the max understated it.
        let mut h = histogram();
        let longest = MAX_DURATION.as_nanos() as u64;
        h.record(longest).expect("within the histogram's bounds");
        assert!(h.max() >= longest);
    }
}
