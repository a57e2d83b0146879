//! JSON value -> blob.

use serde_json::Value as JsonValue;
use simd_json::{BorrowedValue, StaticNode};

use super::{Error, FORMAT_VERSION, FieldDict, MAX_DEPTH, Result, tag, varint};

/// Options of [`encode`] and [`encode_simd`].
#[derive(Debug, Clone, Copy, Default)]
pub struct EncodeOptions<'a> {
    /// Top-level fields whose value, when it is an array of numbers, is
    /// stored as an f32 vector (lossy: each number is rounded to f32, and it
    /// comes back as that f32's shortest decimal). An array holding anything
    /// but numbers, or a number outside the finite f32 range, is stored as an
    /// ordinary array.
    pub vector_fields: &'a [&'a str],
}

/// Encodes `doc` as a blob, interning its new keys in `dict`.
///
/// On error the names this call added to `dict` are rolled back. On success
/// the caller must persist `dict.names_from(old_len)` before the blob is
/// readable by another process.
///
/// # Errors
/// [`Error::NotFinite`] for a NaN or infinite float, [`Error::TooDeep`] for
/// nesting deeper than [`MAX_DEPTH`]: both mean the document is rejected.
pub fn encode(doc: &JsonValue, dict: &mut FieldDict, opts: &EncodeOptions<'_>) -> Result<Vec<u8>> {
    encode_any(doc, dict, opts)
}

/// Same as [`encode`] for a document parsed by simd-json; gives the same
/// bytes as [`encode`] on the same JSON text (object keys are sorted by byte
/// order and a repeated key keeps its last value, as serde_json does).
///
/// # Errors
/// As [`encode`].
pub fn encode_simd(doc: &BorrowedValue<'_>, dict: &mut FieldDict, opts: &EncodeOptions<'_>) -> Result<Vec<u8>> {
    encode_any(doc, dict, opts)
}

/// Encodes `doc` using only the names `dict` already holds: `Ok(None)` when
/// the document has a name that [`encode`] would intern (one that is new,
/// short enough and fits). Needs no `&mut`, so many threads can encode
/// against one shared dictionary; only a document with a new name needs
/// [`encode`] on a dictionary of its own.
///
/// # Errors
/// As [`encode`].
pub fn encode_known(doc: &JsonValue, dict: &FieldDict, opts: &EncodeOptions<'_>) -> Result<Option<Vec<u8>>> {
    encode_shared(doc, dict, opts)
}

/// [`encode_known`] for a document parsed by simd-json.
///
/// # Errors
/// As [`encode`].
pub fn encode_simd_known(
    doc: &BorrowedValue<'_>,
    dict: &FieldDict,
    opts: &EncodeOptions<'_>,
) -> Result<Option<Vec<u8>>> {
    encode_shared(doc, dict, opts)
}

fn encode_shared<V: Source>(doc: &V, dict: &FieldDict, opts: &EncodeOptions<'_>) -> Result<Option<Vec<u8>>> {
    let names = Names::Known { dict, missing: false };
    let mut w = Writer { out: Vec::with_capacity(doc.size_estimate()), names, vector_fields: opts.vector_fields };
    w.out.push(FORMAT_VERSION);
    w.value(doc, 0)?;
    Ok(match w.names {
        Names::Known { missing: true, .. } => None,
        _ => Some(w.out),
    })
}

fn encode_any<V: Source>(doc: &V, dict: &mut FieldDict, opts: &EncodeOptions<'_>) -> Result<Vec<u8>> {
    let mark = dict.len();
    let names = Names::Intern(dict);
    let mut w = Writer { out: Vec::with_capacity(doc.size_estimate()), names, vector_fields: opts.vector_fields };
    w.out.push(FORMAT_VERSION);
    match w.value(doc, 0) {
        Ok(()) => Ok(w.out),
        Err(e) => {
            // Keep ids of a failed write out of the dictionary, so that a
            // caller who only persists after success never loses a name.
            if let Names::Intern(dict) = w.names {
                dict.truncate(mark);
            }
            Err(e)
        }
    }
}

