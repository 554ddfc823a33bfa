//! RFC 8785 (JCS) canonical JSON: no whitespace, object keys sorted by UTF-16
//! code units, strings escaped minimally, numbers written the way ECMAScript's
//! `Number.prototype.toString` writes the IEEE-754 double. That last part is
//! the hard one and comes from `ryu-js`; the rest is this module.
//!
//! The writer works on borrowed values and writes straight into one buffer,
//! so hashing a version allocates little beyond its output.

use std::cmp::Ordering;

use serde_json::{Map, Number, Value};

/// The canonical JSON of `value`.
pub fn to_canonical_json(value: &Value) -> String {
    let mut out = Vec::with_capacity(128);
    write_value(&mut out, value, ObjectRule::AsIs);
    // Only valid UTF-8 is ever written: JSON punctuation and whole `str`s.
    String::from_utf8(out).unwrap_or_default()
}

/// How objects inside a value are written.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ObjectRule {
    AsIs,
    /// An object holding both `entity` and `original_entity` is written with
    /// `entity` set to the `original_entity` value and without that key
    /// (version hashes, `vectors/README.md` §2 step 4).
    OriginalEntity,
}

pub(crate) fn write_value(out: &mut Vec<u8>, value: &Value, rule: ObjectRule) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(number) => write_number(out, number),
        Value::String(text) => write_string(out, text),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item, rule);
            }
            out.push(b']');
        }
        Value::Object(map) => write_object(out, map, rule),
    }
}

pub(crate) fn write_object(out: &mut Vec<u8>, map: &Map<String, Value>, rule: ObjectRule) {
    let original_entity = match rule {
        ObjectRule::OriginalEntity if map.contains_key("entity") => map.get("original_entity"),
        _ => None,
    };
    let mut entries: Vec<(&str, &Value)> = map
        .iter()
        .filter(|(key, _)| original_entity.is_none() || key.as_str() != "original_entity")
        .map(|(key, value)| match original_entity {
            Some(original) if key == "entity" => (key.as_str(), original),
            _ => (key.as_str(), value),
        })
        .collect();
    entries.sort_unstable_by(|a, b| utf16_cmp(a.0, b.0));

    out.push(b'{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string(out, key);
        out.push(b':');
        write_value(out, value, rule);
    }
    out.push(b'}');
}

/// The order of RFC 8785 §3.2.3: by UTF-16 code units, which differs from
/// code point order only between U+E000..U+FFFF and the supplementary planes.
pub(crate) fn utf16_cmp(a: &str, b: &str) -> Ordering {
    if a.is_ascii() && b.is_ascii() {
        return a.cmp(b);
    }
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Writes a JSON string, escaping only `"`, `\` and U+0000..U+001F.
pub(crate) fn write_string(out: &mut Vec<u8>, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = text.as_bytes();
    let mut start = 0;
    for (i, &byte) in bytes.iter().enumerate() {
        let escape: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\x08' => b"\\b",
            b'\t' => b"\\t",
            b'\n' => b"\\n",
            b'\x0c' => b"\\f",
            b'\r' => b"\\r",
            0x00..=0x1f => &[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0xf)],
            ],
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        out.extend_from_slice(escape);
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Writes a number as ECMAScript writes the nearest double: integers beyond
/// ±2^53 lose precision exactly as RFC 8785 says they must.
fn write_number(out: &mut Vec<u8>, number: &Number) {
    // serde_json numbers are always finite; as_f64 is Some for every kind.
    let value = number.as_f64().unwrap_or(0.0);
    if value == 0.0 {
        // Both zeros are written "0".
        out.push(b'0');
    } else {
        out.extend_from_slice(ryu_js::Buffer::new().format_finite(value).as_bytes());
    }
}

/// Writes an object whose keys the caller supplies in canonical order, for
/// typed values whose keys are known in advance.
pub(crate) struct ObjectWriter<'o> {
    out: &'o mut Vec<u8>,
    previous_key: Option<&'static str>,
}

impl<'o> ObjectWriter<'o> {
    pub(crate) fn begin(out: &'o mut Vec<u8>) -> Self {
        out.push(b'{');
        Self {
            out,
            previous_key: None,
        }
    }

    /// Writes `"key":` (after a comma if needed) and returns the buffer for the value.
    pub(crate) fn key(&mut self, key: &'static str) -> &mut Vec<u8> {
        if let Some(previous) = self.previous_key {
            debug_assert_eq!(
                utf16_cmp(previous, key),
                Ordering::Less,
                "keys out of order"
            );
            self.out.push(b',');
        }
        self.previous_key = Some(key);
        write_string(self.out, key);
        self.out.push(b':');
        self.out
    }

    pub(crate) fn end(self) {
        self.out.push(b'}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_sort_by_utf16_code_units() {
        let value = json!({"\u{FB01}": 1, "\u{1F600}": 2, "a": 3, "": 4});
        assert_eq!(
            to_canonical_json(&value),
            "{\"\":4,\"a\":3,\"\u{1F600}\":2,\"\u{FB01}\":1}"
        );
    }

    #[test]
    fn controls_escape_with_lowercase_hex_and_the_rest_stays_raw() {
        let value = json!("\u{0}\u{1f}\u{7f}\u{2028}/é\"\\\n");
        assert_eq!(
            to_canonical_json(&value),
            "\"\\u0000\\u001f\u{7f}\u{2028}/é\\\"\\\\\\n\""
        );
    }

    #[test]
    fn numbers_follow_ecmascript() {
        let value: Value =
            serde_json::from_str("[-0, -0.0, 1.0, 1E2, 1e21, 1e-7, 0.000001, 9007199254740993]")
                .unwrap();
        assert_eq!(
            to_canonical_json(&value),
            "[0,0,1,100,1e+21,1e-7,0.000001,9007199254740992]"
        );
    }
}
