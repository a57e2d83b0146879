//! The order-preserving tuple encoding every key component goes through.
//!
//! Each component is a type tag followed by its payload; the tags order mixed types
//! `null < false < true < number < string < bytes`, and within a type the bytes order like the values:
//!
//! | tag  | component | payload |
//! |------|-----------|---------|
//! | 0x01 | null      | — |
//! | 0x02 | false     | — |
//! | 0x03 | true      | — |
//! | 0x04 | number < 0 | `!exponent` (u16 BE), `!mantissa` (u64 BE) |
//! | 0x05 | number 0  | — (so `0 == -0.0`) |
//! | 0x06 | number > 0 | exponent + 1100 (u16 BE), mantissa left-aligned (u64 BE) |
//! | 0x07 | string    | UTF-8 with `00` escaped as `00 FF`, then the terminator `00 01` |
//! | 0x08 | bytes     | raw bytes, escaped and terminated like strings |
//!
//! The two-byte terminator (as in CockroachDB's encoding) keeps the encoding prefix-free: the key of
//! table `a` is never a byte prefix of the keys of table `a\0`, so a prefix scan holds exactly the
//! keys that extend it.
//!
//! A number `|v| = M · 2^(E-63)` with the top bit of `M` set is unique for every finite value, so
//! `1`, `1.0` and `1e0` encode to the same bytes and every i64, u64 and f64 keeps its exact value:
//! comparing encodings compares the numbers exactly, ints and floats alike.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;

const TAG_NULL: u8 = 0x01;
const TAG_FALSE: u8 = 0x02;
const TAG_TRUE: u8 = 0x03;
const TAG_NEG: u8 = 0x04;
const TAG_ZERO: u8 = 0x05;
const TAG_POS: u8 = 0x06;
const TAG_STR: u8 = 0x07;
const TAG_BYTES: u8 = 0x08;

/// Bias added to the binary exponent so it encodes as an unsigned u16 (exponents run -1074..=1023).
const EXP_BIAS: i32 = 1100;

/// Why bytes could not be read as key components. A key that fails to decode was not written by
/// this version of mosaicdb: report it, do not retry.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The key ended inside a component.
    #[error("key ends inside a component")]
    Truncated,
    /// A byte that starts no known component type.
    #[error("unknown component tag 0x{0:02x}")]
    UnknownTag(u8),
    /// A string component is not valid UTF-8.
    #[error("string component is not valid UTF-8")]
    InvalidUtf8,
    /// A `00` byte inside a string is followed by neither `FF` (escaped NUL) nor `01` (end).
    #[error("invalid escape in a string component")]
    InvalidEscape,
    /// A number component is not in canonical form.
    #[error("number component is not canonical")]
    InvalidNumber,
    /// NaN and infinities have no place in the key order: reject them at the edge.
    #[error("numbers in keys must be finite")]
    NotFinite,
    /// The component has another type than the key layout expects.
    #[error("expected a {expected} component")]
    UnexpectedType {
        /// the type the layout wants at this position
        expected: &'static str,
    },
    /// The key holds more components than its layout.
    #[error("key has trailing bytes")]
    TrailingBytes,
}

/// A number as keys compare it: exactly, ints and floats on one line.
///
/// Equality and order are numeric (`Int(1) == Float(1.0)`); NaN and infinities cannot be built
/// through [`Number::from_f64`].
#[derive(Debug, Clone, Copy)]
pub enum Number {
    /// a signed integer
    Int(i64),
    /// an unsigned integer above `i64::MAX` (smaller ones may also use this variant)
    UInt(u64),
    /// a finite float
    Float(f64),
}

impl Number {
    /// A float number, or `NotFinite` for NaN and infinities.
    pub fn from_f64(f: f64) -> Result<Self, KeyError> {
        if f.is_finite() { Ok(Number::Float(f)) } else { Err(KeyError::NotFinite) }
    }

    /// Sign (-1, 0, 1) and, for non-zero values, `(E, M)` with `|v| = M · 2^(E-63)` and the top bit of M set.
    fn parts(self) -> (i8, i32, u64) {
        let (sign, mantissa, exp) = match self {
            Number::Int(i) => (i.signum() as i8, i.unsigned_abs(), 0i32),
            Number::UInt(u) => (i8::from(u != 0), u, 0),
            Number::Float(f) => {
                let bits = f.to_bits();
                let biased = ((bits >> 52) & 0x7ff) as i32;
                let frac = bits & ((1u64 << 52) - 1);
                let (m, e) = if biased == 0 { (frac, -1074) } else { (frac | (1u64 << 52), biased - 1075) };
                let sign = if m == 0 {
                    0
                } else if f.is_sign_negative() {
                    -1
                } else {
                    1
                };
                (sign, m, e)
            }
        };
        if sign == 0 {
            return (0, 0, 0);
        }
        let lz = mantissa.leading_zeros();
        (sign, exp + 63 - lz as i32, mantissa << lz)
    }

