//! Whether a generator could issue now, without issuing: for health checks.

use super::Generator;
use super::step::{Step, next_state};
use crate::Error;
use crate::clock::TimeSource;
use crate::sync::Ordering;

impl<C: TimeSource> Generator<C> {
    /// Whether a call could issue now, without issuing anything: `Ok` when
    /// [`Generator::try_next_id`] would issue or would only ask to wait
    /// ([`Error::WouldBlock`]: the generator is busy at its lead limit, or a leased one waits
    /// for its reservation to be extended — not broken), otherwise the error it would return.
    ///
    /// Meant for health checks (a service's `/readyz`): asking costs a clock read and a few
    /// loads, and no ID is taken and dropped.
    ///
    /// # Errors
    ///
    /// * [`Error::Exhausted`]: the layout's time field has run out.
    /// * [`Error::Forked`]: the process forked after the generator was built.
    /// * [`Error::LeaseLost`], [`Error::ReservationUnavailable`]: only for a leased generator
    ///   (see [`Leased::check`](crate::Leased::check)).
    ///
    /// ```
    /// use monoflake::{Error, Generator, Layout};
    ///
    /// let generator = Generator::new(Layout::twitter(), 1)?;
    /// generator.check()?;
    /// assert_eq!(generator.stats().issued, 0); // nothing was issued
    /// // Baidu's default layout ran out in November 2024.
    /// let baidu = Generator::new(Layout::baidu(), 1)?;
    /// assert!(matches!(baidu.check(), Err(Error::Exhausted { .. })));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn check(&self) -> Result<(), Error> {
        if self.core.fence.forked() || self.core.fence.another_process() {
            return Err(Error::Forked { node: self.node });
        }
        let now = self.now_of(self.clock.precise_now_ns());
        // Ordering: Relaxed, as every access to the state.
        let cur = self.core.state.load(Ordering::Relaxed);
        match next_state(cur, now, 1, &self.params) {
            Step::Issue { last, .. } => {
                let last_tick = last >> self.params.sequence_bits;
                if !self.core.fence.refuses(now.tick, last_tick) {
                    return Ok(());
                }
                match self.fence_error(false, now.tick) {
                    Error::WouldBlock { .. } => Ok(()),
                    error => Err(error),
                }
            }
            Step::Lead { .. } => Ok(()),
            Step::Exhausted { .. } => Err(self.exhausted()),
        }
    }
}
