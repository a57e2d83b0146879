//! Errors of the entity (stored document) format.

/// Everything that can go wrong while encoding a document or reading a blob.
///
/// Decoding errors mean the blob is corrupt, was written by a newer format
/// version, or was written against a different field dictionary; none of them
/// is recoverable by retrying the same call.
#[non_exhaustive]
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum Error {
    /// A decimal float has a scale above 22 or a mantissa beyond 2^53: the blob is damaged.
    #[error("invalid decimal float")]
    InvalidDecimal,
    /// The blob ended in the middle of a value, or a length points past its
    /// end. The stored bytes are damaged or were cut short: report the
    /// document as corrupt.
    #[error("blob truncated")]
    Truncated,
    /// The blob starts with a format version this build does not know. It was
    /// written by a newer build: upgrade before reading it, do not rewrite it.
    #[error("unknown entity format version {0}")]
    UnknownVersion(u8),
    /// A value starts with a tag byte that the format does not define. The
    /// blob is corrupt (or from a newer build): report it as corrupt.
    #[error("unknown value tag 0x{0:02x}")]
    UnknownTag(u8),
    /// A string or an inline key is not valid UTF-8. The blob is corrupt.
    #[error("invalid UTF-8 in string or key")]
    InvalidUtf8,
    /// Containers are nested deeper than [`MAX_DEPTH`](super::MAX_DEPTH).
    /// On encode: reject the document as too deeply nested (a client error).
    /// On decode: the blob is corrupt, since the encoder never writes one.
    #[error("nesting deeper than {} levels", super::MAX_DEPTH)]
    TooDeep,
    /// Bytes follow the root value. The blob is corrupt.
    #[error("trailing bytes after the root value")]
    TrailingBytes,
    /// An object key refers to a field id that the dictionary does not hold.
    /// The blob was written against a dictionary whose new names were not
    /// persisted (or were rolled back): reload the dictionary; if the id is
    /// still unknown, the blob cannot be decoded.
    #[error("unknown field id {0}")]
    UnknownFieldId(u32),
    /// A float is NaN or infinite, which JSON cannot represent. On encode:
    /// reject the document. On decode: the blob is corrupt.
    #[error("non-finite float")]
    NotFinite,
    /// A varint is longer than 10 bytes, overflows a u64, or is encoded with
    /// redundant trailing zero groups. The blob is corrupt.
    #[error("invalid varint")]
    InvalidVarint,
    /// A container's byte length disagrees with its element count (elements
    /// overrun it, or bytes are left over). The blob is corrupt.
    #[error("container length does not match its contents")]
    LengthMismatch,
    /// `FieldDict::from_names` was given the same name twice. The persisted
    /// name list is corrupt; do not use it to decode blobs.
    #[error("duplicate field name {0:?} in dictionary")]
    DuplicateFieldName(String),
    /// `FieldDict::from_names` was given a name longer than
    /// [`MAX_FIELD_NAME_LEN`](super::MAX_FIELD_NAME_LEN) bytes, which
    /// `intern` never assigns an id to. The persisted name list is corrupt.
    #[error("field name of {0} bytes is too long for the dictionary")]
    FieldNameTooLong(usize),
    /// `FieldDict::from_names` was given more than
    /// [`MAX_FIELD_NAMES`](super::MAX_FIELD_NAMES) names. The persisted name
    /// list is corrupt.
    #[error("too many field names for the dictionary")]
    DictionaryFull,
}

/// Result type of the entity format.
pub type Result<T> = std::result::Result<T, Error>;
