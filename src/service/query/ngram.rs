//! `$contains` through an `ngram` index: which trigrams of a pattern to look up.

/// Most trigrams of one `$contains` pattern scanned (the planner intersects the cheapest few).
const MAX_PATTERN_TRIGRAMS: usize = 16;

/// The distinct trigrams of a `$contains` pattern to scan (none under three characters), at most
/// [`MAX_PATTERN_TRIGRAMS`], spread over the pattern: every document containing the pattern holds
/// each of them, so any one, or their intersection, yields a superset that the filter checks.
pub(super) fn trigrams(pattern: &str) -> Vec<&str> {
    let bounds: Vec<usize> = pattern.char_indices().map(|(i, _)| i).chain(std::iter::once(pattern.len())).collect();
    let mut grams: Vec<&str> = bounds.windows(4).filter_map(|w| Some(&pattern[*w.first()?..*w.last()?])).collect();
    grams.sort_unstable();
    grams.dedup();
    let step = grams.len().div_ceil(MAX_PATTERN_TRIGRAMS).max(1);
    grams.into_iter().step_by(step).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn patterns_give_their_distinct_trigrams() {
        assert_eq!(super::trigrams("ab"), Vec::<&str>::new());
        assert_eq!(super::trigrams("abcabc"), ["abc", "bca", "cab"]);
        assert_eq!(super::trigrams("øæåø"), ["æåø", "øæå"]);
        assert_eq!(super::trigrams(&"x".repeat(3)), ["xxx"]);
        let long: String = ('a'..='z').collect();
        assert!(super::trigrams(&long).len() <= 16);
    }
}