/// Where the writer gets key ids.
enum Names<'o> {
    /// new names get the next ids
    Intern(&'o mut FieldDict),
    /// read-only; a name that would be interned sets `missing` (and is
    /// written inline, in a blob the caller then throws away)
    Known { dict: &'o FieldDict, missing: bool },
}

/// One node of a JSON tree, as the writer needs to see it.
enum Node<'s, V: Source + 's> {
    Null,
    Bool(bool),
    I64(i64),
    U64(u64),
    F64(f64),
    Str(&'s str),
    Array(&'s [V]),
    /// Entry count and entries in key byte order without duplicates.
    Object(usize, V::Entries<'s>),
}

/// The two JSON tree types the writer accepts; lets one writer serve both.
trait Source: Sized {
    type Entries<'s>: Iterator<Item = (&'s str, &'s Self)>
    where
        Self: 's;

    fn node(&self) -> Node<'_, Self>;

    /// Cheap guess of the blob size, to reserve the output once.
    fn size_estimate(&self) -> usize;
}

/// Rough bytes per top-level member: a key id, a tag and a short payload.
const BYTES_PER_MEMBER: usize = 16;

fn json_entry<'s>((k, v): (&'s String, &'s JsonValue)) -> (&'s str, &'s JsonValue) {
    (k.as_str(), v)
}

impl Source for JsonValue {
    type Entries<'s> =
        std::iter::Map<serde_json::map::Iter<'s>, fn((&'s String, &'s JsonValue)) -> (&'s str, &'s JsonValue)>;

    #[inline]
    fn node(&self) -> Node<'_, Self> {
        match self {
            JsonValue::Null => Node::Null,
            JsonValue::Bool(b) => Node::Bool(*b),
            JsonValue::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Node::I64(i)
                } else if let Some(u) = n.as_u64() {
                    Node::U64(u)
                } else {
                    // Without arbitrary_precision every other number is an f64.
                    Node::F64(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            JsonValue::String(s) => Node::Str(s),
            JsonValue::Array(a) => Node::Array(a),
            // serde_json's Map is a BTreeMap: already sorted and unique.
            JsonValue::Object(m) => Node::Object(m.len(), m.iter().map(json_entry as fn(_) -> _)),
        }
    }

    fn size_estimate(&self) -> usize {
        match self {
            JsonValue::Array(a) => 16 + a.len() * BYTES_PER_MEMBER,
            JsonValue::Object(m) => 16 + m.len() * BYTES_PER_MEMBER,
            _ => 16,
        }
    }
}

impl Source for BorrowedValue<'_> {
    type Entries<'s>
        = std::vec::IntoIter<(&'s str, &'s Self)>
    where
        Self: 's;

    #[inline]
    fn node(&self) -> Node<'_, Self> {
        match self {
            BorrowedValue::Static(StaticNode::Null) => Node::Null,
            BorrowedValue::Static(StaticNode::Bool(b)) => Node::Bool(*b),
            BorrowedValue::Static(StaticNode::I64(i)) => Node::I64(*i),
            BorrowedValue::Static(StaticNode::U64(u)) => Node::U64(*u),
            BorrowedValue::Static(StaticNode::F64(f)) => Node::F64(*f),
            BorrowedValue::String(s) => Node::Str(s),
            BorrowedValue::Array(a) => Node::Array(a),
            BorrowedValue::Object(o) => {
                let mut entries: Vec<(&str, &Self)> = o.iter().map(|(k, v)| (&**k, v)).collect();
                // Stable sort keeps repeated keys (which simd-json keeps in
                // small objects) in input order, so the dedup below keeps the
                // last one, as serde_json's map insert does.
                entries.sort_by(|a, b| a.0.cmp(b.0));
                entries.dedup_by(|later, earlier| {
                    let same = later.0 == earlier.0;
                    if same {
                        *earlier = *later;
                    }
                    same
                });
                Node::Object(entries.len(), entries.into_iter())
            }
        }
    }

    fn size_estimate(&self) -> usize {
        match self {
            BorrowedValue::Array(a) => 16 + a.len() * BYTES_PER_MEMBER,
            BorrowedValue::Object(o) => 16 + o.len() * BYTES_PER_MEMBER,
            _ => 16,
        }
    }
}

struct Writer<'o> {
    out: Vec<u8>,
    names: Names<'o>,
    vector_fields: &'o [&'o str],
}

