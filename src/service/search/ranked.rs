//! A hit in a top-k heap, ordered so that the heap's top is the worst hit it keeps.

use std::cmp::Ordering;

/// A scored document, by its number in the index.
#[derive(Debug, Clone, Copy)]
pub struct Ranked {
    /// its BM25 score
    pub score: f64,
    /// the document's number
    pub num: u64,
}

impl PartialEq for Ranked {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Ranked {}
impl Ord for Ranked {
    /// better = higher score, then smaller number (indexed earlier); "greater" here means worse
    fn cmp(&self, o: &Self) -> Ordering {
        o.score.total_cmp(&self.score).then_with(|| self.num.cmp(&o.num))
    }
}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// Offers `hit` to a heap of at most `depth` hits: a full heap takes only hits better than its
/// worst.
pub fn offer(heap: &mut std::collections::BinaryHeap<Ranked>, depth: usize, hit: Ranked) {
    if heap.len() == depth && heap.peek().is_some_and(|worst| hit >= *worst) {
        return;
    }
    heap.push(hit);
    if heap.len() > depth {
        heap.pop();
    }
}
