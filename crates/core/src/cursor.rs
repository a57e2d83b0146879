//! Cursors: opaque base64url tokens that start with a hash of what handed them out (the table
//! and its incarnation, and for a query its filter and sort). A cursor presented with another
//! binding — from another table, filter or sort, or from a dropped and re-created table — is
//! refused with `invalid_cursor` rather than taken for a position in this one.

use super::{Result, ServiceError};
use base64::Engine;
use serde_json::Value;

/// What a cursor is bound to: a hash of the parts given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding(u64);

impl Binding {
    /// The binding of `parts`, each length-prefixed so that no two lists of parts collide by
    /// concatenation (`["ab", "c"]` vs `["a", "bc"]`).
    pub fn new(parts: &[&[u8]]) -> Binding {
        let mut bytes = Vec::with_capacity(parts.iter().map(|p| p.len() + 8).sum());
        for p in parts {
            bytes.extend_from_slice(&(p.len() as u64).to_be_bytes());
            bytes.extend_from_slice(p);
        }
        Binding(xxhash_rust::xxh3::xxh3_64(&bytes))
    }

    /// The binding of a table: its name and creation time (so a re-created table of the same
    /// name refuses the old table's cursors).
    pub fn table(name: &str, created_at: i64, more: &[&[u8]]) -> Binding {
        let created = created_at.to_be_bytes();
        let mut parts: Vec<&[u8]> = vec![name.as_bytes(), &created];
        parts.extend_from_slice(more);
        Binding::new(&parts)
    }
}

/// The cursor for `payload` under `binding`.
pub fn seal(binding: Binding, payload: &[u8]) -> String {
    let mut bytes = Vec::with_capacity(8 + payload.len());
    bytes.extend_from_slice(&binding.0.to_be_bytes());
    bytes.extend_from_slice(payload);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The payload of `cursor`, if it was sealed under `binding`.
pub fn open(binding: Binding, cursor: &str) -> Result<Vec<u8>> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| invalid("it is not one this server handed out"))?;
    match bytes.split_first_chunk::<8>() {
        Some((hash, payload)) if u64::from_be_bytes(*hash) == binding.0 => Ok(payload.to_vec()),
        Some(_) => Err(invalid("it belongs to another table, filter or sort")),
        None => Err(invalid("it is not one this server handed out")),
    }
}

/// `invalid_cursor` with the reason.
pub fn invalid(why: &str) -> ServiceError {
    ServiceError::InvalidCursor(why.to_owned())
}

/// `v` as JSON text with object keys sorted, so equal filters bind equally whatever their key
/// order.
pub fn canonical_json(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(Value::String(k.clone()).to_string().as_bytes());
                out.push(b':');
                canonical_json(v, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical_json(v, out);
            }
            out.push(b']');
        }
        other => out.extend_from_slice(other.to_string().as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cursor_opens_only_under_its_binding() {
        let b = Binding::table("t", 1, &[b"f"]);
        let c = seal(b, b"pos");
        assert_eq!(open(b, &c).unwrap(), b"pos");
        for other in [Binding::table("u", 1, &[b"f"]), Binding::table("t", 2, &[b"f"]), Binding::table("t", 1, &[b"g"])]
        {
            assert!(matches!(open(other, &c), Err(ServiceError::InvalidCursor(_))));
        }
        assert_ne!(Binding::new(&[b"ab", b"c"]), Binding::new(&[b"a", b"bc"]));
        for junk in ["", "!!", "AAAA"] {
            assert!(matches!(open(b, junk), Err(ServiceError::InvalidCursor(_))), "{junk}");
        }
    }

    #[test]
    fn canonical_json_ignores_key_order() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        canonical_json(&json!({"x": 1, "y": {"b": [1, "2"], "a": null}}), &mut a);
        canonical_json(&serde_json::from_str::<Value>(r#"{"y": {"a": null, "b": [1, "2"]}, "x": 1}"#).unwrap(), &mut b);
        assert_eq!(a, b);
        assert_eq!(String::from_utf8(a).unwrap(), r#"{"x":1,"y":{"a":null,"b":[1,"2"]}}"#);
    }
}
