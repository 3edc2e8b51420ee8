//! serde support (feature `serde`): IDs and public IDs as decimal strings, because
//! JavaScript numbers lose precision above 2^53.

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{Id, OpaqueId};

/// The largest integer a JavaScript number holds exactly.
const MAX_SAFE: u64 = (1 << 53) - 1;

impl Serialize for Id {
    /// In human-readable formats (JSON, TOML, YAML) as a decimal string:
    /// `"175928847299117063"`. In compact binary formats (bincode, postcard), which are not
    /// self-describing, as a plain `u64`.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            serializer.collect_str(self)
        } else {
            serializer.serialize_u64(self.as_u64())
        }
    }
}

/// Reads a `u64` from a binary format, where no JavaScript producer can have rounded it.
struct RawVisitor;

impl Visitor<'_> for RawVisitor {
    type Value = Id;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an ID as a u64")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Id, E> {
        Ok(Id::from_u64(v))
    }
}

struct IdVisitor;

impl Visitor<'_> for IdVisitor {
    type Value = Id;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an ID as a decimal string, or as a number no larger than 2^53 - 1")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Id, E> {
        v.parse().map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Id, E> {
        if v > MAX_SAFE {
            return Err(E::custom(format_args!(
                "ID {v} is a number above 2^53 - 1 = {MAX_SAFE}: a JavaScript producer may \
                 already have rounded it; send IDs as strings"
            )));
        }
        Ok(Id::from_u64(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Id, E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => Err(E::custom(format_args!("ID {v} is negative"))),
        }
    }
}

impl<'de> Deserialize<'de> for Id {
    /// In human-readable formats: from a decimal string, or from a number no larger than
    /// 2^53 - 1 (larger numbers are refused: they may have been rounded by a JavaScript
    /// producer). In binary formats: from a `u64`, as [`Serialize`] writes it.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Id, D::Error> {
        if deserializer.is_human_readable() {
            deserializer.deserialize_any(IdVisitor)
        } else {
            deserializer.deserialize_u64(RawVisitor)
        }
    }
}

impl Serialize for OpaqueId {
    /// As an [`Id`]: a decimal string in human-readable formats, a `u64` in binary ones.
    ///
    /// ```
    /// let public = monoflake::OpaqueId::from_u64(175_928_847_299_117_063);
    /// assert_eq!(serde_json::to_string(&public).unwrap(), r#""175928847299117063""#);
    /// ```
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Id::from_u64(self.as_u64()).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for OpaqueId {
    /// As an [`Id`]: from a decimal string, or a number no larger than 2^53 - 1, in
    /// human-readable formats; from a `u64` in binary ones.
    ///
    /// ```
    /// use monoflake::OpaqueId;
    /// let public: OpaqueId = serde_json::from_str(r#""175928847299117063""#).unwrap();
    /// assert_eq!(public.as_u64(), 175_928_847_299_117_063);
    /// // A private ID's type is not a public one's: a struct says which it holds.
    /// #[derive(serde::Deserialize)]
    /// struct Order {
    ///     id: OpaqueId,
    /// }
    /// let order: Order = serde_json::from_str(r#"{"id":"42"}"#).unwrap();
    /// assert_eq!(order.id, OpaqueId::from_u64(42));
    /// ```
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<OpaqueId, D::Error> {
        Id::deserialize(deserializer).map(|id| OpaqueId::from_u64(id.as_u64()))
    }
}

/// `#[serde(with = "monoflake::as_u64")]`: an [`Id`] as a plain number, for consumers that
/// want numbers and hold all 64 bits (not JavaScript).
///
/// ```
/// #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
/// struct Row {
///     #[serde(with = "monoflake::as_u64")]
///     id: monoflake::Id,
/// }
/// let row = Row { id: monoflake::Id::from_u64(175_928_847_299_117_063) };
/// let json = serde_json::to_string(&row).unwrap();
/// assert_eq!(json, r#"{"id":175928847299117063}"#);
/// assert_eq!(serde_json::from_str::<Row>(&json).unwrap(), row);
/// ```
pub mod as_u64 {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::Id;

    /// Serializes the ID as a `u64`.
    ///
    /// # Errors
    ///
    /// The serializer's.
    pub fn serialize<S: Serializer>(id: &Id, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(id.as_u64())
    }

    /// Deserializes the ID from a `u64`.
    ///
    /// # Errors
    ///
    /// The deserializer's, e.g. for a string or a negative number.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Id, D::Error> {
        u64::deserialize(deserializer).map(Id::from_u64)
    }
}
