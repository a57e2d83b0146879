//! The vectors of a graph's slots, in one contiguous arena indexed by slot: as given (`f32`), or
//! quantized to int8 (the index option `"quantization": "int8"`), a quarter of the size.
//!
//! The int8 form is scalar quantization per vector, symmetric about zero: a vector `v` is kept as
//! `scale = max|v_i| / 127` and codes `c_i = round(v_i / scale)` in -127..=127. Per vector rather
//! than one range for the whole index (Qdrant's quantile bounds), so no training pass is needed
//! and a vector inserted long after the build is coded as well as the first ones.
//!
//! Distances are computed on the decoded values `scale · c_i` against a query kept in floats
//! (asymmetric: only the stored side carries the rounding). The Euclidean distance (and cosine's,
//! `|a − b|² / 2` for unit vectors) sums the squared differences rather than expanding
//! `|a|² + |b|² − 2a·b`: near neighbours differ little, and the expansion would subtract two large
//! rounded numbers (on the unit test's clustered data, recall@10 by the codes was 0.77 that way,
//! 0.97 this way). The dot metric is `scale_a · scale_b · Σ c_a·c_b` between stored vectors, an integer
//! sum. The walk ranks by these approximate distances; the search rescores its candidates on the
//! documents' own vectors (`vectors::search`).

use super::metric::Metric;
use crate::service::vectors::kernels;

/// Largest code magnitude.
const MAX_CODE: f32 = 127.0;

/// The vectors of every slot.
pub(super) enum Arena {
    /// `dim` floats per slot
    Float(Vec<f32>),
    /// `dim` codes per slot, with each slot's scale
    Int8 { codes: Vec<i8>, scales: Vec<f32> },
}

/// Codes `v` into `out` (appended); its scale.
fn quantize(v: &[f32], out: &mut Vec<i8>) -> f32 {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    let scale = if max > 0.0 && max.is_finite() { max / MAX_CODE } else { 0.0 };
    let inv = if scale > 0.0 { 1.0 / scale } else { 0.0 };
    out.extend(v.iter().map(|x| (x * inv).round().clamp(-MAX_CODE, MAX_CODE) as i8));
    scale
}

impl Arena {
    /// An empty arena.
    pub fn new(quantized: bool) -> Arena {
        if quantized { Arena::Int8 { codes: Vec::new(), scales: Vec::new() } } else { Arena::Float(Vec::new()) }
    }

    /// Room for `slots` more slots of `dim` values.
    pub fn reserve(&mut self, slots: usize, dim: usize) {
        match self {
            Arena::Float(f) => f.reserve(slots * dim),
            Arena::Int8 { codes, scales } => {
                codes.reserve(slots * dim);
                scales.reserve(slots);
            }
        }
    }

    /// Appends a slot holding `v` (`dim` values: shorter is padded with zeros, longer is cut).
    pub fn push(&mut self, v: &[f32], dim: usize) {
        let v = &v[..v.len().min(dim)];
        match self {
            Arena::Float(f) => {
                f.extend_from_slice(v);
                f.resize(f.len() + dim - v.len(), 0.0);
            }
            Arena::Int8 { codes, scales } => {
                scales.push(quantize(v, codes));
                codes.resize(codes.len() + dim - v.len(), 0);
            }
        }
    }

    /// Replaces the vector of slot `s` with `v` (`dim` values).
    pub fn set(&mut self, s: u32, v: &[f32], dim: usize) {
        let at = s as usize * dim;
        match self {
            Arena::Float(f) => {
                if let Some(dst) = f.get_mut(at..at + dim) {
                    dst.copy_from_slice(&v[..dim.min(v.len())]);
                }
            }
            Arena::Int8 { codes, scales } => {
                let mut c = Vec::with_capacity(dim);
                let sc = quantize(v, &mut c);
                if let (Some(dst), Some(ds)) = (codes.get_mut(at..at + dim), scales.get_mut(s as usize)) {
                    dst.copy_from_slice(&c);
                    *ds = sc;
                }
            }
        }
    }

    /// The floats of slot `s` (`None` for the int8 form, which does not keep them).
    pub fn float(&self, s: u32, dim: usize) -> Option<&[f32]> {
        match self {
            Arena::Float(f) => f.get(s as usize * dim..(s as usize + 1) * dim),
            Arena::Int8 { .. } => None,
        }
    }

    /// True when slot `s` holds `v` as it would be stored (for int8: the same codes and scale).
    pub fn holds(&self, s: u32, v: &[f32], dim: usize) -> bool {
        match self {
            Arena::Float(_) => self.float(s, dim) == Some(v),
            Arena::Int8 { codes, scales } => {
                let mut c = Vec::with_capacity(dim);
                let sc = quantize(v, &mut c);
                let at = s as usize * dim;
                codes.get(at..at + dim) == Some(&c[..]) && scales.get(s as usize) == Some(&sc)
            }
        }
    }

