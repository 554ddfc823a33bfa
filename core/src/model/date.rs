//! `RecordDate`: an instant at 100 ns precision, written on the wire as
//! `YYYY-MM-DDTHH:MM:SS.fffffffZ` (PROTOCOL.md §2).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

const TICKS_PER_SECOND: i64 = 10_000_000;
const TICKS_PER_MILLI: i64 = 10_000;
const NANOS_PER_TICK: i128 = 100;
/// 0000-01-01T00:00:00Z and 9999-12-31T23:59:59.9999999Z: the instants a
/// four-digit UTC year can write.
const MIN_TICKS: i64 = -62_167_219_200 * TICKS_PER_SECOND;
const MAX_TICKS: i64 = 253_402_300_800 * TICKS_PER_SECOND - 1;

/// An instant between the years 0000 and 9999 UTC, at 100 ns precision.
///
/// Parsing accepts any RFC 3339 date (any number of fractional digits, `Z` or
/// an offset) and drops the digits past the seventh; `Display` and `Serialize`
/// always write the wire form, UTC with exactly 7 fractional digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RecordDate(i64);

/// Why a text or a number is not a [`RecordDate`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DateError {
    /// The text is not an RFC 3339 date.
    #[error("not an RFC 3339 date")]
    Syntax,
    /// The date is before year 0000 or after year 9999, in UTC.
    #[error("outside the years 0000 to 9999 UTC")]
    OutOfRange,
}

impl RecordDate {
    /// The Unix epoch, 1970-01-01T00:00:00Z.
    pub const EPOCH: RecordDate = RecordDate(0);

    /// The instant `ticks` × 100 ns after the Unix epoch (negative before it).
    pub fn from_unix_ticks(ticks: i64) -> Result<Self, DateError> {
        if (MIN_TICKS..=MAX_TICKS).contains(&ticks) {
            Ok(Self(ticks))
        } else {
            Err(DateError::OutOfRange)
        }
    }

    /// The instant `millis` milliseconds after the Unix epoch.
    pub fn from_unix_millis(millis: i64) -> Result<Self, DateError> {
        let ticks = millis
            .checked_mul(TICKS_PER_MILLI)
            .ok_or(DateError::OutOfRange)?;
        Self::from_unix_ticks(ticks)
    }

    /// 100 ns ticks since the Unix epoch.
    pub fn unix_ticks(self) -> i64 {
        self.0
    }

    /// Whole milliseconds since the Unix epoch, rounded down.
    pub fn unix_millis(self) -> i64 {
        self.0.div_euclid(TICKS_PER_MILLI)
    }

    /// `millis` milliseconds earlier, or the earliest instant if that is before it.
    pub fn saturating_sub_millis(self, millis: i64) -> Self {
        let ticks = self
            .0
            .saturating_sub(millis.saturating_mul(TICKS_PER_MILLI));
        Self(ticks.max(MIN_TICKS))
    }

    /// `millis` milliseconds later, or the latest instant if that is after it.
    pub fn saturating_add_millis(self, millis: i64) -> Self {
        let ticks = self
            .0
            .saturating_add(millis.saturating_mul(TICKS_PER_MILLI));
        Self(ticks.clamp(MIN_TICKS, MAX_TICKS))
    }

    /// The whole milliseconds from this instant until `later`, rounded up
    /// (a wait that ends no earlier than `later`); zero if `later` is not
    /// after it.
    pub fn millis_until(self, later: Self) -> u64 {
        let ticks = u64::try_from(later.0.saturating_sub(self.0)).unwrap_or(0);
        ticks.div_ceil(TICKS_PER_MILLI.unsigned_abs())
    }

    /// This instant with everything below the millisecond dropped: the
    /// precision of the dates Folio assigns itself, and of every date inside a
    /// version hash.
    pub fn truncated_to_millis(self) -> Self {
        Self(self.unix_millis() * TICKS_PER_MILLI)
    }