impl Writer<'_> {
    /// Writes `v`, which sits inside `depth` containers.
    fn value<V: Source>(&mut self, v: &V, depth: usize) -> Result<()> {
        match v.node() {
            Node::Null => self.out.push(tag::NULL),
            Node::Bool(false) => self.out.push(tag::FALSE),
            Node::Bool(true) => self.out.push(tag::TRUE),
            Node::I64(i) => self.int(i),
            Node::U64(u) => match i64::try_from(u) {
                Ok(i) => self.int(i),
                Err(_) => {
                    self.out.push(tag::UINT);
                    varint::write(&mut self.out, u);
                }
            },
            Node::F64(x) => self.float(x)?,
            Node::Str(s) => self.string(s),
            Node::Array(items) => {
                let depth = Self::enter(depth)?;
                let start = self.begin(tag::ARRAY, items.len());
                for item in items {
                    self.value(item, depth)?;
                }
                self.finish(start);
            }
            Node::Object(len, entries) => {
                let depth = Self::enter(depth)?;
                let start = self.begin(tag::OBJECT, len);
                for (key, item) in entries {
                    self.key(key);
                    if depth == 1 && self.vector_fields.contains(&key) && self.vector(item) {
                        continue;
                    }
                    self.value(item, depth)?;
                }
                self.finish(start);
            }
        }
        Ok(())
    }

    fn enter(depth: usize) -> Result<usize> {
        if depth >= MAX_DEPTH {
            return Err(Error::TooDeep);
        }
        Ok(depth + 1)
    }

    #[inline]
    fn int(&mut self, i: i64) {
        if (0..tag::SMALL_INT_LIMIT).contains(&i) {
            self.out.push(tag::SMALL_INT | i as u8);
        } else {
            self.out.push(tag::INT);
            varint::write(&mut self.out, varint::zigzag(i));
        }
    }

    #[inline]
    fn float(&mut self, x: f64) -> Result<()> {
        if !x.is_finite() {
            return Err(Error::NotFinite);
        }
        let narrow = x as f32;
        // Exact f32 values (small integers, halves, -0.0, ...) are common and
        // lose nothing in half the space; the check preserves the sign of 0.
        if f64::from(narrow) == x {
            self.out.push(tag::F32);
            self.out.extend_from_slice(&narrow.to_le_bytes());
        } else if let Some((m, scale)) = short_decimal(x) {
            // Prices and measurements (29.99, 0.1) are short decimals: 3-5 bytes instead of 9.
            self.out.push(tag::DECIMAL);
            varint::write(&mut self.out, varint::zigzag(m));
            self.out.push(scale);
        } else {
            self.out.push(tag::F64);
            self.out.extend_from_slice(&x.to_le_bytes());
        }
        Ok(())
    }

    #[inline]
    fn string(&mut self, s: &str) {
        if s.len() < tag::SHORT_STRING_MAX_LEN {
            self.out.push(tag::SHORT_STRING | s.len() as u8);
        } else {
            self.out.push(tag::STRING);
            varint::write(&mut self.out, s.len() as u64);
        }
        self.out.extend_from_slice(s.as_bytes());
    }

    #[inline]
    fn key(&mut self, key: &str) {
        let id = match &mut self.names {
            Names::Intern(dict) => dict.intern(key),
            Names::Known { dict, missing } => {
                let id = dict.id_of(key);
                *missing |= id.is_none() && dict.could_intern(key);
                id
            }
        };
        match id {
            Some(id) => varint::write(&mut self.out, u64::from(id) << 1),
            None => {
                varint::write(&mut self.out, ((key.len() as u64) << 1) | 1);
                self.out.extend_from_slice(key.as_bytes());
            }
        }
    }

    /// Writes `v` as an f32 vector if it is an array of numbers that all fit
    /// a finite f32; returns false, having written nothing, otherwise.
    fn vector<V: Source>(&mut self, v: &V) -> bool {
        let Node::Array(items) = v.node() else {
            return false;
        };
        let as_f32 = |item: &V| -> Option<f32> {
            let x = match item.node() {
                Node::I64(i) => i as f32,
                Node::U64(u) => u as f32,
                Node::F64(f) => f as f32,
                _ => return None,
            };
            x.is_finite().then_some(x)
        };
        if !items.iter().all(|item| as_f32(item).is_some()) {
            return false;
        }
        self.out.push(tag::VECTOR);
        varint::write(&mut self.out, items.len() as u64);
        self.out.reserve(items.len() * 4);
        for x in items.iter().filter_map(as_f32) {
            self.out.extend_from_slice(&x.to_le_bytes());
        }
        true
    }

    /// Starts a container: writes its tag, a one-byte body length slot and
    /// the count; returns the slot position for [`finish`](Self::finish).
    #[inline]
    fn begin(&mut self, tag: u8, count: usize) -> usize {
        self.out.push(tag);
        let slot = self.out.len();
        self.out.push(0);
        varint::write(&mut self.out, count as u64);
        slot
    }

    /// Fills in the body length. Most bodies are under 128 bytes and fit the
    /// reserved byte; a longer one shifts its body right by the extra varint
    /// bytes, which costs one move of bytes just written (still in cache)
    /// instead of a separate sizing pass over the whole tree.
    #[inline]
    fn finish(&mut self, slot: usize) {
        let body = self.out.len() - slot - 1;
        if body < 0x80 {
            if let Some(b) = self.out.get_mut(slot) {
                *b = body as u8;
            }
        } else {
            let (bytes, n) = varint::to_bytes(body as u64);
            self.out.splice(slot..=slot, bytes.into_iter().take(n));
        }
    }
}

