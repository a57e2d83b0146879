//! The wall clock, as the models read it, and times given in requests.

use crate::{Result, ServiceError};

/// The wall clock in milliseconds since the Unix epoch: what "now" is for expiry, the
/// changefeed's event times and history.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Now, in nanoseconds since the epoch.
pub fn now_nanos() -> i64 {
    i64::try_from(time::OffsetDateTime::now_utc().unix_timestamp_nanos()).unwrap_or(i64::MAX)
}

/// A time bound of a read (`from`, `to`): integer milliseconds or RFC 3339.
pub fn parse_bound(name: &str, text: &str) -> Result<i64> {
    let parsed = match text.parse::<i64>() {
        Ok(ms) => ms.checked_mul(1_000_000).ok_or_else(|| format!("{ms} is out of range")),
        Err(_) => rfc3339_nanos(text),
    };
    parsed.map_err(|why| ServiceError::InvalidRequest(format!("{name}: {why}")))
}

/// An RFC 3339 time in nanoseconds since the epoch, or why it is not one.
pub fn rfc3339_nanos(s: &str) -> std::result::Result<i64, String> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .map_err(|_| format!("{s:?} is not an RFC 3339 time such as 2026-11-21T10:00:00Z"))?;
    i64::try_from(t.unix_timestamp_nanos()).map_err(|_| format!("{s:?} is out of range (years 1678 to 2262)"))
}
