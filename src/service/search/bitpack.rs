//! Columns of integers in the fewest bits: a width byte (the bits of the largest value), then
//! every value in that many bits, least significant first. A column of zeros is the width byte
//! alone.

use crate::service::{Result, ServiceError};

fn damaged() -> ServiceError {
    ServiceError::damaged("ftidx", "a posting column")
}

/// Appends a column of `values`.
pub fn pack(out: &mut Vec<u8>, values: impl Iterator<Item = u64> + Clone) {
    let width = 64 - values.clone().fold(0u64, |a, v| a | v).leading_zeros();
    out.push(width as u8);
    if width == 0 {
        return;
    }
    let (mut acc, mut bits) = (0u128, 0u32);
    for v in values {
        acc |= u128::from(v) << bits;
        bits += width;
        while bits >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            bits -= 8;
        }
    }
    if bits > 0 {
        out.push(acc as u8);
    }
}

/// Reads a column of `count` values into `out` (cleared first); returns the bytes after it.
pub fn unpack<'a>(bytes: &'a [u8], count: usize, out: &mut Vec<u64>) -> Result<&'a [u8]> {
    let (&width, rest) = bytes.split_first().ok_or_else(damaged)?;
    let width = u32::from(width);
    if width > 64 {
        return Err(damaged());
    }
    let len = (count as u64 * u64::from(width)).div_ceil(8);
    let len = usize::try_from(len).map_err(|_| damaged())?;
    let (column, rest) = rest.split_at_checked(len).ok_or_else(damaged)?;
    out.clear();
    if width == 0 {
        // bounded by the caller's count, which the block's bytes bound
        out.resize(count, 0);
        return Ok(rest);
    }
    out.reserve(count);
    let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
    if width <= 56 {
        // each value from one unaligned little-endian word read at its first byte (a value of
        // at most 56 bits shifted by at most 7 fits in it); the last few from a padded copy
        let fast = if column.len() >= 8 { (column.len() - 8) * 8 / width as usize + 1 } else { 0 };
        let fast = fast.min(count);
        let w = width as usize;
        // (an exact-size extend: no capacity check a value; every read is in the column, as
        // `fast` is computed)
        out.extend((0..fast).map(|k| {
            let bit = k * w;
            let word = column.get(bit / 8..bit / 8 + 8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_le_bytes);
            (word >> (bit % 8)) & mask
        }));
        let bit = fast * w;
        if fast < count {
            let mut tail = [0u8; 16];
            let from = bit / 8;
            let rest_bytes = &column[from..];
            tail[..rest_bytes.len()].copy_from_slice(rest_bytes);
            let mut local = bit % 8;
            for _ in fast..count {
                let at = local / 8;
                let word = u64::from_le_bytes(tail[at..at + 8].try_into().map_err(|_| damaged())?);
                out.push((word >> (local % 8)) & mask);
                local += w;
            }
        }
        return Ok(rest);
    }
    let (mut acc, mut bits) = (0u128, 0u32);
    let mut next = column.iter();
    for _ in 0..count {
        while bits < width {
            acc |= u128::from(*next.next().ok_or_else(damaged)?) << bits;
            bits += 8;
        }
        out.push(acc as u64 & mask);
        acc >>= width;
        bits -= width;
    }
    Ok(rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn columns_round_trip(values in proptest::collection::vec(prop_oneof![0u64..4, 0u64..70_000, any::<u64>()], 0..200), tail in any::<u8>()) {
            let mut out = Vec::new();
            pack(&mut out, values.iter().copied());
            out.push(tail);
            let mut back = Vec::new();
            let rest = unpack(&out, values.len(), &mut back).unwrap();
            prop_assert_eq!(back, values);
            prop_assert_eq!(rest, &[tail][..]);
        }
    }

    #[test]
    fn widths() {
        let mut out = Vec::new();
        pack(&mut out, [0u64; 128].into_iter());
        assert_eq!(out, [0]);
        out.clear();
        pack(&mut out, (0..128u64).map(|i| i % 4));
        assert_eq!(out.len(), 1 + 32);
        assert!(unpack(&[65], 1, &mut Vec::new()).is_err());
        assert!(unpack(&[8, 1], 2, &mut Vec::new()).is_err());
    }
}
