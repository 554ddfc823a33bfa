//! Blobs (PROTOCOL.md §9, spec §4.5): what an upload must carry and what it
//! answers, which blob link a download goes through, and the headers of the
//! download (`Range`, `Content-Range`, `Content-Disposition`,
//! `Cache-Control`).
//!
//! # Upload
//!
//! `POST /api/{user}/blobs`, by an authorized app:
//! 1. [`check_upload_content_type`] and [`check_upload_length`], before
//!    reading the body;
//! 2. read exactly the announced length (a body that ends early or runs on
//!    is a broken request, not a smaller blob), hashing it with SHA-256;
//! 3. store the bytes under their hash and record the upload in the user's
//!    store with [`upload_expiry`];
//! 4. answer 200 with [`UploadResponse`].
//!
//! # Download
//!
//! `GET …/records/{entity}/{record_id}/blobs/{blob_hash}/{file_name}` (or
//! the same through `…/versions/{version_hash}`), after the host has read
//! the record (or that version) and checked the requester may read it:
//! 1. [`find_indexed_blob_link`] (or [`find_blob_link`]): `None` is
//!    `blob/404-not-found`, and so is a blob missing from storage;
//! 2. [`parse_range`] against the blob's size: 200 with the whole blob, 206
//!    with [`content_range`], or 416 (`blob/416-range-not-satisfiable`) with
//!    [`unsatisfied_content_range`];
//! 3. headers: `Content-Type` from the link, [`content_disposition`],
//!    `Accept-Ranges: bytes` ([`ACCEPT_RANGES`]), and `Cache-Control` from
//!    [`blob_audience`] through
//!    [`blob_cache_control`](crate::service::http::blob_cache_control). Error responses carry
//!    `Cache-Control: no-cache` like every other response.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::model::{BlobHash, BlobLink, FileName, MediaType, Record, RecordDate};
use crate::problem::{Problem, ProblemType};
use crate::query::IndexEntry;
use crate::service::http::BlobAudience;
use crate::service::limits::{Limits, check_body_len};

/// How long an uploaded blob that no record links is kept: one hour.
pub const UNLINKED_BLOB_LIFETIME_MS: i64 = 3_600_000;

/// The `Accept-Ranges` value of every successful download.
pub const ACCEPT_RANGES: &str = "bytes";

/// When a blob uploaded at `uploaded_at` expires unless a record links it
/// first: [`UNLINKED_BLOB_LIFETIME_MS`] later, at full precision. Past the
/// last representable instant (the end of year 9999) it is that instant.
pub fn upload_expiry(uploaded_at: RecordDate) -> RecordDate {
    // The lifetime in ticks, taken from the date type so the unit is not restated here.
    let lifetime =
        RecordDate::from_unix_millis(UNLINKED_BLOB_LIFETIME_MS).map_or(0, RecordDate::unix_ticks);
    RecordDate::from_unix_ticks(uploaded_at.unix_ticks().saturating_add(lifetime))
        .unwrap_or_else(|_| last_instant())
}

fn last_instant() -> RecordDate {
    "9999-12-31T23:59:59.9999999Z"
        .parse()
        .expect("the last instant of year 9999 is a RecordDate")
}

/// Checks the `Content-Type` of an upload: it is the blob's media type and
/// is required; any parsable media type is accepted, and kept as sent.
/// Missing or unparsable is `request/415-unsupported-media-type`.
pub fn check_upload_content_type(content_type: Option<&str>) -> Result<MediaType, Problem> {
    let problem =
        |detail: String| Err(Problem::new(ProblemType::UnsupportedMediaType).with_detail(detail));
    match content_type {
        None => problem("a blob upload needs a Content-Type: the blob's media type".to_owned()),
        Some(text) => match text.parse() {
            Ok(media_type) => Ok(media_type),
            Err(_) => problem(format!("`{text}` is not a media type (type/subtype)")),
        },
    }
}

