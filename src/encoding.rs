//! String forms of an ID: decimal, and fixed-width hex, Crockford base32 and base62, whose
//! string order is the numeric order.

use std::fmt;
use std::ops::Deref;
use std::str::FromStr;

use crate::{Error, Id};

/// How an ID is written as a string.
///
/// | encoding | width | alphabet | case | order-preserving |
/// |---|---|---|---|---|
/// | `Decimal` | 1–20 | `0-9` | — | no (not fixed width) |
/// | `Hex` | 16 | `0-9a-f` | any on input | yes |
/// | `Base32` | 13 | Crockford: `0-9A-Z` without `I L O U` | any on input; `I L` read as 1, `O` as 0 | yes |
/// | `Base62` | 11 | `0-9A-Za-z` | significant | yes |
///
/// The fixed-width forms are zero-padded, and their alphabets are in ASCII order, so comparing
/// two strings byte by byte gives the same answer as comparing the IDs.
///
/// # Example
///
/// ```
/// use monoflake::{Encoding, Id};
///
/// let id = Id::from_u64(175_928_847_299_117_063);
/// assert_eq!(&*id.encode(Encoding::Base32), "04W86BB0G4007");
/// assert_eq!(&*id.encode(Encoding::Base62), "0Czks0tP37X");
/// assert_eq!(&*id.encode(Encoding::Hex), "0271065ac1020007");
/// assert_eq!(Id::decode("04w86bb0g4007", Encoding::Base32)?, id);
/// # Ok::<(), monoflake::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Encoding {
    /// Decimal digits, as `Display` prints.
    Decimal,
    /// 16 lowercase hex digits.
    Hex,
    /// 13 characters of Crockford's base32.
    Base32,
    /// 11 characters of `0-9A-Za-z`.
    Base62,
}

const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

impl Encoding {
    /// Every encoding, for tools that list them.
    ///
    /// ```
    /// assert_eq!(monoflake::Encoding::ALL.len(), 4);
    /// ```
    pub const ALL: [Encoding; 4] = [
        Encoding::Decimal,
        Encoding::Hex,
        Encoding::Base32,
        Encoding::Base62,
    ];

    /// The encoding's name, as [`FromStr`] takes it.
    ///
    /// ```
    /// assert_eq!(monoflake::Encoding::Base62.name(), "base62");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            Encoding::Decimal => "decimal",
            Encoding::Hex => "hex",
            Encoding::Base32 => "base32",
            Encoding::Base62 => "base62",
        }
    }

    /// The width of the fixed-width forms (`None` for decimal).
    ///
    /// ```
    /// assert_eq!(monoflake::Encoding::Base32.width(), Some(13));
    /// ```
    pub const fn width(self) -> Option<usize> {
        match self {
            Encoding::Decimal => None,
            Encoding::Hex => Some(16),
            Encoding::Base32 => Some(13),
            Encoding::Base62 => Some(11),
        }
    }
}

impl FromStr for Encoding {
    type Err = String;

    /// ```
    /// use monoflake::Encoding;
    /// assert_eq!("base32".parse::<Encoding>(), Ok(Encoding::Base32));
    /// assert!("base64".parse::<Encoding>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Self, String> {
        Encoding::ALL
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| format!("unknown encoding {s:?}: decimal, hex, base32 or base62"))
    }
}

/// An ID written out by [`Id::encode`]: a string on the stack, no allocation.
///
/// ```
/// let s = monoflake::Id::from_u64(255).encode(monoflake::Encoding::Hex);
/// assert_eq!(s.to_string(), "00000000000000ff");
/// assert_eq!(s.len(), 16);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Encoded {
    buf: [u8; 20],
    len: u8,
}

