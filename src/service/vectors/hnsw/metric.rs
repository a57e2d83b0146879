//! The distance of an index.

use crate::service::vectors::kernels;

/// How distances are measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// 1 − cosine similarity (vectors are stored normalised, so 1 − dot)
    Cosine,
    /// Euclidean distance (squared while ranking)
    L2,
    /// negative dot product
    Dot,
}

impl Metric {
    /// The ranking distance of two stored (for cosine: normalised) vectors.
    #[inline]
    pub fn distance(self, a: &[f32], b: &[f32]) -> f32 {
        match self {
            Metric::Cosine => 1.0 - kernels::dot(a, b),
            Metric::L2 => kernels::l2_squared(a, b),
            Metric::Dot => -kernels::dot(a, b),
        }
    }

    /// The distance as reported to clients (the Euclidean distance for `l2`), always a finite
    /// number (a sum that overflowed is shown as the largest f32, so JSON can carry it).
    pub fn reported(self, d: f32) -> f32 {
        let d = match self {
            Metric::L2 => d.max(0.0).sqrt(),
            _ => d,
        };
        if d.is_nan() { f32::MAX } else { d.clamp(-f32::MAX, f32::MAX) }
    }
}
