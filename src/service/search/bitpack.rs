//! Columns of integers in the fewest bits: a width byte (the bits of the largest value), then
//! every value in that many bits, least significant first. A column of zeros is the width byte
//! alone.

use crate::service::{Result, ServiceError};

fn damaged() -> ServiceError {
    ServiceError::Internal("a damaged full-text posting column".into())
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
