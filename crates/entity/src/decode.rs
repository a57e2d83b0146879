//! Blob -> JSON value; built on the lazy views of `access`.

use std::fmt::Write as _;

use serde_json::{Map, Number, Value as JsonValue};

use super::{Error, FieldDict, Result, ValueRef, VectorRef, root};

/// Decodes a whole blob back to the JSON value it was encoded from.
///
/// `dict` must hold every name the blob's writer interned.
///
/// # Errors
/// [`Error::UnknownVersion`] for a blob of another format version,
/// [`Error::UnknownFieldId`] if `dict` lacks a name the blob uses; any other
/// error means the blob is corrupt.
pub fn decode(blob: &[u8], dict: &FieldDict) -> Result<JsonValue> {
    root(blob)?.to_json(dict)
}

impl ValueRef<'_> {
    /// Decodes this value and everything under it to JSON. Ints come back as
    /// ints, floats as floats (`3.0` stays `3.0`); vector components come back
    /// as the shortest decimal of their f32.
    ///
    /// # Errors
    /// [`Error::UnknownFieldId`] if `dict` lacks a name the value uses; any
    /// other error means the blob is corrupt.
    pub fn to_json(&self, dict: &FieldDict) -> Result<JsonValue> {
        Ok(match *self {
            ValueRef::Null => JsonValue::Null,
            ValueRef::Bool(b) => JsonValue::Bool(b),
            ValueRef::Int(i) => JsonValue::from(i),
            ValueRef::UInt(u) => JsonValue::from(u),
            ValueRef::Float(x) => float(x)?,
            ValueRef::Str(s) => JsonValue::String(s.to_owned()),
            ValueRef::Bytes(b) => JsonValue::Array(b.iter().map(|&x| JsonValue::from(x)).collect()),
            ValueRef::Vector(v) => vector(v)?,
            ValueRef::Array(a) => {
                // len() is capped by the body size, so this is bounded.
                let mut out = Vec::with_capacity(a.len());
                for item in a.iter() {
                    out.push(item?.to_json(dict)?);
                }
                JsonValue::Array(out)
            }
            ValueRef::Object(o) => {
                let mut out = Map::new();
                for entry in o.iter(dict) {
                    let (key, value) = entry?;
                    out.insert(key.to_owned(), value.to_json(dict)?);
                }
                JsonValue::Object(out)
            }
        })
    }
}

fn float(x: f64) -> Result<JsonValue> {
    Number::from_f64(x).map(JsonValue::Number).ok_or(Error::NotFinite)
}

fn vector(v: VectorRef<'_>) -> Result<JsonValue> {
    let mut out = Vec::with_capacity(v.len());
    let mut text = String::new();
    for x in v.iter() {
        if !x.is_finite() {
            return Err(Error::NotFinite);
        }
        // The f32's shortest decimal, read as f64, prints as the number the
        // client sent (0.1, not 0.10000000149011612).
        text.clear();
        write!(text, "{x}").map_err(|_| Error::NotFinite)?;
        let wide: f64 = text.parse().map_err(|_| Error::NotFinite)?;
        out.push(float(wide)?);
    }
    Ok(JsonValue::Array(out))
}

impl ValueRef<'_> {
    /// Writes this value as compact JSON text straight from the blob — the same text
    /// `serde_json::to_vec(&self.to_json(dict)?)` gives, without building the tree.
    ///
    /// # Errors
    /// As [`ValueRef::to_json`].
    pub fn write_json(&self, dict: &FieldDict, out: &mut Vec<u8>) -> Result<()> {
        let put = |out: &mut Vec<u8>, v: &dyn erased::Json| v.write(out);
        match *self {
            ValueRef::Null => out.extend_from_slice(b"null"),
            ValueRef::Bool(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
            ValueRef::Int(i) => put(out, &i)?,
            ValueRef::UInt(u) => put(out, &u)?,
            ValueRef::Float(x) => put(out, &float(x)?)?,
            ValueRef::Str(s) => put(out, &s)?,
            ValueRef::Bytes(_) | ValueRef::Vector(_) => put(out, &self.to_json(dict)?)?,
            ValueRef::Array(a) => {
                out.push(b'[');
                for (i, item) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    item?.write_json(dict, out)?;
                }
                out.push(b']');
            }
            ValueRef::Object(o) => {
                out.push(b'{');
                write_entries(o, dict, out, false)?;
                out.push(b'}');
            }
        }
        Ok(())
    }
}

/// Writes an object's entries (`"k":v,...`, no braces), after a comma when `after_other`.
pub fn write_entries(o: super::ObjectRef<'_>, dict: &FieldDict, out: &mut Vec<u8>, after_other: bool) -> Result<()> {
    for (i, entry) in o.iter(dict).enumerate() {
        let (key, value) = entry?;
        if i > 0 || after_other {
            out.push(b',');
        }
        erased::Json::write(&key, out)?;
        out.push(b':');
        value.write_json(dict, out)?;
    }
    Ok(())
}

/// Scalars written through serde_json, so escaping and number formats are its own.
mod erased {
    use super::{Error, Result};

    pub trait Json {
        fn write(&self, out: &mut Vec<u8>) -> Result<()>;
    }

    impl<T: serde::Serialize> Json for T {
        fn write(&self, out: &mut Vec<u8>) -> Result<()> {
            serde_json::to_writer(out, self).map_err(|_| Error::NotFinite)
        }
    }
}
