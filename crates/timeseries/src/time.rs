//! Times and durations as the time-series routes take them: integer timestamps in a stated
//! precision or RFC 3339 strings (stored as nanoseconds since the epoch), and durations such as
//! `90s`, `1h`, `7d` (parsed by [`mosaic_core::duration`]).

use mosaic_core::clock::rfc3339_nanos;
pub use mosaic_core::clock::{now_nanos, parse_bound};
use mosaic_core::{Result, ServiceError};
use serde::Deserialize;
use utoipa::ToSchema;

/// Nanoseconds in one millisecond.
pub const NS_PER_MS: i64 = 1_000_000;

/// The unit of an integer timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, ToSchema)]
pub enum Precision {
    /// nanoseconds (`ns`, or Influx 1.x `n`)
    #[serde(rename = "ns", alias = "n")]
    Nanoseconds,
    /// microseconds (`us`, or Influx 1.x `u`)
    #[serde(rename = "us", alias = "u")]
    Microseconds,
    /// milliseconds
    #[default]
    #[serde(rename = "ms")]
    Milliseconds,
    /// seconds
    #[serde(rename = "s")]
    Seconds,
    /// minutes (Influx 1.x)
    #[serde(rename = "m")]
    Minutes,
    /// hours (Influx 1.x)
    #[serde(rename = "h")]
    Hours,
}

impl Precision {
    /// Nanoseconds per unit.
    pub fn nanos(self) -> i64 {
        match self {
            Precision::Nanoseconds => 1,
            Precision::Microseconds => 1_000,
            Precision::Milliseconds => NS_PER_MS,
            Precision::Seconds => 1_000_000_000,
            Precision::Minutes => 60_000_000_000,
            Precision::Hours => 3_600_000_000_000,
        }
    }

    /// `value` units in nanoseconds, if that fits in an i64 (about the years 1678 to 2262).
    pub fn to_nanos(self, value: i64) -> Option<i64> {
        value.checked_mul(self.nanos())
    }
}

/// A point's time as a JSON body gives it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(untagged, try_from = "serde_json::Value")]
pub enum TsIn {
    /// an integer in the request's precision (milliseconds by default)
    Int(i64),
    /// an RFC 3339 time, e.g. `2026-11-21T10:00:00Z`
    Text(String),
}

impl TryFrom<serde_json::Value> for TsIn {
    type Error = String;

    /// An integer as JSON Schema counts one: `1588868820.0` is the integer 1588868820.
    fn try_from(value: serde_json::Value) -> std::result::Result<TsIn, String> {
        match value {
            serde_json::Value::Number(n) => match (n.as_i64(), n.as_f64()) {
                (Some(i), _) => Ok(TsIn::Int(i)),
                (None, Some(f)) if f.fract() == 0.0 && f >= -(2f64.powi(63)) && f < 2f64.powi(63) => {
                    Ok(TsIn::Int(f as i64))
                }
                _ => Err(format!("ts {n} is not an integer within i64")),
            },
            serde_json::Value::String(s) => Ok(TsIn::Text(s)),
            other => Err(format!("ts must be an integer or an RFC 3339 string, not {other}")),
        }
    }
}

/// A point's time as given, in nanoseconds.
pub fn parse_ts(value: &TsIn, precision: Precision) -> std::result::Result<i64, String> {
    match value {
        TsIn::Int(i) => precision.to_nanos(*i).ok_or_else(|| format!("{i} is out of range (years 1678 to 2262)")),
        TsIn::Text(s) => rfc3339_nanos(s),
    }
}

/// The duration in the largest unit that divides it: 86400000 → `1d`.
pub fn format_duration_ms(ms: i64) -> String {
    let units = [(604_800_000, "w"), (86_400_000, "d"), (3_600_000, "h"), (60_000, "m"), (1_000, "s")];
    for (per, unit) in units {
        if ms % per == 0 {
            return format!("{}{unit}", ms / per);
        }
    }
    format!("{ms}ms")
}

/// A duration parameter, or 400 naming it.
pub fn duration_param(name: &str, text: &str) -> Result<i64> {
    mosaic_core::duration::parse_duration_ms(text).ok_or_else(|| {
        ServiceError::InvalidRequest(format!(
            "{name}: {text:?} is not a duration such as 500ms, 90s, 5m, 24h, 7d or 2w (a positive integer and a unit)"
        ))
    })
}

/// The number of the `step`-wide bucket holding `t`, buckets aligned to multiples of `step` since
/// the epoch (times before it included: floor division). Buckets are numbered rather than given
/// by their start, which for a time near the ends of the i64 range may not fit one.
pub fn bucket_of(t: i64, step: i64) -> i64 {
    t.div_euclid(step)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timestamps_in_every_precision_and_rfc3339() {
        let ts = |v: serde_json::Value| serde_json::from_value::<TsIn>(v).unwrap();
        assert_eq!(parse_ts(&ts(json!(1_730_000_000_000i64)), Precision::Milliseconds), Ok(1_730_000_000_000_000_000));
        assert_eq!(parse_ts(&ts(json!(1_730_000_000)), Precision::Seconds), Ok(1_730_000_000_000_000_000));
        assert_eq!(parse_ts(&ts(json!(-5)), Precision::Nanoseconds), Ok(-5));
        assert_eq!(parse_ts(&ts(json!("1970-01-01T00:00:01.5Z")), Precision::Seconds), Ok(1_500_000_000));
        assert_eq!(parse_ts(&ts(json!("1969-12-31T23:59:59Z")), Precision::Seconds), Ok(-1_000_000_000));
        assert!(parse_ts(&ts(json!(i64::MAX)), Precision::Milliseconds).is_err());
        assert!(serde_json::from_value::<TsIn>(json!(1.5)).is_err());
        assert_eq!(ts(json!(1588868820.0)), TsIn::Int(1588868820));
        assert!(serde_json::from_value::<TsIn>(json!(1e300)).is_err());
        assert!(parse_ts(&ts(json!("yesterday")), Precision::Milliseconds).is_err());
        assert_eq!(parse_bound("from", "1000").ok(), Some(1_000_000_000));
        assert_eq!(parse_bound("from", "1970-01-01T00:00:01Z").ok(), Some(1_000_000_000));
        assert!(parse_bound("from", "soon").is_err());
    }

    #[test]
    fn durations_print_in_their_largest_unit() {
        assert_eq!(format_duration_ms(86_400_000), "1d");
        assert_eq!(format_duration_ms(90_000), "90s");
        assert_eq!(format_duration_ms(1_500), "1500ms");
    }

    #[test]
    fn buckets_floor_before_the_epoch() {
        assert_eq!(bucket_of(59_999, 60_000), 0);
        assert_eq!(bucket_of(60_000, 60_000), 1);
        assert_eq!(bucket_of(-1, 60_000), -1);
        assert_eq!(bucket_of(i64::MIN, 7), i64::MIN.div_euclid(7));
    }
}
