//! Lazy, borrowed views of a blob and single-field access.

use super::{Error, FORMAT_VERSION, FieldDict, MAX_DEPTH, Result, tag, varint};

/// A value inside a blob, decoded only as far as its own header: strings and
/// bytes borrow from the blob, containers are walked on demand.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueRef<'a> {
    /// JSON null.
    Null,
    /// JSON true / false.
    Bool(bool),
    /// An integer that fits an i64.
    Int(i64),
    /// An integer above `i64::MAX`.
    UInt(u64),
    /// A float (never an integer, even when its value is whole).
    Float(f64),
    /// A string.
    Str(&'a str),
    /// Raw bytes (JSON: an array of numbers 0-255).
    Bytes(&'a [u8]),
    /// An f32 vector.
    Vector(VectorRef<'a>),
    /// An array.
    Array(ArrayRef<'a>),
    /// An object.
    Object(ObjectRef<'a>),
}

/// An f32 vector inside a blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VectorRef<'a> {
    // Length is a multiple of 4, checked when the view is made.
    data: &'a [u8],
}

impl<'a> VectorRef<'a> {
    /// Number of components.
    pub fn len(&self) -> usize {
        self.data.len() / 4
    }

    /// Whether the vector has no components.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The components, in order.
    pub fn iter(&self) -> impl Iterator<Item = f32> + use<'a> {
        self.data.as_chunks::<4>().0.iter().map(|c| f32::from_le_bytes(*c))
    }
}

/// An array inside a blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArrayRef<'a> {
    /// The elements' bytes, after the count.
    items: &'a [u8],
    len: usize,
    /// Containers around the elements, this one included.
    depth: usize,
}

impl<'a> ArrayRef<'a> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements, decoded one at a time. Yields an error (then stops) at
    /// the first malformed element or if the elements do not fill the body.
    pub fn iter(&self) -> impl Iterator<Item = Result<ValueRef<'a>>> + use<'a> {
        let depth = self.depth;
        Members::new(self.len, Reader::new(self.items), move |r: &mut Reader<'a>| read_value(r, depth))
    }

    /// Element `index`, skipping the ones before it without decoding them.
    pub fn get(&self, index: usize) -> Result<Option<ValueRef<'a>>> {
        if index >= self.len {
            return Ok(None);
        }
        let mut r = Reader::new(self.items);
        for _ in 0..index {
            skip_value(&mut r)?;
        }
        read_value(&mut r, self.depth).map(Some)
    }
}

/// An object inside a blob. Keys that are field ids need the [`FieldDict`]
/// the blob was written with, so the methods that produce keys take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectRef<'a> {
    /// The entries' bytes, after the count.
    entries: &'a [u8],
    len: usize,
    /// Containers around the values, this one included.
    depth: usize,
}

impl<'a> ObjectRef<'a> {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the object has no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The entries in stored order (byte order of the keys), decoded one at a
    /// time. Yields an error (then stops) at the first malformed entry, at a
    /// field id `dict` does not know, or if the entries do not fill the body.
    pub fn iter<'s>(&self, dict: &'s FieldDict) -> impl Iterator<Item = Result<(&'s str, ValueRef<'a>)>> + use<'a, 's>
    where
        'a: 's,
    {
        let depth = self.depth;
        let entry = move |r: &mut Reader<'a>| -> Result<(&'s str, ValueRef<'a>)> {
            let key = match read_key(r)? {
                Key::Id(id) => dict.name_of(id).ok_or(Error::UnknownFieldId(id))?,
                Key::Inline(bytes) => std::str::from_utf8(bytes).map_err(|_| Error::InvalidUtf8)?,
            };
            Ok((key, read_value(r, depth)?))
        };
        Members::new(self.len, Reader::new(self.entries), entry)
    }

    /// The value of `key`, skipping other entries' values without decoding
    /// them; `None` if the object has no such key.
    pub fn get(&self, dict: &FieldDict, key: &str) -> Result<Option<ValueRef<'a>>> {
        match self.find(dict.id_of(key), key)? {
            Some(mut r) => read_value(&mut r, self.depth).map(Some),
            None => Ok(None),
        }
    }

    /// A reader at the value of the first entry whose key is `id` or the
    /// inline `key`. Returning a position rather than a `ValueRef` keeps
    /// `get_path` from moving whole views around at every step.
    #[inline]
    fn find(&self, id: Option<u32>, key: &str) -> Result<Option<Reader<'a>>> {
        // A key is stored by id if it had one when written, inline otherwise;
        // match both so a blob stays readable whatever the dictionary holds.
        let mut r = Reader::new(self.entries);
        for _ in 0..self.len {
            let matched = match read_key(&mut r)? {
                Key::Id(stored) => id == Some(stored),
                Key::Inline(bytes) => bytes == key.as_bytes(),
            };
            if matched {
                return Ok(Some(r));
            }
            skip_value(&mut r)?;
        }
        Ok(None)
    }
}

