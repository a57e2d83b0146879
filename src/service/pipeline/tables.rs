//! Tables: create, list, describe, add columns, drop (with every key of the table).

use super::purge::Purge;
use crate::catalog::{ColumnDef, OnVertexDelete, TableDef, TableKind};
use crate::keys::{Direction, FtStatKey, GraphKey, MetaKey, table_prefix};
use crate::service::core::Handle;
use crate::service::pipeline::Pipeline;
use crate::service::{Result, ServiceError};
use crate::storage::Space;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::ToSchema;

/// Longest table name, in bytes.
pub const MAX_TABLE_NAME_LEN: usize = 256;

/// The body of `POST /v1/tables`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTable {
    /// table name: 1-256 bytes of UTF-8, no `/` and no control characters
    #[schema(example = "users", min_length = 1, max_length = 256, pattern = "^[^/\\u0000-\\u001f\\u007f-\\u009f]+$")]
    pub name: String,
    /// `document` (default) or `edge`
    #[serde(default)]
    pub kind: TableKind,
    /// typed columns; omit for a schemaless table
    #[serde(default)]
    pub columns: Option<Vec<ColumnDef>>,
    /// edge tables only: `reject` (default) refuses to delete a vertex that has edges here (409
    /// `vertex_has_edges`), `cascade` deletes them with the vertex in the same atomic write
    #[serde(default)]
    pub on_vertex_delete: Option<OnVertexDelete>,
    /// edge tables only: a top-level field every edge must hold as a finite number >= 0; its value
    /// is kept in the adjacency entries, so a shortest path weighted by it reads no edge document
    #[serde(default)]
    #[schema(min_length = 1, pattern = "^[^_.][^.]*$", example = "km")]
    pub weight_field: Option<String>,
    /// what the table's change events carry: `full` (the new document on puts), `keys` (default:
    /// table and id) or `off` (not in the feed)
    #[serde(default)]
    pub changefeed: Option<crate::catalog::ChangefeedMode>,
    /// keep the versions writes replace (and deletions), within these bounds: see
    /// `GET …/documents/{id}/history` and `?as_of=`
    #[serde(default)]
    pub history: Option<crate::catalog::HistoryPolicy>,
}

/// What `PATCH /v1/tables/{table}` changes.
#[derive(Debug, Default)]
pub struct AlterTable {
    /// columns to add
    pub columns: Vec<ColumnDef>,
    /// the new changefeed mode, if given
    pub changefeed: Option<crate::catalog::ChangefeedMode>,
    /// the new history policy, if given (`Some(None)`: history off)
    pub history: Option<Option<crate::catalog::HistoryPolicy>>,
}

/// A table definition with its document count.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TableInfo {
    /// the definition
    #[serde(flatten)]
    pub table: TableDef,
    /// number of documents
    pub documents: u64,
}

/// Checks a table name.
pub fn check_table_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        "must not be empty"
    } else if name.len() > MAX_TABLE_NAME_LEN {
        "must be at most 256 bytes"
    } else if name.contains('/') {
        "must not contain '/' (it separates table and id in vertex references)"
    } else if name.chars().any(char::is_control) {
        "must not contain control characters"
    } else {
        return Ok(());
    };
    Err(ServiceError::InvalidTableName { name: name.to_owned(), reason })
}

fn check_columns(columns: &[ColumnDef]) -> Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for c in columns {
        crate::service::schema::check_column_name(&c.name)?;
        if !seen.insert(c.name.as_str()) {
            return Err(ServiceError::InvalidRequest(format!("column {:?} is declared twice", c.name)));
        }
        if let Some(default) = &c.default {
            crate::service::schema::check_value(c, &mut default.clone()).map_err(|e| {
                ServiceError::InvalidRequest(format!("default of column {:?} does not fit its type: {e}", c.name))
            })?;
        }
    }
    Ok(())
}