    /// The `received_at` of a new version: `now`, or one tick after the
    /// previous version the same user stored if the clock has not moved past
    /// it, so that `received_at` orders a user's versions strictly.
    pub fn received_after(now: Self, previous: Option<Self>) -> Self {
        match previous {
            Some(previous) if previous >= now => Self(previous.0.saturating_add(1).min(MAX_TICKS)),
            _ => now,
        }
    }

    /// The millisecond form used inside version hashes:
    /// `YYYY-MM-DDTHH:MM:SS.mmmZ`, truncated, never rounded.
    pub fn millis_form(self) -> MillisForm {
        MillisForm(self)
    }

    /// Writes the millisecond form into `buf` and returns it, without allocating.
    pub(crate) fn write_millis_form(self, buf: &mut [u8; 28]) -> &str {
        self.write_into(buf, 3)
    }

    /// Writes `YYYY-MM-DDTHH:MM:SS.` followed by the first `digits` digits of
    /// the fraction and `Z` into `buf`, returning the used part.
    fn write_into(self, buf: &mut [u8; 28], digits: usize) -> &str {
        let seconds = self.0.div_euclid(TICKS_PER_SECOND);
        let fraction = self.0.rem_euclid(TICKS_PER_SECOND);
        // In range by construction: MIN_TICKS..=MAX_TICKS are whole years 0000..=9999.
        let civil =
            OffsetDateTime::from_unix_timestamp(seconds).unwrap_or(OffsetDateTime::UNIX_EPOCH);
        let (year, month, day) = (civil.year(), u8::from(civil.month()), civil.day());
        let (hour, minute, second) = civil.to_hms();

        let mut put = |at: usize, value: u32, width: usize| {
            let mut value = value;
            for i in (at..at + width).rev() {
                buf[i] = b'0' + (value % 10) as u8;
                value /= 10;
            }
        };
        put(0, year as u32, 4);
        put(5, month.into(), 2);
        put(8, day.into(), 2);
        put(11, hour.into(), 2);
        put(14, minute.into(), 2);
        put(17, second.into(), 2);
        put(
            20,
            (fraction / 10_i64.pow(7 - digits as u32)) as u32,
            digits,
        );
        buf[4] = b'-';
        buf[7] = b'-';
        buf[10] = b'T';
        buf[13] = b':';
        buf[16] = b':';
        buf[19] = b'.';
        buf[20 + digits] = b'Z';
        // Only ASCII digits and separators were written.
        std::str::from_utf8(&buf[..21 + digits]).unwrap_or_default()
    }
}

impl FromStr for RecordDate {
    type Err = DateError;

    fn from_str(text: &str) -> Result<Self, DateError> {
        let parsed = OffsetDateTime::parse(text, &Rfc3339).map_err(|_| DateError::Syntax)?;
        let ticks = parsed.unix_timestamp_nanos().div_euclid(NANOS_PER_TICK);
        let ticks = i64::try_from(ticks).map_err(|_| DateError::OutOfRange)?;
        Self::from_unix_ticks(ticks)
    }
}

impl fmt::Display for RecordDate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.write_into(&mut [0; 28], 7))
    }
}

impl fmt::Debug for RecordDate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// [`RecordDate::millis_form`]: the date as a version hash writes it.
#[derive(Clone, Copy)]
pub struct MillisForm(RecordDate);

impl fmt::Display for MillisForm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.write_into(&mut [0; 28], 3))
    }
}

impl Serialize for RecordDate {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.write_into(&mut [0; 28], 7))
    }
}

impl<'de> Deserialize<'de> for RecordDate {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        super::deserialize_from_str(deserializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extremes_format_with_four_digit_years() {
        let min = RecordDate::from_unix_ticks(MIN_TICKS).unwrap();
        let max = RecordDate::from_unix_ticks(MAX_TICKS).unwrap();
        assert_eq!(min.to_string(), "0000-01-01T00:00:00.0000000Z");
        assert_eq!(max.to_string(), "9999-12-31T23:59:59.9999999Z");
        assert_eq!(max.millis_form().to_string(), "9999-12-31T23:59:59.999Z");
        assert!(RecordDate::from_unix_ticks(MIN_TICKS - 1).is_err());
        assert!(RecordDate::from_unix_ticks(MAX_TICKS + 1).is_err());
    }
}
