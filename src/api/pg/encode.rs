//! Rows for the PostgreSQL wire: each column's PostgreSQL type ([`pg_type`]) and each value in
//! the text or the binary format the client asked for ([`PgRows`], run by the SQL engine beside
//! the statement). Text is what PostgreSQL itself prints (`t`/`f`, `2024-01-02 03:04:05.5+00:00`,
//! `Infinity`); a column of JSON is `json`; a type PostgreSQL has no match for (lists, structs,
//! intervals) is `text` as Arrow displays it.

use crate::service::sql::{RowWriter, is_json, json_value};
use datafusion::arrow::array::{
    Array, AsArray, BooleanArray, Float16Array, Float32Array, Float64Array, Int8Array, Int16Array, Int32Array,
    Int64Array, RecordBatch, UInt8Array, UInt16Array, UInt32Array, UInt64Array,
};
use datafusion::arrow::datatypes::{DataType, Field, TimeUnit};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::{DataFusionError, Result};
use pgwire::api::Type;

/// Days from 1970-01-01 to 2000-01-01, PostgreSQL's epoch for binary dates and timestamps.
pub(super) const PG_EPOCH_DAYS: i64 = 10_957;
/// Microseconds from 1970-01-01 to 2000-01-01.
pub(super) const PG_EPOCH_MICROS: i64 = PG_EPOCH_DAYS * 86_400 * 1_000_000;

/// The PostgreSQL type a column is sent as.
pub(super) fn pg_type(field: &Field) -> Type {
    if is_json(field) {
        return Type::JSON;
    }
    match field.data_type() {
        DataType::Boolean => Type::BOOL,
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => Type::INT2,
        DataType::Int32 | DataType::UInt16 => Type::INT4,
        DataType::Int64 | DataType::UInt32 => Type::INT8,
        DataType::UInt64 => Type::NUMERIC,
        DataType::Float16 | DataType::Float32 => Type::FLOAT4,
        DataType::Float64 => Type::FLOAT8,
        DataType::Timestamp(_, Some(_)) => Type::TIMESTAMPTZ,
        DataType::Timestamp(_, None) => Type::TIMESTAMP,
        DataType::Date32 | DataType::Date64 => Type::DATE,
        DataType::Decimal32(..) | DataType::Decimal64(..) | DataType::Decimal128(..) | DataType::Decimal256(..) => {
            Type::NUMERIC
        }
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => Type::BYTEA,
        DataType::Union(..) => Type::JSON,
        _ => Type::TEXT,
    }
}

/// Writes rows for the wire: each row is its length (4 bytes, big-endian) and then its fields,
/// each a length (-1: NULL) and its bytes: the body of a `DataRow` less its field count.
#[derive(Debug, Clone)]
pub(super) struct PgRows {
    /// per column: binary (true) or text; a column past the list takes the last entry, and an
    /// empty list means text for all (as the `Bind` message says)
    pub(super) binary: Vec<bool>,
}

impl PgRows {
    fn binary(&self, column: usize) -> bool {
        match self.binary.as_slice() {
            [] => false,
            [one] => *one,
            many => many.get(column).copied().unwrap_or(false),
        }
    }
}

impl RowWriter for PgRows {
    fn write(&self, batch: &RecordBatch, from: usize, to: usize, out: &mut Vec<u8>, max_bytes: usize) -> Result<usize> {
        let options = FormatOptions::default()
            .with_timestamp_format(Some("%Y-%m-%d %H:%M:%S%.f"))
            .with_timestamp_tz_format(Some("%Y-%m-%d %H:%M:%S%.f%:z"))
            .with_date_format(Some("%Y-%m-%d"));
        let schema = batch.schema();
        let formatters = batch
            .columns()
            .iter()
            .map(|a| ArrayFormatter::try_new(a.as_ref(), &options))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        for row in from..to {
            let start = out.len();
            out.extend_from_slice(&[0; 4]);
            for (i, column) in batch.columns().iter().enumerate() {
                let field = schema.field(i);
                let at = out.len();
                out.extend_from_slice(&(-1i32).to_be_bytes());
                if column.is_null(row) && !matches!(column.data_type(), DataType::Union(..)) {
                    continue;
                }
                match self.binary(i) {
                    true => binary(column.as_ref(), field, &formatters[i], row, out)?,
                    false => text(column.as_ref(), field, &formatters[i], row, out)?,
                }
                let len = i32::try_from(out.len() - at - 4)
                    .map_err(|_| DataFusionError::Execution("a value longer than 2 GiB".into()))?;
                out[at..at + 4].copy_from_slice(&len.to_be_bytes());
            }
            let len = u32::try_from(out.len() - start - 4)
                .map_err(|_| DataFusionError::Execution("a row longer than 4 GiB".into()))?;
            out[start..start + 4].copy_from_slice(&len.to_be_bytes());
            if out.len() >= max_bytes {
                return Ok(row + 1);
            }
        }
        Ok(to)
    }
}