/// The top-level value of `blob`, after checking the version byte and that
/// the root value spans exactly the rest of the blob.
///
/// # Errors
/// [`Error::UnknownVersion`] for a blob of another format version; any other
/// error means the root value's header is malformed (corrupt blob).
pub fn root(blob: &[u8]) -> Result<ValueRef<'_>> {
    read_value(&mut root_reader(blob)?, 0)
}

/// A reader at the root value, once the version and length are checked.
#[inline]
fn root_reader(blob: &[u8]) -> Result<Reader<'_>> {
    let (&version, body) = blob.split_first().ok_or(Error::Truncated)?;
    if version != FORMAT_VERSION {
        return Err(Error::UnknownVersion(version));
    }
    // Containers carry their length, so this check costs no decoding.
    let mut skip = Reader::new(body);
    skip_value(&mut skip)?;
    if !skip.is_empty() {
        return Err(Error::TrailingBytes);
    }
    Ok(Reader::new(body))
}

/// The value at `path` (object keys from the root down), skipping sibling
/// values without decoding them. `None` if a step is missing or reaches a
/// value that is not an object. An empty path gives the root.
///
/// Only what lies on the path is checked: a sibling that is skipped is
/// checked for its length, not for its contents.
///
/// # Errors
/// As [`root`], plus any malformation met on the path (corrupt blob).
pub fn get_path<'a>(blob: &'a [u8], dict: &FieldDict, path: &[&str]) -> Result<Option<ValueRef<'a>>> {
    let mut r = root_reader(blob)?;
    let mut depth = 0;
    for key in path {
        if r.peek() != Some(tag::OBJECT) {
            return Ok(None);
        }
        let obj = object(&mut r, depth)?;
        match obj.find(dict.id_of(key), key)? {
            Some(at) => {
                r = at;
                depth = obj.depth;
            }
            None => return Ok(None),
        }
    }
    read_value(&mut r, depth).map(Some)
}

/// Iterator over the members of a container: reads `len` of them with
/// `read`, then checks that they used exactly the body.
struct Members<'a, F> {
    r: Reader<'a>,
    left: usize,
    read: F,
    done: bool,
}

impl<'a, F> Members<'a, F> {
    fn new(len: usize, r: Reader<'a>, read: F) -> Self {
        Self { r, left: len, read, done: false }
    }
}

impl<'a, T, F: FnMut(&mut Reader<'a>) -> Result<T>> Iterator for Members<'a, F> {
    type Item = Result<T>;

    fn next(&mut self) -> Option<Result<T>> {
        if self.done {
            return None;
        }
        if self.left == 0 {
            self.done = true;
            return (!self.r.is_empty()).then_some(Err(Error::LengthMismatch));
        }
        self.left -= 1;
        let item = (self.read)(&mut self.r);
        self.done = item.is_err();
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done { (0, Some(0)) } else { (0, Some(self.left.saturating_add(1))) }
    }
}

/// A stored object key.
enum Key<'a> {
    Id(u32),
    Inline(&'a [u8]),
}

fn read_key<'a>(r: &mut Reader<'a>) -> Result<Key<'a>> {
    let k = r.varint()?;
    if k & 1 == 0 {
        // An id past u32 can be in no dictionary; report it as unknown.
        let id = u32::try_from(k >> 1).unwrap_or(u32::MAX);
        Ok(Key::Id(id))
    } else {
        r.take_u64(k >> 1).map(Key::Inline)
    }
}

/// Reads one value; `depth` is the number of containers around it.
fn read_value<'a>(r: &mut Reader<'a>, depth: usize) -> Result<ValueRef<'a>> {
    let t = r.byte()?;
    Ok(match t {
        tag::NULL => ValueRef::Null,
        tag::FALSE => ValueRef::Bool(false),
        tag::TRUE => ValueRef::Bool(true),
        tag::INT => ValueRef::Int(varint::unzigzag(r.varint()?)),
        tag::UINT => ValueRef::UInt(r.varint()?),
        tag::F64 => ValueRef::Float(f64::from_le_bytes(r.array()?)),
        tag::F32 => ValueRef::Float(f64::from(f32::from_le_bytes(r.array()?))),
        tag::DECIMAL => {
            let m = varint::unzigzag(r.varint()?);
            let p = super::POW10.get(usize::from(r.byte()?)).ok_or(Error::InvalidDecimal)?;
            if !(-super::DECIMAL_MAX_MANTISSA..=super::DECIMAL_MAX_MANTISSA).contains(&m) {
                return Err(Error::InvalidDecimal);
            }
            ValueRef::Float(m as f64 / p)
        }
        tag::STRING => {
            let len = r.varint()?;
            ValueRef::Str(utf8(r.take_u64(len)?)?)
        }
        tag::BYTES => {
            let len = r.varint()?;
            ValueRef::Bytes(r.take_u64(len)?)
        }
        tag::VECTOR => {
            let dim = r.varint()?;
            let bytes = dim.checked_mul(4).ok_or(Error::Truncated)?;
            ValueRef::Vector(VectorRef { data: r.take_u64(bytes)? })
        }
        tag::ARRAY => {
            let (items, len, depth) = container(r, depth, 1)?;
            ValueRef::Array(ArrayRef { items, len, depth })
        }
        tag::OBJECT => ValueRef::Object(object_body(r, depth)?),
        tag::SHORT_STRING..tag::SMALL_INT => ValueRef::Str(utf8(r.take(usize::from(t - tag::SHORT_STRING))?)?),
        tag::SMALL_INT..=u8::MAX => ValueRef::Int(i64::from(t - tag::SMALL_INT)),
        _ => return Err(Error::UnknownTag(t)),
    })
}