impl Pipeline {
    fn count(&self, table: &str) -> Result<u64> {
        Ok(crate::service::core::counts::decode(
            self.core.store.get(Space::Meta, &crate::service::core::counts::key(table))?.as_deref(),
        ))
    }

    /// A table's document count (0 where it cannot be read).
    pub(crate) fn table_count(&self, table: &str) -> u64 {
        self.count(table).unwrap_or(0)
    }

    /// Creates a table.
    pub async fn create_table(self: &Arc<Self>, req: CreateTable) -> Result<TableDef> {
        check_table_name(&req.name)?;
        if let Some(policy) = &req.history {
            crate::service::history::check_policy(policy)?;
        }
        if let Some(columns) = &req.columns {
            check_columns(columns)?;
        }
        let edge_only = req.on_vertex_delete.is_some() || req.weight_field.is_some();
        if req.kind != TableKind::Edge && edge_only {
            return Err(ServiceError::InvalidRequest("on_vertex_delete and weight_field are for edge tables".into()));
        }
        if let Some(w) = &req.weight_field {
            crate::service::schema::check_column_name(w)?;
            if let Some(c) = req.columns.iter().flatten().find(|c| &c.name == w)
                && !matches!(c.ty, crate::catalog::ColumnType::Int | crate::catalog::ColumnType::Float)
            {
                return Err(ServiceError::InvalidRequest(format!("weight field {w:?} is a column of type {}", c.ty)));
            }
        }
        let on_vertex_delete = match req.kind {
            TableKind::Edge => Some(req.on_vertex_delete.unwrap_or_default()),
            TableKind::Document => None,
        };
        self.write(move |tx, db| {
            if db.core.catalog.table(&req.name).is_some() {
                return Err(ServiceError::TableExists(req.name));
            }
            if db.core.catalog.is_dropping(&req.name) {
                return Err(ServiceError::TableDropping(req.name));
            }
            let created_at = db.core.catalog.next_created_at(tx)?;
            let def = TableDef {
                name: req.name,
                kind: req.kind,
                columns: req.columns,
                on_vertex_delete,
                weight_field: req.weight_field,
                changefeed: req.changefeed,
                history: req.history,
                created_at,
            };
            db.core.catalog.put_table(tx, def.clone());
            Ok(def)
        })
        .await
    }

    /// Every table with its document count.
    pub async fn list_tables(self: &Arc<Self>) -> Result<Vec<TableInfo>> {
        self.read(|db| {
            db.core
                .catalog
                .tables()
                .into_iter()
                .map(|t| Ok(TableInfo { documents: db.count(&t.name)?, table: (*t).clone() }))
                .collect()
        })
        .await
    }

    /// One table with its document count.
    pub async fn get_table(self: &Arc<Self>, name: String) -> Result<TableInfo> {
        self.read(move |db| {
            let t = db.core.catalog.table(&name).ok_or_else(|| ServiceError::TableNotFound(name.clone()))?;
            Ok(TableInfo { documents: db.count(&name)?, table: (*t).clone() })
        })
        .await
    }

    /// Adds columns to a table. A new column must be nullable or have a default, since existing
    /// documents lack it; a schemaless table stays schemaless only if no columns are added.
    pub async fn add_columns(self: &Arc<Self>, name: String, columns: Vec<ColumnDef>) -> Result<TableDef> {
        self.alter_table(name, AlterTable { columns, ..AlterTable::default() }).await
    }

