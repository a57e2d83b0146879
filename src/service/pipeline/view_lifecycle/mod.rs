//! A view's lifecycle: created (built in the background on a non-empty table), dropped with a
//! durable mark and a purge, resumed at open.

mod build;

use crate::catalog::{ViewDef, ViewState};
use crate::service::pipeline::Pipeline;
use crate::service::views::{CreateView, def};
use crate::service::{Result, ServiceError};
use std::sync::Arc;

impl Pipeline {
    /// Creates a view; on a non-empty table it is `building` until a background job has added
    /// every document (reads refuse it before it is `ready`).
    pub async fn create_view(self: &Arc<Self>, table: String, req: CreateView) -> Result<ViewDef> {
        def::check(&req)?;
        let db = self.clone();
        self.core.detached(async move { db.create_view_now(table, req).await }).await
    }

    async fn create_view_now(self: &Arc<Self>, table: String, req: CreateView) -> Result<ViewDef> {
        let def = self
            .write(move |tx, db| {
                db.core.catalog.table(&table).ok_or_else(|| ServiceError::TableNotFound(table.clone()))?;
                if db.core.catalog.view(&table, &req.name).is_some() {
                    return Err(ServiceError::ViewExists { table, view: req.name });
                }
                // The old view's purge would remove the new one's keys.
                if db.core.catalog.view_dropping(&table, &req.name).is_some() {
                    return Err(ServiceError::ViewDropping { table, view: req.name });
                }
                if db.core.catalog.views(&table).len() >= def::MAX_VIEWS_PER_TABLE {
                    return Err(ServiceError::InvalidView(format!(
                        "a table has at most {} views",
                        def::MAX_VIEWS_PER_TABLE
                    )));
                }
                let docs = crate::service::core::counts::count_in(tx, &table)?;
                let state = if docs == 0 {
                    ViewState::Ready
                } else {
                    ViewState::Building { done: 0, total: docs, after: None }
                };
                let created_at = db.core.catalog.next_created_at(tx)?;
                let def = ViewDef {
                    table,
                    name: req.name,
                    kind: req.kind,
                    filter: req.filter,
                    by: req.by,
                    aggregates: req.aggregates,
                    state,
                    created_at,
                    compiled: Default::default(),
                };
                db.core.catalog.put_view(tx, def.clone());
                Ok(def)
            })
            .await?;
        if !def.is_ready() {
            self.spawn_view_build(&def);
        }
        Ok(def)
    }

    /// Drops a view and removes its keys. The definition goes at once with a durable drop mark;
    /// the name stays taken (`view_dropping`) until the keys are gone, also across a restart.
    pub async fn drop_view(self: &Arc<Self>, table: String, name: String) -> Result<()> {
        let db = self.clone();
        self.core.detached(async move { db.drop_view_now(table, name).await }).await
    }

    async fn drop_view_now(self: &Arc<Self>, table: String, name: String) -> Result<()> {
        let (t, n) = (table.clone(), name.clone());
        let created_at = self
            .write(move |tx, db| {
                db.core.catalog.table(&t).ok_or_else(|| ServiceError::TableNotFound(t.clone()))?;
                let def = db.core.catalog.view(&t, &n).ok_or(ServiceError::ViewNotFound { table: t, view: n })?;
                db.core.catalog.drop_view(tx, &def);
                Ok(def.created_at)
            })
            .await?;
        self.purge_dropped_view(&table, &name, created_at)
            .await
            .map_err(|e| ServiceError::Internal(format!("purge task failed: {e}")))?
    }

    /// Resumes what views left unfinished at the last close: builds, failed builds' keys, drops.
    pub(crate) fn resume_views(self: &Arc<Self>) {
        for table in self.core.catalog.tables() {
            for view in self.core.catalog.views(&table.name) {
                match view.state {
                    ViewState::Building { .. } => self.spawn_view_build(&view),
                    ViewState::Failed { .. } => self.purge_failed_view(&view),
                    ViewState::Ready => {}
                }
            }
        }
        for (table, view, created_at) in self.core.catalog.dropping_views() {
            drop(self.purge_dropped_view(&table, &view, created_at));
        }
    }
}