/// Reads an object whose tag is next in `r`.
#[inline]
fn object<'a>(r: &mut Reader<'a>, depth: usize) -> Result<ObjectRef<'a>> {
    r.byte()?;
    object_body(r, depth)
}

/// Reads an object after its tag; it sits inside `depth` containers.
#[inline]
fn object_body<'a>(r: &mut Reader<'a>, depth: usize) -> Result<ObjectRef<'a>> {
    // Each entry takes at least 2 bytes: a key-ref and a tag.
    let (entries, len, depth) = container(r, depth, 2)?;
    Ok(ObjectRef { entries, len, depth })
}

/// Reads a container header after its tag: returns the members' bytes, the
/// member count and the depth of the members.
#[inline]
fn container<'a>(r: &mut Reader<'a>, depth: usize, min_member_size: usize) -> Result<(&'a [u8], usize, usize)> {
    if depth >= MAX_DEPTH {
        return Err(Error::TooDeep);
    }
    let body_len = r.varint()?;
    let mut body = Reader::new(r.take_u64(body_len)?);
    let len = body.varint()?;
    // A count larger than the body could hold is a lie; capping it here
    // also bounds what a caller may allocate from `len()`.
    let len = usize::try_from(len).map_err(|_| Error::LengthMismatch)?;
    if len.checked_mul(min_member_size).is_none_or(|n| n > body.remaining()) {
        return Err(Error::LengthMismatch);
    }
    Ok((body.take_all(), len, depth + 1))
}

/// Steps over one value without decoding or validating its contents.
fn skip_value(r: &mut Reader<'_>) -> Result<()> {
    let t = r.byte()?;
    match t {
        tag::NULL | tag::FALSE | tag::TRUE | tag::SMALL_INT..=u8::MAX => {}
        tag::INT | tag::UINT => {
            r.varint()?;
        }
        tag::F64 => {
            r.take(8)?;
        }
        tag::F32 => {
            r.take(4)?;
        }
        tag::DECIMAL => {
            r.varint()?;
            r.byte()?;
        }
        tag::STRING | tag::BYTES | tag::ARRAY | tag::OBJECT => {
            let len = r.varint()?;
            r.take_u64(len)?;
        }
        tag::VECTOR => {
            let dim = r.varint()?;
            r.take_u64(dim.checked_mul(4).ok_or(Error::Truncated)?)?;
        }
        tag::SHORT_STRING..tag::SMALL_INT => {
            r.take(usize::from(t - tag::SHORT_STRING))?;
        }
        _ => return Err(Error::UnknownTag(t)),
    }
    Ok(())
}

fn utf8(bytes: &[u8]) -> Result<&str> {
    std::str::from_utf8(bytes).map_err(|_| Error::InvalidUtf8)
}

/// Bounds-checked cursor over blob bytes.
#[derive(Clone, Copy)]
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    fn peek(&self) -> Option<u8> {
        self.buf.first().copied()
    }

    fn remaining(&self) -> usize {
        self.buf.len()
    }

    #[inline]
    fn byte(&mut self) -> Result<u8> {
        let (&b, rest) = self.buf.split_first().ok_or(Error::Truncated)?;
        self.buf = rest;
        Ok(b)
    }

    #[inline(always)]
    fn varint(&mut self) -> Result<u64> {
        // Inline the one-byte case: nearly every length, count and key-ref.
        if let Some((&b, rest)) = self.buf.split_first()
            && b < 0x80
        {
            self.buf = rest;
            return Ok(u64::from(b));
        }
        self.varint_long()
    }

    #[inline(never)]
    fn varint_long(&mut self) -> Result<u64> {
        let (v, n) = varint::read(self.buf)?;
        self.take(n)?;
        Ok(v)
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let (head, rest) = self.buf.split_at_checked(n).ok_or(Error::Truncated)?;
        self.buf = rest;
        Ok(head)
    }

    #[inline]
    fn take_u64(&mut self, n: u64) -> Result<&'a [u8]> {
        self.take(usize::try_from(n).map_err(|_| Error::Truncated)?)
    }

    fn take_all(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.buf)
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let (head, rest) = self.buf.split_first_chunk::<N>().ok_or(Error::Truncated)?;
        self.buf = rest;
        Ok(*head)
    }
}
