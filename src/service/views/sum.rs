//! An exact sum of integers and floats: a fixed-point integer in units of 2^-1074 (the smallest
//! subnormal), wide enough for every finite f64 and 2^64 of them, so adding and subtracting
//! values is exact and order-independent — a group's sum after any sequence of inserts and
//! deletes is bit-for-bit the sum of the values it holds, and `check` can compare it exactly.
//! It is stored trimmed (sign, first non-zero limb, limbs), a few bytes for typical values.

/// Limbs of the two's-complement accumulator: bits 0..2097 hold any finite f64, 64 more bits of
/// headroom for carries, and a sign bit.
const LIMBS: usize = 35;
/// The bit position of 2^0.
const ONE: u32 = 1074;

/// An exact sum (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExactSum {
    limbs: [u64; LIMBS],
}

impl Default for ExactSum {
    fn default() -> Self {
        ExactSum { limbs: [0; LIMBS] }
    }
}

impl ExactSum {
    /// True when the sum is 0.
    pub fn is_zero(&self) -> bool {
        self.limbs.iter().all(|&l| l == 0)
    }

    fn negative(&self) -> bool {
        self.limbs[LIMBS - 1] >> 63 == 1
    }

    /// Adds (or with `neg`, subtracts) `mag · 2^(shift - 1074)`.
    fn add_mag(&mut self, mag: u64, shift: u32, neg: bool) {
        if mag == 0 {
            return;
        }
        let (limb, bit) = ((shift / 64) as usize, shift % 64);
        let wide = u128::from(mag) << bit;
        let parts = [wide as u64, (wide >> 64) as u64];
        if neg {
            let mut borrow = false;
            for (i, limb_v) in self.limbs.iter_mut().enumerate().skip(limb) {
                let sub = parts.get(i - limb).copied().unwrap_or(0);
                let (d1, b1) = limb_v.overflowing_sub(sub);
                let (d2, b2) = d1.overflowing_sub(u64::from(borrow));
                *limb_v = d2;
                borrow = b1 || b2;
                if !borrow && i > limb {
                    break;
                }
            }
        } else {
            let mut carry = false;
            for (i, limb_v) in self.limbs.iter_mut().enumerate().skip(limb) {
                let add = parts.get(i - limb).copied().unwrap_or(0);
                let (s1, c1) = limb_v.overflowing_add(add);
                let (s2, c2) = s1.overflowing_add(u64::from(carry));
                *limb_v = s2;
                carry = c1 || c2;
                if !carry && i > limb {
                    break;
                }
            }
        }
    }

    /// Adds a float (`neg`: subtracts it). NaN and infinities never reach here (JSON has none).
    pub fn add_f64(&mut self, f: f64, neg: bool) {
        let bits = f.to_bits();
        let exp = ((bits >> 52) & 0x7ff) as u32;
        let frac = bits & ((1 << 52) - 1);
        if exp == 0x7ff {
            return;
        }
        // value = mantissa · 2^(e - 1074) with e = max(exp, 1) - 1
        let (mantissa, shift) = if exp == 0 { (frac, 0) } else { (frac | (1 << 52), exp - 1) };
        self.add_mag(mantissa, shift, neg ^ f.is_sign_negative());
    }

    /// Adds an integer (`neg`: subtracts it).
    pub fn add_int(&mut self, i: i128, neg: bool) {
        let mag = i.unsigned_abs();
        let neg = neg ^ (i < 0);
        self.add_mag(mag as u64, ONE, neg);
        self.add_mag((mag >> 64) as u64, ONE + 64, neg);
    }

    /// Adds another sum.
    pub fn add(&mut self, other: &ExactSum) {
        let mut carry = false;
        for (a, b) in self.limbs.iter_mut().zip(other.limbs.iter()) {
            let (s1, c1) = a.overflowing_add(*b);
            let (s2, c2) = s1.overflowing_add(u64::from(carry));
            *a = s2;
            carry = c1 || c2;
        }
    }

