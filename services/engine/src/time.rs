//! Timestamps with Go `time.Time` JSON semantics (docs/design/evaluation.md#timestamps).
//!
//! Input: RFC3339 with optional fractional seconds and a `Z` or `±hh:mm` offset. Output:
//! RFC3339Nano — trailing fractional zeros trimmed, `Z` for a zero offset, any other offset kept.
//! The zero value is `0001-01-01T00:00:00Z`.

use std::fmt;
use std::fmt::Write as _;

use chrono::{DateTime, FixedOffset, NaiveDate, Offset, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Errors of this module.
#[derive(Debug, thiserror::Error)]
pub enum TimestampError {
    /// The text is not an RFC3339 timestamp (`2006-01-02T15:04:05Z07:00`, optional fraction).
    #[error("{value:?} is not an RFC3339 timestamp")]
    Parse {
        /// The rejected text.
        value: String,
        /// The parser's complaint.
        #[source]
        source: chrono::ParseError,
    },
    /// The text is not in the exact RFC3339 layout Go accepts (upper-case `T`, 4-digit year).
    #[error(
        "{value:?} is not an RFC3339 timestamp (expected YYYY-MM-DDTHH:MM:SS[.frac](Z|±hh:mm))"
    )]
    Layout {
        /// The rejected text.
        value: String,
    },
}

/// An instant with its original UTC offset, serialised like Go's `time.Time`.
///
/// Equality compares instants (two timestamps with different offsets denoting the same instant
/// are equal), like Go's `Time.Equal`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(DateTime<FixedOffset>);

impl Timestamp {
    /// Go's zero time, `0001-01-01T00:00:00Z`. It is the [`Default`].
    pub fn zero() -> Self {
        let naive = NaiveDate::from_ymd_opt(1, 1, 1)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .unwrap_or_default();
        Self(DateTime::from_naive_utc_and_offset(naive, Utc.fix()))
    }

    /// Whether this is Go's zero instant (validation rejects it where a time is required).
    pub fn is_zero(&self) -> bool {
        *self == Self::zero()
    }

    /// The current instant (UTC).
    pub fn now() -> Self {
        Self::from(Utc::now())
    }

    /// Parses an RFC3339 timestamp with Go's accepted layout.
    pub fn parse(value: &str) -> Result<Self, TimestampError> {
        let bytes = value.as_bytes();
        let layout_ok = bytes.len() >= 20
            && bytes[4] == b'-'
            && bytes[7] == b'-'
            && bytes[10] == b'T'
            && bytes[13] == b':'
            && bytes[16] == b':'
            && bytes[..4].iter().all(u8::is_ascii_digit);
        if !layout_ok {
            return Err(TimestampError::Layout {
                value: value.to_owned(),
            });
        }
        DateTime::parse_from_rfc3339(value)
            .map(Self)
            .map_err(|source| TimestampError::Parse {
                value: value.to_owned(),
                source,
            })
    }

    /// The wrapped date-time with its offset.
    pub fn as_datetime(&self) -> &DateTime<FixedOffset> {
        &self.0
    }

    /// Seconds since the Unix epoch and the sub-second nanoseconds (for wire conversions).
    pub fn unix_parts(&self) -> (i64, u32) {
        (self.0.timestamp(), self.0.timestamp_subsec_nanos())
    }

    /// Builds a UTC timestamp from Unix seconds and nanoseconds; `None` if out of range.
    pub fn from_unix(seconds: i64, nanos: u32) -> Option<Self> {
        DateTime::<Utc>::from_timestamp(seconds, nanos).map(Self::from)
    }

    /// Go `time.RFC3339Nano` formatting: trailing fractional zeros trimmed, `Z` for UTC.
    pub fn to_rfc3339_nano(&self) -> String {
        let mut out = self.date_time_prefix();
        let nanos = self.0.timestamp_subsec_nanos();
        if nanos > 0 {
            let digits = format!("{nanos:09}");
            out.push('.');
            out.push_str(digits.trim_end_matches('0'));
        }
        push_offset(&mut out, self.0.offset().local_minus_utc());
        out
    }