    fn encode(self, out: &mut Vec<u8>) {
        let (sign, exp, mantissa) = self.parts();
        match sign {
            0 => out.push(TAG_ZERO),
            s => {
                // exp is within -1074..=1023, so the biased form fits a u16.
                let e = (exp + EXP_BIAS) as u16;
                if s > 0 {
                    out.push(TAG_POS);
                    out.extend_from_slice(&e.to_be_bytes());
                    out.extend_from_slice(&mantissa.to_be_bytes());
                } else {
                    out.push(TAG_NEG);
                    out.extend_from_slice(&(!e).to_be_bytes());
                    out.extend_from_slice(&(!mantissa).to_be_bytes());
                }
            }
        }
    }

    /// Rebuilds the number from its canonical parts: an integer if it is one that fits i64/u64,
    /// else the f64 it came from.
    fn from_parts(negative: bool, exp: i32, mantissa: u64) -> Result<Self, KeyError> {
        if mantissa >> 63 != 1 || !(-1074..=1023).contains(&exp) {
            return Err(KeyError::InvalidNumber);
        }
        if (0..=63).contains(&exp) {
            let shift = 63 - exp as u32;
            if mantissa.trailing_zeros() >= shift {
                let m = mantissa >> shift;
                return Ok(match (negative, m) {
                    (false, m) if m <= i64::MAX as u64 => Number::Int(m as i64),
                    (false, m) => Number::UInt(m),
                    (true, m) if m <= 1u64 << 63 => Number::Int((m as i128).wrapping_neg() as i64),
                    // An integral float below i64::MIN: stays a float, if f64 holds it exactly
                    // (more significant bits would round: another key's bytes).
                    (true, m) if 64 - m.leading_zeros() - m.trailing_zeros() <= 53 => Number::Float(-(m as f64)),
                    (true, _) => return Err(KeyError::InvalidNumber),
                });
            }
        }
        // A float: at most 53 significant bits, the rest must be zero.
        let bits = if exp >= -1022 {
            if mantissa & 0x7ff != 0 {
                return Err(KeyError::InvalidNumber);
            }
            (((exp + 1023) as u64) << 52) | ((mantissa << 1) >> 12)
        } else {
            let shift = 11 + (-1022 - exp) as u32;
            if shift >= 64 || mantissa.trailing_zeros() < shift {
                return Err(KeyError::InvalidNumber);
            }
            mantissa >> shift
        };
        let f = f64::from_bits(bits);
        Ok(Number::Float(if negative { -f } else { f }))
    }

    /// The value as an f64 (lossy for integers beyond 2^53).
    pub fn as_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::UInt(u) => u as f64,
            Number::Float(f) => f,
        }
    }

    /// The value as JSON, keeping ints as ints.
    pub fn to_json(self) -> serde_json::Value {
        match self {
            Number::Int(i) => i.into(),
            Number::UInt(u) => u.into(),
            Number::Float(f) => serde_json::Number::from_f64(f).map_or(serde_json::Value::Null, Into::into),
        }
    }
}