    /// Changes a table: adds `columns` (see [`Pipeline::add_columns`]; none: no change of columns) and
    /// sets its changefeed mode when `changefeed` is given (from the next write on).
    pub async fn alter_table(self: &Arc<Self>, name: String, change: AlterTable) -> Result<TableDef> {
        let AlterTable { columns, changefeed, history } = change;
        if let Some(Some(policy)) = &history {
            crate::service::history::check_policy(policy)?;
        }
        self.write(move |tx, db| {
            let current = db.core.catalog.table(&name).ok_or_else(|| ServiceError::TableNotFound(name.clone()))?;
            let mut def = (*current).clone();
            if changefeed.is_some() {
                def.changefeed = changefeed;
            }
            if let Some(history) = history {
                // turned off: what was kept goes at the next retention run. Turned on again before
                // that, the kept versions and heads would not follow the writes made meanwhile.
                if history.is_some()
                    && def.history.is_none()
                    && !tx.scan_current(Space::Hist, &table_prefix(&name), 1)?.is_empty()
                {
                    return Err(ServiceError::HistoryPurging(name.clone()));
                }
                def.history = history;
            }
            if columns.is_empty() {
                db.core.catalog.put_table(tx, def.clone());
                return Ok(def);
            }
            let Some(existing) = def.columns.as_mut() else {
                return Err(ServiceError::InvalidRequest(
                    "a schemaless table cannot get columns: create a typed table instead".into(),
                ));
            };
            for c in &columns {
                if !c.nullable && c.default.is_none() {
                    return Err(ServiceError::InvalidRequest(format!(
                        "new column {:?} must be nullable or have a default: existing documents lack it",
                        c.name
                    )));
                }
            }
            existing.extend(columns);
            check_columns(existing)?;
            db.core.catalog.put_table(tx, def.clone());
            Ok(def)
        })
        .await
    }

    /// Drops a table: its definition goes at once (atomically), then every key of the table is
    /// removed in chunks; a table of the same name can be created once that is done.
    pub async fn drop_table(self: &Arc<Self>, name: String) -> Result<()> {
        let db = self.clone();
        self.core.detached(async move { db.drop_table_now(name).await }).await
    }

    async fn drop_table_now(self: &Arc<Self>, name: String) -> Result<()> {
        let n = name.clone();
        self.write(move |tx, db| {
            if db.core.catalog.table(&n).is_none() {
                return Err(ServiceError::TableNotFound(n));
            }
            db.core.catalog.drop_table(tx, &n);
            Ok(())
        })
        .await?;
        self.vectors.graphs.forget_table(&name);
        self.purge_table(&name).await
    }

    /// Removes every key of a dropped table, then (in the write removing the last keys) its
    /// count and its `dropping` mark.
    pub(crate) async fn purge_table(self: &Arc<Self>, name: &str) -> Result<()> {
        let spaces = [
            Space::Entity,
            Space::Idx,
            Space::Ridx,
            Space::Sidx,
            Space::Ftidx,
            Space::Vec,
            Space::View,
            Space::Ttlidx,
            Space::Hist,
        ];
        let mut prefixes: Vec<_> = spaces.into_iter().map(|s| (s, table_prefix(name))).collect();
        prefixes.push((Space::Graph, GraphKey::table_prefix(Direction::Out, name)));
        prefixes.push((Space::Graph, GraphKey::table_prefix(Direction::In, name)));
        prefixes.extend(FtStatKey::table_prefixes(name).into_iter().map(|p| (Space::Ftstat, p)));
        let (live, finish) = (name.to_owned(), name.to_owned());
        let purge = Purge {
            prefixes,
            live: Box::new(move |db| db.core.catalog.is_dropping(&live)),
            finish: Box::new(move |tx, db| {
                tx.delete(Space::Meta, MetaKey::Count(finish.as_str().into()).encode());
                db.core.catalog.finish_drop(tx, &finish);
                Ok(())
            }),
            feed: Some(name.to_owned()),
        };
        self.spawn_purge(format!("table {name:?}"), purge)
            .await
            .map_err(|e| ServiceError::Internal(format!("purge task failed: {e}")))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names() {
        assert!(check_table_name("users").is_ok());
        assert!(check_table_name("ünïcode 🦀:%").is_ok());
        assert!(check_table_name("").is_err());
        assert!(check_table_name("a/b").is_err());
        assert!(check_table_name("a\0b").is_err());
        assert!(check_table_name(&"x".repeat(257)).is_err());
    }
}
