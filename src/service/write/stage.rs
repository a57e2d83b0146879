//! The stage step: what one document change does to every derived family, in one place and in
//! one order (see the parent module for why this order).

use super::prepare::Derived;
use super::{Change, Write};
use crate::service::Result;
use crate::service::{adjacency, changefeed, history, indexes, search, ttl, vectors, views};

/// Stages every derived family's part of document change `c` in the write, taking what was
/// prepared for its new version from `derived` (empty for a delete, or a version prepared on the
/// committer). Any step may refuse the change (a missing vertex, a unique or view-cap violation,
/// a bad vector); the caller's write or attempt then stages nothing of it. The entity key and the
/// table's count are the caller's (`documents`).
pub(crate) fn derived(w: &mut Write<'_, '_>, c: &Change<'_>, derived: &mut Derived) -> Result<()> {
    adjacency::stage(w, c, derived.edge.as_ref())?;
    ttl::stage(w, c)?;
    views::stage(w, c)?;
    vectors::stage(w, c, &mut derived.vectors)?;
    indexes::stage::stage(w, c, &mut derived.entries)?;
    // logged last: nothing after it can refuse the change for a reason of the document's own
    search::maintain::stage(w, c, &mut derived.text)?;
    history::stage(w, c)?;
    changefeed::stage(w, c)
}