    /// The negated sum.
    pub fn negated(&self) -> ExactSum {
        let mut out = ExactSum { limbs: self.limbs.map(|l| !l) };
        out.add_mag(1, 0, false);
        out
    }

    fn magnitude(&self) -> [u64; LIMBS] {
        if self.negative() { self.negated().limbs } else { self.limbs }
    }

    /// The sum as an integer, when it is one that fits an i128.
    pub fn to_i128(&self) -> Option<i128> {
        let mag = self.magnitude();
        // bits below 2^0 must be zero
        let (limb, bit) = ((ONE / 64) as usize, ONE % 64);
        if mag[..limb].iter().any(|&l| l != 0) || mag[limb] & ((1u64 << bit) - 1) != 0 {
            return None;
        }
        let mut v: u128 = 0;
        for i in (0..LIMBS).rev() {
            let pos = (i as u32) * 64;
            if mag[i] == 0 {
                continue;
            }
            // the bits of limb i sit at 2^(pos - 1074)
            let shift = pos as i64 - i64::from(ONE);
            let part = u128::from(mag[i]);
            let piece = if shift >= 0 {
                if shift >= 128 || (part.leading_zeros() as i64) < shift {
                    return None;
                }
                part << shift
            } else {
                part >> (-shift)
            };
            v = v.checked_add(piece)?;
        }
        let v = i128::try_from(v).ok()?;
        Some(if self.negative() { -v } else { v })
    }

    /// The sum rounded to the nearest f64 (ties to even); beyond the f64 range, ±infinity.
    pub fn to_f64(&self) -> f64 {
        let mag = self.magnitude();
        let sign = if self.negative() { -1.0 } else { 1.0 };
        let Some(top) = (0..LIMBS).rev().find(|&i| mag[i] != 0) else { return 0.0 };
        // h: position of the highest set bit
        let h = top as u32 * 64 + 63 - mag[top].leading_zeros();
        let bit = |p: u32| (mag[(p / 64) as usize] >> (p % 64)) & 1;
        if h < 53 {
            // exactly representable: a multiple of 2^-1074 below 2^53 of them
            return sign * (mag[0] as f64) * f64::from_bits(1);
        }
        // the 53 bits h..=h-52, then round on bit h-53 and the bits below it
        let mut m: u64 = 0;
        for p in (h - 52..=h).rev() {
            m = (m << 1) | bit(p);
        }
        let round = bit(h - 53) == 1;
        let sticky = (0..h - 53).any(|p| bit(p) == 1);
        let mut h = h;
        if round && (sticky || m & 1 == 1) {
            m += 1;
            if m == 1 << 53 {
                m >>= 1;
                h += 1;
            }
        }
        // value = m · 2^(h - 52 - 1074); biased exponent of 1.xxx · 2^(h - 1074)
        let biased = i64::from(h) - i64::from(ONE) + 1023;
        if biased >= 0x7ff {
            return sign * f64::INFINITY;
        }
        sign * f64::from_bits(((biased as u64) << 52) | (m & ((1 << 52) - 1)))
    }

