//! The fields the system owns (`_id`, `_from`, `_to`, `_expires_at`) and the rules for their
//! values: a leaf that the schema checks, the graph rules (`adjacency`), expiry (`ttl::expiry`),
//! queries and views all use, so none of them needs to import another for a field name.

/// Fields the system owns: the id, the expiry, and an edge's endpoints.
pub const ID_FIELD: &str = "_id";
/// An edge's source vertex, `"table/id"`.
pub const FROM_FIELD: &str = "_from";
/// An edge's target vertex, `"table/id"`.
pub const TO_FIELD: &str = "_to";
/// When the document expires (RFC 3339 or epoch milliseconds; see `service::ttl`), on any table.
pub const EXPIRES_FIELD: &str = "_expires_at";

/// Milliseconds since the Unix epoch of an RFC 3339 timestamp.
pub fn parse_rfc3339_millis(s: &str) -> Option<i64> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

/// A weight field's value as a weight: a finite number >= 0.
pub fn weight_of(v: &serde_json::Value) -> Option<f64> {
    v.as_f64().filter(|w| w.is_finite() && *w >= 0.0)
}

/// Longest document id, in bytes.
pub const MAX_ID_LEN: usize = 1024;

/// Checks a document id.
pub fn check_id(id: &str) -> crate::Result<()> {
    if id.is_empty() {
        return Err(crate::ServiceError::InvalidId("must not be empty"));
    }
    if id.len() > MAX_ID_LEN {
        return Err(crate::ServiceError::InvalidId("must be at most 1024 bytes"));
    }
    Ok(())
}
