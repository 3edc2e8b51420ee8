//! The claimant token: 128 random bits per claim, so that two claims of one row never look
//! alike.

use std::sync::atomic::Ordering;

/// A fresh claimant token: 128 bits from the operating system's random source (hex).
pub(super) fn claimant_token() -> String {
    let mut bytes = [0u8; 16];
    fill_random(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Fills `bytes` from the operating system's random source, or, should it fail, from
/// [`fill_hashed`]: true when the system's source filled them.
#[cfg(unix)]
fn fill_random(bytes: &mut [u8]) -> bool {
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
        return false;
    }
    true
}

#[cfg(not(unix))]
fn fill_random(bytes: &mut [u8]) -> bool {
    fill_hashed(bytes);
    false
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

#[cfg(test)]
mod tests {
    use super::*;

    fn is_hex(token: &str) -> bool {
        token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit())
    }

    /// On Linux the system's source fills a token, every byte of it, and no two differ.
    #[test]
    #[cfg(unix)]
    fn tokens_come_from_the_systems_source_and_never_repeat() {
        let mut bytes = [0u8; 1024];
        assert!(fill_random(&mut bytes));
        // 1,024 random bytes are all zero with probability 2^-8192.
        assert!(bytes.iter().any(|&b| b != 0));
        let tokens: std::collections::HashSet<String> =
            (0..100).map(|_| claimant_token()).collect();
        assert_eq!(tokens.len(), 100);
        assert!(tokens.iter().all(|t| is_hex(t)), "{tokens:?}");
    }

    /// The fallback fills a buffer of any length, differently each time.
    #[test]
    fn the_fallback_fills_any_length_and_never_repeats() {
        let mut a = [0u8; 20];
        let mut b = [0u8; 20];
        fill_hashed(&mut a);
        fill_hashed(&mut b);
        assert_ne!(a, b);
        assert!(a[16..].iter().any(|&x| x != 0) || b[16..].iter().any(|&x| x != 0));
    }
}
