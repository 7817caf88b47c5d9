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
    /// The text is not in the RFC3339 layout Go accepts (upper-case `T`, 4-digit year, 2-digit
    /// month, day, minute and second, `Z` or `±hh:mm`).
    #[error(
        "{value:?} is not an RFC3339 timestamp (expected YYYY-MM-DDTHH:MM:SS[.frac](Z|±hh:mm))"
    )]
    Layout {
        /// The rejected text.
        value: String,
    },
    /// A field is out of its range (Go's "month out of range", "second out of range", …).
    #[error("{value:?} is not an RFC3339 timestamp: {field} out of range")]
    Range {
        /// The rejected text.
        value: String,
        /// The field, in Go's words (`month`, `day`, `hour`, `minute`, `second`,
        /// `time zone offset hour`, `time zone offset minute`).
        field: &'static str,
    },
    /// Go accepts offsets of 24 hours and more (`+24:00`, `+23:60`); an instant here keeps
    /// offsets strictly within a day, so such a text is refused (docs/design/evaluation.md#timestamps).
    #[error("{value:?}: a time zone offset of 24 hours or more is not supported")]
    OffsetTooLarge {
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

    /// Parses an RFC3339 timestamp exactly as Go's `time.Parse(time.RFC3339, …)` and
    /// `time.Time`'s JSON decoding do (go1.26, docs/design/evaluation.md#timestamps): a 4-digit
    /// year, 2-digit month, day, minute and second (second 60 refused), a 1- or 2-digit hour, an
    /// optional fraction after `.` or `,` (digits past the ninth dropped), then `Z` or `±hh:mm`
    /// (Go allows hh up to 24 and mm up to 60; offsets of a day or more are refused here, see
    /// [`TimestampError::OffsetTooLarge`]).
    pub fn parse(value: &str) -> Result<Self, TimestampError> {
        let layout = || TimestampError::Layout {
            value: value.to_owned(),
        };
        let range = |field| TimestampError::Range {
            value: value.to_owned(),
            field,
        };
        let mut rest = value.as_bytes();
        let year = take_digits(&mut rest, 4).ok_or_else(layout)?;
        expect(&mut rest, b'-').ok_or_else(layout)?;
        let month = take_digits(&mut rest, 2).ok_or_else(layout)?;
        expect(&mut rest, b'-').ok_or_else(layout)?;
        let day = take_digits(&mut rest, 2).ok_or_else(layout)?;
        expect(&mut rest, b'T').ok_or_else(layout)?;
        // Go reads the hour of this layout ("15") with one or two digits.
        let hour = match take_digits(&mut rest, 2) {
            Some(h) => h,
            None => take_digits(&mut rest, 1).ok_or_else(layout)?,
        };
        expect(&mut rest, b':').ok_or_else(layout)?;
        let minute = take_digits(&mut rest, 2).ok_or_else(layout)?;
        expect(&mut rest, b':').ok_or_else(layout)?;
        let second = take_digits(&mut rest, 2).ok_or_else(layout)?;
        let mut nanos = 0u32;
        if let [b'.' | b',', next, ..] = rest
            && next.is_ascii_digit()
        {
            let digits = rest[1..].iter().take_while(|b| b.is_ascii_digit()).count();
            for (i, d) in rest[1..=digits].iter().enumerate() {
                if i < 9 {
                    nanos = nanos * 10 + u32::from(d - b'0');
                }
            }
            for _ in digits..9 {
                nanos *= 10;
            }
            rest = &rest[1 + digits..];
        }
        let offset_seconds = match rest {
            [b'Z'] => 0,
            [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
                let hh = two_digits(*h1, *h2).ok_or_else(layout)?;
                let mm = two_digits(*m1, *m2).ok_or_else(layout)?;
                if hh > 24 {
                    return Err(range("time zone offset hour"));
                }
                if mm > 60 {
                    return Err(range("time zone offset minute"));
                }
                let seconds = i32::try_from((hh * 60 + mm) * 60).unwrap_or(i32::MAX);
                if *sign == b'-' { -seconds } else { seconds }
            }
            _ => return Err(layout()),
        };
        // Go checks the ranges in this order.
        if !(1..=12).contains(&month) {
            return Err(range("month"));
        }
        if hour > 23 {
            return Err(range("hour"));
        }
        if minute > 59 {
            return Err(range("minute"));
        }
        if second > 59 {
            return Err(range("second"));
        }
        let date = i32::try_from(year)
            .ok()
            .and_then(|y| NaiveDate::from_ymd_opt(y, month, day))
            .ok_or_else(|| range("day"))?;
        let naive = date
            .and_hms_nano_opt(hour, minute, second, nanos)
            .ok_or_else(layout)?;
        let offset = FixedOffset::east_opt(offset_seconds).ok_or_else(|| {
            TimestampError::OffsetTooLarge {
                value: value.to_owned(),
            }
        })?;
        naive
            .and_local_timezone(offset)
            .single()
            .map(Self)
            .ok_or_else(layout)
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

/// Takes exactly `n` ASCII digits from the front of `rest`.
fn take_digits(rest: &mut &[u8], n: usize) -> Option<u32> {
    let digits = rest.get(..n)?;
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    *rest = &rest[n..];
    Some(
        digits
            .iter()
            .fold(0, |acc, d| acc * 10 + u32::from(d - b'0')),
    )
}

fn expect(rest: &mut &[u8], byte: u8) -> Option<()> {
    let (first, tail) = rest.split_first()?;
    (*first == byte).then(|| *rest = tail)
}

fn two_digits(a: u8, b: u8) -> Option<u32> {
    (a.is_ascii_digit() && b.is_ascii_digit())
        .then(|| u32::from(a - b'0') * 10 + u32::from(b - b'0'))
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

    /// What go1.26.8 prints for each input, through both `json.Unmarshal` into a `time.Time`
    /// and `time.Parse(time.RFC3339, …)`, formatted with `time.RFC3339Nano` ("ERR": refused).
    /// Both gave the same answer for every input (a small Go program reading one input per line,
    /// `var t time.Time; err := t.UnmarshalJSON([]byte(strconv.Quote(in)))`).
    const GO_VECTORS: &[(&str, &str)] = &[
        ("2026-08-22T21:31:04Z", "2026-08-22T21:31:04Z"),
        ("2026-08-22T21:31:60Z", "ERR"),
        ("2026-12-31T23:59:60Z", "ERR"),
        ("2026-01-01T00:00:60Z", "ERR"),
        ("2026-08-22T21:31:04z", "ERR"),
        ("2026-08-22t21:31:04Z", "ERR"),
        ("2026-08-22T21:31:04.Z", "ERR"),
        (
            "2026-08-22T21:31:04.123456789123Z",
            "2026-08-22T21:31:04.123456789Z",
        ),
        ("2026-08-22T21:31:04,5Z", "2026-08-22T21:31:04.5Z"),
        ("2026-08-22T21:31:04+23:59", "2026-08-22T21:31:04+23:59"),
        ("2026-08-22T21:31:04+01:60", "2026-08-22T21:31:04+02:00"),
        ("2026-08-22T21:31:04-00:00", "2026-08-22T21:31:04Z"),
        ("0000-01-01T00:00:00Z", "0000-01-01T00:00:00Z"),
        ("2024-02-29T00:00:00Z", "2024-02-29T00:00:00Z"),
        ("2023-02-29T00:00:00Z", "ERR"),
        ("2026-08-22T24:00:00Z", "ERR"),
        ("2026-08-22T1:31:04Z", "2026-08-22T01:31:04Z"),
        ("2026-08-22T21:31:04+0100", "ERR"),
        ("2026-08-22T21:31:04.5+01:00", "2026-08-22T21:31:04.5+01:00"),
        ("2026-08-22T21:31:04 Z", "ERR"),
        ("2026-08-22T21:31:04.000000000Z", "2026-08-22T21:31:04Z"),
        ("2026-13-01T00:00:00Z", "ERR"),
        ("2026-00-01T00:00:00Z", "ERR"),
        ("2026-01-00T00:00:00Z", "ERR"),
        ("+026-08-22T21:31:04Z", "ERR"),
        ("2026-08-22T21:31:04.1e3Z", "ERR"),
        ("2026-08-22T21:60:04Z", "ERR"),
        ("2026-08-22T21:31:04+25:00", "ERR"),
        ("2026-08-22T21:31:04+01:61", "ERR"),
    ];

    #[test]
    fn parses_exactly_what_go_parses() {
        for (input, want) in GO_VECTORS {
            let got =
                Timestamp::parse(input).map_or_else(|_| "ERR".to_owned(), |t| t.to_rfc3339_nano());
            assert_eq!(&got, want, "{input:?}");
        }
    }

    #[test]
    fn offsets_of_a_day_or_more_are_refused_with_their_own_error() {
        // Go accepts both (printing +24:00 and +24:60 → +25:00); an offset here stays within a day.
        for input in ["2026-08-22T21:31:04+24:00", "2026-08-22T21:31:04-23:60"] {
            let err = Timestamp::parse(input).unwrap_err();
            assert!(
                matches!(err, TimestampError::OffsetTooLarge { .. }),
                "{input}: {err}"
            );
        }
    }

    #[test]
    fn a_leap_second_names_the_field() {
        let err = Timestamp::parse("2026-01-01T00:00:60Z").unwrap_err();
        assert_eq!(
            err.to_string(),
            "\"2026-01-01T00:00:60Z\" is not an RFC3339 timestamp: second out of range"
        );
    }

    #[test]
    fn unix_parts_round_trip() {
        let ts = Timestamp::parse("2026-08-22T21:31:04.25Z").unwrap();
        let (s, n) = ts.unix_parts();
        assert_eq!(Timestamp::from_unix(s, n).unwrap(), ts);
    }
}
