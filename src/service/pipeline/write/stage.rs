//! The stage step: what one document change does to every derived family, in one place and in
//! one order (see the parent module for why this order).

use super::prepare::Derived;
use super::{Change, Write};
use crate::catalog::Catalog;
use crate::service::Result;
use crate::service::graph::adjacency;
use crate::service::{changefeed, history, indexes, search, ttl, vectors, views};
use std::sync::Arc;

/// Stages every derived family's part of document change `c` in the write, taking what was
/// prepared for its new version from `derived` (empty for a delete, or a version prepared on the
/// committer). Any step may refuse the change (a missing vertex, a unique or view-cap violation,
/// a bad vector); the caller's write or attempt then stages nothing of it. The entity key and the
/// table's count are the caller's (`documents`).
pub(crate) fn derived(w: &mut Write<'_, '_>, c: &Change<'_>, derived: &mut Derived) -> Result<()> {
    // each family takes what it needs: the transaction, the catalog, and its own log
    let Write { tx, catalog, fulltext, vectors: vector_log, graph: edge_log, history_at } = w;
    let catalog: &Arc<Catalog> = catalog;
    adjacency::stage(tx, catalog, c, derived.edge.as_ref(), edge_log)?;
    ttl::stage(tx, catalog, c)?;
    views::stage(tx, catalog, c)?;
    vectors::stage(catalog, c, &mut derived.vectors, vector_log)?;
    indexes::stage::stage(tx, catalog, c, &mut derived.entries)?;
    // logged last: nothing after it can refuse the change for a reason of the document's own
    search::maintain::stage(tx, catalog, c, &mut derived.text, fulltext)?;
    history::stage(tx, c, history_at)?;
    changefeed::stage(tx, catalog, c)
}
