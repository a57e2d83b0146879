//! BM25, exactly as documented: for each matched term `t` and field `f` of document `d`,
//! `w_f · idf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·len(d)/avglen))` with
//! `idf(t) = ln(1 + (N − df + 0.5)/(df + 0.5))`, k1 = 1.2, b = 0.75; `N`, `df` and `avglen` are
//! the whole index's, as of the search's snapshot. A phrase counts as the sum of its terms' idf
//! with its own frequency (how often the whole phrase occurs in the field) as `tf`.

/// BM25's term-frequency saturation.
pub const K1: f64 = 1.2;
/// BM25's length normalization.
pub const B: f64 = 0.75;

/// The statistics of one index.
#[derive(Debug, Clone, Copy)]
pub struct Bm25 {
    /// documents with at least one token
    pub n: u64,
    /// their average length in tokens
    pub avglen: f64,
}

impl Bm25 {
    /// From `N` and the total length.
    pub fn new(n: u64, total: u64) -> Bm25 {
        Bm25 { n, avglen: if n == 0 { 0.0 } else { total as f64 / n as f64 } }
    }

    /// Lucene's idf: always positive.
    pub fn idf(&self, df: u64) -> f64 {
        let (n, df) = (self.n as f64, df as f64);
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// The term-frequency part for `tf` occurrences in a document of `len` tokens.
    pub fn tf_part(&self, tf: f64, len: u64) -> f64 {
        let norm = if self.avglen > 0.0 { len as f64 / self.avglen } else { 0.0 };
        tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * norm))
    }
}

/// How often a phrase occurs: the positions `p` of its first term such that every other term
/// `k` is at `p + offset_k`. `positions[k]` are term `k`'s positions, ascending.
pub fn phrase_frequency(positions: &[Vec<u32>], offsets: &[u32]) -> u32 {
    let Some(first) = positions.first() else { return 0 };
    let mut count = 0;
    'start: for &p in first {
        for (k, list) in positions.iter().enumerate().skip(1) {
            let want = p.saturating_add(offsets.get(k).copied().unwrap_or(0));
            if list.binary_search(&want).is_err() {
                continue 'start;
            }
        }
        count += 1;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formula_by_hand() {
        let s = Bm25::new(10, 100);
        // idf = ln(1 + (10 - 2 + 0.5) / 2.5) = ln(4.4)
        assert!((s.idf(2) - 4.4f64.ln()).abs() < 1e-15);
        // tf 3 in a document of the average length: 3 * 2.2 / (3 + 1.2)
        assert!((s.tf_part(3.0, 10) - 6.6 / 4.2).abs() < 1e-15);
        assert!(s.idf(10) > 0.0, "Lucene's idf stays positive for a term in every document");
    }

    #[test]
    fn phrases_need_every_term_at_its_offset() {
        let positions = vec![vec![1, 5, 9], vec![2, 7, 10], vec![4, 12]];
        assert_eq!(phrase_frequency(&positions, &[0, 1, 3]), 2); // 1-2-4 and 9-10-12
        assert_eq!(phrase_frequency(&positions[..2], &[0, 2]), 1); // 5-7
        assert_eq!(phrase_frequency(&[vec![1], vec![]], &[0, 1]), 0);
    }
}
