//! The parameters of a `Bind` as SQL values: each decoded from its text or binary format by
//! the type the client declared (or, when it declared none, the type the planner inferred), then
//! cast to the inferred type where there is one, so `$1` compares as its column does.

use super::encode::{PG_EPOCH_DAYS, PG_EPOCH_MICROS};
use datafusion::arrow::datatypes::DataType;
#[cfg(test)]
use datafusion::arrow::datatypes::TimeUnit;
use datafusion::common::ScalarValue;
use pgwire::api::Type;

/// The PostgreSQL type a parameter of inferred type `ty` is described as.
pub(super) fn described(ty: Option<&DataType>) -> Type {
    match ty {
        Some(DataType::Boolean) => Type::BOOL,
        Some(DataType::Int8 | DataType::Int16 | DataType::UInt8) => Type::INT2,
        Some(DataType::Int32 | DataType::UInt16) => Type::INT4,
        Some(DataType::Int64 | DataType::UInt32 | DataType::UInt64) => Type::INT8,
        Some(DataType::Float16 | DataType::Float32) => Type::FLOAT4,
        Some(DataType::Float64) => Type::FLOAT8,
        Some(DataType::Timestamp(_, Some(_))) => Type::TIMESTAMPTZ,
        Some(DataType::Timestamp(_, None)) => Type::TIMESTAMP,
        Some(DataType::Date32 | DataType::Date64) => Type::DATE,
        Some(
            DataType::Decimal32(..) | DataType::Decimal64(..) | DataType::Decimal128(..) | DataType::Decimal256(..),
        ) => Type::NUMERIC,
        _ => Type::TEXT,
    }
}

/// One parameter's value: `bytes` (`None`: NULL) in the binary format or text, of PostgreSQL
/// type `ty`, cast to `want` (the planner's type) when known.
pub(super) fn decode(
    bytes: Option<&[u8]>,
    ty: &Type,
    binary: bool,
    want: Option<&DataType>,
) -> Result<ScalarValue, String> {
    let value = match bytes {
        None => ScalarValue::Null,
        Some(bytes) if binary => from_binary(bytes, ty)?,
        Some(bytes) => from_text(bytes, ty)?,
    };
    match want {
        Some(want) if value.data_type() != *want && !matches!(want, DataType::Null) => {
            value.cast_to(want).map_err(|_| format!("invalid input for a parameter of type {want}: {}", shown(&value)))
        }
        _ => Ok(value),
    }
}

fn shown(value: &ScalarValue) -> String {
    let text = value.to_string();
    match text.chars().count() > 64 {
        true => format!("{}…", text.chars().take(64).collect::<String>()),
        false => text,
    }
}

fn utf8(bytes: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(bytes).map_err(|_| "a parameter is not valid UTF-8".to_owned())
}

fn from_text(bytes: &[u8], ty: &Type) -> Result<ScalarValue, String> {
    let text = utf8(bytes)?;
    let bad = || format!("invalid input syntax for type {}: \"{}\"", ty.name(), text);
    Ok(match *ty {
        Type::INT2 | Type::INT4 | Type::INT8 | Type::OID => {
            ScalarValue::Int64(Some(text.trim().parse().map_err(|_| bad())?))
        }
        Type::FLOAT4 | Type::FLOAT8 | Type::NUMERIC => {
            let t = text.trim();
            let v = match t.to_ascii_lowercase().as_str() {
                "nan" => f64::NAN,
                "infinity" | "+infinity" | "inf" => f64::INFINITY,
                "-infinity" | "-inf" => f64::NEG_INFINITY,
                _ => t.parse().map_err(|_| bad())?,
            };
            ScalarValue::Float64(Some(v))
        }
        Type::BOOL => ScalarValue::Boolean(Some(match text.trim().to_ascii_lowercase().as_str() {
            "t" | "true" | "yes" | "y" | "on" | "1" => true,
            "f" | "false" | "no" | "n" | "off" | "0" => false,
            _ => return Err(bad()),
        })),
        // dates, timestamps, json, text and unknown: text, which the cast to the planner's type
        // (or the comparison) reads
        _ => ScalarValue::Utf8(Some(text.to_owned())),
    })
}

