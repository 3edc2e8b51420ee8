//! The contract every generator flavour keeps: [`Generator`], [`PerCore`], [`PerThread`] and
//! [`Leased`].

use super::{Generator, Ids, PerCore, PerThread};
use crate::clock::TimeSource;
use crate::{Error, Id, Layout, Stats};

/// What every generator flavour promises: [`Generator`] (one state), [`PerCore`] (a state per
/// slot), [`PerThread`] and its [`LocalSlot`](crate::LocalSlot) handles (a slot per thread)
/// and [`Leased`](crate::Leased) (a generator holding its node through a store).
///
/// * **Unique.** No two IDs a generator returns are equal, across all its threads.
/// * **Increasing.** [`Generator`] and [`Leased`](crate::Leased): every ID is greater than
///   every ID returned before, across threads. [`PerCore`]: per thread; across threads, ordered
///   by time (k-sorted). [`PerThread`]: per slot (a thread's calls, or a handle's); across
///   slots, ordered by time.
/// * **Honest time.** The time field is never ahead of the clock by more than `max_lead`, and
///   never behind the previous ID's.
/// * **Fails loudly.** When an ID cannot be issued the call returns a typed [`Error`]: it never
///   returns a duplicate and never blocks longer than `max_wait`.
///
/// The conformance suite in `tests/conformance.rs` checks these properties against every
/// implementation. Write code generic over `IdGenerator` to accept any flavour:
///
/// ```
/// use monoflake::{Generator, IdGenerator, Layout};
///
/// fn three(g: &impl IdGenerator) -> Result<[u64; 3], monoflake::Error> {
///     Ok([g.next_id()?.as_u64(), g.next_id()?.as_u64(), g.next_id()?.as_u64()])
/// }
/// let plain = Generator::new(Layout::twitter(), 1)?;
/// let per_core = Generator::builder(Layout::twitter()).node(1).build_per_core(2)?;
/// assert!(three(&plain)?.windows(2).all(|w| w[0] < w[1]));
/// assert!(three(&per_core)?.windows(2).all(|w| w[0] < w[1]));
/// # Ok::<(), monoflake::Error>(())
/// ```
pub trait IdGenerator {
    /// Issues one ID without waiting.
    ///
    /// # Errors
    ///
    /// [`Error::WouldBlock`] at the lead limit; [`Error::Exhausted`] past the end of the time
    /// field; [`Error::Forked`] in a forked child; [`Error::LeaseLost`] and
    /// [`Error::ReservationUnavailable`] for a generator whose lease or reservation is gone.
    fn try_next_id(&self) -> Result<Id, Error>;

    /// Issues one ID, waiting at the lead limit for at most `max_wait`.
    ///
    /// # Errors
    ///
    /// [`Error::TimedOut`] after waiting `max_wait`; otherwise as
    /// [`IdGenerator::try_next_id`], except [`Error::WouldBlock`].
    fn next_id(&self) -> Result<Id, Error>;

    /// Reserves `n` consecutive IDs with one compare-exchange, without waiting.
    ///
    /// # Errors
    ///
    /// As [`IdGenerator::try_next_id`], and [`Error::BatchTooLarge`] at once for a batch that
    /// can never fit within `max_lead` ([`Generator::max_batch`]).
    fn try_next_ids(&self, n: u64) -> Result<Ids, Error>;

    /// Reserves `n` consecutive IDs, waiting at the lead limit for at most `max_wait`.
    ///
    /// # Errors
    ///
    /// As [`IdGenerator::next_id`], and [`Error::BatchTooLarge`] at once, without waiting,
    /// for a batch that can never fit ([`Generator::max_batch`]).
    fn next_ids(&self, n: u64) -> Result<Ids, Error>;

    /// What the generator has been doing.
    fn stats(&self) -> Stats;

    /// The layout IDs are issued under.
    fn layout(&self) -> &Layout;

    /// The node value every ID carries.
    fn node(&self) -> u64;
}

/// Implements [`IdGenerator`] by calling the type's inherent methods of the same names.
macro_rules! id_generator_by_inherent_methods {
    ($ty:ident, $($bounds:tt)+) => {
        impl<C: $($bounds)+> IdGenerator for $ty<C> {
            #[inline]
            fn try_next_id(&self) -> Result<Id, Error> {
                $ty::try_next_id(self)
            }
            #[inline]
            fn next_id(&self) -> Result<Id, Error> {
                $ty::next_id(self)
            }
            fn try_next_ids(&self, n: u64) -> Result<Ids, Error> {
                $ty::try_next_ids(self, n)
            }
            fn next_ids(&self, n: u64) -> Result<Ids, Error> {
                $ty::next_ids(self, n)
            }
            fn stats(&self) -> Stats {
                $ty::stats(self)
            }
            fn layout(&self) -> &Layout {
                $ty::layout(self)
            }
            fn node(&self) -> u64 {
                $ty::node(self)
            }
        }
    };
}
pub(crate) use id_generator_by_inherent_methods;

id_generator_by_inherent_methods!(Generator, TimeSource);
id_generator_by_inherent_methods!(PerCore, TimeSource);
id_generator_by_inherent_methods!(PerThread, TimeSource + 'static);
