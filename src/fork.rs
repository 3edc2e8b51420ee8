//! Fork detection on the common path: which process generation this is, in one load.
//!
//! A forked child gets a copy of its parent's memory: every generator's state, its node and
//! its lease. It must never issue under them. Linux (4.14 and later) tells the copy at the cost
//! of one load: a page marked `MADV_WIPEONFORK` reads as zeros in a child, whichever way the
//! child was made — libc's `fork`, a raw `syscall(SYS_fork)`, glibc's `_Fork`, `clone` without
//! `CLONE_VM` — with no handler to run (BoringSSL keeps its random generator fork-safe this
//! way). The page holds one word, this process's **generation**: `1` in a process that was
//! never forked, in a child one more than the largest its ancestors armed, written by the
//! first caller there.
//!
//! A [`ForkWatch`] remembers the generation it was made in; [`ForkWatch::forked`] compares it
//! with the word: a child reads `0`, or its own larger generation once something armed it,
//! never its parent's. (`clone` with `CLONE_VM` and `vfork` share the parent's memory, state
//! included: as far as uniqueness goes that is a thread, and nothing needs catching.)
//!
//! Elsewhere (other Unix systems, and loom models) a `pthread_atfork` handler counts forks
//! (the `forkguard` crate), and the generation is worked out from the process id; a fork that
//! skips the handler is caught off the common path by the process id (`Fence::another_process`).
//! On Linux before 4.14, building a generator fails with [`Error::ForkDetection`]: there is no
//! silent fallback.
//!
//! This file holds the crate's only `unsafe` block: mapping that page. It uses no other module
//! of the crate but the error type.

use crate::Error;

/// A process generation remembered when a generator was built.
#[derive(Debug, Clone)]
pub(crate) struct ForkWatch {
    /// The generation this watch was made in.
    armed: u64,
    #[cfg(all(target_os = "linux", not(loom)))]
    word: &'static std::sync::atomic::AtomicU64,
    #[cfg(any(not(target_os = "linux"), loom))]
    guard: forkguard::Guard,
}

impl ForkWatch {
    /// A watch for the current process generation.
    ///
    /// # Errors
    ///
    /// [`Error::ForkDetection`] when the system cannot detect forks (Linux before 4.14 has no
    /// `MADV_WIPEONFORK`; `pthread_atfork` failed elsewhere).
    pub(crate) fn new() -> Result<ForkWatch, Error> {
        imp::watch()
    }

    /// Whether this process is another than the one (the generation) the watch was made in:
    /// one relaxed load and a comparison.
    #[inline(always)]
    pub(crate) fn forked(&self) -> bool {
        imp::forked(self)
    }

    /// [`ForkWatch::forked`] as the common paths ask it (a shared generator's, a per-thread
    /// run's, a handle iterator's).
    #[inline(always)]
    pub(crate) fn forked_on_common_path(&self) -> bool {
        // A deliberately broken build for scripts/mutants.sh: the common path never asks.
        !cfg!(monoflake_mutant_fork_common) && self.forked()
    }

    /// The generation the watch was made in.
    pub(crate) fn generation(&self) -> u64 {
        self.armed
    }

    /// This process's generation as the common paths read it: [`ForkWatch::generation`] in
    /// the process the watch was made in, another value (`0`, or a larger generation) in any
    /// forked child — one relaxed load, for a caller that compares it with a generation it
    /// folded into a word of its own (the per-thread registry's key).
    #[inline(always)]
    pub(crate) fn generation_now_on_common_path(&self) -> u64 {
        // A deliberately broken build for scripts/mutants.sh: the common path never asks.
        if cfg!(monoflake_mutant_fork_common) {
            self.armed
        } else {
            imp::generation_now(self)
        }
    }
}

#[cfg(all(target_os = "linux", not(loom)))]
mod imp {
    use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

    use super::ForkWatch;
    use crate::Error;

    /// The wiped page's word, mapped once by the first caller; a child inherits the mapping
    /// (zeroed) and this pointer to it.
    // Ordering: Relaxed; the pointer is to memory the kernel made (zero-filled), not to memory
    // a thread wrote before publishing it: there is nothing to order.
    static WORD: AtomicPtr<AtomicU64> = AtomicPtr::new(std::ptr::null_mut());

    /// The largest generation armed in this memory. It is not in the wiped page, so a child
    /// starts from its parent's and arms the next one.
    // Ordering: Relaxed; raised before the word shows a generation, which the word's Release
    // orders (see `arm`).
    static LAST: AtomicU64 = AtomicU64::new(0);

    pub(super) fn watch() -> Result<ForkWatch, Error> {
        let word = word()?;
        Ok(ForkWatch {
            armed: arm(word, &LAST),
            word,
        })
    }

    /// The generation in `word`, armed on a process's first call (a child's page was wiped)
    /// as the one after `last`, the largest armed in this memory.
    ///
    /// `last` is raised before the word shows the new generation: a fork can copy this
    /// memory between any two stores of another thread, and a child whose `last` were
    /// behind a generation its parent already handed out would arm that same generation
    /// again — and read its parent's generators, and its default, as its own.
    pub(super) fn arm(word: &AtomicU64, last: &AtomicU64) -> u64 {
        // Ordering: Acquire, paired with the Release below: a generation read from the word
        // comes after `last` was raised to it.
        let armed = word.load(Ordering::Acquire);
        if armed != 0 {
            return armed;
        }
        // Threads racing here compute the same value (or a later one, past the first's
        // raise: harmless); one store wins, the others read it.
        // Ordering: Relaxed; ordered before the word's store by its Release.
        let next = last.load(Ordering::Relaxed) + 1;
        last.fetch_max(next, Ordering::Relaxed);
        match word.compare_exchange(0, next, Ordering::Release, Ordering::Acquire) {
            Ok(_) => next,
            Err(other) => other,
        }
    }

