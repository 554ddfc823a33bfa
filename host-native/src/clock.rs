//! The host's clock, as core reads time: a [`RecordDate`] at 100 ns ticks.

use std::time::{SystemTime, UNIX_EPOCH};

use folio_core::model::RecordDate;

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct Clock;

impl Clock {
    pub fn now(&self) -> RecordDate {
        date_of(SystemTime::now())
    }
}

/// A system time as core reads it (a time before the epoch, or past
/// core's dates, is the epoch).
pub fn date_of(time: SystemTime) -> RecordDate {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let ticks = i64::try_from(since.as_nanos() / 100).unwrap_or(i64::MAX);
    RecordDate::from_unix_ticks(ticks)
        .unwrap_or_else(|_| RecordDate::from_unix_ticks(0).expect("the epoch is a date"))
}
