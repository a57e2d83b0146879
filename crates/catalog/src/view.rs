//! Maintained view definitions (`meta:view:{table}:{name}`) and their drop marks
//! (`meta:view_dropping:{table}:{name}`), mirroring indexes.

use super::{Catalog, WriteTx, json};
use mosaic_keys::MetaKey;
use mosaic_storage::Space;
use serde::{Deserialize, Serialize};
use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use utoipa::ToSchema;

/// The two kinds of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ViewKind {
    /// the member set of a saved filter
    Filter,
    /// documents grouped by fields, with aggregates per group
    Group,
}

/// Whether a view can be read yet.
/// (Its OpenAPI schema is one flat object: see `state_schema`.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum ViewState {
    /// a background job is adding the existing documents; not readable yet
    Building {
        /// documents added so far
        done: u64,
        /// documents to add (the table's count when the build started)
        total: u64,
        /// the last document id the build has added: writes maintain the view for documents up
        /// to it, and leave the ones after it to the build
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after: Option<String>,
    },
    /// complete and maintained with every write
    Ready,
    /// the build stopped (a document over the per-document cap); not maintained: drop it
    Failed {
        /// why
        error: String,
    },
}

impl utoipa::PartialSchema for ViewState {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        super::state_schema::flat_state(
            "a view",
            &[(
                "after",
                "building: the last document id the build has added (writes maintain the view for documents up to it)",
            )],
        )
    }
}

impl ToSchema for ViewState {}

/// A view definition as stored under `meta:view:{table}:{name}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ViewDef {
    /// the table
    pub table: String,
    /// view name, unique within the table
    pub name: String,
    /// `filter` or `group`
    pub kind: ViewKind,
    /// the saved filter (a group view's is optional: every document when absent)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub filter: Option<serde_json::Value>,
    /// group views: the grouping fields (dotted paths), 1-4
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by: Vec<String>,
    /// group views: output name → `count`, `sum(f)`, `avg(f)`, `min(f)` or `max(f)`
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub aggregates: BTreeMap<String, String>,
    /// building, ready or failed
    #[serde(flatten)]
    pub state: ViewState,
    /// creation time, milliseconds since the Unix epoch; unique across tables, indexes and views
    pub created_at: i64,
    /// the service's compiled form of the definition (filter parsed, aggregates resolved), made
    /// once per definition version
    #[serde(skip)]
    #[schema(ignore)]
    pub compiled: OnceLock<Arc<dyn Any + Send + Sync>>,
}

impl ViewDef {
    /// True when writes must keep the view up to date (building or ready).
    pub fn is_maintained(&self) -> bool {
        !matches!(self.state, ViewState::Failed { .. })
    }

    /// True when it may be read.
    pub fn is_ready(&self) -> bool {
        self.state == ViewState::Ready
    }

    /// True when a write of document `id` must update the view: it is ready, or building and its
    /// build has passed `id` (the build adds the documents after its position as it finds them).
    pub fn covers(&self, id: &str) -> bool {
        match &self.state {
            ViewState::Ready => true,
            ViewState::Building { after, .. } => after.as_deref().is_some_and(|a| id.as_bytes() <= a.as_bytes()),
            ViewState::Failed { .. } => false,
        }
    }
}

impl Catalog {
    /// The views of `table`, by name.
    pub fn views(&self, table: &str) -> Vec<Arc<ViewDef>> {
        self.defs().views.get(table).map(|m| m.values().cloned().collect()).unwrap_or_default()
    }

    /// True when `table` has a view: the write path's check, without allocating.
    pub fn has_views(&self, table: &str) -> bool {
        self.defs().views.get(table).is_some_and(|m| !m.is_empty())
    }

    /// One view of `table`.
    pub fn view(&self, table: &str, name: &str) -> Option<Arc<ViewDef>> {
        self.defs().views.get(table)?.get(name).cloned()
    }

    /// Stages a view definition (new or with a new state).
    pub fn put_view(self: &Arc<Self>, tx: &mut WriteTx<'_>, def: ViewDef) {
        let key = MetaKey::View(def.table.as_str().into(), def.name.as_str().into()).encode();
        tx.put(Space::Meta, key, json(&def));
        let this = self.clone();
        tx.on_durable(move || {
            this.defs_mut().views.entry(def.table.clone()).or_default().insert(def.name.clone(), Arc::new(def));
        });
    }

    /// Stages the removal of a view definition and marks its keys as being removed
    /// (`meta:view_dropping:{table}:{name}`, holding its `created_at`) until
    /// [`Catalog::finish_view_drop`], as for indexes.
    pub fn drop_view(self: &Arc<Self>, tx: &mut WriteTx<'_>, def: &ViewDef) {
        let (table, name) = (def.table.as_str(), def.name.as_str());
        tx.delete(Space::Meta, MetaKey::View(table.into(), name.into()).encode());
        let mark = MetaKey::ViewDropping(table.into(), name.into()).encode();
        tx.put(Space::Meta, mark, def.created_at.to_be_bytes().to_vec());
        let (this, table, name, generation) = (self.clone(), table.to_owned(), name.to_owned(), def.created_at);
        tx.on_durable(move || {
            let mut defs = this.defs_mut();
            if let Some(m) = defs.views.get_mut(&table) {
                m.remove(&name);
            }
            defs.dropping_views.insert((table, name), generation);
        });
    }

    /// Stages the end of a view's removal.
    pub fn finish_view_drop(self: &Arc<Self>, tx: &mut WriteTx<'_>, table: &str, name: &str) {
        tx.delete(Space::Meta, MetaKey::ViewDropping(table.into(), name.into()).encode());
        let (this, key) = (self.clone(), (table.to_owned(), name.to_owned()));
        tx.on_durable(move || {
            this.defs_mut().dropping_views.remove(&key);
        });
    }

    /// While a dropped view's keys are still being removed: its `created_at`.
    pub fn view_dropping(&self, table: &str, name: &str) -> Option<i64> {
        self.defs().dropping_views.get(&(table.to_owned(), name.to_owned())).copied()
    }

    /// View drops that have not finished, as (table, view, `created_at`) (resumed at start).
    pub fn dropping_views(&self) -> Vec<(String, String, i64)> {
        self.defs().dropping_views.iter().map(|((t, n), g)| (t.clone(), n.clone(), *g)).collect()
    }
}
