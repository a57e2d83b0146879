//! What a write logs of its vector changes (`Write::vectors`), applied at the end of the write
//! by `vectors::finish`: a leaf, so the write module holds the log without importing the family
//! that fills and reads it.

use super::hnsw::InsertPlan;

/// One change of one document in one vector index, logged by a write.
pub(crate) struct VecOp {
    pub table: String,
    pub index: String,
    pub created_at: i64,
    pub id: String,
    /// the new vector; `None` removes the node
    pub vector: Option<Vec<f32>>,
    /// its insert, planned outside the writer
    pub plan: Option<InsertPlan>,
}
