//! Deserialization helpers shared by the request bodies of several models.

use serde::Deserialize;

/// A JSON Schema integer: `20`, or `20.0` (a number without a fraction is an integer there, so a
/// client working from the OpenAPI document may send it). Beyond usize it saturates.
pub fn integer<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<usize>, D::Error> {
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else { return Ok(None) };
    match (n.as_u64(), n.as_f64()) {
        (Some(u), _) => Ok(Some(usize::try_from(u).unwrap_or(usize::MAX))),
        // `as` saturates at usize::MAX
        (None, Some(f)) if f >= 0.0 && f.fract() == 0.0 => Ok(Some(f as usize)),
        _ => Err(serde::de::Error::custom(format!("expected a non-negative integer, got {n}"))),
    }
}