/// Checks the `Content-Length` of an upload (`None`: the request has none,
/// for example a chunked body): required (`blob/411-length-required`) and
/// within [`Limits::blob_bytes`] (`request/413-body-too-large`). Returns
/// the length the host must then read, exactly.
pub fn check_upload_length(content_length: Option<u64>, limits: &Limits) -> Result<u64, Problem> {
    let len = content_length.ok_or_else(|| {
        Problem::new(ProblemType::LengthRequired)
            .with_detail("a blob upload needs a Content-Length")
    })?;
    check_body_len(len, limits.blob_bytes)?;
    Ok(len)
}

/// An upload as it arrives: counts and hashes each chunk the host reads,
/// and holds it to exactly the declared length (PROTOCOL.md §9). The host
/// stops reading at the first refusal, so a body longer than declared is
/// never kept past its declared length.
#[derive(Debug, Clone)]
pub struct UploadMeter {
    declared: u64,
    received: u64,
    hasher: Sha256,
}

/// What an upload held, once its meter saw the whole of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// The SHA-256 of the bytes received.
    pub hash: BlobHash,
    /// How many bytes were received.
    pub size: u64,
}

/// An upload that is not the length it declared: `request/400-invalid-body`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the body is {received} bytes, not the {declared} its Content-Length declares")]
pub struct LengthMismatch {
    /// The length the `Content-Length` header declared.
    pub declared: u64,
    /// What had arrived when the meter refused it (at least one byte past
    /// `declared`, or all of a short body).
    pub received: u64,
}

impl From<&LengthMismatch> for Problem {
    fn from(error: &LengthMismatch) -> Self {
        Problem::new(ProblemType::InvalidBody).with_detail(error.to_string())
    }
}

impl UploadMeter {
    /// A meter for an upload of `declared` bytes (from
    /// [`check_upload_length`]).
    pub fn new(declared: u64) -> Self {
        UploadMeter {
            declared,
            received: 0,
            hasher: Sha256::new(),
        }
    }

    /// The length the upload declared.
    pub fn declared(&self) -> u64 {
        self.declared
    }

    /// Takes the next chunk; refuses the upload once it passes its
    /// declared length.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), LengthMismatch> {
        self.received = self.received.saturating_add(chunk.len() as u64);
        if self.received > self.declared {
            return Err(self.mismatch());
        }
        self.hasher.update(chunk);
        Ok(())
    }

    /// The upload's hash and size, once the body has ended: refused if it
    /// ended short of its declared length.
    pub fn finish(self) -> Result<Received, LengthMismatch> {
        if self.received != self.declared {
            return Err(self.mismatch());
        }
        Ok(Received {
            hash: BlobHash::from_bytes(self.hasher.finalize().into()),
            size: self.received,
        })
    }

    fn mismatch(&self) -> LengthMismatch {
        LengthMismatch {
            declared: self.declared,
            received: self.received,
        }
    }
}

/// The answer to an upload: `{"hash", "size", "expires_at"}`, the date in
/// the wire form of [`RecordDate`].
///
/// `expires_at` is when the blob is collected unless a record links it by
/// then; once linked it is kept, whatever this date says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct UploadResponse {
    /// The blob's SHA-256.
    pub hash: BlobHash,
    /// The blob's size in bytes.
    pub size: u64,
    /// When the blob is collected unless a record links it by then.
    pub expires_at: RecordDate,
}

impl UploadResponse {
    /// The answer for a blob of `size` bytes with this hash, uploaded at `uploaded_at`.
    pub fn new(hash: BlobHash, size: u64, uploaded_at: RecordDate) -> Self {
        Self {
            hash,
            size,
            expires_at: upload_expiry(uploaded_at),
        }
    }

