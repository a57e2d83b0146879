//! The stored form ("blob") of a JSON document.
//!
//! A blob is versioned, type-tagged and compact, keeps numbers bit-exact
//! (i64, u64 above `i64::MAX` and f64 each come back as what they were) and
//! lets a reader fetch one field without decoding the rest.
//!
//! # Format, version 1
//!
//! `blob = 0x01 value`; `value = tag payload`. A varint is an unsigned LEB128
//! u64 of at most 10 bytes in its shortest form.
//!
//! | tag | value | payload |
//! |---|---|---|
//! | `0x00` / `0x01` / `0x02` | null / false / true | none |
//! | `0x03` | int outside `0..=127` | zigzag varint of the i64 |
//! | `0x04` | uint above `i64::MAX` | varint |
//! | `0x05` | f64 | 8 bytes LE |
//! | `0x06` | f64 exactly representable as f32 | 4 bytes LE (read back as f64) |
//! | `0x07` | string of 64+ bytes | varint length, UTF-8 |
//! | `0x08` | bytes | varint length, bytes (JSON: array of 0-255) |
//! | `0x09` | f32 vector | varint dimension, dim x 4 bytes LE |
//! | `0x0A` | array | varint body length, body = varint count, elements |
//! | `0x0B` | object | varint body length, body = varint count, entries |
//! | `0x0C` | f64 that is a short decimal `m / 10^s` | zigzag varint `m`, one byte `s` (1-15) |
//! | `0x40..=0x7F` | string of `tag - 0x40` bytes | UTF-8 |
//! | `0x80..=0xFF` | int `tag - 0x80` | none |
//!
//! A container's body length counts every byte after the length varint (the
//! count and the elements), so a reader skips a container in O(1). An object
//! entry is a key-ref varint `k` then the value: an even `k` is the
//! [`FieldDict`] id `k >> 1`, an odd `k` is followed by `k >> 1` bytes of
//! inline UTF-8 key. Entries keep the order of the input map (byte order of
//! the keys).
//!
//! Readers check every length against the input, cap counts by the bytes
//! left, limit nesting to [`MAX_DEPTH`] and reject trailing bytes, unknown
//! versions and unknown tags: a malformed blob gives an [`Error`], never a
//! panic or an allocation larger than the blob warrants.
#![forbid(unsafe_code)]
// Blob bytes are untrusted: no panicking access outside tests (arithmetic
// on lengths read from a blob uses checked_* by hand).
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod access;
mod decode;
mod dict;
mod encode;
mod error;
mod text;
pub mod varint;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]
mod tests;

pub use access::{ArrayRef, ObjectRef, ValueRef, VectorRef, get_path, root};
pub use decode::{decode, write_entries};
pub use dict::FieldDict;
pub use encode::{EncodeOptions, encode, encode_known, encode_simd, encode_simd_known};
pub use error::{Error, Result};
pub use text::{Checked, TextError, check as check_text, rewrite_negative_zero};

/// Version byte that starts every blob this build writes.
pub const FORMAT_VERSION: u8 = 1;

/// Deepest nesting of arrays and objects that is encoded or decoded; a root
/// container is at depth 1.
pub const MAX_DEPTH: usize = 128;

/// Longest key, in bytes, that [`FieldDict::intern`] gives an id to.
pub const MAX_FIELD_NAME_LEN: usize = 64;

/// Most names a [`FieldDict`] holds (ids `0..MAX_FIELD_NAMES`).
pub const MAX_FIELD_NAMES: usize = 65_536;

/// Powers of ten exact in f64 (10^0..=10^22): a decimal `m / 10^s` with |m| < 2^53 divides
/// exactly-rounded, so it decodes to the same f64 on every machine.
pub(crate) const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20,
    1e21, 1e22,
];

/// Largest mantissa of a decimal float (2^53: every integer below is exact in f64).
pub(crate) const DECIMAL_MAX_MANTISSA: i64 = 1 << 53;

/// Tag bytes of format version 1.
mod tag {
    pub(super) const NULL: u8 = 0x00;
    pub(super) const FALSE: u8 = 0x01;
    pub(super) const TRUE: u8 = 0x02;
    pub(super) const INT: u8 = 0x03;
    pub(super) const UINT: u8 = 0x04;
    pub(super) const F64: u8 = 0x05;
    pub(super) const F32: u8 = 0x06;
    pub(super) const STRING: u8 = 0x07;
    pub(super) const BYTES: u8 = 0x08;
    pub(super) const VECTOR: u8 = 0x09;
    pub(super) const ARRAY: u8 = 0x0A;
    pub(super) const OBJECT: u8 = 0x0B;
    pub(super) const DECIMAL: u8 = 0x0C;
    pub(super) const SHORT_STRING: u8 = 0x40;
    /// Strings shorter than this use a short-string tag.
    pub(super) const SHORT_STRING_MAX_LEN: usize = 64;
    pub(super) const SMALL_INT: u8 = 0x80;
    /// Ints in `0..SMALL_INT_LIMIT` use a small-int tag.
    pub(super) const SMALL_INT_LIMIT: i64 = 128;
}
