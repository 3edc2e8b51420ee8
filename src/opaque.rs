//! Opaque public IDs: a keyed, reversible permutation of a layout's bit space, its key, and
//! the public ID's own type.

use std::fmt;
use std::hash::Hasher;
use std::str::FromStr;

use siphasher::sip::SipHasher24;

use crate::layout::mask;
use crate::{Encoded, Encoding, Error, Id, Layout};

/// Feistel rounds; four make a strong pseudo-random permutation (Luby–Rackoff), eight leave a
/// margin.
const ROUNDS: u64 = 8;

/// A 128-bit key for [`Opaque`]: made with [`OpaqueKey::generate`], kept as 32 hex digits
/// ([`OpaqueKey::to_hex`]) in a secrets store or a key file, read back with
/// [`OpaqueKey::from_hex`] or [`OpaqueKey::from_file_contents`].
///
/// Its `Debug` does not print the key.
///
/// ```
/// use monoflake::OpaqueKey;
/// let key = OpaqueKey::from_hex("000102030405060708090a0b0c0d0e0f")?;
/// assert_eq!(key, OpaqueKey::from_bytes([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]));
/// assert_eq!(format!("{key:?}"), "OpaqueKey(..)");
/// # Ok::<(), monoflake::Error>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct OpaqueKey {
    k0: u64,
    k1: u64,
}

impl fmt::Debug for OpaqueKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OpaqueKey(..)")
    }
}

impl OpaqueKey {
    /// A new key from the operating system's random source (`getrandom(2)` on Linux).
    ///
    /// # Errors
    ///
    /// [`Error::RandomSource`] when the operating system cannot supply random bytes.
    ///
    /// ```
    /// use monoflake::OpaqueKey;
    /// let key = OpaqueKey::generate()?;
    /// assert_ne!(key, OpaqueKey::generate()?);
    /// // Keep it as 32 hex digits; every public ID made with it depends on it.
    /// assert_eq!(OpaqueKey::from_hex(&key.to_hex())?, key);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn generate() -> Result<Self, Error> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|e| Error::RandomSource {
            reason: e.to_string(),
        })?;
        Ok(Self::from_bytes(bytes))
    }

    /// A key from 16 bytes (e.g. from a secrets store).
    ///
    /// ```
    /// let key = monoflake::OpaqueKey::from_bytes([7; 16]);
    /// assert_eq!(key.to_bytes(), [7; 16]);
    /// ```
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        let (a, b) = bytes.split_at(8);
        OpaqueKey {
            k0: u64::from_le_bytes(a.try_into().unwrap_or_default()),
            k1: u64::from_le_bytes(b.try_into().unwrap_or_default()),
        }
    }

    /// The key's 16 bytes, as [`OpaqueKey::from_bytes`] takes them.
    ///
    /// ```
    /// let bytes = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16];
    /// assert_eq!(monoflake::OpaqueKey::from_bytes(bytes).to_bytes(), bytes);
    /// ```
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.k0.to_le_bytes());
        bytes[8..].copy_from_slice(&self.k1.to_le_bytes());
        bytes
    }

    /// The key as 32 lowercase hex digits, as [`OpaqueKey::from_hex`] reads them and
    /// `monoflake keygen` writes them.
    ///
    /// ```
    /// let key = monoflake::OpaqueKey::from_bytes([0xab; 16]);
    /// assert_eq!(key.to_hex(), "abababababababababababababababab");
    /// ```
    pub fn to_hex(&self) -> String {
        self.to_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// A key from 32 hex digits (surrounding whitespace ignored), as in a key file made by
    /// `head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n'`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidKey`] with what is wrong.
    ///
    /// ```
    /// use monoflake::{Error, OpaqueKey};
    /// assert!(OpaqueKey::from_hex("  00112233445566778899aabbccddeeff\n").is_ok());
    /// assert!(matches!(OpaqueKey::from_hex("0011"), Err(Error::InvalidKey { .. })));
    /// ```
    pub fn from_hex(text: &str) -> Result<Self, Error> {
        let text = text.trim();
        if text.len() != 32 {
            return Err(Error::InvalidKey {
                reason: format!(
                    "a key is 32 hex digits (128 bits), got {} characters",
                    text.len()
                ),
            });
        }
        let mut bytes = [0u8; 16];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2).unwrap_or("zz"), 16).map_err(
                |_| Error::InvalidKey {
                    reason: format!("not a hex digit near position {}", 2 * i),
                },
            )?;
        }
        Ok(Self::from_bytes(bytes))
    }

    /// A key from the contents of a key file: either exactly 16 raw bytes (`head -c 16
    /// /dev/urandom > key`) or 32 hex digits, surrounding whitespace and a trailing newline
    /// allowed (what `monoflake keygen` writes).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidKey`] saying what a key file holds and what this one holds instead
    /// (its length, the first byte that is not a hex digit). Sixteen hex digits are refused
    /// rather than read as raw bytes: they are a 64-bit key written by mistake.
    ///
    /// ```
    /// use monoflake::{Error, OpaqueKey};
    ///
    /// let hex = OpaqueKey::from_file_contents(b"000102030405060708090a0b0c0d0e0f\n")?;
    /// let raw = OpaqueKey::from_file_contents(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15])?;
    /// assert_eq!(hex, raw);
    /// let err = OpaqueKey::from_file_contents(&[7; 32]).unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "invalid opaque-ID key: a key file holds 16 raw bytes or 32 hex digits (a trailing \
    ///      newline is fine); this one holds 32 bytes, and byte 0 (0x07) is not a hex digit"
    /// );
    /// # Ok::<(), Error>(())
    /// ```
    pub fn from_file_contents(contents: &[u8]) -> Result<Self, Error> {
        const WHAT: &str = "a key file holds 16 raw bytes or 32 hex digits (a trailing newline \
                            is fine)";
        if let Ok(raw) = <[u8; 16]>::try_from(contents)
            && !raw.iter().all(u8::is_ascii_hexdigit)
        {
            return Ok(Self::from_bytes(raw));
        }
        let text = contents.trim_ascii();
        let refuse = |holds: String| {
            Err(Error::InvalidKey {
                reason: format!("{WHAT}; this one {holds}"),
            })
        };
        if text.is_empty() {
            return refuse(format!(
                "is empty{}",
                if contents.is_empty() {
                    String::new()
                } else {
                    format!(" but for {} bytes of whitespace", contents.len())
                }
            ));
        }
        if let Some(bad) = text.iter().position(|b| !b.is_ascii_hexdigit()) {
            let offset = bad + (contents.len() - contents.trim_ascii_start().len());
            return refuse(format!(
                "holds {} bytes, and byte {offset} ({:#04x}) is not a hex digit",
                contents.len(),
                contents[offset]
            ));
        }
        if text.len() != 32 {
            return refuse(format!(
                "holds {} hex digits ({} bits)",
                text.len(),
                text.len() * 4
            ));
        }
        std::str::from_utf8(text)
            .map_err(|_| Error::InvalidKey {
                reason: WHAT.into(),
            })
            .and_then(Self::from_hex)
    }
}

