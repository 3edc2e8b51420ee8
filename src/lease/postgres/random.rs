//! The claimant token: 128 random bits per claim, so that two claims of one row never look
//! alike.

use std::sync::atomic::Ordering;

/// A fresh claimant token: 128 bits from the operating system's random source (hex).
pub(super) fn claimant_token() -> String {
    let mut bytes = [0u8; 16];
    fill_random(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(unix)]
fn fill_random(bytes: &mut [u8]) {
    let mut filled = 0;
    while filled < bytes.len() {
        match rustix::rand::getrandom(&mut bytes[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => break,
        }
    }
    if filled < bytes.len() {
        fill_hashed(bytes);
    }
}

#[cfg(not(unix))]
fn fill_random(bytes: &mut [u8]) {
    fill_hashed(bytes);
}

/// Randomness from `RandomState` (randomly keyed per process), the time and a counter.
fn fill_hashed(bytes: &mut [u8]) {
    use std::hash::{BuildHasher, RandomState};
    use std::sync::atomic::AtomicU64;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        // Ordering: Relaxed; only distinctness matters.
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let h = RandomState::new().hash_one((i, n, now, std::process::id()));
        chunk.copy_from_slice(&h.to_le_bytes()[..chunk.len()]);
    }
}