/// `x` as `m / 10^scale` with the smallest scale in 1..=15 that gives back exactly `x`, when the
/// encoding is shorter than an f64's 8 bytes (so |m| < 2^41).
fn short_decimal(x: f64) -> Option<(i64, u8)> {
    for (scale, p) in super::POW10.iter().enumerate().take(16).skip(1) {
        let m = (x * p).round();
        if m.abs() >= (1u64 << 41) as f64 {
            return None;
        }
        if m / p == x {
            return Some((m as i64, scale as u8));
        }
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use serde_json::json;

    fn enc(v: &JsonValue) -> Vec<u8> {
        encode(v, &mut FieldDict::new(), &EncodeOptions::default()).unwrap()
    }

    #[test]
    fn golden_bytes() {
        let doc = json!({"a":1,"b":"x","c":[true,null],"d":-200,"e":1.5,"f":0.1,"g":1e300});
        let mut dict = FieldDict::new();
        let blob = encode(&doc, &mut dict, &EncodeOptions::default()).unwrap();
        #[rustfmt::skip]
        let expected = vec![
            0x01,                   // version
            0x0B, 0x24, 0x07,       // object, body 36 bytes, 7 entries
            0x00, 0x81,             // a (id 0): small int 1
            0x02, 0x41, b'x',       // b (id 1): short string "x"
            0x04, 0x0A, 0x03, 0x02, 0x02, 0x00, // c: array, body 3, 2 elems: true, null
            0x06, 0x03, 0x8F, 0x03, // d: int, zigzag(-200) = 399
            0x08, 0x06, 0x00, 0x00, 0xC0, 0x3F, // e: f32 1.5
            0x0A, 0x0C, 0x02, 0x01, // f: decimal 1 / 10^1
            0x0C, 0x05, 0x9C, 0x75, 0x00, 0x88, 0x3C, 0xE4, 0x37, 0x7E, // g: f64 1e300
        ];
        assert_eq!(blob, expected);
        let names: Vec<_> = dict.names_from(0).collect();
        assert_eq!(names, vec![(0, "a"), (1, "b"), (2, "c"), (3, "d"), (4, "e"), (5, "f"), (6, "g")]);
    }

    #[test]
    fn scalar_bytes() {
        assert_eq!(enc(&json!(null)), [1, 0x00]);
        assert_eq!(enc(&json!(false)), [1, 0x01]);
        assert_eq!(enc(&json!(127)), [1, 0xFF]);
        assert_eq!(enc(&json!(128)), [1, 0x03, 0x80, 0x02]);
        assert_eq!(enc(&json!(-1)), [1, 0x03, 0x01]);
        let mut big = vec![1, 0x04];
        big.extend([0xff; 9]);
        big.push(0x01);
        assert_eq!(enc(&json!(u64::MAX)), big);
        assert_eq!(enc(&json!(-0.0)), [1, 0x06, 0, 0, 0, 0x80]);
        let long = "y".repeat(64);
        let mut expected = vec![1, 0x07, 64];
        expected.extend(long.bytes());
        assert_eq!(enc(&json!(long)), expected);
        let short = "y".repeat(63);
        assert_eq!(enc(&json!(short))[1], 0x7F);
    }

    #[test]
    fn long_body_length_is_shifted_in() {
        let doc = json!(["z".repeat(200)]);
        let blob = enc(&doc);
        // body = count(1) + tag(1) + len varint(2) + 200 = 204 -> 2-byte varint.
        assert_eq!(&blob[..6], &[1, 0x0A, 0xCC, 0x01, 0x01, 0x07]);
        assert_eq!(blob.len(), 4 + 204);
    }

    #[test]
    fn inline_keys() {
        let long = "k".repeat(65);
        let doc = json!({ long.clone(): 1 });
        let mut dict = FieldDict::new();
        let blob = encode(&doc, &mut dict, &EncodeOptions::default()).unwrap();
        assert!(dict.is_empty());
        // body = count 1 + key-ref (65 << 1 | 1 = 0x83 0x01) 2 + key 65 + value 1.
        let mut expected = vec![1, 0x0B, 69, 0x01, 0x83, 0x01];
        expected.extend(long.bytes());
        expected.push(0x81);
        assert_eq!(blob, expected);
    }

    #[test]
    fn vector_fields() {
        let doc = json!({"emb": [1, 0.5, -2.25], "other": [1, 2], "mixed": [1, "x"], "huge": [1e300]});
        let fields = ["emb", "mixed", "huge"];
        let opts = EncodeOptions { vector_fields: &fields };
        let mut dict = FieldDict::new();
        let blob = encode(&doc, &mut dict, &opts).unwrap();
        let emb = dict.id_of("emb").unwrap() as u8;
        let pos = blob.windows(2).position(|w| w == [emb << 1, 0x09]).unwrap();
        assert_eq!(blob[pos + 2], 3);
        assert_eq!(&blob[pos + 3..pos + 7], &1.0f32.to_le_bytes());
        // Non-number and out-of-range arrays stay ordinary arrays.
        let arrays = blob.windows(2).filter(|w| w[1] == 0x0A).count();
        assert!(arrays >= 3);
        // Nested fields of the same name are not vectors.
        let nested = json!({"n": {"emb": [1.0]}});
        let blob = encode(&nested, &mut dict, &opts).unwrap();
        assert!(!blob.contains(&0x09));
    }

    #[test]
    fn not_finite_rolls_back_dict() {
        // serde_json cannot hold a NaN, but the simd-json tree can.
        let mut doc = simd_json::borrowed::Object::default();
        doc.insert("fresh".into(), BorrowedValue::Static(StaticNode::F64(f64::NAN)));
        let doc = BorrowedValue::Object(Box::new(doc));
        let mut dict = FieldDict::new();
        dict.intern("old");
        let err = encode_simd(&doc, &mut dict, &EncodeOptions::default()).unwrap_err();
        assert_eq!(err, Error::NotFinite);
        assert_eq!(dict.len(), 1);
        assert_eq!(dict.id_of("fresh"), None);
    }

    #[test]
    fn depth_limit() {
        let mut v = json!(1);
        for _ in 0..MAX_DEPTH {
            v = json!([v]);
        }
        assert!(encode(&v, &mut FieldDict::new(), &EncodeOptions::default()).is_ok());
        let v = json!({ "k": v });
        let mut dict = FieldDict::new();
        let err = encode(&v, &mut dict, &EncodeOptions::default()).unwrap_err();
        assert_eq!(err, Error::TooDeep);
        assert!(dict.is_empty());
    }

    #[test]
    fn simd_duplicate_keys_keep_last() {
        let text = br#"{"b":1,"a":2,"b":3}"#;
        let serde: JsonValue = serde_json::from_slice(text).unwrap();
        let mut buf = text.to_vec();
        let simd = simd_json::to_borrowed_value(&mut buf).unwrap();
        let opts = EncodeOptions::default();
        let mut d1 = FieldDict::new();
        let mut d2 = FieldDict::new();
        assert_eq!(encode(&serde, &mut d1, &opts).unwrap(), encode_simd(&simd, &mut d2, &opts).unwrap());
    }
}
