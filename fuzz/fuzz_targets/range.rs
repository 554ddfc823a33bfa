//! The `Range` header of blob downloads on arbitrary text, for a blob size
//! taken from the first 8 bytes (little-endian; the rest is the header).
//! The answer must be deterministic, and a partial answer must lie within
//! the blob: `start <= end_inclusive < size`. A partial answer is what its
//! own canonical header (`bytes=start-end`) asks for. An unsatisfiable
//! range stays unsatisfiable for a smaller blob. A header of the plain
//! forms `bytes=a-b`, `bytes=a-` and `bytes=-n` must answer what RFC 9110
//! says, computed here independently with wide integers.

#![no_main]

use folio_core::service::blob::{RangeAnswer, content_range, parse_range};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let (size, header) = data.split_at(8);
    let mut size = u64::from_le_bytes(size.try_into().expect("8 bytes"));
    // Mostly small sizes, where ranges land inside the blob.
    if size & (1 << 63) == 0 {
        size %= 4096;
    }
    let Ok(header) = std::str::from_utf8(header) else {
        return;
    };

    assert_eq!(
        parse_range(None, size),
        RangeAnswer::Whole,
        "no header, the whole blob"
    );
    let answer = parse_range(Some(header), size);
    assert_eq!(answer, parse_range(Some(header), size), "deterministic");
    match answer {
        RangeAnswer::Partial {
            start,
            end_inclusive,
        } => {
            assert!(start <= end_inclusive, "{header:?} for {size}: {answer:?}");
            assert!(end_inclusive < size, "{header:?} for {size}: {answer:?}");
            assert_eq!(answer.status(), 206);
            assert_eq!(
                content_range(start, end_inclusive, size),
                format!("bytes {start}-{end_inclusive}/{size}")
            );
            let canonical = format!("bytes={start}-{end_inclusive}");
            assert_eq!(
                parse_range(Some(&canonical), size),
                answer,
                "{canonical} asks the same"
            );
        }
        RangeAnswer::Unsatisfiable => {
            assert_eq!(answer.status(), 416);
            for smaller in [0, size / 2, size.saturating_sub(1)] {
                assert_eq!(
                    parse_range(Some(header), smaller),
                    RangeAnswer::Unsatisfiable,
                    "{header:?} is unsatisfiable for {size} but not for {smaller}"
                );
            }
        }
        RangeAnswer::Whole => assert_eq!(answer.status(), 200),
    }
    if let Some(expected) = reference(header, size) {
        assert_eq!(answer, expected, "{header:?} for a blob of {size} bytes");
    }
});

/// RFC 9110 §14.1.2 for the plain one-range forms, with numbers of up to 30
/// digits in u128 (past u64, exactly); `None` for any other text.
fn reference(header: &str, size: u64) -> Option<RangeAnswer> {
    let spec = header.strip_prefix("bytes=")?;
    let (first, last) = spec.split_once('-')?;
    let number = |text: &str| -> Option<u128> {
        (!text.is_empty() && text.len() <= 30 && text.bytes().all(|b| b.is_ascii_digit()))
            .then(|| text.parse().ok())
            .flatten()
    };
    let size = u128::from(size);
    let partial = |start: u128, end: u128| RangeAnswer::Partial {
        start: u64::try_from(start).expect("within the size"),
        end_inclusive: u64::try_from(end).expect("within the size"),
    };
    Some(match (first.is_empty(), last.is_empty()) {
        // `-n`: the last n bytes; none is unsatisfiable; an empty blob is sent whole.
        (true, false) => {
            let n = number(last)?;
            if n == 0 {
                RangeAnswer::Unsatisfiable
            } else if size == 0 {
                RangeAnswer::Whole
            } else {
                partial(size - n.min(size), size - 1)
            }
        }
        // `a-`: from a to the end.
        (false, true) => {
            let a = number(first)?;
            if a >= size {
                RangeAnswer::Unsatisfiable
            } else {
                partial(a, size - 1)
            }
        }
        // `a-b`: b before a is invalid and ignored.
        (false, false) => {
            let (a, b) = (number(first)?, number(last)?);
            if b < a {
                RangeAnswer::Whole
            } else if a >= size {
                RangeAnswer::Unsatisfiable
            } else {
                partial(a, b.min(size - 1))
            }
        }
        (true, true) => return None,
    })
}