    /// The JSON body.
    pub fn to_json(&self) -> String {
        // A hash, an integer and a date: serializing cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// What a download answers, given its `Range` header and the blob's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeAnswer {
    /// 200 with the whole blob: no `Range`, or one to ignore.
    Whole,
    /// 206 with bytes `start..=end_inclusive` and [`content_range`]. Always
    /// `start <= end_inclusive < size`.
    Partial {
        /// The first byte served.
        start: u64,
        /// The last byte served.
        end_inclusive: u64,
    },
    /// 416 (`blob/416-range-not-satisfiable`) with [`unsatisfied_content_range`].
    Unsatisfiable,
}

impl RangeAnswer {
    /// The response status.
    pub fn status(self) -> u16 {
        match self {
            RangeAnswer::Whole => 200,
            RangeAnswer::Partial { .. } => 206,
            RangeAnswer::Unsatisfiable => ProblemType::RangeNotSatisfiable.status(),
        }
    }
}

/// Reads a `Range` header (RFC 9110 §14.1.2, §14.2) for a blob of `size` bytes.
///
/// - Exactly one range, `bytes=a-b`, `bytes=a-` or `bytes=-n`, gives
///   [`RangeAnswer::Partial`], with `b` clamped to the last byte and `-n`
///   longer than the blob meaning the whole blob from byte 0.
/// - One well-formed range that selects no byte is
///   [`RangeAnswer::Unsatisfiable`]: `a >= size`, or `-0`.
/// - Everything else is ignored, [`RangeAnswer::Whole`], as RFC 9110 lets a
///   server do: no header, several ranges (PROTOCOL.md §9; the list is
///   scanned without allocating and without parsing past the second
///   range, however many there are), a unit other than `bytes` (compared
///   without regard to case), and anything malformed, including `a-b` with
///   `b < a`. Empty list elements (`bytes=0-9,`) are skipped, as RFC 9110
///   §5.6.1 asks.
///
/// An empty blob (`size` 0) has no byte to select: `a-` and `a-b` are
/// unsatisfiable, as is `-0`. RFC 9110 counts `-n` with `n > 0` as
/// satisfiable even then, but no `Content-Range` can describe a part of
/// nothing, so it answers [`RangeAnswer::Whole`]: 200 with the empty body.
///
/// Positions of any length parse: a number past `u64::MAX` is compared
/// exactly, never wrapped (a huge `a` is unsatisfiable, a huge `b` or `n`
/// means "to the end").
pub fn parse_range(header: Option<&str>, size: u64) -> RangeAnswer {
    let Some(spec) = header.and_then(single_range_spec) else {
        return RangeAnswer::Whole;
    };
    let Some((first, last)) = spec.split_once('-') else {
        return RangeAnswer::Whole;
    };
    if !all_digits(last) || (!first.is_empty() && !all_digits(first)) {
        return RangeAnswer::Whole;
    }
    let last_byte = size.checked_sub(1);
    if first.is_empty() {
        // A suffix range: the last `n` bytes.
        if last.is_empty() {
            return RangeAnswer::Whole;
        }
        let n = saturating_decimal(last);
        return match (n, last_byte) {
            (0, _) => RangeAnswer::Unsatisfiable,
            (_, None) => RangeAnswer::Whole,
            (n, Some(end)) => RangeAnswer::Partial {
                start: size - n.min(size),
                end_inclusive: end,
            },
        };
    }
    if !last.is_empty() && decimal_less(last, first) {
        return RangeAnswer::Whole;
    }
    let start = saturating_decimal(first);
    match last_byte {
        Some(end) if start <= end => RangeAnswer::Partial {
            start,
            end_inclusive: if last.is_empty() {
                end
            } else {
                saturating_decimal(last).min(end)
            },
        },
        _ => RangeAnswer::Unsatisfiable,
    }
}

/// The one range-spec of a `bytes=` header, or `None` for another unit, a
/// malformed header, no range or several.
fn single_range_spec(header: &str) -> Option<&str> {
    let (unit, set) = header.trim_matches(is_ows).split_once('=')?;
    if !unit.eq_ignore_ascii_case("bytes") {
        return None;
    }
    let mut specs = set
        .split(',')
        .map(|spec| spec.trim_matches(is_ows))
        .filter(|spec| !spec.is_empty());
    let spec = specs.next()?;
    specs.next().is_none().then_some(spec)
}

fn is_ows(c: char) -> bool {
    c == ' ' || c == '\t'
}

fn all_digits(text: &str) -> bool {
    text.bytes().all(|b| b.is_ascii_digit())
}

/// The value of a non-empty run of ASCII digits, `u64::MAX` if larger.
fn saturating_decimal(digits: &str) -> u64 {
    digits.bytes().fold(0u64, |value, digit| {
        value
            .saturating_mul(10)
            .saturating_add(u64::from(digit - b'0'))
    })
}

/// Whether decimal `a` is less than decimal `b`, both non-empty runs of
/// ASCII digits of any length.
fn decimal_less(a: &str, b: &str) -> bool {
    let (a, b) = (a.trim_start_matches('0'), b.trim_start_matches('0'));
    (a.len(), a) < (b.len(), b)
}

/// The `Content-Range` of a 206: `bytes <start>-<end_inclusive>/<size>`.
pub fn content_range(start: u64, end_inclusive: u64, size: u64) -> String {
    format!("bytes {start}-{end_inclusive}/{size}")
}

/// The `Content-Range` of a 416: `bytes */<size>`.
pub fn unsatisfied_content_range(size: u64) -> String {
    format!("bytes */{size}")
}

/// RFC 8187 `attr-char`s stay as they are in `filename*`; every other byte
/// is percent-encoded.
const NOT_ATTR_CHAR: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'!')
    .remove(b'#')
    .remove(b'$')
    .remove(b'&')
    .remove(b'+')
    .remove(b'-')
    .remove(b'.')
    .remove(b'^')
    .remove(b'_')
    .remove(b'`')
    .remove(b'|')
    .remove(b'~');

