//! Distance kernels over f32 slices. Each runs over `chunks_exact(8)` with eight independent
//! accumulators, which LLVM turns into packed SIMD (`mulps`/`addps` on x86-64 with SSE2, `fmla`
//! on aarch64) without a SIMD crate or `unsafe`; the tail is summed in scalar code. Summing in
//! lanes changes the rounding order against a plain loop, which is fine for ranking.
//!
//! Checked in the release build with `objdump -d` on `hnsw::Metric::distance`: the loops are
//! packed `subps`/`mulps`/`addps` on two xmm registers per step (x86-64's SSE2 baseline; a build
//! with `-C target-cpu=native` gets AVX).

/// Lanes per step.
const LANES: usize = 8;

/// Σ `term(a_i, b_i)` over two equally long slices (the shorter one's length), in eight
/// independent lanes over `chunks_exact(8)` then a scalar tail: every kernel below is this loop
/// with its own term, inlined and monomorphised, so each is packed SIMD.
#[inline(always)]
fn sum_lanes<A: Copy, B: Copy>(a: &[A], b: &[B], term: impl Fn(A, B) -> f32) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0f32; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for ((s, x), y) in acc.iter_mut().zip(x).zip(y) {
            *s += term(*x, *y);
        }
    }
    let tail: f32 = ra.iter().zip(rb).map(|(x, y)| term(*x, *y)).sum();
    acc.iter().sum::<f32>() + tail
}

/// The dot product of two equally long slices.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    sum_lanes(a, b, |x, y| x * y)
}

/// The squared Euclidean distance of two equally long slices.
#[inline]
pub fn l2_squared(a: &[f32], b: &[f32]) -> f32 {
    sum_lanes(a, b, |x, y| (x - y) * (x - y))
}

/// The dot product of two equally long int8 slices (codes of at most 127 in magnitude), summed
/// in i32 lanes: products widen to i16 (127² fits), pairs of them to i32, which LLVM packs into
/// `pmaddwd` on x86-64.
#[inline]
pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    const W: usize = 16;
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0i32; W];
    let (ca, cb) = (a.chunks_exact(W), b.chunks_exact(W));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for ((s, x), y) in acc.iter_mut().zip(x).zip(y) {
            *s += i32::from(i16::from(*x) * i16::from(*y));
        }
    }
    let tail: i32 = ra.iter().zip(rb).map(|(x, y)| i32::from(*x) * i32::from(*y)).sum();
    acc.iter().sum::<i32>() + tail
}

/// The squared Euclidean distance of `a` and the int8 codes `b` scaled by `sb` (a query against
/// a quantized vector), in f32 lanes.
#[inline]
pub fn l2_squared_f32_i8(a: &[f32], b: &[i8], sb: f32) -> f32 {
    sum_lanes(a, b, |x, y| {
        let d = x - f32::from(y) * sb;
        d * d
    })
}

/// The squared Euclidean distance of the int8 codes `a` scaled by `sa` and `b` scaled by `sb`.
#[inline]
pub fn l2_squared_i8(a: &[i8], sa: f32, b: &[i8], sb: f32) -> f32 {
    sum_lanes(a, b, |x, y| {
        let d = f32::from(x) * sa - f32::from(y) * sb;
        d * d
    })
}

/// The dot product of `a` and the int8 codes `b` (unscaled), in f32 lanes.
#[inline]
pub fn dot_f32_i8(a: &[f32], b: &[i8]) -> f32 {
    sum_lanes(a, b, |x, y| x * f32::from(y))
}

/// Scales `v` to unit length in place; false (and `v` unchanged) for a zero or non-finite vector.
pub fn normalize(v: &mut [f32]) -> bool {
    let norm = dot(v, v).sqrt();
    if !norm.is_finite() || norm == 0.0 {
        return false;
    }
    v.iter_mut().for_each(|x| *x /= norm);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_agree_with_plain_loops() {
        for n in [0, 1, 7, 8, 9, 31, 128, 130] {
            let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
            let d: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            let l: f32 = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum();
            assert!((dot(&a, &b) - d).abs() < 1e-4, "{n}");
            assert!((l2_squared(&a, &b) - l).abs() < 1e-4, "{n}");
        }
        for n in [0, 1, 15, 16, 17, 96, 130] {
            let a: Vec<i8> = (0..n).map(|i| ((i * 37) % 255 - 127) as i8).collect();
            let b: Vec<i8> = (0..n).map(|i| (127 - (i * 11) % 255) as i8).collect();
            let d: i32 = a.iter().zip(&b).map(|(x, y)| i32::from(*x) * i32::from(*y)).sum();
            assert_eq!(dot_i8(&a, &b), d, "{n}");
            let f: Vec<f32> = a.iter().map(|x| f32::from(*x) * 0.5).collect();
            let l: f32 = f.iter().zip(&b).map(|(x, y)| (x - f32::from(*y) * 0.25).powi(2)).sum();
            assert!((l2_squared_f32_i8(&f, &b, 0.25) - l).abs() <= 1e-4 * l.max(1.0), "{n}");
            assert!((l2_squared_i8(&a, 0.5, &b, 0.25) - l).abs() <= 1e-4 * l.max(1.0), "{n}");
            let d: f32 = f.iter().zip(&b).map(|(x, y)| x * f32::from(*y)).sum();
            assert!((dot_f32_i8(&f, &b) - d).abs() <= 1e-4 * d.abs().max(1.0), "{n}");
        }
        let mut v = vec![3.0, 4.0];
        assert!(normalize(&mut v));
        assert!((v[0] - 0.6).abs() < 1e-6);
        assert!(!normalize(&mut [0.0, 0.0]));
    }
}
