//! Fixed-length lowercase hex identifiers: record ids, client ids, version
//! hashes and blob hashes (PROTOCOL.md §2, spec §4.0). Each is stored as its
//! bytes, so it is `Copy`, compares in the same order as its hex text, and
//! cannot hold anything else.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a text is not a hex identifier of the expected kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected {expected_len} lowercase hex characters")]
pub struct HexIdError {
    /// How many hex characters the identifier has.
    pub expected_len: usize,
}

macro_rules! hex_id {
    ($(#[$doc:meta])* $name:ident, $bytes:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name([u8; $bytes]);

        impl $name {
            /// Length of the hex form.
            pub const HEX_LEN: usize = $bytes * 2;

            /// The identifier of these bytes.
            pub const fn from_bytes(bytes: [u8; $bytes]) -> Self {
                Self(bytes)
            }

            /// The identifier's bytes.
            pub const fn as_bytes(&self) -> &[u8; $bytes] {
                &self.0
            }

            /// The id written as `hex`, for constants: a text that is not
            /// exactly [`Self::HEX_LEN`] lowercase hex characters fails the
            /// build (or panics, outside a constant).
            pub const fn from_hex_const(hex: &str) -> Self {
                let hex = hex.as_bytes();
                assert!(hex.len() == Self::HEX_LEN, "wrong length for a hex id");
                let mut bytes = [0; $bytes];
                let mut at = 0;
                while at < $bytes {
                    bytes[at] = lower_hex_digit(hex[2 * at]) << 4 | lower_hex_digit(hex[2 * at + 1]);
                    at += 1;
                }
                Self(bytes)
            }

            /// Writes the hex form into `buf` and returns it.
            pub fn encode<'b>(&self, buf: &'b mut [u8; $bytes * 2]) -> &'b str {
                encode_lower_hex(&self.0, buf)
            }
        }

        impl FromStr for $name {
            type Err = HexIdError;

            fn from_str(text: &str) -> Result<Self, HexIdError> {
                let mut bytes = [0; $bytes];
                decode_lower_hex(text, &mut bytes)
                    .map(|()| Self(bytes))
                    .ok_or(HexIdError { expected_len: Self::HEX_LEN })
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.encode(&mut [0; $bytes * 2]))
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.encode(&mut [0; $bytes * 2]))
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                super::deserialize_from_str(deserializer)
            }
        }
    };
}

hex_id!(
    /// A record id: 128 bits, written as 32 lowercase hex characters. The host
    /// draws fresh ones from its randomness source.
    RecordId,
    16
);
hex_id!(
    /// An `X-Svc-Client-Id` (spec §4.0): the random 128-bit id a client
    /// draws for itself, as 32 lowercase hex characters. Versions written by
    /// requests carrying it are not sent back to the events streams that
    /// carry the same one (PROTOCOL.md §8).
    ClientId,
    16
);
hex_id!(
    /// A version hash: the SHA-256 of a version's canonical form, as 64
    /// lowercase hex characters (see [`crate::model::hash`]).
    VersionHash,
    32
);
hex_id!(
    /// A blob hash: the SHA-256 of the blob's bytes, as 64 lowercase hex characters.
    BlobHash,
    32
);

/// One lowercase hex digit's value, for [`RecordId::from_hex_const`] and its kin.
const fn lower_hex_digit(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        _ => panic!("not a lowercase hex digit"),
    }
}

fn encode_lower_hex<'b>(bytes: &[u8], buf: &'b mut [u8]) -> &'b str {
    // `hex` writes lowercase and only fails on a length mismatch, which the
    // callers' array sizes rule out.
    match hex::encode_to_slice(bytes, buf) {
        Ok(()) => std::str::from_utf8(buf).unwrap_or_default(),
        Err(_) => "",
    }
}

/// Decodes `text` into `out` if it is exactly `2 * out.len()` lowercase hex
/// characters. (`hex` alone would also take uppercase.)
fn decode_lower_hex(text: &str, out: &mut [u8]) -> Option<()> {
    let lowercase_hex = |b: &u8| matches!(b, b'0'..=b'9' | b'a'..=b'f');
    if text.len() != out.len() * 2 || !text.bytes().all(|b| lowercase_hex(&b)) {
        return None;
    }
    hex::decode_to_slice(text, out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_constant_id_is_the_parsed_one() {
        let hex = "0123456789abcdef0f1e2d3c4b5a6978";
        assert_eq!(RecordId::from_hex_const(hex), hex.parse().unwrap());
        assert_eq!(RecordId::from_hex_const(hex).to_string(), hex);
    }
}
