//! Maintained views: saved filters (their member sets) and group-by aggregates, kept as keys of
//! the `view` family and updated in the same atomic write as every document change (see
//! [`maintain`]), so reading one costs what the answer holds and is never stale.
//!
//! A view is catalog state like an index (`meta:view:{table}:{name}`): created `ready` on an
//! empty table, else `building` while a background job adds the existing documents (`service/pipeline/view_lifecycle/build.rs`);
//! readable only once ready; dropped with a durable mark and a purge of its keys, or with its
//! table.

pub(crate) mod check;
pub mod def;
mod info;
pub mod maintain;
mod read;
pub mod state;
pub mod sum;

pub use def::CreateView;
pub use info::{ViewInfo, ViewList};
pub(crate) use maintain::stage;
pub use read::{GroupQuery, PageQuery, ViewDocuments};
pub(crate) use read::{member_after, member_scan};

use super::core::{Core, Handle};
use std::sync::Arc;

/// The views model: group and filter views read from their keys (`view:`), over the shared
/// [`Core`]. Their upkeep is a step of every write ([`maintain`]); their lifecycle (create, build,
/// drop) calls the indexes' and purges' machinery and is the database's (`service/pipeline/view_lifecycle/`).
pub struct Views {
    core: Arc<Core>,
}

impl Handle for Views {
    fn core(&self) -> &Core {
        &self.core
    }
}

impl Views {
    /// The model over `core`.
    pub(crate) fn new(core: Arc<Core>) -> Views {
        Views { core }
    }
}