    /// Go layout `"2006-01-02T15:04:05Z07:00"`: RFC3339 with fractional seconds dropped (this is
    /// the format of `observedAt`/`detectedAt` in finding evidence refs).
    pub fn to_rfc3339_seconds(&self) -> String {
        let mut out = self.date_time_prefix();
        push_offset(&mut out, self.0.offset().local_minus_utc());
        out
    }
}

impl Timestamp {
    /// `YYYY-MM-DDTHH:MM:SS` in the timestamp's own offset (hand-rolled: chrono's `format`
    /// parses its pattern on every call, which dominated evaluation time).
    fn date_time_prefix(&self) -> String {
        use chrono::{Datelike, Timelike};
        let local = self.0.naive_local();
        let mut out = String::with_capacity(36);
        let _ = write!(
            out,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            local.year(),
            local.month(),
            local.day(),
            local.hour(),
            local.minute(),
            local.second()
        );
        out
    }
}

fn push_offset(out: &mut String, offset_seconds: i32) {
    if offset_seconds == 0 {
        out.push('Z');
        return;
    }
    let sign = if offset_seconds < 0 { '-' } else { '+' };
    let minutes = offset_seconds.unsigned_abs() / 60;
    let _ = write!(out, "{sign}{:02}:{:02}", minutes / 60, minutes % 60);
}

impl Default for Timestamp {
    fn default() -> Self {
        Self::zero()
    }
}

impl From<DateTime<Utc>> for Timestamp {
    fn from(value: DateTime<Utc>) -> Self {
        Self(value.fixed_offset())
    }
}

impl From<DateTime<FixedOffset>> for Timestamp {
    fn from(value: DateTime<FixedOffset>) -> Self {
        Self(value)
    }
}

impl std::str::FromStr for Timestamp {
    type Err = TimestampError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339_nano())
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({})", self.to_rfc3339_nano())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_rfc3339_nano())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nano_output_trims_zeros_and_keeps_offsets() {
        let cases = [
            ("2026-08-22T21:31:04Z", "2026-08-22T21:31:04Z"),
            ("2026-08-22T21:31:04.500Z", "2026-08-22T21:31:04.5Z"),
            (
                "2026-08-22T21:31:04.000000001Z",
                "2026-08-22T21:31:04.000000001Z",
            ),
            (
                "2026-08-22T21:31:04.120+02:00",
                "2026-08-22T21:31:04.12+02:00",
            ),
            ("2026-08-22T21:31:04-05:30", "2026-08-22T21:31:04-05:30"),
            ("2026-08-22T21:31:04+00:00", "2026-08-22T21:31:04Z"),
        ];
        for (input, want) in cases {
            let ts = Timestamp::parse(input).unwrap();
            assert_eq!(ts.to_rfc3339_nano(), want, "{input}");
        }
    }

    #[test]
    fn seconds_output_drops_fraction() {
        let ts = Timestamp::parse("2026-08-22T21:31:04.987654321+01:00").unwrap();
        assert_eq!(ts.to_rfc3339_seconds(), "2026-08-22T21:31:04+01:00");
        let utc = Timestamp::parse("2026-08-22T21:31:04.9Z").unwrap();
        assert_eq!(utc.to_rfc3339_seconds(), "2026-08-22T21:31:04Z");
    }

    #[test]
    fn zero_time_round_trips_and_is_zero() {
        let zero = Timestamp::zero();
        assert_eq!(zero.to_rfc3339_nano(), "0001-01-01T00:00:00Z");
        assert!(Timestamp::parse("0001-01-01T00:00:00Z").unwrap().is_zero());
        assert!(!Timestamp::parse("2026-01-01T00:00:00Z").unwrap().is_zero());
    }

    #[test]
    fn rejects_non_rfc3339() {
        for bad in [
            "",
            "2026-08-22",
            "2026-08-22 21:31:04Z",
            "2026-08-22t21:31:04Z",
            "2026-08-22T21:31:04",
            "26-08-22T21:31:04Z",
            "2026-08-22T25:31:04Z",
        ] {
            assert!(Timestamp::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn unix_parts_round_trip() {
        let ts = Timestamp::parse("2026-08-22T21:31:04.25Z").unwrap();
        let (s, n) = ts.unix_parts();
        assert_eq!(Timestamp::from_unix(s, n).unwrap(), ts);
    }
}
