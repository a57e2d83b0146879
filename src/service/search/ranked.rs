//! A hit in a top-k heap, ordered so that the heap's top is the worst hit it keeps.

use std::cmp::Ordering;

/// A scored document id.
#[derive(Debug)]
pub struct Ranked<'a> {
    /// its BM25 score
    pub score: f64,
    /// the document id
    pub id: &'a [u8],
}

impl PartialEq for Ranked<'_> {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Ranked<'_> {}
impl Ord for Ranked<'_> {
    /// better = higher score, then smaller id; "greater" here means worse
    fn cmp(&self, o: &Self) -> Ordering {
        o.score.total_cmp(&self.score).then_with(|| self.id.cmp(o.id))
    }
}
impl PartialOrd for Ranked<'_> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// Offers `hit` to a heap of at most `depth` hits: a full heap takes only hits better than its
/// worst.
pub fn offer<'a>(heap: &mut std::collections::BinaryHeap<Ranked<'a>>, depth: usize, hit: Ranked<'a>) {
    if heap.len() == depth && heap.peek().is_some_and(|worst| hit >= *worst) {
        return;
    }
    heap.push(hit);
    if heap.len() > depth {
        heap.pop();
    }
}