fn downcast<T: 'static>(array: &dyn Array) -> Result<&T> {
    array.as_any().downcast_ref::<T>().ok_or_else(|| DataFusionError::Internal("a column of an unexpected type".into()))
}

/// A float as PostgreSQL prints it: `NaN`, `Infinity`, shortest round-trip digits otherwise.
fn float(v: f64, out: &mut Vec<u8>) {
    use std::io::Write;
    let _ = if v.is_nan() {
        write!(out, "NaN")
    } else if v.is_infinite() {
        write!(out, "{}", if v > 0.0 { "Infinity" } else { "-Infinity" })
    } else if v != 0.0 && !(1e-5..1e16).contains(&v.abs()) {
        write!(out, "{v:e}")
    } else {
        write!(out, "{v}")
    };
}

/// One value in the text format.
fn text(array: &dyn Array, field: &Field, formatter: &ArrayFormatter<'_>, row: usize, out: &mut Vec<u8>) -> Result<()> {
    use std::io::Write;
    match array.data_type() {
        DataType::Boolean => out.push(if downcast::<BooleanArray>(array)?.value(row) { b't' } else { b'f' }),
        DataType::Float16 => float(f64::from(downcast::<Float16Array>(array)?.value(row).to_f32()), out),
        DataType::Float32 => float(f64::from(downcast::<Float32Array>(array)?.value(row)), out),
        DataType::Float64 => float(downcast::<Float64Array>(array)?.value(row), out),
        DataType::Utf8 => out.extend_from_slice(array.as_string::<i32>().value(row).as_bytes()),
        DataType::LargeUtf8 => out.extend_from_slice(array.as_string::<i64>().value(row).as_bytes()),
        DataType::Utf8View => out.extend_from_slice(array.as_string_view().value(row).as_bytes()),
        DataType::Union(..) => json_value(array, is_json(field), row, out)?,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => {
            // bytea's hex format
            let bytes = binary_value(array, row)?;
            out.extend_from_slice(b"\\x");
            for b in bytes {
                let _ = write!(out, "{b:02x}");
            }
        }
        _ => {
            let _ = write!(out, "{}", formatter.value(row));
        }
    }
    Ok(())
}

fn binary_value(array: &dyn Array, row: usize) -> Result<Vec<u8>> {
    Ok(match array.data_type() {
        DataType::Binary => array.as_binary::<i32>().value(row).to_vec(),
        DataType::LargeBinary => array.as_binary::<i64>().value(row).to_vec(),
        DataType::BinaryView => array.as_binary_view().value(row).to_vec(),
        _ => array.as_fixed_size_binary().value(row).to_vec(),
    })
}

/// One value in the binary format of its PostgreSQL type ([`pg_type`]).
fn binary(
    array: &dyn Array,
    field: &Field,
    formatter: &ArrayFormatter<'_>,
    row: usize,
    out: &mut Vec<u8>,
) -> Result<()> {
    match array.data_type() {
        DataType::Boolean => out.push(u8::from(downcast::<BooleanArray>(array)?.value(row))),
        DataType::Int8 => out.extend_from_slice(&i16::from(downcast::<Int8Array>(array)?.value(row)).to_be_bytes()),
        DataType::UInt8 => out.extend_from_slice(&i16::from(downcast::<UInt8Array>(array)?.value(row)).to_be_bytes()),
        DataType::Int16 => out.extend_from_slice(&downcast::<Int16Array>(array)?.value(row).to_be_bytes()),
        DataType::UInt16 => out.extend_from_slice(&i32::from(downcast::<UInt16Array>(array)?.value(row)).to_be_bytes()),
        DataType::Int32 => out.extend_from_slice(&downcast::<Int32Array>(array)?.value(row).to_be_bytes()),
        DataType::UInt32 => out.extend_from_slice(&i64::from(downcast::<UInt32Array>(array)?.value(row)).to_be_bytes()),
        DataType::Int64 => out.extend_from_slice(&downcast::<Int64Array>(array)?.value(row).to_be_bytes()),
        DataType::UInt64 => numeric(&downcast::<UInt64Array>(array)?.value(row).to_string(), out)?,
        DataType::Float16 => out.extend_from_slice(&downcast::<Float16Array>(array)?.value(row).to_f32().to_be_bytes()),
        DataType::Float32 => out.extend_from_slice(&downcast::<Float32Array>(array)?.value(row).to_be_bytes()),
        DataType::Float64 => out.extend_from_slice(&downcast::<Float64Array>(array)?.value(row).to_be_bytes()),
        DataType::Timestamp(unit, _) => {
            let v = array.as_primitive_opt::<datafusion::arrow::datatypes::TimestampMicrosecondType>();
            let raw = match v {
                Some(a) => a.value(row),
                None => {
                    let cast = datafusion::arrow::compute::cast(
                        &array.slice(row, 1),
                        &DataType::Timestamp(TimeUnit::Microsecond, None),
                    )?;
                    let micros = cast.as_primitive::<datafusion::arrow::datatypes::TimestampMicrosecondType>();
                    if *unit != TimeUnit::Microsecond && micros.is_null(0) {
                        return Err(DataFusionError::Execution("a timestamp out of PostgreSQL's range".into()));
                    }
                    micros.value(0)
                }
            };
            out.extend_from_slice(&(raw - PG_EPOCH_MICROS).to_be_bytes());
        }
        DataType::Date32 => {
            let days = i64::from(array.as_primitive::<datafusion::arrow::datatypes::Date32Type>().value(row));
            let days = i32::try_from(days - PG_EPOCH_DAYS)
                .map_err(|_| DataFusionError::Execution("a date out of PostgreSQL's range".into()))?;
            out.extend_from_slice(&days.to_be_bytes());
        }
        DataType::Date64 => {
            let ms = array.as_primitive::<datafusion::arrow::datatypes::Date64Type>().value(row);
            let days = i32::try_from(ms.div_euclid(86_400_000) - PG_EPOCH_DAYS)
                .map_err(|_| DataFusionError::Execution("a date out of PostgreSQL's range".into()))?;
            out.extend_from_slice(&days.to_be_bytes());
        }
        DataType::Decimal32(..) | DataType::Decimal64(..) | DataType::Decimal128(..) | DataType::Decimal256(..) => {
            numeric(&formatter.value(row).to_string(), out)?
        }
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => {
            out.extend_from_slice(&binary_value(array, row)?)
        }
        // text, json and every type sent as text: the binary format of text is its bytes
        _ => text(array, field, formatter, row, out)?,
    }
    Ok(())
}

