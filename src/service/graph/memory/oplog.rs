//! What a write logs of its edge changes (`Write::graph`), applied to the in-memory adjacency by a
//! commit hook once the write commits (`memory::finish`): a leaf, so the write module holds the
//! log without importing the graph.

/// An edge's endpoints (`"table/id"`) and its weight (the table's declared weight field), as its
/// adjacency entries hold them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EdgeEnds {
    pub from: String,
    pub to: String,
    pub weight: Option<f64>,
}

/// One edge's change in a write: its ends before (`None`: created) and after (`None`: deleted).
#[derive(Debug, Clone)]
pub(crate) struct EdgeOp {
    /// the edge table
    pub table: String,
    /// the edge table's `created_at` (a table re-created under the same name is another)
    pub created_at: i64,
    /// the edge's id
    pub id: String,
    pub old: Option<EdgeEnds>,
    pub new: Option<EdgeEnds>,
}
