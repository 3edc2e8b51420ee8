//! [`StateLease`]: a node held for a state word kept outside this crate — the lease, the
//! keeper and the fence of [`Leased`](super::Leased), without the generator.
//!
//! A host that keeps its own state word and compare-exchange ([`StateStep`]: one word of a
//! PostgreSQL server's shared memory, advanced by every backend) still needs a node held
//! through a [`NodeStore`] and reservations written ahead of use. The claim, the hand-over
//! decisions, the keeper's renewals and extensions, the write-back of a lost lease and the
//! release are the ones [`GeneratorBuilder::build_leased`] runs (one code path: `lease_with`);
//! the host only says what it issued ([`OutsideState`]) and reads the fence the keeper
//! publishes ([`StateLease::fence`]).

use std::fmt;
use std::sync::Arc;

use super::holding::Holding;
use super::keeper::Held;
use super::store::{NodeRequest, NodeStore};
use crate::clock::TimeSource;
use crate::generator::{Fence, Refusal};
use crate::{Error, GeneratorBuilder, Layout, StateStep, Stats};

/// What a [`StateLease`]'s keeper needs of the host's state word. Called on the keeper's
/// thread: neither method may block on anything the keeper's caller holds.
pub trait OutsideState: Send + Sync + 'static {
    /// Called once, when the node is claimed and before the keeper starts: the host starts
    /// its word at [`StateStep::start`] (and its IDs carry [`StateStep::node`]). Until the
    /// host reads an open fence from [`StateLease::fence`], it issues nothing.
    fn start(&self, step: &StateStep);

    /// The highest tick issued so far (or the start's), for the next extension.
    fn last_tick(&self) -> u64;

    /// Stops issuing for good — exactly: swap the word for a value every issuer refuses, so
    /// a compare-exchange racing the seal fails — and returns the highest tick anything was
    /// issued in (the start's tick when nothing was). Called once, when the lease is lost (the
    /// keeper then writes it back to the store) or released (the final reservation).
    fn seal(&self) -> u64;
}

/// The keeper's view of the host: its clock, its layout, the fence words, its state.
struct Outside<C> {
    layout: Layout,
    clock: C,
    fence: Fence,
    state: Arc<dyn OutsideState>,
    #[cfg(feature = "tracing")]
    node: u64,
}

impl<C: TimeSource + 'static> Held for Outside<C> {
    type Clock = C;
    fn layout(&self) -> &Layout {
        &self.layout
    }
    fn clock(&self) -> &C {
        &self.clock
    }
    #[cfg(feature = "tracing")]
    fn node(&self) -> u64 {
        self.node
    }
    fn last_tick(&self) -> u64 {
        self.state.last_tick()
    }
    fn set_fence(&self, limit: u64, deadline: u64) {
        self.fence.set(limit, deadline);
    }
    fn seal(&self) -> u64 {
        // The host's seal stops every issuer; the fence closes for `check` and `fence`.
        let tick = self.state.seal();
        self.fence.close();
        tick
    }
}

/// A node held through a [`NodeStore`] for a state word the host keeps itself, with the
/// keeper [`Leased`](super::Leased) runs: built by [`GeneratorBuilder::build_state_lease`].
///
/// * **The same lease**: the claim, the wait for a reservation ahead of the clock, the first
///   reservation and renewal, the keeper's rounds, the write-back of a lost lease and the
///   release are [`GeneratorBuilder::build_leased`]'s.
/// * **The host issues only inside the fence**: a tick `t` at clock tick `now` only if
///   `t <= limit` and `now < deadline` ([`StateLease::fence`], ticks of the builder's clock;
///   both 0 once lost or released). The keeper raises them; a host that copies them
///   elsewhere (shared memory) copies them often, and a stale copy is an older, lower bound.
/// * **Exact at the end**: a lost lease or a release calls [`OutsideState::seal`] first, and
///   writes back (or reserves finally) the end of the tick it returns.
/// * **Released on drop**, as [`Leased`](super::Leased).
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use monoflake::{FileStore, Generator, Layout, NodeRequest, OutsideState, StateStep, TimeSource};
///
/// /// One word; `SEALED` is refused by every issuer.
/// struct Word(AtomicU64, AtomicU64);
/// const SEALED: u64 = u64::MAX;
/// impl OutsideState for Word {
///     fn start(&self, step: &StateStep) {
///         self.1.store(step.tick_of(step.start()), Ordering::Relaxed);
///         self.0.store(step.start(), Ordering::Release);
///     }
///     fn last_tick(&self) -> u64 {
///         match self.0.load(Ordering::Relaxed) {
///             SEALED => self.1.load(Ordering::Relaxed),
///             s => s >> 12, // twitter: 12 sequence bits
///         }
///     }
///     fn seal(&self) -> u64 {
///         let tick = self.last_tick();
///         match self.0.swap(SEALED, Ordering::Relaxed) {
///             SEALED => tick,
///             s => s >> 12,
///         }
///     }
/// }
///
/// let dir = std::env::temp_dir().join(format!("monoflake-doc-state-lease-{}", std::process::id()));
/// let store = Arc::new(FileStore::open(&dir)?);
/// let word = Arc::new(Word(AtomicU64::new(SEALED), AtomicU64::new(0)));
/// let lease = Generator::builder(Layout::twitter())
///     .build_state_lease(store.clone(), NodeRequest::Any, word.clone())?;
/// // The host's issue: load, step, fence, compare-exchange.
/// let now_ns = lease.clock().precise_now_ns();
/// let cur = word.0.load(Ordering::Acquire);
/// let (first, _) = lease.step().next(cur, now_ns, 1)?;
/// let (limit, deadline) = lease.fence();
/// let now_tick = lease.layout().tick_at(now_ns / 1_000_000);
/// assert!(lease.step().tick_of(first) <= limit && now_tick < deadline);
/// word.0.compare_exchange(cur, first, Ordering::Relaxed, Ordering::Relaxed).unwrap();
/// let id = lease.step().id(first);
/// lease.release()?; // seals the word, reserves the end of its tick, gives the node up
/// assert_eq!(word.0.load(Ordering::Relaxed), SEALED);
/// // The node's next holder starts above everything issued.
/// let next = Generator::builder(Layout::twitter()).build_leased(store, NodeRequest::Any)?;
/// assert_eq!(next.node(), id.parts(next.layout())?.node());
/// assert!(next.next_id()? > id);
/// # drop(next); std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), monoflake::Error>(())
/// ```
pub struct StateLease<C: TimeSource + 'static> {
    held: Arc<Outside<C>>,
    step: StateStep,
    refusal: Arc<dyn Refusal>,
    holding: Holding,
}