/// Maps IDs to opaque IDs and back with a key: a Feistel network over the layout's bit space,
/// keyed with SipHash-2-4 as the round function, with cycle-walking for odd widths.
///
/// **What it protects.** Without the key an opaque ID reveals neither the time, the node nor
/// the order of the ID behind it: consecutive IDs map to values that look unrelated, so a
/// competitor cannot count your orders by subtracting two public IDs.
///
/// **What it does not.** It is not authentication: anyone can make up a number, and it will
/// map back to *some* ID — check that the ID exists. The mapping is deterministic, so equal
/// IDs give equal opaque IDs. The width of the layout shows (opaque IDs stay below
/// `2^total_bits`; js-safe ones stay below 2^53). It protects nothing once the key leaks, and
/// rotating the key changes every public ID.
///
/// The public ID is its own type, [`OpaqueId`]: a private [`Id`] cannot be sent where a
/// public one belongs, nor decoded into parts, by mistake.
///
/// # Example
///
/// ```
/// use monoflake::{Layout, Opaque, OpaqueId, OpaqueKey};
///
/// let layout = Layout::js_safe();
/// let opaque = Opaque::new(&layout, OpaqueKey::from_hex("00112233445566778899aabbccddeeff")?);
/// let id = layout.compose(123_456, 7, 1)?;
/// let public: OpaqueId = opaque.encrypt(id)?;
/// assert_ne!(public.as_u64(), id.as_u64());
/// assert!(public.as_u64() < 1 << 53);
/// assert_eq!(opaque.decrypt(public)?, id);
/// # Ok::<(), monoflake::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Opaque {
    key: OpaqueKey,
    bits: u32,
    half: u32,
}

impl Opaque {
    /// A mapping over `layout`'s bit space.
    ///
    /// ```
    /// let o = monoflake::Opaque::new(&monoflake::Layout::twitter(), monoflake::OpaqueKey::from_bytes([1; 16]));
    /// assert_eq!(o.bits(), 63);
    /// ```
    pub fn new(layout: &Layout, key: OpaqueKey) -> Self {
        let bits = layout.total_bits();
        Opaque {
            key,
            bits,
            half: bits.div_ceil(2),
        }
    }