impl Deref for Encoded {
    type Target = str;
    fn deref(&self) -> &str {
        // Only ASCII from the alphabets above is ever written.
        std::str::from_utf8(&self.buf[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl AsRef<str> for Encoded {
    fn as_ref(&self) -> &str {
        self
    }
}

impl fmt::Display for Encoded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

impl fmt::Debug for Encoded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// Writes `value` in `alphabet`'s base, zero-padded to `width`.
fn fixed(mut value: u64, alphabet: &[u8], width: usize) -> Encoded {
    let base = alphabet.len() as u64;
    let mut buf = [b'0'; 20];
    for slot in buf[..width].iter_mut().rev() {
        *slot = alphabet[(value % base) as usize];
        value /= base;
    }
    Encoded {
        buf,
        len: width as u8,
    }
}

/// The value of one character in an alphabet.
type DigitFn = fn(u8) -> Option<u64>;

fn crockford_digit(c: u8) -> Option<u64> {
    let v = match c.to_ascii_uppercase() {
        b'0'..=b'9' => c - b'0',
        b'O' => 0,
        b'I' | b'L' => 1,
        c => CROCKFORD.iter().position(|&a| a == c)? as u8,
    };
    Some(u64::from(v))
}

fn base62_digit(c: u8) -> Option<u64> {
    Some(u64::from(match c {
        b'0'..=b'9' => c - b'0',
        b'A'..=b'Z' => c - b'A' + 10,
        b'a'..=b'z' => c - b'a' + 36,
        _ => return None,
    }))
}

fn hex_digit(c: u8) -> Option<u64> {
    (c as char).to_digit(16).map(u64::from)
}

impl Id {
    /// Writes the ID in `encoding`.
    ///
    /// ```
    /// use monoflake::{Encoding, Id};
    /// assert_eq!(&*Id::from_u64(0).encode(Encoding::Base62), "00000000000");
    /// assert_eq!(&*Id::from_u64(u64::MAX).encode(Encoding::Base32), "FZZZZZZZZZZZZ");
    /// assert_eq!(&*Id::from_u64(42).encode(Encoding::Decimal), "42");
    /// ```
    pub fn encode(self, encoding: Encoding) -> Encoded {
        let v = self.as_u64();
        match encoding {
            Encoding::Decimal => {
                let width = v.checked_ilog10().map_or(1, |d| d as usize + 1);
                fixed(v, b"0123456789", width)
            }
            Encoding::Hex => fixed(v, b"0123456789abcdef", 16),
            Encoding::Base32 => fixed(v, CROCKFORD, 13),
            Encoding::Base62 => fixed(v, BASE62, 11),
        }
    }

    /// Reads an ID written in `encoding`. Fixed-width forms must have their exact width.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`] naming the first bad character and its position, a wrong length,
    /// or a value above `u64::MAX`.
    ///
    /// ```
    /// use monoflake::{Encoding, Error, Id};
    /// assert_eq!(Id::decode("00000000000000ff", Encoding::Hex)?.as_u64(), 255);
    /// let err = Id::decode("04V1QRWUG0007", Encoding::Base32).unwrap_err();
    /// assert_eq!(err.to_string(), "invalid ID \"04V1QRWUG0007\": not a base32 character 'U' at position 7");
    /// assert!(matches!(Id::decode("G0000000000000", Encoding::Base32), Err(Error::InvalidId { .. })));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn decode(s: &str, encoding: Encoding) -> Result<Id, Error> {
        let invalid = |reason, position| Error::InvalidId {
            input: s.to_owned(),
            reason,
            position,
        };
        let (digit, base, reason): (DigitFn, u64, &'static str) = match encoding {
            Encoding::Decimal => return s.parse(),
            Encoding::Hex => (hex_digit, 16, "not a hex digit"),
            Encoding::Base32 => (crockford_digit, 32, "not a base32 character"),
            Encoding::Base62 => (base62_digit, 62, "not a base62 character"),
        };
        if let Some(p) = s.bytes().position(|b| !b.is_ascii() || digit(b).is_none()) {
            return Err(invalid(reason, Some(p)));
        }
        let width = encoding.width().unwrap_or(0);
        if s.len() != width {
            return Err(invalid(
                match encoding {
                    Encoding::Hex => "a hex ID has exactly 16 digits",
                    Encoding::Base32 => "a base32 ID has exactly 13 characters",
                    _ => "a base62 ID has exactly 11 characters",
                },
                None,
            ));
        }
        let mut value: u64 = 0;
        for b in s.bytes() {
            value = value
                .checked_mul(base)
                .and_then(|v| v.checked_add(digit(b).unwrap_or(0)))
                .ok_or_else(|| invalid("larger than 18446744073709551615", None))?;
        }
        Ok(Id::from_u64(value))
    }
}