/// The `Content-Disposition` of a download: `attachment; filename=<name>`.
///
/// The name is written as it is when it is an RFC 9110 token, else as a
/// quoted-string with `"` and `\` escaped. A name that is not printable
/// ASCII gets an ASCII fallback in `filename` (each other character
/// replaced by `_`) and the exact name in `filename*=UTF-8''…`, percent-encoded
/// outside RFC 8187's `attr-char`s (RFC 6266 §4.3: clients that understand
/// `filename*` prefer it). No control character, CR or LF can reach the
/// header: the fallback replaces them and `filename*` encodes them.
pub fn content_disposition(name: &FileName) -> String {
    let name = name.as_str();
    let printable = |c: char| matches!(c, ' '..='~');
    let mut header = String::with_capacity(name.len() + 32);
    header.push_str("attachment; filename=");
    if name.chars().all(printable) {
        push_token_or_quoted(&mut header, name);
    } else {
        let fallback: String = name
            .chars()
            .map(|c| if printable(c) { c } else { '_' })
            .collect();
        push_token_or_quoted(&mut header, &fallback);
        header.push_str("; filename*=UTF-8''");
        header.extend(utf8_percent_encode(name, NOT_ATTR_CHAR));
    }
    header
}

/// Appends printable ASCII `text` as a token when it is one, else as a quoted-string.
fn push_token_or_quoted(header: &mut String, text: &str) {
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if !text.is_empty() && text.bytes().all(tchar) {
        header.push_str(text);
        return;
    }
    header.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            header.push('\\');
        }
        header.push(c);
    }
    header.push('"');
}

