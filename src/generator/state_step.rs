//! The pure step over a state word kept outside this crate.
//!
//! Every flavour in this crate keeps its state word itself. A host that must share one state
//! between processes this crate does not start — a PostgreSQL server's backends, each its own
//! process, sharing one word of the server's shared memory — keeps the word and the
//! compare-exchange itself, and asks [`StateStep`] what to write: the same `next_state` every
//! flavour uses, so there is one ID algorithm, not two.

use std::time::Duration;

use super::Output;
use super::step::{Step, StepParams, next_state};
use crate::error::{BlockedOn, Error};
use crate::id::Id;
use crate::layout::Layout;

/// The generator's pure step, for a state word kept elsewhere (built by
/// [`GeneratorBuilder::build_step`](crate::GeneratorBuilder::build_step)).
///
/// The host keeps one `AtomicU64`, starting at [`StateStep::start`], and issues by
///
/// ```text
/// loop {
///     cur = state.load()
///     (first, last) = step.next(cur, now_unix_ns, n)?      // pure
///     if state.compare_exchange(cur, last) succeeds { return step.id(first)..=step.id(last) }
/// }
/// ```
///
/// with `now_unix_ns` from a clock that never goes back (the host's own locked clock). The
/// step has no clock, no fence, no fork guard and no lease: whatever the host needs of those
/// (a node it holds, a reservation acknowledged before a tick is issued) it checks itself
/// against [`StateStep::tick_of`] of the values it is about to commit.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// let step = monoflake::Generator::builder(monoflake::Layout::twitter()).node(3).build_step()?;
/// let state = AtomicU64::new(step.start());
/// let now_ns = 1_700_000_000_000_000_000;
/// let cur = state.load(Ordering::Relaxed);
/// let (first, last) = step.next(cur, now_ns, 1)?;
/// assert_eq!(first, last);
/// assert!(state.compare_exchange(cur, last, Ordering::Relaxed, Ordering::Relaxed).is_ok());
/// let id = step.id(first);
/// assert_eq!(id.parts(step.layout())?.node(), 3);
/// assert_eq!(id.parts(step.layout())?.unix_ms(), 1_700_000_000_000);
/// # Ok::<(), monoflake::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct StateStep {
    params: StepParams,
    out: Output,
    start: u64,
    expires_at_ms: u64,
    layout: Layout,
    node: u64,
}

impl StateStep {
    pub(super) fn new(
        params: StepParams,
        out: Output,
        start: u64,
        layout: Layout,
        node: u64,
    ) -> StateStep {
        StateStep {
            params,
            out,
            start,
            expires_at_ms: layout.expires_at_ms(),
            layout,
            node,
        }
    }

    /// The state word's first value (0, or the last value before the tick that
    /// [`GeneratorBuilder::resume_after`](crate::GeneratorBuilder::resume_after) set).
    pub const fn start(&self) -> u64 {
        self.start
    }

    /// The layout the IDs follow.
    pub const fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The node every ID carries.
    pub const fn node(&self) -> u64 {
        self.node
    }

    /// The tick of a state value.
    pub const fn tick_of(&self, state: u64) -> u64 {
        state >> self.params.sequence_bits
    }

    /// The ID of a state value.
    pub const fn id(&self, state: u64) -> Id {
        self.out.id(state)
    }

    /// Reserves `n >= 1` values after the state `cur` at the clock reading `now_unix_ns`:
    /// the first and the last, the last being the state to commit. Pure: nothing is written.
    ///
    /// # Errors
    ///
    /// [`Error::WouldBlock`] when the values would run beyond the lead (`retry_after` says
    /// when the next slot opens); [`Error::Exhausted`] when the layout's time field cannot hold
    /// them. `n == 0` issues nothing: [`Error::InvalidConfig`].
    pub fn next(&self, cur: u64, now_unix_ns: u64, n: u64) -> Result<(u64, u64), Error> {
        if n == 0 {
            return Err(Error::InvalidConfig {
                setting: "n",
                value: "0".into(),
                allowed: "at least 1".into(),
            });
        }
        let since = now_unix_ns.saturating_sub(self.params.epoch_ns);
        let tick = since / self.params.tick_ns;
        let now = super::step::Now {
            tick,
            rem_ns: since - tick * self.params.tick_ns,
        };
        match next_state(cur, now, n, &self.params) {
            Step::Issue { first, last } => Ok((first, last)),
            Step::Lead { wait_ns } => Err(Error::WouldBlock {
                retry_after: Duration::from_nanos(wait_ns),
                blocked_on: BlockedOn::LeadLimit,
            }),
            Step::Exhausted { .. } => Err(Error::Exhausted {
                expired_at_ms: self.expires_at_ms,
            }),
        }
    }
}
