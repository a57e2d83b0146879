//! What a write logs of its fulltext changes (`Write::fulltext`), merged at the end of the write
//! by `maintain::finish`: a leaf, so the write module holds the log without importing the
//! family that fills and reads it.

use super::postings::DocPostings;

/// One document's change of one fulltext index, logged in the write.
pub(crate) struct FtOp {
    pub table: String,
    pub index: String,
    pub created_at: i64,
    pub id: String,
    /// the postings the document had (number 0: added earlier in this write)
    pub removed: Option<Removed>,
    /// its new terms
    pub added: Option<DocPostings>,
}

/// The postings a change removes: the document's length, number and tokens.
pub(crate) struct Removed {
    pub len: u64,
    pub num: u64,
    pub tokens: Vec<String>,
}
