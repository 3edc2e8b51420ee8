//! The one-line start: a process-wide default generator, built on first use.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::{Error, FileStore, Generator, Id, Layout, Leased, NodeRequest};

type Builder = Box<dyn Fn() -> Result<Leased, Error> + Send>;

static DEFAULT: OnceLock<Leased> = OnceLock::new();
static CONFIG: Mutex<Option<Builder>> = Mutex::new(None);

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
/// window ahead. To choose the layout, the store or the directory, call [`configure_default`]
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
    if let Some(g) = DEFAULT.get() {
        return Ok(g);
    }
    let config = CONFIG.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(g) = DEFAULT.get() {
        return Ok(g); // built by another thread while this one waited
    }
    let leased = match config.as_ref() {
        Some(build) => build()?,
        None => Generator::builder(Layout::twitter())
            .build_leased(Arc::new(FileStore::open_default()?), NodeRequest::Any)?,
    };
    Ok(DEFAULT.get_or_init(|| leased))
}

/// Sets how the default generator is built; call it before the first [`next_id`].
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
    build: impl Fn() -> Result<Leased, Error> + Send + 'static,
) -> Result<(), Error> {
    let mut config = CONFIG.lock().unwrap_or_else(PoisonError::into_inner);
    if DEFAULT.get().is_some() {
        return Err(Error::DefaultAlreadyBuilt);
    }
    *config = Some(Box::new(build));
    Ok(())
}
