//! The answer, in InfluxDB 1.x's JSON shape: `{"results": [{"statement_id", "series": [{"name",
//! "tags", "columns", "values"}]}]}`, or a statement's `error`. Times are RFC 3339 (nanoseconds,
//! trailing zeros cut, as InfluxDB writes them) unless an `epoch` unit is asked for; numbers are
//! written as Go writes a float64 (`2`, not `2.0`).

use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// The unit of integer times (`epoch=`), or RFC 3339 text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Epoch(pub Option<i64>);

impl Epoch {
    /// `ns`, `n`, `u`, `µ`, `ms`, `s`, `m`, `h`.
    pub fn parse(unit: &str) -> Option<Epoch> {
        let per = match unit {
            "ns" | "n" => 1,
            "u" | "µ" | "us" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        Some(Epoch(Some(per)))
    }

    /// A time as answered.
    pub fn time(self, ns: i64) -> Value {
        match self.0 {
            Some(per) => Value::from(ns.div_euclid(per)),
            None => Value::String(rfc3339(ns)),
        }
    }
}

/// `2026-01-01T00:00:01.5Z`: RFC 3339 with up to nine fraction digits, trailing zeros cut.
pub fn rfc3339(ns: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ns)).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let mut out = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    );
    let nanos = t.nanosecond();
    if nanos > 0 {
        let frac = format!("{nanos:09}");
        out.push('.');
        out.push_str(frac.trim_end_matches('0'));
    }
    out.push('Z');
    out
}

/// A number as InfluxDB (Go's JSON) writes a float64: whole ones without a fraction; none for
/// NaN or infinities.
pub fn number(v: f64) -> Value {
    if !v.is_finite() {
        return Value::Null;
    }
    if v.fract() == 0.0 && v.abs() < 1e15 {
        return Value::from(v as i64);
    }
    Value::from(v)
}

/// The answer to a query.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct QueryResults {
    /// one per statement, in order
    pub results: Vec<StatementResult>,
}

/// The answer to one statement: its series, or its error.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct StatementResult {
    /// the statement's position in the query, from 0
    pub statement_id: usize,
    /// the series answered (left out when there are none)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<Vec<SeriesOut>>,
    /// why the statement failed
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl StatementResult {
    pub fn series(statement_id: usize, series: Vec<SeriesOut>) -> StatementResult {
        StatementResult { statement_id, series: (!series.is_empty()).then_some(series), error: None }
    }

    pub fn error(statement_id: usize, error: String) -> StatementResult {
        StatementResult { statement_id, series: None, error: Some(error) }
    }
}

/// One series of an answer.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct SeriesOut {
    /// the measurement (or what a `SHOW` lists: `databases`, `measurements`)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// the `GROUP BY` tags' values
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub tags: Option<BTreeMap<String, String>>,
    /// the columns' names; `time` first in a `SELECT`'s
    pub columns: Vec<String>,
    /// the rows: the time (RFC 3339 text or an integer), then numbers, strings (tags) or null
    pub values: Vec<Vec<Value>>,
}

impl SeriesOut {
    /// A listing: one column, one row per name.
    pub fn list(name: Option<&str>, column: &str, names: impl IntoIterator<Item = String>) -> SeriesOut {
        SeriesOut {
            name: name.map(str::to_owned),
            tags: None,
            columns: vec![column.to_owned()],
            values: names.into_iter().map(|n| vec![Value::String(n)]).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_numbers_as_influxdb_writes_them() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_500_000_000), "1970-01-01T00:00:01.5Z");
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59.999999999Z");
        assert_eq!(rfc3339(1_767_225_600_000_000_001), "2026-01-01T00:00:00.000000001Z");
        assert_eq!(Epoch::parse("ms").unwrap().time(1_500_000_000), Value::from(1500));
        assert_eq!(Epoch::parse("s").unwrap().time(-1), Value::from(-1));
        assert_eq!(Epoch::parse("x"), None);
        assert_eq!(number(2.0), serde_json::json!(2));
        assert_eq!(number(1.5), serde_json::json!(1.5));
        assert_eq!(number(f64::NAN), Value::Null);
        assert_eq!(number(1e20), serde_json::json!(1e20));
    }
}