    /// The width of the space permuted.
    ///
    /// ```
    /// let o = monoflake::Opaque::new(&monoflake::Layout::js_safe(), monoflake::OpaqueKey::from_bytes([1; 16]));
    /// assert_eq!(o.bits(), 53);
    /// ```
    pub const fn bits(&self) -> u32 {
        self.bits
    }

    fn round(&self, i: u64, half: u64) -> u64 {
        let mut h = SipHasher24::new_with_keys(self.key.k0, self.key.k1);
        h.write_u64(i);
        h.write_u64(half);
        h.finish() & mask(self.half)
    }

    /// One pass of the balanced Feistel network over `2 * half` bits.
    fn forward(&self, x: u64) -> u64 {
        let m = mask(self.half);
        let (mut l, mut r) = (x >> self.half & m, x & m);
        for i in 0..ROUNDS {
            (l, r) = (r, l ^ self.round(i, r));
        }
        l << self.half | r
    }

    fn backward(&self, x: u64) -> u64 {
        let m = mask(self.half);
        let (mut l, mut r) = (x >> self.half & m, x & m);
        for i in (0..ROUNDS).rev() {
            (l, r) = (r ^ self.round(i, l), l);
        }
        l << self.half | r
    }

    fn check(&self, v: u64) -> Result<u64, Error> {
        if self.bits < 64 && v >> self.bits != 0 {
            return Err(Error::IdTooWide {
                id: v,
                layout_bits: self.bits,
            });
        }
        Ok(v)
    }

    /// The opaque ID for `id`.
    ///
    /// # Errors
    ///
    /// [`Error::IdTooWide`] when `id` uses bits the layout does not have.
    ///
    /// ```
    /// use monoflake::{Layout, Opaque, OpaqueKey};
    /// let o = Opaque::new(&Layout::twitter(), OpaqueKey::from_bytes([9; 16]));
    /// let id = Layout::twitter().compose(5, 1, 0)?;
    /// assert_eq!(o.decrypt(o.encrypt(id)?)?, id);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn encrypt(&self, id: Id) -> Result<OpaqueId, Error> {
        self.check(id.as_u64())
            .map(|x| OpaqueId(self.walk(x, Self::forward)))
    }

    /// Cycle-walking: the network permutes `2 * half` bits; apply `step` until the value is
    /// back in the layout's space. Started inside it, this is a permutation of that space.
    fn walk(&self, mut x: u64, step: fn(&Self, u64) -> u64) -> u64 {
        loop {
            x = step(self, x);
            if self.bits == 64 || x >> self.bits == 0 {
                return x;
            }
        }
    }

    /// The ID behind an opaque ID.
    ///
    /// # Errors
    ///
    /// [`Error::IdTooWide`] when the value uses bits the layout does not have.
    ///
    /// ```
    /// use monoflake::{Error, Layout, Opaque, OpaqueId, OpaqueKey};
    /// let o = Opaque::new(&Layout::js_safe(), OpaqueKey::from_bytes([9; 16]));
    /// assert!(matches!(o.decrypt(OpaqueId::from_u64(1 << 60)), Err(Error::IdTooWide { .. })));
    /// ```
    pub fn decrypt(&self, opaque: OpaqueId) -> Result<Id, Error> {
        self.check(opaque.0)
            .map(|x| Id::from_u64(self.walk(x, Self::backward)))
    }
}

/// A public ID made by [`Opaque::encrypt`]: a number that reveals neither time, node nor order
/// without the key, and maps back to its [`Id`] with [`Opaque::decrypt`].
///
/// A type of its own, so that a private ID and a public one cannot be mixed up: it has no
/// [`parts`](Id::parts), an `Id` is not accepted where an `OpaqueId` is expected, and the
/// only way between them is the key. It is written and read like an `Id`: decimal
/// (`Display`, `FromStr`), the fixed-width [`Encoding`]s, and with the `serde` feature as a
/// decimal string in human-readable formats (a `u64` in binary ones).
///
/// ```
/// use monoflake::{Encoding, Layout, Opaque, OpaqueId, OpaqueKey};
///
/// let opaque = Opaque::new(&Layout::twitter(), OpaqueKey::from_bytes([3; 16]));
/// let id = Layout::twitter().compose_at(1_700_000_000_000, 5, 0)?;
/// let public = opaque.encrypt(id)?;
/// // To the outside: a decimal number, or a short fixed-width string.
/// let text = public.to_string();
/// let short = public.encode(Encoding::Base62);
/// // Back from the outside.
/// assert_eq!(text.parse::<OpaqueId>()?, public);
/// assert_eq!(OpaqueId::decode(&short, Encoding::Base62)?, public);
/// assert_eq!(opaque.decrypt(public)?, id);
/// # Ok::<(), monoflake::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpaqueId(u64);

