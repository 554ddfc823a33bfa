//! The version hash (../shared/vectors/README.md §2), written apart from the
//! server's: the suite's hostile peer serves records whose hash must
//! recompute on the server under test (and one whose hash must not).
//!
//! The hash is the SHA-256 of the record's hashed form written as RFC 8785
//! canonical JSON: [`hashed_form`] projects the record, [`canonical_json`]
//! writes it.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The top-level keys a version hash covers.
const HASHED_KEYS: [&str; 8] = [
    "author",
    "id",
    "created_at",
    "version",
    "permissions",
    "type",
    "content",
    "no_content",
];

/// The keys of `version` a hash covers.
const HASHED_VERSION_KEYS: [&str; 3] = ["author", "created_at", "parent_hash"];

/// The `version.hash` of a record in wire form: 64 lowercase hex digits.
pub fn version_hash(record: &Value) -> String {
    let canonical = canonical_json(&hashed_form(record));
    hex::encode(Sha256::digest(canonical.as_bytes()))
}

/// What is hashed of a record: the hashed keys only, `version` without its
/// hash and receipt, dates to the millisecond, and every link below the top
/// level under its `original_entity`.
pub fn hashed_form(record: &Value) -> Value {
    let Some(record) = record.as_object() else {
        return record.clone();
    };
    let mut hashed = Map::new();
    for key in HASHED_KEYS {
        let Some(value) = record.get(key) else {
            continue;
        };
        let mut value = match key {
            "version" => keep_keys(value, &HASHED_VERSION_KEYS),
            _ => value.clone(),
        };
        match key {
            "created_at" => to_milliseconds(&mut value),
            "author" => link_date_to_milliseconds(&mut value),
            "version" => {
                if let Some(date) = value.get_mut("created_at") {
                    to_milliseconds(date);
                }
                if let Some(author) = value.get_mut("author") {
                    link_date_to_milliseconds(author);
                }
            }
            "permissions" => {
                if let Some(permissions) = value.as_object_mut() {
                    permissions
                        .values_mut()
                        .filter_map(Value::as_array_mut)
                        .flatten()
                        .for_each(link_date_to_milliseconds);
                }
            }
            _ => {}
        }
        use_original_entities(&mut value);
        hashed.insert(key.to_owned(), value);
    }
    Value::Object(hashed)
}

fn keep_keys(value: &Value, keys: &[&str]) -> Value {
    match value.as_object() {
        Some(object) => Value::Object(
            object
                .iter()
                .filter(|(key, _)| keys.contains(&key.as_str()))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
        ),
        None => value.clone(),
    }
}

/// A RecordDate cut to 3 fractional digits (truncated, never rounded).
fn to_milliseconds(date: &mut Value) {
    let Some(text) = date.as_str() else {
        return;
    };
    let Some((seconds, fraction)) = text.split_once('.') else {
        return;
    };
    let Some(digits) = fraction.strip_suffix('Z') else {
        return;
    };
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return;
    }
    let millis: String = digits.chars().chain("000".chars()).take(3).collect();
    *date = Value::String(format!("{seconds}.{millis}Z"));
}

/// An entity link's `version_created_at`, to the millisecond.
fn link_date_to_milliseconds(link: &mut Value) {
    if let Some(date) = link.get_mut("version_created_at") {
        to_milliseconds(date);
    }
}

/// Every object with both `entity` and `original_entity`, at any depth of
/// `value` (itself included), takes `original_entity` as its `entity`.
fn use_original_entities(value: &mut Value) {
    match value {
        Value::Object(object) => {
            if object.contains_key("entity")
                && let Some(original) = object.remove("original_entity")
            {
                object.insert("entity".to_owned(), original);
            }
            object.values_mut().for_each(use_original_entities);
        }
        Value::Array(items) => items.iter_mut().for_each(use_original_entities),
        _ => {}
    }
}

/// RFC 8785 (JCS): no whitespace, object keys sorted by UTF-16 code units,
/// minimal string escapes, numbers as ECMAScript writes them.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(number) => out.push_str(&ecmascript_number(number)),
        Value::String(text) => write_string(text, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(object) => {
            let mut entries: Vec<(&String, &Value)> = object.iter().collect();
            entries.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
    }
}

fn write_string(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if c < ' ' => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The largest integer a double holds exactly, 2^53 - 1.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// A JSON number as `Number.prototype.toString` writes its double.
fn ecmascript_number(number: &serde_json::Number) -> String {
    if let Some(integer) = number.as_u64()
        && integer <= MAX_SAFE_INTEGER
    {
        return integer.to_string();
    }
    if let Some(integer) = number.as_i64()
        && integer.unsigned_abs() <= MAX_SAFE_INTEGER
    {
        return integer.to_string();
    }
    let double = number.as_f64().unwrap_or(f64::NAN);
    if double == 0.0 {
        // -0 is written "0".
        return "0".to_owned();
    }
    ryu_js::Buffer::new().format(double).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every case of ../shared/vectors/version-hashes.json: the canonical
    /// text and the hash.
    #[test]
    fn every_vector_hashes_as_expected() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/vectors/version-hashes.json");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let cases: Vec<Value> = serde_json::from_str(&text).expect("the vectors are JSON");
        assert_eq!(cases.len(), 15, "the README counts 15 cases");
        for case in &cases {
            let name = case["name"].as_str().expect("a name");
            let record = &case["record"];
            assert_eq!(
                canonical_json(&hashed_form(record)),
                case["canonical_json"].as_str().expect("canonical_json"),
                "{name}: canonical JSON"
            );
            let expected = case["expected_hash"].as_str().expect("expected_hash");
            assert_eq!(version_hash(record), expected, "{name}: hash");
            assert_eq!(record["version"]["hash"], expected, "{name}: version.hash");
        }
    }

    #[test]
    fn numbers_are_written_as_ecmascript_writes_them() {
        for (json, written) in [
            ("0", "0"),
            ("-0", "0"),
            ("-0.0", "0"),
            ("1.0", "1"),
            ("1E2", "100"),
            ("2.50", "2.5"),
            ("1e20", "100000000000000000000"),
            ("1e21", "1e+21"),
            ("0.000001", "0.000001"),
            ("1e-7", "1e-7"),
            ("9007199254740993", "9007199254740992"),
        ] {
            let value: Value = serde_json::from_str(json).unwrap();
            assert_eq!(canonical_json(&value), written, "{json}");
        }
    }

    #[test]
    fn dates_are_truncated_to_the_millisecond() {
        let mut date = Value::from("2024-05-01T12:34:56.9999999Z");
        to_milliseconds(&mut date);
        assert_eq!(date, "2024-05-01T12:34:56.999Z");
    }
}