impl PartialEq for Number {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Number {}
impl PartialOrd for Number {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Number {
    fn cmp(&self, other: &Self) -> Ordering {
        let (sa, ea, ma) = self.parts();
        let (sb, eb, mb) = other.parts();
        sa.cmp(&sb).then_with(|| {
            let mag = ea.cmp(&eb).then(ma.cmp(&mb));
            if sa < 0 { mag.reverse() } else { mag }
        })
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Number::Int(i) => write!(f, "{i}"),
            Number::UInt(u) => write!(f, "{u}"),
            Number::Float(x) => write!(f, "{x:?}"),
        }
    }
}

impl From<i64> for Number {
    fn from(i: i64) -> Self {
        Number::Int(i)
    }
}
impl From<u64> for Number {
    fn from(u: u64) -> Self {
        Number::UInt(u)
    }
}

/// One component of a key.
///
/// Equality and order are the order of the encoded bytes (numbers compare numerically).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Component<'a> {
    /// JSON null
    Null,
    /// a boolean
    Bool(bool),
    /// a number
    Num(Number),
    /// a UTF-8 string
    Str(Cow<'a, str>),
    /// a byte string
    Bytes(Cow<'a, [u8]>),
}

impl Component<'_> {
    /// Appends the encoded component to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Component::Null => out.push(TAG_NULL),
            Component::Bool(false) => out.push(TAG_FALSE),
            Component::Bool(true) => out.push(TAG_TRUE),
            Component::Num(n) => n.encode(out),
            Component::Str(s) => encode_escaped(TAG_STR, s.as_bytes(), out),
            Component::Bytes(b) => encode_escaped(TAG_BYTES, b, out),
        }
    }

    /// The tag bytes `[start, end)` of this component's type class (null, boolean, number,
    /// string, bytes): range conditions stay within one class.
    pub fn class_tags(&self) -> (u8, u8) {
        match self {
            Component::Null => (TAG_NULL, TAG_FALSE),
            Component::Bool(_) => (TAG_FALSE, TAG_NEG),
            Component::Num(_) => (TAG_NEG, TAG_STR),
            Component::Str(_) => (TAG_STR, TAG_BYTES),
            Component::Bytes(_) => (TAG_BYTES, TAG_BYTES + 1),
        }
    }

    /// An owned copy that borrows nothing.
    pub fn into_owned(self) -> Component<'static> {
        match self {
            Component::Null => Component::Null,
            Component::Bool(b) => Component::Bool(b),
            Component::Num(n) => Component::Num(n),
            Component::Str(s) => Component::Str(Cow::Owned(s.into_owned())),
            Component::Bytes(b) => Component::Bytes(Cow::Owned(b.into_owned())),
        }
    }

    /// The component as JSON (bytes become an array of numbers).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Component::Null => serde_json::Value::Null,
            Component::Bool(b) => (*b).into(),
            Component::Num(n) => n.to_json(),
            Component::Str(s) => s.as_ref().into(),
            Component::Bytes(b) => b.iter().map(|&x| serde_json::Value::from(x)).collect(),
        }
    }
}

/// Writes `tag`, the bytes with `00` escaped as `00 FF`, and the `00 01` terminator.
fn encode_escaped(tag: u8, bytes: &[u8], out: &mut Vec<u8>) {
    out.reserve(bytes.len() + 3);
    out.push(tag);
    for chunk in bytes.split_inclusive(|&b| b == 0) {
        out.extend_from_slice(chunk);
        if chunk.last() == Some(&0) {
            out.push(0xff);
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

/// Renders components in the display form: strings bare when unambiguous, else JSON-quoted.
impl fmt::Display for Component<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Component::Null => f.write_str("null"),
            Component::Bool(b) => write!(f, "{b}"),
            Component::Num(n) => write!(f, "{n}"),
            Component::Str(s) if is_bare(s) => f.write_str(s),
            Component::Str(s) => write!(f, "{}", serde_json::Value::from(s.as_ref())),
            Component::Bytes(b) => {
                f.write_str("0x")?;
                b.iter().try_for_each(|x| write!(f, "{x:02x}"))
            }
        }
    }
}

/// A string prints bare when it cannot be mistaken for a number, keyword or separator.
fn is_bare(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '@'))
        && !matches!(s, "null" | "true" | "false")
}

/// Builds a key component by component. Callers never concatenate key bytes by hand.
#[derive(Debug, Default, Clone)]
pub struct KeyWriter {
    buf: Vec<u8>,
}

impl KeyWriter {
    /// An empty key with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        KeyWriter { buf: Vec::with_capacity(capacity) }
    }
    /// A key that starts with `prefix`, the bytes of components encoded before (e.g. a series
    /// prefix shared by many keys), with room for `extra` more bytes.
    pub fn after(prefix: &[u8], extra: usize) -> Self {
        let mut buf = Vec::with_capacity(prefix.len() + extra);
        buf.extend_from_slice(prefix);
        KeyWriter { buf }
    }
    /// Appends a string component.
    pub fn str(mut self, s: &str) -> Self {
        encode_escaped(TAG_STR, s.as_bytes(), &mut self.buf);
        self
    }
    /// Appends a number component.
    pub fn num(mut self, n: impl Into<Number>) -> Self {
        n.into().encode(&mut self.buf);
        self
    }
    /// Appends the start of a string component without its terminator: every key whose next
    /// component is a string starting with `s` starts with the result.
    pub fn str_prefix(mut self, s: &str) -> Self {
        encode_escaped(TAG_STR, s.as_bytes(), &mut self.buf);
        self.buf.truncate(self.buf.len() - 2);
        self
    }

    /// Appends one raw tag byte: the start or end of a type class (see [`Component::class_tags`]).
    pub fn tag(mut self, tag: u8) -> Self {
        self.buf.push(tag);
        self
    }

    /// Appends any component.
    pub fn component(mut self, c: &Component<'_>) -> Self {
        c.encode(&mut self.buf);
        self
    }
    /// The key bytes.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