fn fixed<const N: usize>(bytes: &[u8], ty: &Type) -> Result<[u8; N], String> {
    bytes.try_into().map_err(|_| format!("a binary {} parameter of {} bytes", ty.name(), bytes.len()))
}

fn from_binary(bytes: &[u8], ty: &Type) -> Result<ScalarValue, String> {
    Ok(match *ty {
        Type::BOOL => ScalarValue::Boolean(Some(fixed::<1>(bytes, ty)?[0] != 0)),
        Type::INT2 => ScalarValue::Int16(Some(i16::from_be_bytes(fixed(bytes, ty)?))),
        Type::INT4 => ScalarValue::Int32(Some(i32::from_be_bytes(fixed(bytes, ty)?))),
        Type::OID => ScalarValue::Int64(Some(i64::from(u32::from_be_bytes(fixed(bytes, ty)?)))),
        Type::INT8 => ScalarValue::Int64(Some(i64::from_be_bytes(fixed(bytes, ty)?))),
        Type::FLOAT4 => ScalarValue::Float32(Some(f32::from_be_bytes(fixed(bytes, ty)?))),
        Type::FLOAT8 => ScalarValue::Float64(Some(f64::from_be_bytes(fixed(bytes, ty)?))),
        Type::TIMESTAMP | Type::TIMESTAMPTZ => {
            let micros = i64::from_be_bytes(fixed(bytes, ty)?)
                .checked_add(PG_EPOCH_MICROS)
                .ok_or_else(|| "a timestamp parameter out of range".to_owned())?;
            let zone = (*ty == Type::TIMESTAMPTZ).then(|| "UTC".into());
            ScalarValue::TimestampMicrosecond(Some(micros), zone)
        }
        Type::DATE => {
            let days = i64::from(i32::from_be_bytes(fixed(bytes, ty)?)) + PG_EPOCH_DAYS;
            ScalarValue::Date32(Some(i32::try_from(days).map_err(|_| "a date parameter out of range".to_owned())?))
        }
        // jsonb's binary format is a version byte, then the text
        Type::JSONB => match bytes.split_first() {
            Some((1, text)) => ScalarValue::Utf8(Some(utf8(text)?.to_owned())),
            _ => return Err("a binary jsonb parameter of an unknown version".into()),
        },
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN | Type::JSON => {
            ScalarValue::Utf8(Some(utf8(bytes)?.to_owned()))
        }
        _ => return Err(format!("a binary parameter of type {} is not taken: send it as text", ty.name())),
    })
}

/// The Arrow type of a timestamp parameter, for tests.
#[cfg(test)]
fn micros(zone: Option<&str>) -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, zone.map(Into::into))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_decode_from_text_and_binary_and_cast_to_the_planners_type() {
        let int = decode(Some(b"42"), &Type::UNKNOWN, false, Some(&DataType::Int32)).unwrap();
        assert_eq!(int, ScalarValue::Int32(Some(42)));
        let bin = decode(Some(&7i64.to_be_bytes()), &Type::INT8, true, Some(&DataType::Int64)).unwrap();
        assert_eq!(bin, ScalarValue::Int64(Some(7)));
        let flag = decode(Some(b"t"), &Type::BOOL, false, None).unwrap();
        assert_eq!(flag, ScalarValue::Boolean(Some(true)));
        let null = decode(None, &Type::TEXT, false, Some(&DataType::Utf8)).unwrap();
        assert!(null.is_null());
        // 2000-01-02 00:00:00 UTC
        let day = 86_400_000_000i64;
        let ts = decode(Some(&day.to_be_bytes()), &Type::TIMESTAMPTZ, true, None).unwrap();
        assert_eq!(ts.data_type(), micros(Some("UTC")));
        assert_eq!(ts, ScalarValue::TimestampMicrosecond(Some(PG_EPOCH_MICROS + day), Some("UTC".into())));
        assert!(decode(Some(b"x"), &Type::INT4, false, None).unwrap_err().contains("invalid input syntax"));
        assert!(
            decode(Some(b"abc"), &Type::TEXT, false, Some(&DataType::Int64)).unwrap_err().contains("invalid input")
        );
        assert!(decode(Some(&[0, 1]), &Type::INT8, true, None).is_err());
        assert_eq!(described(Some(&DataType::Int32)), Type::INT4);
        assert_eq!(described(None), Type::TEXT);
    }
}
