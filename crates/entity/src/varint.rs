//! Unsigned LEB128 varints and zigzag mapping.

use super::{Error, Result};

/// Longest varint of a u64.
pub(super) const MAX_LEN: usize = 10;

/// Appends `v` as LEB128.
#[inline]
pub fn write(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// `v` as LEB128 in a stack buffer, with its length; used where the bytes
/// must be spliced into the middle of the output.
#[inline]
pub(super) fn to_bytes(mut v: u64) -> ([u8; MAX_LEN], usize) {
    let mut buf = [0u8; MAX_LEN];
    let mut n = 0;
    for slot in buf.iter_mut() {
        n += 1;
        if v < 0x80 {
            *slot = v as u8;
            break;
        }
        *slot = (v as u8) | 0x80;
        v >>= 7;
    }
    (buf, n)
}

/// Reads a varint from the start of `bytes`; returns it and its length.
/// Rejects overlong forms (a final zero group) and values above u64::MAX so
/// that every number has exactly one encoding.
#[inline]
pub fn read(bytes: &[u8]) -> Result<(u64, usize)> {
    // Fast path: most lengths, counts and field ids fit one byte.
    match bytes.first() {
        None => return Err(Error::Truncated),
        Some(&b) if b < 0x80 => return Ok((u64::from(b), 1)),
        Some(_) => {}
    }
    let mut value = 0u64;
    for (i, &b) in bytes.iter().take(MAX_LEN).enumerate() {
        if i == MAX_LEN - 1 && b > 1 {
            return Err(Error::InvalidVarint);
        }
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            if b == 0 {
                return Err(Error::InvalidVarint);
            }
            return Ok((value, i + 1));
        }
    }
    if bytes.len() < MAX_LEN { Err(Error::Truncated) } else { Err(Error::InvalidVarint) }
}

/// Maps an i64 to a u64 so that small magnitudes get short varints.
#[inline]
pub(super) fn zigzag(i: i64) -> u64 {
    ((i << 1) ^ (i >> 63)) as u64
}

/// Inverse of [`zigzag`].
#[inline]
pub(super) fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_edges() {
        for v in [0, 1, 127, 128, 255, 16_383, 16_384, u64::from(u32::MAX), u64::MAX / 2, u64::MAX] {
            let mut out = Vec::new();
            write(&mut out, v);
            let (buf, n) = to_bytes(v);
            assert_eq!(&buf[..n], &out[..]);
            assert_eq!(read(&out), Ok((v, out.len())));
        }
    }

    #[test]
    fn rejects_bad_forms() {
        assert_eq!(read(&[]), Err(Error::Truncated));
        assert_eq!(read(&[0x80]), Err(Error::Truncated));
        // Overlong zero and overlong one.
        assert_eq!(read(&[0x80, 0x00]), Err(Error::InvalidVarint));
        assert_eq!(read(&[0x81, 0x00]), Err(Error::InvalidVarint));
        // 10th byte may only carry the top bit of a u64.
        let mut max = vec![0xff; 9];
        max.push(0x01);
        assert_eq!(read(&max), Ok((u64::MAX, 10)));
        let mut over = vec![0xff; 9];
        over.push(0x02);
        assert_eq!(read(&over), Err(Error::InvalidVarint));
        assert_eq!(read(&[0xff; 11]), Err(Error::InvalidVarint));
    }

    #[test]
    fn zigzag_edges() {
        for i in [0, -1, 1, -64, 63, -200, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(i)), i);
        }
        assert_eq!(zigzag(-200), 399);
        assert_eq!(zigzag(i64::MIN), u64::MAX);
    }
}