/// The blob link a download goes through, found by its shape: the first
/// object in the record's content (document order, depth first) of exactly
/// the blob link shape `{hash, type, name, size?}` with this hash and
/// name. A tombstone serves no blob: `None`.
///
/// This reads the record alone, without its schema, so it also takes an
/// object of that shape that the type's schema does not declare as a blob
/// link. Only the record's writers (the user's own apps) can place such an
/// object, and the blob must still be in the user's store to be served;
/// still, a host that has the version's stored links (every version read
/// returns them) should use [`find_indexed_blob_link`], which goes by the
/// schema's verdict.
///
/// `name` is the percent-decoded `{file_name}` path segment, compared
/// exactly. The link is returned by value: content is JSON, so the record
/// holds no [`BlobLink`] to borrow.
pub fn find_blob_link(record: &Record, hash: &BlobHash, name: &str) -> Option<BlobLink> {
    let content = record.content()?;
    let hash_text = hash.to_string();
    let mut pending: Vec<&Value> = vec![content.as_value()];
    while let Some(value) = pending.pop() {
        if let Some(link) = blob_link_in(value, &hash_text, name) {
            return Some(link);
        }
        // Children pushed in reverse, so they are visited in document order.
        match value {
            Value::Object(object) => pending.extend(object.values().rev()),
            Value::Array(items) => pending.extend(items.iter().rev()),
            _ => {}
        }
    }
    None
}

/// The blob link a download goes through, found where the record's schema
/// put its blob links: `entries` are the version's link index entries
/// (what [`crate::store::read_version`] returns beside the record, or
/// [`crate::query::index_entries`] of its validated links). Of the content
/// paths that hold a link to `hash`, the first object there whose `name` is
/// `name` is the link. A tombstone serves no blob: `None`.
///
/// Preferred over [`find_blob_link`]: an object that merely has the shape
/// of a blob link, where the schema declares none, is never taken.
pub fn find_indexed_blob_link(
    record: &Record,
    entries: &[IndexEntry],
    hash: &BlobHash,
    name: &str,
) -> Option<BlobLink> {
    let content = record.content()?.as_value();
    let hash_text = hash.to_string();
    // The index key of a blob link, as `query::index_entries` writes it.
    let key = format!("b:{hash_text}");
    entries
        .iter()
        .filter(|entry| entry.key == key)
        .filter_map(|entry| entry.path.strip_prefix("$['content']"))
        .find_map(|path| {
            values_at(content, path)
                .into_iter()
                .find_map(|value| blob_link_in(value, &hash_text, name))
        })
}

/// The values at a link path (the part after `$['content']`) inside
/// `content`: `['key']` steps into an object, `[*]` into every item of an
/// array or value of an object. A malformed path finds nothing.
fn values_at<'v>(content: &'v Value, mut path: &str) -> Vec<&'v Value> {
    let mut values = vec![content];
    while !path.is_empty() {
        if let Some(rest) = path.strip_prefix("[*]") {
            let mut children = Vec::new();
            for value in values {
                match value {
                    Value::Array(items) => children.extend(items),
                    Value::Object(object) => children.extend(object.values()),
                    _ => {}
                }
            }
            values = children;
            path = rest;
        } else {
            let Some((key, rest)) = path
                .strip_prefix("['")
                .and_then(|inner| inner.split_once("']"))
            else {
                return Vec::new();
            };
            values = values
                .into_iter()
                .filter_map(|value| value.as_object()?.get(key))
                .collect();
            path = rest;
        }
    }
    values
}

/// `value` as a blob link, if it is one with this hash and name.
fn blob_link_in(value: &Value, hash: &str, name: &str) -> Option<BlobLink> {
    let object = value.as_object()?;
    if object.get("hash")?.as_str()? != hash || object.get("name")?.as_str()? != name {
        return None;
    }
    BlobLink::deserialize(value).ok()
}

