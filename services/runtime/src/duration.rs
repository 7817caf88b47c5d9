//! Parsing of Go-style durations (`500ms`, `10s`, `2m0s`, `1h30m`) used by duration flags.

use std::time::Duration;

/// A duration flag value that could not be parsed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DurationError {
    /// The value was empty.
    #[error("empty duration")]
    Empty,
    /// A number was not followed by a unit, or the unit is unknown.
    #[error(
        "invalid duration {value:?}: expected a sequence of <number><unit> with unit ns, us, ms, s, m or h"
    )]
    Invalid {
        /// The rejected input.
        value: String,
    },
}

/// Parses a Go-style duration: a sequence of decimal numbers, each followed by a unit
/// (`ns`, `us`, `ms`, `s`, `m`, `h`), e.g. `2m0s`, `1.5s`, `250ms`. A bare `0` is accepted.
pub fn parse_duration(value: &str) -> Result<Duration, DurationError> {
    let input = value.trim();
    if input.is_empty() {
        return Err(DurationError::Empty);
    }
    if input == "0" {
        return Ok(Duration::ZERO);
    }
    let invalid = || DurationError::Invalid {
        value: value.to_owned(),
    };
    let mut total = 0f64;
    let mut rest = input;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(invalid)?;
        if number_len == 0 {
            return Err(invalid());
        }
        let number: f64 = rest[..number_len].parse().map_err(|_| invalid())?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(invalid()),
        };
        total += number * seconds_per_unit;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| invalid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        for (input, expected) in [
            ("0", Duration::ZERO),
            ("10s", Duration::from_secs(10)),
            ("2m0s", Duration::from_mins(2)),
            ("1h30m", Duration::from_mins(90)),
            ("250ms", Duration::from_millis(250)),
            ("1.5s", Duration::from_millis(1500)),
        ] {
            assert_eq!(parse_duration(input), Ok(expected), "{input}");
        }
    }

    #[test]
    fn rejects_garbage() {
        for input in ["", "10", "s", "10x", "1.2.3s", "-1s"] {
            assert!(parse_duration(input).is_err(), "{input}");
        }
    }
}
