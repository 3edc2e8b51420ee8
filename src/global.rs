//! The one-line start: a process-wide default generator, built on first use.

use std::sync::{Arc, Mutex, OnceLock, PoisonError, TryLockError};

use crate::fork::ForkWatch;
use crate::{Error, FileStore, Generator, Id, Layout, Leased, NodeRequest};

type Builder = Arc<dyn Fn() -> Result<Leased, Error> + Send + Sync>;

/// How many process generations (a process, its forked child, that child's child ...) get a
/// default generator of their own.
const GENERATIONS: usize = 64;

/// The default generator of each process generation (see `crate::fork`): a forked child finds
/// its parent's (which refuses with `Forked`) at its parent's index, and builds its own at the
/// next. A child never waits on a slot its parent's threads may have been filling at the fork.
static DEFAULTS: [OnceLock<Leased>; GENERATIONS] = [const { OnceLock::new() }; GENERATIONS];

/// How each generation builds its default (`configure_default`); a child without one of its
/// own uses the nearest ancestor's. Locked only to set it or to take a copy, never while a
/// default is built: a child forked while its parent builds (which takes a while: a claim, a
/// reservation write, perhaps a wait) finds its parent's unlocked.
static CONFIGS: [Mutex<Option<Builder>>; GENERATIONS] = [const { Mutex::new(None) }; GENERATIONS];

/// Locked while a generation builds its default (and while it is configured), so that it
/// builds one. Only that generation's threads take it: a child's index is past its parent's.
static BUILDS: [Mutex<()>; GENERATIONS] = [const { Mutex::new(()) }; GENERATIONS];

/// This process generation's index into [`DEFAULTS`] and [`CONFIGS`].
fn index() -> Result<usize, Error> {
    let generation = ForkWatch::new()?.generation();
    usize::try_from(generation)
        .ok()
        .filter(|&i| i < GENERATIONS)
        .ok_or_else(|| Error::ForkDetection {
            // Generation 1 is a process never forked: a child of depth d is generation d + 1.
            reason: format!(
                "this process is {} forks deep; the process-wide default generator is rebuilt \
                 in forked children only up to {} deep: build a generator in this process \
                 yourself",
                generation.saturating_sub(1),
                GENERATIONS - 2
            ),
        })
}

/// Issues an ID from the process-wide default generator, building it on the first call.
///
/// **The first call has side effects**, like any leased generator's start:
///
/// * it creates the default state directory if it is missing
///   ([`FileStore::open_default`]) and takes a lock file in it for the node it claims;
/// * it writes a time reservation there (an fsynced file, about a millisecond);
/// * it starts one background thread, `monoflake-lease-<node>`, that extends the reservation
///   every few seconds.
///
/// Later calls are the plain hot path. The generator lives as long as the process: the node is
/// freed when the process exits (the lock dies with it) and its reservation stays at most one
/// window ahead.
///
/// **Forked children build their own.** In a child made by `fork()` however it was made —
/// gunicorn, celery and uWSGI workers, `multiprocessing` with fork, a raw
/// `syscall(SYS_fork)` — the first call claims a new node for that child (as the first call
/// did in the parent, with the same [`configure_default`] builder, which therefore runs again
/// in each child: create the store inside it), and every ID the child issues is its own. The
/// parent's node, claim and lock stay the parent's; the child never issues under them. To choose the layout, the store or the directory, call [`configure_default`]
/// before the first call; to avoid the side effects altogether, build a [`Generator`] yourself.
///
/// The default is the embedded one: the Twitter layout, a node ID claimed from the file store
/// in the default state directory, the locked clock.
///
/// # Errors
///
/// Building it can fail (the state directory cannot be written, every node ID is held): that
/// error is returned — no panic — and the next call tries again. After that, as
/// [`Generator::next_id`].
///
/// # Example
///
/// ```
/// let a = monoflake::next_id()?;
/// let b = monoflake::next_id()?;
/// assert!(b > a);
/// # Ok::<(), monoflake::Error>(())
/// ```
pub fn next_id() -> Result<Id, Error> {
    default_generator()?.next_id()
}

