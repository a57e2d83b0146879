//! InfluxDB line protocol — split into lines by influxdata's crate (`influxdb-line-protocol`),
//! each parsed by [`super::lineparse`] (held to that crate's answers by a property test) — mapped
//! onto metrics and entities: the measurement is the metric; the tag set, sorted by key and
//! joined `k=v,k=v` (see [`super::labels::entity_of`]), is the entity and its labels; a field
//! named `value` is the metric itself and any other field `f` the metric `{measurement}.{f}`. Integer, unsigned, float and boolean fields are
//! stored as numbers; string fields are skipped and counted.

use super::batch::{Batch, MAX_POINTS_PER_WRITE};
use super::labels;
use super::lineparse::{self, Field, Line};
use super::time::Precision;
use mosaic_core::error::LineError;
use mosaic_core::{Result, ServiceError};
use std::collections::HashMap;

/// The points of a line-protocol body, or every bad line.
pub struct Parsed {
    pub batch: Batch,
    pub skipped_string_fields: usize,
}

/// Parses `body`; a point without a timestamp gets `now` (ns). All lines or none: any bad line
/// fails the whole body, listing every bad line.
pub fn parse(body: &str, precision: Precision, now: i64) -> Result<Parsed> {
    let mut batch = Batch::default();
    let mut skipped = 0;
    let mut errors = Vec::new();
    // lines that are not blank or comments
    let mut lines = 0;
    // the entity of each series text met (a body repeats its series)
    let mut entities: HashMap<&str, String> = HashMap::new();
    // the 1-based number of the line `text` starts on (a quoted string field may hold newlines)
    let (mut number, mut counted) = (1, 0);
    for text in influxdb_line_protocol::split_lines(body) {
        let start = (text.as_ptr() as usize).saturating_sub(body.as_ptr() as usize).min(body.len());
        number += body.as_bytes()[counted..start.max(counted)].iter().filter(|b| **b == b'\n').count();
        counted = start.max(counted);
        let Some(parsed) = lineparse::parse(text) else { continue };
        lines += 1;
        let outcome = parsed.and_then(|line| add(&line, precision, now, &mut batch, &mut entities));
        match outcome {
            Ok(strings) => skipped += strings,
            Err(error) => errors.push(LineError { line: number, error }),
        }
        if batch.len() > MAX_POINTS_PER_WRITE {
            return Err(ServiceError::InvalidRequest(format!("at most {} points per request", MAX_POINTS_PER_WRITE)));
        }
    }
    if !errors.is_empty() {
        return Err(ServiceError::InvalidLines(errors));
    }
    if lines == 0 {
        return Err(ServiceError::InvalidRequest("the body holds no lines of line protocol".into()));
    }
    Ok(Parsed { batch, skipped_string_fields: skipped })
}

/// Adds the points of one line (all or, on an error, none); returns its string fields' count.
fn add<'a>(
    line: &Line<'a>,
    precision: Precision,
    now: i64,
    batch: &mut Batch,
    entities: &mut HashMap<&'a str, String>,
) -> std::result::Result<usize, String> {
    let measurement = line.measurement.as_ref();
    let entity = entities
        .entry(line.series)
        .or_insert_with(|| labels::entity_of(line.tags.iter().map(|(k, v)| (k.as_ref(), v.as_ref())).collect()));
    let ts = match line.timestamp {
        Some(t) => {
            precision.to_nanos(t).ok_or_else(|| format!("timestamp {t} is out of range (years 1678 to 2262)"))?
        }
        None => now,
    };
    let mut strings = 0;
    let mut numbers = Vec::with_capacity(line.fields.len());
    for (field, value) in &line.fields {
        let value = match value {
            Field::I64(v) => *v as f64,
            Field::U64(v) => *v as f64,
            Field::F64(v) if v.is_finite() => *v,
            Field::F64(v) => return Err(format!("field {:?}: {v} is not a finite number", field.as_ref())),
            Field::Bool(b) => f64::from(u8::from(*b)),
            Field::Str(_) => {
                strings += 1;
                continue;
            }
        };
        numbers.push((field.as_ref(), value));
    }
    let mut name = String::new();
    let mut series = Vec::with_capacity(numbers.len());
    for (field, value) in numbers {
        let metric = if field == "value" {
            measurement
        } else {
            name.clear();
            name.push_str(measurement);
            name.push('.');
            name.push_str(field);
            &name
        };
        series.push((batch.series(metric, entity)?, value));
    }
    for (s, value) in series {
        batch.push(s, ts, value, None);
    }
    Ok(strings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(body: &str, precision: Precision) -> Vec<(String, String, i64, f64)> {
        let parsed = parse(body, precision, 42).unwrap_or_else(|e| panic!("{e:?}"));
        parsed.batch.flatten()
    }

    #[test]
    fn tags_sorted_into_the_entity_fields_into_metrics() {
        let got = points("cpu,region=eu,host=h1 value=0.5,idle=3i,up=true,name=\"x\" 10\n", Precision::Nanoseconds);
        assert_eq!(
            got,
            [
                ("cpu".to_owned(), "host=h1,region=eu".to_owned(), 10, 0.5),
                ("cpu.idle".to_owned(), "host=h1,region=eu".to_owned(), 10, 3.0),
                ("cpu.up".to_owned(), "host=h1,region=eu".to_owned(), 10, 1.0),
            ]
        );
        let parsed = parse("cpu name=\"x\",value=1 1", Precision::Seconds, 0).unwrap();
        assert_eq!(parsed.skipped_string_fields, 1);
        assert_eq!(parsed.batch.flatten()[0].2, 1_000_000_000);
    }

    #[test]
    fn escapes_per_the_spec() {
        let got = points("disk\\ io,path=C:\\,x=a\\ b\\=c value=1 5", Precision::Milliseconds);
        assert_eq!(got, [("disk io".to_owned(), "path=C:\\,x\\=a b\\=c".to_owned(), 5_000_000, 1.0)]);
        let got = points("m,k=v\\,w f\\ g=2u", Precision::Nanoseconds);
        assert_eq!(got, [("m.f g".to_owned(), "k=v\\,w".to_owned(), 42, 2.0)]);
    }

    #[test]
    fn line_numbers_count_newlines_inside_quoted_strings() {
        let body = "m note=\"two\nlines\",value=1 1\nbad\n";
        match parse(body, Precision::Nanoseconds, 0) {
            Err(ServiceError::InvalidLines(errors)) => {
                assert_eq!(errors.iter().map(|e| e.line).collect::<Vec<_>>(), [3])
            }
            other => panic!("{:?}", other.map(|p| p.batch.flatten())),
        }
    }

    #[test]
    fn every_bad_line_with_its_number() {
        let body = "ok value=1 1\nbad\n\nm value=notanumber 2\n# a comment\nm value=1 99999999999999999999\n";
        match parse(body, Precision::Nanoseconds, 0) {
            Err(ServiceError::InvalidLines(errors)) => {
                assert_eq!(errors.iter().map(|e| e.line).collect::<Vec<_>>(), [2, 4, 6]);
            }
            other => panic!("{:?}", other.map(|p| p.batch.flatten())),
        }
        match parse("m value=1 9223372036854775807", Precision::Seconds, 0) {
            Err(ServiceError::InvalidLines(errors)) => assert!(errors[0].error.contains("out of range")),
            other => panic!("{:?}", other.map(|p| p.batch.flatten())),
        }
    }
}