/// A decimal number (`-12.3400`) in `numeric`'s binary format: digit count, weight, sign and
/// display scale, then base-10,000 digits.
pub(super) fn numeric(decimal: &str, out: &mut Vec<u8>) -> Result<()> {
    let bad = || DataFusionError::Execution(format!("'{decimal}' is not a decimal number"));
    let (negative, body) = match decimal.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, decimal),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    if int.is_empty() && frac.is_empty() || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let dscale = u16::try_from(frac.len()).map_err(|_| bad())?;
    // integer digits padded on the left, fraction on the right, to groups of four
    let int = int.trim_start_matches('0');
    let int_pad = (4 - int.len() % 4) % 4;
    let frac_pad = (4 - frac.len() % 4) % 4;
    let digits: String = "0".repeat(int_pad) + int + frac + &"0".repeat(frac_pad);
    let groups: Vec<i16> =
        digits.as_bytes().chunks(4).map(|c| c.iter().fold(0i16, |acc, d| acc * 10 + i16::from(d - b'0'))).collect();
    let int_groups = (int.len() + int_pad) / 4;
    let mut weight = i16::try_from(int_groups).map_err(|_| bad())? - 1;
    // no leading or trailing zero groups
    let mut first = 0;
    while first < groups.len() && groups[first] == 0 {
        first += 1;
        weight -= 1;
    }
    let mut last = groups.len();
    while last > first && groups[last - 1] == 0 {
        last -= 1;
    }
    let kept = &groups[first..last];
    if kept.is_empty() {
        weight = 0;
    }
    let count = i16::try_from(kept.len()).map_err(|_| bad())?;
    out.extend_from_slice(&count.to_be_bytes());
    out.extend_from_slice(&weight.to_be_bytes());
    out.extend_from_slice(&(if negative && !kept.is_empty() { 0x4000u16 } else { 0 }).to_be_bytes());
    out.extend_from_slice(&dscale.to_be_bytes());
    for g in kept {
        out.extend_from_slice(&g.to_be_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numeric_bytes(s: &str) -> Vec<u8> {
        let mut out = Vec::new();
        numeric(s, &mut out).unwrap();
        out
    }

    fn words(v: &[i16]) -> Vec<u8> {
        v.iter().flat_map(|w| w.to_be_bytes()).collect()
    }

    #[test]
    fn numerics_are_base_ten_thousand_groups() {
        // 12345.678: groups 1 | 2345 . 6780, weight 1, scale 3
        assert_eq!(numeric_bytes("12345.678"), words(&[3, 1, 0, 3, 1, 2345, 6780]));
        // -0.5: one group 5000 at weight -1, negative, scale 1
        assert_eq!(numeric_bytes("-0.5"), words(&[1, -1, 0x4000, 1, 5000]));
        assert_eq!(numeric_bytes("0"), words(&[0, 0, 0, 0]));
        assert_eq!(numeric_bytes("10000"), words(&[1, 1, 0, 0, 1]));
        assert_eq!(numeric_bytes("0.0001"), words(&[1, -1, 0, 4, 1]));
        assert!(numeric("1e5", &mut Vec::new()).is_err());
        assert!(numeric("-", &mut Vec::new()).is_err());
    }

    #[test]
    fn floats_print_as_postgresql_does() {
        let text = |v: f64| {
            let mut out = Vec::new();
            float(v, &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(text(1.0), "1");
        assert_eq!(text(0.1), "0.1");
        assert_eq!(text(f64::NAN), "NaN");
        assert_eq!(text(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(text(1e300), "1e300");
        assert_eq!(text(-2.5e-7), "-2.5e-7");
    }
}