/// The process-wide default generator (see [`next_id`]), built on the first call.
///
/// # Errors
///
/// As [`next_id`] when it cannot be built.
///
/// ```
/// let generator = monoflake::default_generator()?;
/// assert_eq!(generator.layout().name(), "twitter");
/// # Ok::<(), monoflake::Error>(())
/// ```
pub fn default_generator() -> Result<&'static Leased, Error> {
    let index = index()?;
    if let Some(g) = DEFAULTS[index].get() {
        return Ok(g);
    }
    build(index)
}

/// Builds generation `index`'s default generator, once, with the nearest configuration: its
/// own, else an ancestor's, else the embedded default.
#[cold]
fn build(index: usize) -> Result<&'static Leased, Error> {
    let _building = BUILDS[index].lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(g) = DEFAULTS[index].get() {
        return Ok(g); // built by another thread while this one waited
    }
    let leased = match nearest_config(index)? {
        Some(build) => build()?,
        None => Generator::builder(Layout::twitter())
            .build_leased(Arc::new(FileStore::open_default()?), NodeRequest::Any)?,
    };
    // Nobody else fills this slot: this thread holds its generation's build lock.
    Ok(DEFAULTS[index].get_or_init(|| leased))
}

/// The configuration of generation `index`, else of its nearest ancestor that has one.
fn nearest_config(index: usize) -> Result<Option<Builder>, Error> {
    let own = CONFIGS[index]
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    if own.is_some() {
        return Ok(own);
    }
    for ancestor in (0..index).rev() {
        // An ancestor's lock can be held only by a thread of that ancestor that was setting
        // or copying its configuration when this process was forked (a few instructions): it
        // will never be released here, so it is not waited for.
        let config = match CONFIGS[ancestor].try_lock() {
            Ok(config) => config.clone(),
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner().clone(),
            Err(TryLockError::WouldBlock) => {
                return Err(Error::ForkDetection {
                    reason: "this process was forked while another thread of its parent was \
                             setting or reading the default generator's configuration; build \
                             a generator in this process yourself"
                        .into(),
                });
            }
        };
        if config.is_some() {
            return Ok(config);
        }
    }
    Ok(None)
}

/// Sets how the default generator is built; call it before the first [`next_id`].
///
/// `build` runs again in every forked child that calls [`next_id`] (each claims a node of its
/// own), also in a child forked while a thread of the parent was running it: hence `Sync`.
///
/// # Errors
///
/// [`Error::DefaultAlreadyBuilt`] when the default generator exists already.
///
/// ```
/// use std::sync::Arc;
/// use monoflake::{FileStore, Generator, Layout, NodeRequest};
///
/// let dir = std::env::temp_dir().join(format!("monoflake-doc-configure-{}", std::process::id()));
/// monoflake::configure_default(move || {
///     Generator::builder(Layout::discord())
///         .build_leased(Arc::new(FileStore::open(&dir)?), NodeRequest::Any)
/// })?;
/// let id = monoflake::next_id()?;
/// assert_eq!(monoflake::default_generator()?.layout().name(), "discord");
/// assert!(matches!(
///     monoflake::configure_default(|| unreachable!()),
///     Err(monoflake::Error::DefaultAlreadyBuilt)
/// ));
/// # let _ = id;
/// # Ok::<(), monoflake::Error>(())
/// ```
pub fn configure_default(
    build: impl Fn() -> Result<Leased, Error> + Send + Sync + 'static,
) -> Result<(), Error> {
    let index = index()?;
    // A build under way finishes first (and then the default exists).
    let _building = BUILDS[index].lock().unwrap_or_else(PoisonError::into_inner);
    if DEFAULTS[index].get().is_some() {
        return Err(Error::DefaultAlreadyBuilt);
    }
    *CONFIGS[index]
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(build));
    Ok(())
}
