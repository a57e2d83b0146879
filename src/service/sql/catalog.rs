//! A database as DataFusion sees it: one schema (`public`) whose relations are the database's
//! tables (shaped as `shape.rs` says), looked up in the catalog when a statement names them (a
//! table created a moment ago is there at once), each scanned by `scan.rs` with what
//! `pushdown.rs` takes over.

use super::pushdown::{self, Pushed};
use super::scan::{ScanExec, ScanSpec};
use super::shape::{ColumnKind, shape};
use super::statement::{Statement, TableRef};
use crate::catalog::TableDef;
use crate::service::Db;
use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::SchemaProvider;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_plan::ExecutionPlan;
use std::sync::Arc;

/// The `public` schema of one database, for one statement.
pub(super) struct DbSchema {
    pub(super) db: Arc<Db>,
    pub(super) statement: Arc<Statement>,
}

impl std::fmt::Debug for DbSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbSchema").field("statement", &self.statement).finish_non_exhaustive()
    }
}

#[async_trait]
impl SchemaProvider for DbSchema {
    fn table_names(&self) -> Vec<String> {
        let catalog = &self.db.core.catalog;
        catalog.tables().iter().filter(|t| !catalog.is_dropping(&t.name)).map(|t| t.name.clone()).collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>, DataFusionError> {
        let catalog = &self.db.core.catalog;
        let Some(def) = catalog.table(name).filter(|_| !catalog.is_dropping(name)) else { return Ok(None) };
        Ok(Some(Arc::new(DbTable::new(self.db.clone(), &def, self.statement.clone(), None))))
    }

    fn table_exist(&self, name: &str) -> bool {
        let catalog = &self.db.core.catalog;
        catalog.table(name).is_some() && !catalog.is_dropping(name)
    }
}

/// One table as a relation (as it is, or as it was at a time).
#[derive(Debug)]
pub(super) struct DbTable {
    table: TableRef,
    kinds: Vec<ColumnKind>,
    schema: SchemaRef,
    statement: Arc<Statement>,
    as_of: Option<String>,
}

impl DbTable {
    pub(super) fn new(db: Arc<Db>, def: &TableDef, statement: Arc<Statement>, as_of: Option<String>) -> DbTable {
        let (kinds, schema) = shape(def);
        DbTable { table: TableRef::new(db, def.name.clone()), kinds, schema, statement, as_of }
    }

    fn kind_of(&self, name: &str) -> Option<&ColumnKind> {
        self.schema.index_of(name).ok().map(|i| &self.kinds[i])
    }
}

#[async_trait]
impl TableProvider for DbTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        let mut pushed = 0;
        Ok(filters
            .iter()
            .map(|f| {
                if !self.statement.pushdown || pushed >= pushdown::MAX_PUSHED {
                    return TableProviderFilterPushDown::Unsupported;
                }
                match pushdown::translate(f, &|name| self.kind_of(name)) {
                    Some(Pushed::Exact(_)) => {
                        pushed += 1;
                        TableProviderFilterPushDown::Exact
                    }
                    Some(Pushed::Inexact(_)) => {
                        pushed += 1;
                        TableProviderFilterPushDown::Inexact
                    }
                    None => TableProviderFilterPushDown::Unsupported,
                }
            })
            .collect())
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        // the same translation as above: every filter handed here was said to be pushed
        let conditions: Vec<serde_json::Value> = match self.statement.pushdown {
            true => filters
                .iter()
                .filter_map(|f| pushdown::translate(f, &|name| self.kind_of(name)))
                .take(pushdown::MAX_PUSHED)
                .map(Pushed::into_condition)
                .collect(),
            false => Vec::new(),
        };
        let filter = match conditions.len() {
            0 => None,
            1 => conditions.into_iter().next(),
            _ => Some(serde_json::json!({ "$and": conditions })),
        };
        let indices: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.kinds.len()).collect(),
        };
        let schema = Arc::new(self.schema.project(&indices)?);
        let kinds: Vec<ColumnKind> = indices.iter().map(|&i| self.kinds[i].clone()).collect();
        // the planner's choice, for EXPLAIN only: execution plans again on its own snapshot
        let plan = match self.statement.explain && self.as_of.is_none() {
            true => {
                let query = self.table.db.query.clone();
                let summary = query
                    .plan_of(self.table.name.clone(), filter.as_ref().unwrap_or(&serde_json::json!({})))
                    .await
                    .map_err(|e| self.statement.service_error(e))?;
                Some(summary)
            }
            false => None,
        };
        let limit = if self.statement.pushdown { limit } else { None };
        let spec = ScanSpec { table: self.table.clone(), kinds, filter, limit, plan, as_of: self.as_of.clone() };
        Ok(Arc::new(ScanExec::new(spec, schema, self.statement.clone())))
    }
}