impl OpaqueId {
    /// Wraps a number received from outside (a URL, a request) as a public ID.
    ///
    /// ```
    /// assert_eq!(monoflake::OpaqueId::from_u64(42).as_u64(), 42);
    /// ```
    pub const fn from_u64(value: u64) -> OpaqueId {
        OpaqueId(value)
    }

    /// The public ID as a number.
    ///
    /// ```
    /// assert_eq!(monoflake::OpaqueId::from_u64(7).as_u64(), 7);
    /// ```
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// Writes the public ID in `encoding`, as [`Id::encode`] writes an ID.
    ///
    /// ```
    /// use monoflake::{Encoding, OpaqueId};
    /// assert_eq!(&*OpaqueId::from_u64(61).encode(Encoding::Base62), "0000000000z");
    /// ```
    pub fn encode(self, encoding: Encoding) -> Encoded {
        Id::from_u64(self.0).encode(encoding)
    }

    /// Reads a public ID written in `encoding`, as [`Id::decode`] reads an ID.
    ///
    /// # Errors
    ///
    /// As [`Id::decode`]: [`Error::InvalidId`] with the first bad character and its position.
    ///
    /// ```
    /// use monoflake::{Encoding, OpaqueId};
    /// assert_eq!(OpaqueId::decode("0000000000z", Encoding::Base62)?.as_u64(), 61);
    /// # Ok::<(), monoflake::Error>(())
    /// ```
    pub fn decode(text: &str, encoding: Encoding) -> Result<OpaqueId, Error> {
        Id::decode(text, encoding).map(|id| OpaqueId(id.as_u64()))
    }
}

impl fmt::Display for OpaqueId {
    /// Decimal.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl FromStr for OpaqueId {
    type Err = Error;

    /// Parses a decimal public ID, as `Id`'s `FromStr` parses an ID.
    ///
    /// ```
    /// use monoflake::{Error, OpaqueId};
    /// assert_eq!("42".parse::<OpaqueId>()?.as_u64(), 42);
    /// assert!(matches!("4x2".parse::<OpaqueId>(), Err(Error::InvalidId { position: Some(1), .. })));
    /// # Ok::<(), Error>(())
    /// ```
    fn from_str(s: &str) -> Result<OpaqueId, Error> {
        s.parse::<Id>().map(|id| OpaqueId(id.as_u64()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_files_hold_16_raw_bytes_or_32_hex_digits() {
        let raw: Vec<u8> = (0..16).map(|i| 0xf0 | i).collect();
        let expected = OpaqueKey::from_bytes(raw.clone().try_into().unwrap());
        assert_eq!(OpaqueKey::from_file_contents(&raw).unwrap(), expected);
        for text in [
            "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff",
            "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff\n",
            "F0F1F2F3F4F5F6F7F8F9FAFBFCFDFEFF\r\n",
            "  f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff  \n",
        ] {
            assert_eq!(
                OpaqueKey::from_file_contents(text.as_bytes()).unwrap(),
                expected,
                "{text:?}"
            );
        }
        let refused: &[(&[u8], &str)] = &[
            (b"", "this one is empty"),
            (b" \n", "this one is empty but for 2 bytes of whitespace"),
            (
                b"0123456789abcdef",
                "this one holds 16 hex digits (64 bits)",
            ),
            (b"0011\n", "this one holds 4 hex digits (16 bits)"),
            (
                b"00112233445566778899aabbccddeeff00\n",
                "this one holds 34 hex digits (136 bits)",
            ),
            (
                b" 0011223344556677889xaabbccddeeff",
                "this one holds 33 bytes, and byte 20 (0x78) is not a hex digit",
            ),
            (
                &[0xff; 17],
                "this one holds 17 bytes, and byte 0 (0xff) is not a hex digit",
            ),
        ];
        for (contents, message) in refused {
            let err = OpaqueKey::from_file_contents(contents).unwrap_err();
            assert!(matches!(err, Error::InvalidKey { .. }));
            let text = err.to_string();
            assert!(
                text.starts_with(
                    "invalid opaque-ID key: a key file holds 16 raw bytes or 32 hex digits"
                ) && text.ends_with(message),
                "{contents:?}: {text}"
            );
        }
    }
}