    /// Appends the trimmed encoding: sign byte, first non-zero limb, limb count, limbs (u64 BE).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mag = self.magnitude();
        let first = mag.iter().position(|&l| l != 0).unwrap_or(0);
        let last = mag.iter().rposition(|&l| l != 0).map_or(0, |l| l + 1);
        let count = last.saturating_sub(first);
        out.push(u8::from(self.negative()));
        out.push(first as u8);
        out.push(count as u8);
        for l in &mag[first..first + count] {
            out.extend_from_slice(&l.to_be_bytes());
        }
    }

    /// Reads what [`ExactSum::encode`] wrote from the front of `bytes`; returns the rest.
    pub fn decode(bytes: &[u8]) -> Option<(ExactSum, &[u8])> {
        let (&[sign, first, count], rest) = bytes.split_first_chunk::<3>()?;
        let (first, count) = (usize::from(first), usize::from(count));
        if sign > 1 || first + count > LIMBS || rest.len() < count * 8 {
            return None;
        }
        let mut sum = ExactSum::default();
        for (i, chunk) in rest[..count * 8].chunks_exact(8).enumerate() {
            sum.limbs[first + i] = u64::from_be_bytes(chunk.try_into().ok()?);
        }
        if sum.negative() {
            return None;
        }
        if sign == 1 {
            sum = sum.negated();
        }
        Some((sum, &rest[count * 8..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn of(values: &[f64]) -> ExactSum {
        let mut s = ExactSum::default();
        for v in values {
            s.add_f64(*v, false);
        }
        s
    }

    fn finite() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<f64>().prop_filter("finite", |f| f.is_finite()),
            (-1e6f64..1e6),
            any::<i32>().prop_map(f64::from),
            (-1e-300f64..1e-300),
        ]
    }

    #[test]
    fn known_sums() {
        assert_eq!(of(&[0.1, 0.2]).to_f64(), 0.1 + 0.2);
        assert_eq!(of(&[1e100, 1.0, -1e100]).to_f64(), 1.0);
        assert_eq!(of(&[f64::MAX, f64::MAX]).to_f64(), f64::INFINITY);
        assert_eq!(of(&[f64::MAX, f64::MAX, -f64::MAX]).to_f64(), f64::MAX);
        assert_eq!(of(&[f64::from_bits(1), f64::from_bits(1)]).to_f64(), f64::from_bits(2));
        assert_eq!(of(&[-2.5]).to_f64(), -2.5);
        let mut s = ExactSum::default();
        s.add_int(i128::from(i64::MAX), false);
        s.add_int(i128::from(u64::MAX), false);
        assert_eq!(s.to_i128(), Some(i128::from(i64::MAX) + i128::from(u64::MAX)));
        s.add_f64(0.5, false);
        assert_eq!(s.to_i128(), None);
        let mut n = ExactSum::default();
        n.add_int(-7, false);
        assert_eq!(n.to_i128(), Some(-7));
        assert_eq!(n.to_f64(), -7.0);
        assert!(ExactSum::default().is_zero());
    }

    proptest! {
        /// Two values: the sum rounds like IEEE addition (which is correctly rounded).
        #[test]
        fn two_values_round_like_ieee(a in finite(), b in finite()) {
            let s = a + b;
            prop_assume!(s.is_finite());
            prop_assert_eq!(of(&[a, b]).to_f64(), s);
            prop_assert_eq!(of(&[a]).to_f64(), a);
        }

        /// Adding values and taking some away again leaves exactly the sum of the rest, whatever
        /// the order; the encoding round-trips and is canonical.
        #[test]
        fn removal_is_exact(values in proptest::collection::vec(finite(), 0..20), ints in proptest::collection::vec(any::<i64>(), 0..5), keep in any::<u32>()) {
            let mut all = ExactSum::default();
            let mut kept = ExactSum::default();
            for (i, v) in values.iter().enumerate() {
                all.add_f64(*v, false);
                if keep >> (i % 32) & 1 == 1 {
                    kept.add_f64(*v, false);
                }
            }
            for i in &ints {
                all.add_int(i128::from(*i), false);
                kept.add_int(i128::from(*i), false);
            }
            for (i, v) in values.iter().enumerate().rev() {
                if keep >> (i % 32) & 1 == 0 {
                    all.add_f64(*v, true);
                }
            }
            prop_assert_eq!(&all, &kept);
            let mut bytes = Vec::new();
            all.encode(&mut bytes);
            let mut again = Vec::new();
            kept.encode(&mut again);
            prop_assert_eq!(&bytes, &again);
            let (back, rest) = ExactSum::decode(&bytes).unwrap();
            prop_assert!(rest.is_empty());
            prop_assert_eq!(back, all.clone());
            let mut diff = all.clone();
            diff.add(&kept.negated());
            prop_assert!(diff.is_zero());
        }
    }
}