/// Who a download of a blob of `record` is for, which decides its
/// `Cache-Control` through
/// [`blob_cache_control`](crate::service::http::blob_cache_control): anyone for a public
/// record; else the signed requester; else the bearer of a token expiring
/// at `via_bearer_expiry`, for the whole seconds left until then (none
/// once it has passed).
///
/// Call it once the request is authorized to read the record; a private
/// record is never served unauthenticated.
pub fn blob_audience(
    record: &Record,
    via_bearer_expiry: Option<RecordDate>,
    now: RecordDate,
) -> BlobAudience {
    if record.permissions.is_public() {
        return BlobAudience::Public;
    }
    match via_bearer_expiry {
        None => BlobAudience::PrivateSigned,
        Some(expiry) => BlobAudience::PrivateBearer {
            remaining_secs: expiry
                .unix_millis()
                .saturating_sub(now.unix_millis())
                .max(0)
                / 1_000,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(header: &str, size: u64) -> RangeAnswer {
        parse_range(Some(header), size)
    }

    fn partial(start: u64, end_inclusive: u64) -> RangeAnswer {
        RangeAnswer::Partial {
            start,
            end_inclusive,
        }
    }

    #[test]
    fn one_range_of_each_form_is_partial() {
        assert_eq!(range("bytes=0-9", 100), partial(0, 9));
        assert_eq!(range("bytes=10-", 100), partial(10, 99));
        assert_eq!(range("bytes=-10", 100), partial(90, 99));
        assert_eq!(range("bytes=99-99", 100), partial(99, 99));
        assert_eq!(range("BYTES=0-0", 100), partial(0, 0));
        assert_eq!(range(" bytes=1-2 ", 100), partial(1, 2));
        assert_eq!(range("bytes=1-2,", 100), partial(1, 2));
        assert_eq!(range("bytes= 1-2 , ,", 100), partial(1, 2));
        assert_eq!(range("bytes=007-0010", 100), partial(7, 10));
    }

    #[test]
    fn ends_are_clamped_to_the_blob() {
        assert_eq!(range("bytes=90-1000", 100), partial(90, 99));
        assert_eq!(range("bytes=-1000", 100), partial(0, 99));
        assert_eq!(
            range("bytes=5-99999999999999999999999999", 100),
            partial(5, 99)
        );
        assert_eq!(
            range("bytes=-99999999999999999999999999", 100),
            partial(0, 99)
        );
        assert_eq!(range("bytes=0-", u64::MAX), partial(0, u64::MAX - 1));
    }

    #[test]
    fn ranges_selecting_no_byte_are_unsatisfiable() {
        assert_eq!(range("bytes=100-", 100), RangeAnswer::Unsatisfiable);
        assert_eq!(range("bytes=100-200", 100), RangeAnswer::Unsatisfiable);
        assert_eq!(range("bytes=-0", 100), RangeAnswer::Unsatisfiable);
        assert_eq!(
            range("bytes=99999999999999999999999999-", 100),
            RangeAnswer::Unsatisfiable
        );
        assert_eq!(RangeAnswer::Unsatisfiable.status(), 416);
    }

    #[test]
    fn an_empty_blob_has_no_part() {
        assert_eq!(range("bytes=0-", 0), RangeAnswer::Unsatisfiable);
        assert_eq!(range("bytes=0-0", 0), RangeAnswer::Unsatisfiable);
        assert_eq!(range("bytes=-0", 0), RangeAnswer::Unsatisfiable);
        assert_eq!(range("bytes=-5", 0), RangeAnswer::Whole);
    }

    #[test]
    fn anything_else_is_ignored() {
        for header in [
            "",
            "bytes",
            "bytes=",
            "bytes=,",
            "bytes=-",
            "bytes=5",
            "bytes=a-b",
            "bytes=1-2-3",
            "bytes=+1-2",
            "bytes=1 -2",
            "bytes=9-1",
            "bytes=99999999999999999999999999-99999999999999999999999998",
            "bytes = 1-2",
            "items=0-1",
            "bytes=0-1,2-3",
            "bytes=0-1,garbage",
            "bytes=0-٣",
        ] {
            assert_eq!(range(header, 100), RangeAnswer::Whole, "{header:?}");
        }
        assert_eq!(parse_range(None, 100), RangeAnswer::Whole);
    }

    #[test]
    fn a_thousand_ranges_are_ignored() {
        let header = format!("bytes={}", vec!["0-1"; 1_000].join(","));
        assert_eq!(range(&header, 100), RangeAnswer::Whole);
    }

    #[test]
    fn content_ranges() {
        assert_eq!(content_range(0, 9, 100), "bytes 0-9/100");
        assert_eq!(unsatisfied_content_range(100), "bytes */100");
    }

    fn disposition(name: &str) -> String {
        content_disposition(&name.parse().unwrap())
    }

    #[test]
    fn tokens_go_as_they_are_and_other_names_are_quoted() {
        assert_eq!(disposition("photo.jpg"), "attachment; filename=photo.jpg");
        assert_eq!(
            disposition("my photo.jpg"),
            "attachment; filename=\"my photo.jpg\""
        );
        assert_eq!(
            disposition("say \"hi\".txt"),
            "attachment; filename=\"say \\\"hi\\\".txt\""
        );
        assert_eq!(disposition("a;b=c"), "attachment; filename=\"a;b=c\"");
    }

    #[test]
    fn names_beyond_ascii_get_a_fallback_and_filename_star() {
        assert_eq!(
            disposition("café.txt"),
            "attachment; filename=caf_.txt; filename*=UTF-8''caf%C3%A9.txt"
        );
        assert_eq!(
            disposition("résumé final.pdf"),
            "attachment; filename=\"r_sum_ final.pdf\"; filename*=UTF-8''r%C3%A9sum%C3%A9%20final.pdf"
        );
        // U+2028 is not a control character, so a FileName may hold it.
        let header = disposition("a\u{2028}b");
        assert_eq!(
            header,
            "attachment; filename=a_b; filename*=UTF-8''a%E2%80%A8b"
        );
        assert!(header.bytes().all(|b| (b' '..=b'~').contains(&b)));
    }

    #[test]
    fn uploads_expire_an_hour_later() {
        let at: RecordDate = "2026-01-01T00:00:00.1234567Z".parse().unwrap();
        assert_eq!(
            upload_expiry(at).to_string(),
            "2026-01-01T01:00:00.1234567Z"
        );
        let late: RecordDate = "9999-12-31T23:30:00Z".parse().unwrap();
        assert_eq!(upload_expiry(late), last_instant());
    }

    #[test]
    fn uploads_need_a_media_type_and_a_length() {
        assert_eq!(
            check_upload_content_type(Some("image/png"))
                .unwrap()
                .as_str(),
            "image/png"
        );
        assert_eq!(
            check_upload_content_type(Some("text/plain; charset=utf-8"))
                .unwrap()
                .essence(),
            "text/plain"
        );
        for bad in [None, Some(""), Some("png"), Some("image/")] {
            assert_eq!(
                check_upload_content_type(bad).unwrap_err().kind,
                ProblemType::UnsupportedMediaType,
                "{bad:?}"
            );
        }
        let limits = Limits::default();
        assert_eq!(
            check_upload_length(None, &limits).unwrap_err().kind,
            ProblemType::LengthRequired
        );
        assert_eq!(check_upload_length(Some(0), &limits), Ok(0));
        assert_eq!(check_upload_length(Some(64 << 20), &limits), Ok(64 << 20));
        assert_eq!(
            check_upload_length(Some((64 << 20) + 1), &limits)
                .unwrap_err()
                .kind,
            ProblemType::BodyTooLarge
        );
        let unlimited = Limits {
            blob_bytes: None,
            ..Limits::default()
        };
        assert_eq!(
            check_upload_length(Some(u64::MAX), &unlimited),
            Ok(u64::MAX)
        );
    }
}