/// Reads a key component by component.
#[derive(Debug, Clone)]
pub struct KeyReader<'a> {
    rest: &'a [u8],
}

impl<'a> KeyReader<'a> {
    /// A reader over encoded key bytes.
    pub fn new(key: &'a [u8]) -> Self {
        KeyReader { rest: key }
    }

    /// True when every component has been read.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// Reads the next component.
    pub fn next_component(&mut self) -> Result<Component<'a>, KeyError> {
        let (&tag, rest) = self.rest.split_first().ok_or(KeyError::Truncated)?;
        self.rest = rest;
        Ok(match tag {
            TAG_NULL => Component::Null,
            TAG_FALSE => Component::Bool(false),
            TAG_TRUE => Component::Bool(true),
            TAG_ZERO => Component::Num(Number::Int(0)),
            TAG_POS | TAG_NEG => {
                let (head, rest) = self.rest.split_at_checked(10).ok_or(KeyError::Truncated)?;
                self.rest = rest;
                let mut e = u16::from_be_bytes([head[0], head[1]]);
                let mut m =
                    u64::from_be_bytes([head[2], head[3], head[4], head[5], head[6], head[7], head[8], head[9]]);
                if tag == TAG_NEG {
                    e = !e;
                    m = !m;
                }
                Component::Num(Number::from_parts(tag == TAG_NEG, i32::from(e) - EXP_BIAS, m)?)
            }
            TAG_STR => {
                let raw = self.unescape()?;
                Component::Str(match raw {
                    Cow::Borrowed(b) => Cow::Borrowed(std::str::from_utf8(b).map_err(|_| KeyError::InvalidUtf8)?),
                    Cow::Owned(v) => Cow::Owned(String::from_utf8(v).map_err(|_| KeyError::InvalidUtf8)?),
                })
            }
            TAG_BYTES => Component::Bytes(self.unescape()?),
            other => return Err(KeyError::UnknownTag(other)),
        })
    }

    /// Reads an escaped, terminated byte string; borrows when it holds no escaped NUL.
    fn unescape(&mut self) -> Result<Cow<'a, [u8]>, KeyError> {
        let input = self.rest;
        let mut owned: Option<Vec<u8>> = None;
        let mut start = 0;
        let mut i = 0;
        loop {
            let pos = input.get(i..).and_then(|s| s.iter().position(|&b| b == 0)).ok_or(KeyError::Truncated)? + i;
            match input.get(pos + 1) {
                Some(0xff) => {
                    owned.get_or_insert_with(Vec::new).extend_from_slice(&input[start..=pos]);
                    start = pos + 2;
                    i = pos + 2;
                    continue;
                }
                Some(0x01) => {}
                Some(_) => return Err(KeyError::InvalidEscape),
                None => return Err(KeyError::Truncated),
            }
            self.rest = &input[pos + 2..];
            return Ok(match owned {
                None => Cow::Borrowed(&input[..pos]),
                Some(mut v) => {
                    v.extend_from_slice(&input[start..pos]);
                    Cow::Owned(v)
                }
            });
        }
    }

    /// Reads the next component, which must be a string.
    pub fn next_str(&mut self) -> Result<Cow<'a, str>, KeyError> {
        match self.next_component()? {
            Component::Str(s) => Ok(s),
            _ => Err(KeyError::UnexpectedType { expected: "string" }),
        }
    }

    /// Reads the next component, which must be a number.
    pub fn next_num(&mut self) -> Result<Number, KeyError> {
        match self.next_component()? {
            Component::Num(n) => Ok(n),
            _ => Err(KeyError::UnexpectedType { expected: "number" }),
        }
    }

    /// Reads the next component, which must be an integer within i64.
    pub fn next_i64(&mut self) -> Result<i64, KeyError> {
        match self.next_num()? {
            Number::Int(i) => Ok(i),
            _ => Err(KeyError::UnexpectedType { expected: "i64" }),
        }
    }

    /// Reads the next component, which must be a non-negative integer within u64.
    pub fn next_u64(&mut self) -> Result<u64, KeyError> {
        match self.next_num()? {
            Number::Int(i) if i >= 0 => Ok(i as u64),
            Number::UInt(u) => Ok(u),
            _ => Err(KeyError::UnexpectedType { expected: "u64" }),
        }
    }

    /// The bytes not read yet.
    pub fn remaining(&self) -> &'a [u8] {
        self.rest
    }

    /// Fails unless every byte was read.
    pub fn end(self) -> Result<(), KeyError> {
        if self.rest.is_empty() { Ok(()) } else { Err(KeyError::TrailingBytes) }
    }

    /// Reads every remaining component.
    pub fn rest(mut self) -> Result<Vec<Component<'a>>, KeyError> {
        let mut out = Vec::new();
        while !self.rest.is_empty() {
            out.push(self.next_component()?);
        }
        Ok(out)
    }
}