    #[inline(always)]
    pub(super) fn forked(watch: &ForkWatch) -> bool {
        generation_now(watch) != watch.armed
    }

    #[inline(always)]
    pub(super) fn generation_now(watch: &ForkWatch) -> u64 {
        // Ordering: Relaxed; a child's page reads zero from its first instruction on, and a
        // generation armed there is another value than any its parent armed.
        watch.word.load(Ordering::Relaxed)
    }

    /// The word, mapping its page on the first call of the process tree.
    #[allow(unsafe_code)]
    fn word() -> Result<&'static AtomicU64, Error> {
        let len = rustix::param::page_size();
        let fail = |what: &str, e: rustix::io::Errno| Error::ForkDetection {
            reason: format!(
                "{what}: {e} (monoflake needs MADV_WIPEONFORK, Linux 4.14 or later, to tell a \
                 forked child on every call)"
            ),
        };
        // SAFETY: `WORD` only ever holds null or a pointer to the start of a page mapped below
        // and never unmapped (a child inherits the mapping, zero-filled, at the same address).
        // `mmap_anonymous` with a null address asks the kernel for a fresh private mapping of
        // `len` bytes that nothing else refers to; `madvise` and `munmap` are given exactly
        // that mapping (page-aligned, `len` long), the latter only for the one that lost the
        // race to be stored, which nobody saw. A page is aligned for an `AtomicU64` and
        // zero-filled, which is a valid `AtomicU64`, and every access to it is atomic (the
        // `AtomicU64` methods) — what memory the kernel itself rewrites requires. So the
        // reference made is valid for `'static`.
        unsafe {
            let mut ptr = WORD.load(Ordering::Relaxed);
            if ptr.is_null() {
                let page = rustix::mm::mmap_anonymous(
                    std::ptr::null_mut(),
                    len,
                    rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                    rustix::mm::MapFlags::PRIVATE,
                )
                .map_err(|e| fail("cannot map a page", e))?;
                if let Err(e) = rustix::mm::madvise(page, len, rustix::mm::Advice::LinuxWipeOnFork)
                {
                    let _ = rustix::mm::munmap(page, len);
                    return Err(fail("madvise(MADV_WIPEONFORK) failed", e));
                }
                ptr = match WORD.compare_exchange(
                    std::ptr::null_mut(),
                    page.cast(),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => page.cast(),
                    Err(theirs) => {
                        let _ = rustix::mm::munmap(page, len);
                        theirs
                    }
                };
            }
            Ok(&*ptr)
        }
    }
}

#[cfg(any(not(target_os = "linux"), loom))]
mod imp {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::ForkWatch;
    use crate::Error;

    /// The process id (high half) and generation (low half) last seen: a call from another
    /// process id is a child's first, which takes the next generation.
    // Ordering: Relaxed; one word, updated by compare-exchange.
    static SEEN: AtomicU64 = AtomicU64::new(0);

    pub(super) fn watch() -> Result<ForkWatch, Error> {
        let guard = forkguard::Guard::try_new().map_err(|e| Error::ForkDetection {
            reason: e.to_string(),
        })?;
        let pid = u64::from(std::process::id());
        let mut seen = SEEN.load(Ordering::Relaxed);
        loop {
            if seen >> 32 == pid {
                break;
            }
            let next = pid << 32 | ((seen & u64::from(u32::MAX)) + 1);
            match SEEN.compare_exchange(seen, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => seen = next,
                Err(other) => seen = other,
            }
        }
        Ok(ForkWatch {
            armed: seen & u64::from(u32::MAX),
            guard,
        })
    }

    #[inline(always)]
    pub(super) fn forked(watch: &ForkWatch) -> bool {
        watch.guard.clone().detected_fork()
    }

    /// The watch's generation, or 0 (never a generation) once a fork is detected.
    #[inline(always)]
    pub(super) fn generation_now(watch: &ForkWatch) -> u64 {
        if forked(watch) { 0 } else { watch.armed }
    }
}

#[cfg(all(test, target_os = "linux", not(loom)))]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    /// What a fork copies at any instant: a word armed with generation `g` and `LAST` at
    /// least `g`. Were `LAST` behind, a child forked in between would arm `g` again — its
    /// parent's generation — and take the parent's generators (and default) for its own.
    /// A reader that loads the word, then `LAST`, must never see the word ahead.
    #[test]
    fn the_last_generation_is_recorded_before_the_word_shows_it() {
        let word = AtomicU64::new(0);
        let last = AtomicU64::new(0);
        let done = AtomicBool::new(false);
        let mut ahead = 0u64;
        std::thread::scope(|s| {
            s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    // A child's first call: its page reads zero.
                    word.store(0, Ordering::Relaxed);
                    super::imp::arm(&word, &last);
                }
            });
            // Samples while the other thread arms (on a loaded machine, across its
            // preemptions too).
            let mut armed_samples = 0;
            while armed_samples < 2_000_000 {
                let w = word.load(Ordering::Acquire);
                let l = last.load(Ordering::Acquire);
                armed_samples += u64::from(w != 0);
                ahead += u64::from(w > l);
            }
            done.store(true, Ordering::Relaxed);
        });
        assert_eq!(
            ahead, 0,
            "the word showed a generation LAST did not have yet"
        );
    }
}
