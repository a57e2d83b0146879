//! The prepare step: a document checked against its table and encoded, and what each derived
//! family can compute from it alone, outside the committer (see the parent module).

use crate::catalog::{Catalog, TableDef, TableKind};
use crate::entity::EncodeOptions;
use crate::service::core::expiry;
use crate::service::core::fields::check_id;
use crate::service::core::fields::{FROM_FIELD, ID_FIELD, TO_FIELD, weight_of};
use crate::service::graph::adjacency::EdgeEnds;
use crate::service::indexes::entries::{self, PreparedEntries};
use crate::service::pipeline::Pipeline;
use crate::service::schema;
use crate::service::search::maintain::{self, PreparedText};
use crate::service::vectors::PreparedVector;
use crate::service::{Result, ServiceError};
use serde_json::{Map, Value};
use std::sync::Arc;

/// What the derived families computed for a new version before its write; each family's stage
/// takes its part (what is left is computed on the committer).
#[derive(Default)]
pub(crate) struct Derived {
    /// an edge's endpoints and weight
    pub edge: Option<EdgeEnds>,
    /// its terms for the table's fulltext indexes
    pub text: Vec<PreparedText>,
    /// its inserts into the table's vector indexes, planned on the cached graphs (empty: the
    /// committer plans them)
    pub vectors: Vec<PreparedVector>,
    /// its entries in the table's other indexes
    pub entries: Vec<PreparedEntries>,
}

/// A document ready to be stored: checked against its table and encoded (outside the committer).
pub(crate) struct Prepared {
    pub id: String,
    pub blob: Vec<u8>,
    pub derived: Derived,
}

impl Prepared {
    /// Plans the document's vector inserts on the cached graphs (the expensive neighbour search),
    /// so the committer only validates and applies them.
    pub(crate) fn plan_vectors(&mut self, db: &Pipeline, table: &TableDef) {
        plan_vectors_of(db, table, vec![self]);
    }
}

/// Plans the vector inserts of many documents of one table at once (on every core: see
/// `vectors::bulk`).
pub(crate) fn plan_vectors_of(db: &Pipeline, table: &TableDef, docs: Vec<&mut Prepared>) {
    let plans =
        db.vectors.plan_vectors(table, &docs.iter().map(|p| (p.id.as_str(), p.blob.as_slice())).collect::<Vec<_>>());
    for (p, planned) in docs.into_iter().zip(plans) {
        p.derived.vectors = planned;
    }
}

/// Takes `_id` out of a document body: it must be a string and, when `path_id` is given, equal it.
pub fn take_id(doc: &mut Map<String, Value>, path_id: Option<&str>) -> Result<Option<String>> {
    match doc.remove(ID_FIELD) {
        None => Ok(None),
        Some(Value::String(id)) => match path_id {
            Some(p) if p != id => {
                Err(ServiceError::InvalidDocument(format!("_id {id:?} differs from the id in the path")))
            }
            _ => Ok(Some(id)),
        },
        Some(_) => Err(ServiceError::InvalidDocument("_id must be a string".into())),
    }
}

/// Checks `doc` against `table` and encodes it. `doc` must not hold `_id` any more.
pub(crate) fn prepare(
    catalog: &Catalog,
    table: &TableDef,
    id: String,
    mut doc: Map<String, Value>,
) -> Result<Prepared> {
    check_id(&id)?;
    expiry::check_document(&doc)?;
    schema::conform(table, &mut doc)?;
    let edge = edge_endpoints(table, &doc);
    let vectors = table.vector_fields();
    let value = Value::Object(doc);
    let blob = catalog
        .encode_detached(&value, &EncodeOptions { vector_fields: &vectors })
        .map_err(|e| ServiceError::InvalidDocument(e.to_string()))?;
    from_blob(catalog, table, id, blob, edge)
}

/// A document already checked and encoded (`blob`, of a table whose documents need no schema
/// check: an import line of a schemaless table) with what the derived families prepare for it.
pub(crate) fn from_blob(
    catalog: &Catalog,
    table: &TableDef,
    id: String,
    blob: Vec<u8>,
    edge: Option<EdgeEnds>,
) -> Result<Prepared> {
    let text = maintain::prepare(catalog, &table.name, &blob)?;
    let entries = entries::prepare(catalog, &table.name, &id, &blob);
    Ok(Prepared { id, blob, derived: Derived { edge, text, vectors: Vec::new(), entries } })
}

fn edge_endpoints(table: &TableDef, doc: &Map<String, Value>) -> Option<EdgeEnds> {
    if table.kind != TableKind::Edge {
        return None;
    }
    let get = |f: &str| doc.get(f).and_then(Value::as_str).map(str::to_owned);
    let weight = table.weight_field.as_ref().and_then(|w| doc.get(w)).and_then(weight_of);
    Some(EdgeEnds { from: get(FROM_FIELD)?, to: get(TO_FIELD)?, weight })
}

/// The table as the write sees it: it must exist and be the same table the document was prepared
/// for (not dropped and re-created in between).
pub(crate) fn live_table(catalog: &Catalog, name: &str, prepared_for: Option<&TableDef>) -> Result<Arc<TableDef>> {
    let table = catalog.table(name).ok_or_else(|| ServiceError::TableNotFound(name.to_owned()))?;
    if let Some(p) = prepared_for
        && p.created_at != table.created_at
    {
        return Err(ServiceError::TableNotFound(name.to_owned()));
    }
    Ok(table)
}

/// True when a document prepared for table definition `prepared` still fits `live`: a column
/// added in between (with a default to fill in) means preparing it again.
pub(crate) fn same_schema(live: &TableDef, prepared: &TableDef) -> bool {
    live.kind == prepared.kind && live.columns == prepared.columns
}