    /// The ranking distance of slots `a` and `b`.
    #[inline]
    pub fn dist(&self, metric: Metric, a: u32, b: u32, dim: usize) -> f32 {
        match self {
            Arena::Float(f) => metric.distance(slot(f, a, dim), slot(f, b, dim)),
            Arena::Int8 { codes, scales } => {
                let (ca, cb) = (slot(codes, a, dim), slot(codes, b, dim));
                let sa = scales.get(a as usize).copied().unwrap_or(0.0);
                let sb = scales.get(b as usize).copied().unwrap_or(0.0);
                match metric {
                    Metric::L2 => kernels::l2_squared_i8(ca, sa, cb, sb),
                    Metric::Cosine => kernels::l2_squared_i8(ca, sa, cb, sb) / 2.0,
                    Metric::Dot => -(kernels::dot_i8(ca, cb) as f32) * sa * sb,
                }
            }
        }
    }

    /// The ranking distance of query `q` to slot `s`.
    #[inline]
    pub fn dist_q(&self, metric: Metric, q: &[f32], s: u32, dim: usize) -> f32 {
        match self {
            Arena::Float(f) => metric.distance(q, slot(f, s, dim)),
            Arena::Int8 { codes, scales } => {
                let (c, sc) = (slot(codes, s, dim), scales.get(s as usize).copied().unwrap_or(0.0));
                match metric {
                    Metric::L2 => kernels::l2_squared_f32_i8(q, c, sc),
                    Metric::Cosine => kernels::l2_squared_f32_i8(q, c, sc) / 2.0,
                    Metric::Dot => -kernels::dot_f32_i8(q, c) * sc,
                }
            }
        }
    }

    /// Bytes held.
    pub fn memory_bytes(&self) -> usize {
        match self {
            Arena::Float(f) => f.capacity() * 4,
            Arena::Int8 { codes, scales } => codes.capacity() + scales.capacity() * 4,
        }
    }
}

/// The `dim` values of slot `s` (empty past the end).
#[inline]
fn slot<T>(all: &[T], s: u32, dim: usize) -> &[T] {
    all.get(s as usize * dim..(s as usize + 1) * dim).unwrap_or(&[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int8_distances_are_close_to_the_floats() {
        let dim = 96;
        let vecs: Vec<Vec<f32>> = (0..20)
            .map(|i| (0..dim).map(|j| ((i * 31 + j * 7) as f32 * 0.173).sin() * (1.0 + i as f32)).collect())
            .collect();
        for metric in [Metric::L2, Metric::Dot, Metric::Cosine] {
            let (mut fl, mut q8) = (Arena::new(false), Arena::new(true));
            let mut vecs = vecs.clone();
            if metric == Metric::Cosine {
                // stored and queried normalised
                vecs.iter_mut().for_each(|v| assert!(kernels::normalize(v)));
            }
            for v in &vecs {
                fl.push(v, dim);
                q8.push(v, dim);
            }
            for a in 0..20u32 {
                let q = vecs[a as usize].as_slice();
                for b in 0..20u32 {
                    let exact = fl.dist(metric, a, b, dim);
                    let scale = kernels::dot(q, q).max(kernels::dot(&vecs[b as usize], &vecs[b as usize]));
                    assert!((q8.dist(metric, a, b, dim) - exact).abs() <= 0.02 * scale, "{metric:?} {a} {b}");
                    assert_eq!(fl.dist_q(metric, q, b, dim), exact);
                    assert!((q8.dist_q(metric, q, b, dim) - exact).abs() <= 0.02 * scale, "{metric:?} {a} {b}");
                }
            }
        }
    }

    #[test]
    fn int8_slots_are_replaced_and_compared_as_coded() {
        let mut a = Arena::new(true);
        a.push(&[1.0, -2.0, 0.5], 3);
        a.push(&[0.0, 0.0, 0.0], 3);
        assert!(a.holds(0, &[1.0, -2.0, 0.5], 3) && a.holds(1, &[0.0; 3], 3));
        assert!(!a.holds(0, &[1.0, -2.0, 0.6], 3));
        a.set(1, &[3.0, 0.0, 0.0], 3);
        assert!(a.holds(1, &[3.0, 0.0, 0.0], 3));
        assert_eq!(a.float(0, 3), None);
        assert!((a.dist(Metric::Dot, 0, 1, 3) + 3.0).abs() < 0.05);
        assert!(a.memory_bytes() >= 6 + 8);
    }
}