/// The name of the type class a lone tag byte starts (how scan bounds display).
pub fn tag_name(tag: u8) -> Option<&'static str> {
    Some(match tag {
        TAG_NULL => "<null>",
        TAG_FALSE => "<false>",
        TAG_TRUE => "<true>",
        TAG_NEG => "<numbers>",
        TAG_ZERO => "<zero>",
        TAG_POS => "<positive numbers>",
        TAG_STR => "<strings>",
        TAG_BYTES => "<bytes>",
        t if t == TAG_BYTES + 1 => "<end>",
        _ => return None,
    })
}

/// The smallest byte string greater than every string that starts with `prefix`, or `None` when
/// no such string exists (the prefix is empty or all `FF`).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let keep = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut out = prefix[..=keep].to_vec();
    out[keep] += 1;
    Some(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    fn enc(c: &Component<'_>) -> Vec<u8> {
        let mut v = Vec::new();
        c.encode(&mut v);
        v
    }
    fn num(n: Number) -> Vec<u8> {
        enc(&Component::Num(n))
    }

    #[test]
    fn golden_components() {
        assert_eq!(enc(&Component::Null), [0x01]);
        assert_eq!(enc(&Component::Bool(false)), [0x02]);
        assert_eq!(enc(&Component::Bool(true)), [0x03]);
        assert_eq!(num(Number::Int(0)), [0x05]);
        // 1 = 2^0: exponent 0 + 1100 = 0x044c, mantissa top bit only.
        assert_eq!(num(Number::Int(1)), [0x06, 0x04, 0x4c, 0x80, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(num(Number::Int(-1)), [0x04, 0xfb, 0xb3, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(num(Number::Float(1.5)), [0x06, 0x04, 0x4c, 0xc0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(enc(&Component::Str("a\0b".into())), [0x07, b'a', 0x00, 0xff, b'b', 0x00, 0x01]);
        assert_eq!(enc(&Component::Bytes(vec![0, 0xff][..].into())), [0x08, 0x00, 0xff, 0xff, 0x00, 0x01]);
    }

    #[test]
    fn ints_and_floats_share_one_line() {
        assert_eq!(num(Number::Int(1)), num(Number::Float(1.0)));
        assert_eq!(num(Number::UInt(7)), num(Number::Int(7)));
        assert_eq!(num(Number::Float(-0.0)), num(Number::Int(0)));
        let ordered = [
            Number::Float(-1e300),
            Number::Int(i64::MIN),
            Number::Int(-2),
            Number::Float(-1.5),
            Number::Float(-5e-324),
            Number::Int(0),
            Number::Float(5e-324),
            Number::Float(1.0e-10),
            Number::Int(1),
            Number::Float(1.5),
            Number::Int(9_007_199_254_740_993),
            Number::Int(i64::MAX),
            Number::UInt(u64::MAX),
            Number::Float(1e300),
        ];
        for pair in ordered.windows(2) {
            assert!(num(pair[0]) < num(pair[1]), "{} < {}", pair[0], pair[1]);
            assert!(pair[0] < pair[1]);
        }
    }

    #[test]
    fn extreme_numbers_round_trip_exactly() {
        for n in [
            Number::Int(i64::MIN),
            Number::Int(i64::MAX),
            Number::UInt(u64::MAX),
            Number::Int(9_007_199_254_740_993),
            Number::Float(5e-324),
            Number::Float(-2.2250738585072014e-308),
            Number::Float(f64::MAX),
            Number::Float(f64::MIN),
            Number::Float(0.1),
        ] {
            let bytes = num(n);
            let back = KeyReader::new(&bytes).next_num().unwrap();
            assert_eq!(back, n);
            assert_eq!(back.to_string(), n.to_string());
        }
    }

    #[test]
    fn non_finite_is_rejected() {
        assert_eq!(Number::from_f64(f64::NAN).unwrap_err(), KeyError::NotFinite);
        assert_eq!(Number::from_f64(f64::INFINITY).unwrap_err(), KeyError::NotFinite);
    }

    #[test]
    fn mixed_types_order() {
        let ordered = [
            Component::Null,
            Component::Bool(false),
            Component::Bool(true),
            Component::Num(Number::Float(-1e300)),
            Component::Num(Number::Int(0)),
            Component::Num(Number::Float(1e300)),
            Component::Str("".into()),
            Component::Str("\0".into()),
            Component::Str("a".into()),
            Component::Bytes(Cow::Borrowed(&[])),
        ];
        for pair in ordered.windows(2) {
            assert!(enc(&pair[0]) < enc(&pair[1]), "{:?} < {:?}", pair[0], pair[1]);
        }
    }

    #[test]
    fn string_prefixes_and_class_ranges() {
        let p = KeyWriter::default().str_prefix("ab").finish();
        for s in ["ab", "abc", "ab\0", "ab🦀"] {
            assert!(enc(&Component::Str(s.into())).starts_with(&p), "{s:?}");
        }
        assert!(!enc(&Component::Str("a".into())).starts_with(&p));
        assert!(!enc(&Component::Str("b".into())).starts_with(&p));
        let (lo, hi) = Component::Num(Number::Int(5)).class_tags();
        for n in [Number::Float(-1e300), Number::Int(0), Number::UInt(u64::MAX)] {
            let e = num(n);
            assert!(e[0] >= lo && e[0] < hi);
        }
        assert!(enc(&Component::Str("".into()))[0] >= hi);
    }

    #[test]
    fn successor() {
        assert_eq!(prefix_successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_successor(&[0x01, 0xff, 0xff]), Some(vec![0x02]));
        assert_eq!(prefix_successor(&[0xff]), None);
        assert_eq!(prefix_successor(&[]), None);
    }

    pub(crate) fn any_number() -> impl Strategy<Value = Number> {
        prop_oneof![
            any::<i64>().prop_map(Number::Int),
            any::<u64>().prop_map(Number::UInt),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Number::Float),
            (-1000i64..1000).prop_map(Number::Int),
            (-1000i64..1000).prop_map(|i| Number::Float(i as f64 / 4.0)),
        ]
    }

    pub(crate) fn any_component() -> impl Strategy<Value = Component<'static>> {
        prop_oneof![
            Just(Component::Null),
            any::<bool>().prop_map(Component::Bool),
            any_number().prop_map(Component::Num),
            ".{0,8}".prop_map(|s| Component::Str(s.into())),
            proptest::collection::vec(prop_oneof![Just(0u8), Just(0xffu8), any::<u8>()], 0..8)
                .prop_map(|b| Component::Bytes(b.into())),
            "[a\\x00:/%]{0,4}".prop_map(|s| Component::Str(s.into())),
        ]
    }

    proptest! {
        #[test]
        fn number_order_matches_bytes(a in any_number(), b in any_number()) {
            prop_assert_eq!(a.cmp(&b), num(a).cmp(&num(b)));
            // f64 order agrees wherever f64 is exact
            if let (Number::Float(x), Number::Float(y)) = (a, b) {
                prop_assert_eq!(x.partial_cmp(&y), Some(a.cmp(&b)));
            }
            if let (Number::Int(x), Number::Int(y)) = (a, b) {
                prop_assert_eq!(x.cmp(&y), a.cmp(&b));
            }
        }

        #[test]
        fn tuples_round_trip_and_order(a in proptest::collection::vec(any_component(), 0..4),
                                       b in proptest::collection::vec(any_component(), 0..4)) {
            let ea: Vec<u8> = a.iter().flat_map(enc).collect();
            let eb: Vec<u8> = b.iter().flat_map(enc).collect();
            prop_assert_eq!(KeyReader::new(&ea).rest().unwrap(), a.clone());
            prop_assert_eq!(a.cmp(&b), ea.cmp(&eb));
            // b extends a exactly when its encoding starts with a's
            prop_assert_eq!(b.starts_with(&a), eb.starts_with(&ea));
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = KeyReader::new(&bytes).rest();
        }
    }
}