impl<C: TimeSource + 'static> fmt::Debug for StateLease<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateLease")
            .field("node", &self.step.node())
            .field("layout", &self.held.layout.name())
            .field("fence", &self.held.fence.words())
            .finish_non_exhaustive()
    }
}

impl<C: TimeSource + Clone + 'static> GeneratorBuilder<C> {
    /// Claims a node ID from `store` for a state word the host keeps itself (see
    /// [`StateLease`]): the lease of [`GeneratorBuilder::build_leased`] — the same claim,
    /// waits, reservations, keeper and release — with `state` in place of a generator. The
    /// builder's node is replaced by the claimed one; [`OutsideState::start`] is called with
    /// the step for it before the keeper starts.
    ///
    /// # Errors
    ///
    /// As [`GeneratorBuilder::build_leased`].
    ///
    /// See [`StateLease`] for an example.
    pub fn build_state_lease(
        self,
        store: Arc<dyn NodeStore>,
        request: NodeRequest,
        state: Arc<dyn OutsideState>,
    ) -> Result<StateLease<C>, Error> {
        let ((step, refusal, held), holding) =
            self.lease_with(store, request, |builder, refusal, (limit, deadline)| {
                let clock = builder.clock_ref().clone();
                let layout = builder.layout_ref().clone();
                let step = builder.build_step()?;
                state.start(&step);
                let held = Arc::new(Outside {
                    layout,
                    clock,
                    fence: Fence::new(limit, deadline)?,
                    state,
                    #[cfg(feature = "tracing")]
                    node: step.node(),
                });
                Ok(((step, refusal, Arc::clone(&held)), held))
            })?;
        Ok(StateLease {
            held,
            step,
            refusal,
            holding,
        })
    }
}

impl<C: TimeSource + 'static> StateLease<C> {
    /// The step for the node held: [`StateStep::next`] to advance the host's word,
    /// [`StateStep::id`] for its IDs.
    pub fn step(&self) -> &StateStep {
        &self.step
    }

    /// The node ID held.
    pub fn node(&self) -> u64 {
        self.step.node()
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.held.layout
    }

    /// The clock the fence's deadline is a tick of.
    pub fn clock(&self) -> &C {
        &self.held.clock
    }

    /// The fence, as the keeper last published it: `(limit, deadline)`, the highest tick the
    /// store has acknowledged, and the first clock tick at which nothing may be issued. Both
    /// are 0 once the lease is lost or released.
    pub fn fence(&self) -> (u64, u64) {
        self.held.fence.words()
    }

    /// Whether the host may issue now, as [`Leased::check`](super::Leased::check) says it:
    /// `Ok` while the lease is held and confirmed; otherwise why not —
    /// [`Error::LeaseLost`] with the store's reason once lost, [`Error::ReservationUnavailable`]
    /// while the store fails.
    ///
    /// # Errors
    ///
    /// As above.
    pub fn check(&self) -> Result<(), Error> {
        let now = self.held.layout.tick_at(self.held.clock.precise_now_ms());
        let fence = &self.held.fence;
        if fence.is_closed() || fence.late(now) {
            return Err(self.refusal.refusal(self.node(), !fence.is_closed()));
        }
        Ok(())
    }

    /// Asks the keeper for a round now: the host found its clock past the fence's limit.
    pub fn wake(&self) {
        self.holding.status.signal.wake();
    }

    /// The lease's counters: reservation writes and failures, renewals, losses, claim waits.
    pub fn stats(&self) -> Stats {
        let mut stats = Stats::default();
        self.holding.status.fill(&mut stats);
        stats
    }

    /// Seals the host's word ([`OutsideState::seal`]), writes the final reservation — the end
    /// of the tick it returned — and gives the node up.
    ///
    /// # Errors
    ///
    /// As [`Leased::release`](super::Leased::release).
    pub fn release(mut self) -> Result<(), Error> {
        self.holding.stop()
    }
}
