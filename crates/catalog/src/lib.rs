//! The catalog: table, index and metric definitions, sequences, and the interned field names of the
//! entity codec — persisted under `meta:` and cached in memory.
//!
//! Changes are staged in a write (so they commit atomically with whatever else the write does)
//! and reach the in-memory cache from an on-commit hook: the cache only ever shows committed state.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod index;
mod metric;
mod state_schema;
mod table;
mod view;

pub use index::{IndexDef, IndexKind, IndexState};
pub use metric::MetricConfig;
pub use table::{ChangefeedMode, ColumnDef, ColumnType, HistoryPolicy, OnVertexDelete, TableDef, TableKind};
pub use view::{ViewDef, ViewKind, ViewState};

use mosaic_entity::{self as entity, EncodeOptions, FieldDict};
use mosaic_keys::{KeyError, MetaKey};
use mosaic_storage::{KeyRange, ReadView, Space, StorageError, Store, WriteTx};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

/// Why the catalog could not be read or changed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The store failed; see [`StorageError`].
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A catalog entry on disk does not parse: the data directory is damaged or from a newer version.
    #[error("damaged catalog entry {key}: {reason}")]
    Corrupt {
        /// the key, in display form
        key: String,
        /// what is wrong
        reason: String,
    },
    /// A document could not be encoded or decoded.
    #[error(transparent)]
    Entity(#[from] entity::Error),
}

impl From<KeyError> for CatalogError {
    fn from(e: KeyError) -> Self {
        CatalogError::Corrupt { key: "meta".into(), reason: e.to_string() }
    }
}

#[derive(Default)]
struct Defs {
    tables: BTreeMap<String, Arc<TableDef>>,
    indexes: BTreeMap<String, BTreeMap<String, Arc<IndexDef>>>,
    metrics: BTreeMap<String, Arc<MetricConfig>>,
    dropping: BTreeSet<String>,
    /// (table, index) of dropped indexes whose entries are still being removed → the dropped
    /// definition's `created_at` (which purge the mark belongs to)
    dropping_indexes: BTreeMap<(String, String), i64>,
    /// table → view name → definition
    views: BTreeMap<String, BTreeMap<String, Arc<ViewDef>>>,
    /// (table, view) of dropped views whose keys are still being removed → its `created_at`
    dropping_views: BTreeMap<(String, String), i64>,
}

/// The field dictionary as an append-only snapshot: readers take the current `Arc` once (the lock
/// is held only to clone it) and decode with it for as long as they like, holding nothing; a
/// document with a new name copies the dictionary, adds the name and publishes the copy. Names
/// are never removed, so an older snapshot is a prefix of every newer one.
struct Fields {
    current: RwLock<Arc<FieldDict>>,
    /// serializes the writers that add names (rare: only documents with a new name)
    grow: Mutex<()>,
    /// names below this id are known to be committed
    persisted: AtomicU32,
}

/// The in-memory catalog, loaded once at start.
pub struct Catalog {
    defs: RwLock<Defs>,
    fields: Fields,
    /// the largest `created_at` of the catalog at load (its table and index definitions, its
    /// index drop marks): where [`Catalog::next_created_at`] starts in a data directory that has
    /// no `meta:seq:created_at` yet
    created_at_at_load: i64,
}

/// The sequence (`meta:seq:created_at`) holding the last `created_at` given out.
const CREATED_AT_SEQ: &str = "created_at";

/// A fixed wall clock for tests (0: the real one); a clock that does not move is what a drop and
/// re-create within one millisecond, or a clock set back, looks like. (Compiled always: the
/// server's unit tests set it, and a dependency is never built with `cfg(test)`.)
#[doc(hidden)]
pub static FROZEN_CLOCK_MS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// The wall clock, in milliseconds since the Unix epoch (0 before it).
pub fn now_ms() -> i64 {
    let frozen = FROZEN_CLOCK_MS.load(Ordering::Relaxed);
    if frozen != 0 {
        return frozen;
    }
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

fn corrupt(key: &[u8], reason: impl ToString) -> CatalogError {
    CatalogError::Corrupt { key: mosaic_keys::display("meta", key), reason: reason.to_string() }
}

fn parse<T: serde::de::DeserializeOwned>(key: &[u8], value: &[u8]) -> Result<T, CatalogError> {
    serde_json::from_slice(value).map_err(|e| corrupt(key, e))
}

/// An index's definition as a read view holds it (`None` when the view does not hold it): the
/// state reads report and use, which in sync mode is the durable one, where the in-memory catalog
/// changes at commit.
pub fn stored_index(view: &ReadView, table: &str, name: &str) -> Result<Option<IndexDef>, CatalogError> {
    let key = MetaKey::Index(table.into(), name.into()).encode();
    view.get(Space::Meta, &key)?.map(|value| parse(&key, &value)).transpose()
}

fn json<T: serde::Serialize>(value: &T) -> Vec<u8> {
    // Catalog types are plain data: serializing them cannot fail.
    serde_json::to_vec(value).unwrap_or_default()
}

impl Catalog {
    /// Reads every catalog entry of the store.
    pub fn load(store: &Store) -> Result<Arc<Catalog>, CatalogError> {
        let (defs, dict, created_at_at_load) = Catalog::read(store)?;
        let fields = Fields {
            persisted: AtomicU32::new(dict.len() as u32),
            current: RwLock::new(Arc::new(dict)),
            grow: Mutex::new(()),
        };
        Ok(Arc::new(Catalog { defs: RwLock::new(defs), fields, created_at_at_load }))
    }

    /// Reads the catalog again, as another server (the cluster's leader) changed it: a
    /// follower's, which changes nothing itself. Readers see the old catalog or the new one.
    pub fn reload(&self, store: &Store) -> Result<(), CatalogError> {
        let (defs, dict, _) = Catalog::read(store)?;
        self.fields.persisted.store(dict.len() as u32, Ordering::Release);
        *self.fields.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(dict);
        *self.defs_mut() = defs;
        Ok(())
    }

    /// The definitions, the field names and the largest `created_at` of the store's catalog.
    fn read(store: &Store) -> Result<(Defs, FieldDict, i64), CatalogError> {
        let view = store.snapshot();
        let mut defs = Defs::default();
        let mut names = Vec::new();
        // Only the kinds the catalog holds: the per-table counts and the per-series records of time
        // series (one key per series, possibly millions) are read where they are needed.
        let kinds = ["dropping", "field", "index", "index_dropping", "metric", "table", "view", "view_dropping"];
        let items = kinds
            .into_iter()
            .flat_map(|kind| view.scan(Space::Meta, KeyRange::Prefix(MetaKey::kind_prefix(kind)), false));
        for item in items {
            let (key, value) = item?;
            match MetaKey::decode(&key).map_err(|e| corrupt(&key, e))? {
                MetaKey::Table(name) => {
                    defs.tables.insert(name.into_owned(), Arc::new(parse(&key, &value)?));
                }
                MetaKey::Index(table, name) => {
                    let def: IndexDef = parse(&key, &value)?;
                    defs.indexes.entry(table.into_owned()).or_default().insert(name.into_owned(), Arc::new(def));
                }
                MetaKey::Metric(name) => {
                    defs.metrics.insert(name.into_owned(), Arc::new(parse(&key, &value)?));
                }
                MetaKey::Dropping(table) => {
                    defs.dropping.insert(table.into_owned());
                }
                MetaKey::IndexDropping(table, name) => {
                    let generation =
                        value.as_ref().try_into().map(i64::from_be_bytes).map_err(|_| corrupt(&key, "not an i64"))?;
                    defs.dropping_indexes.insert((table.into_owned(), name.into_owned()), generation);
                }
                MetaKey::View(table, name) => {
                    let def: ViewDef = parse(&key, &value)?;
                    defs.views.entry(table.into_owned()).or_default().insert(name.into_owned(), Arc::new(def));
                }
                MetaKey::ViewDropping(table, name) => {
                    let generation =
                        value.as_ref().try_into().map(i64::from_be_bytes).map_err(|_| corrupt(&key, "not an i64"))?;
                    defs.dropping_views.insert((table.into_owned(), name.into_owned()), generation);
                }
                MetaKey::Field(id) => {
                    // ids are scanned in order; a gap means a lost entry
                    if id as usize != names.len() {
                        return Err(corrupt(&key, format!("field id {id} follows {} names", names.len())));
                    }
                    names.push(String::from_utf8(value.to_vec()).map_err(|e| corrupt(&key, e))?);
                }
                MetaKey::Seq(_)
                | MetaKey::Count(_)
                | MetaKey::Series(..)
                | MetaKey::Label(..)
                | MetaKey::Format
                | MetaKey::Database(_)
                | MetaKey::DatabaseDropping(_) => {}
            }
        }
        let created_at_at_load = (defs.tables.values().map(|t| t.created_at))
            .chain(defs.indexes.values().flat_map(|m| m.values().map(|i| i.created_at)))
            .chain(defs.dropping_indexes.values().copied())
            .chain(defs.views.values().flat_map(|m| m.values().map(|v| v.created_at)))
            .chain(defs.dropping_views.values().copied())
            .max()
            .unwrap_or(0);
        Ok((defs, FieldDict::from_names(names)?, created_at_at_load))
    }

    fn defs(&self) -> std::sync::RwLockReadGuard<'_, Defs> {
        self.defs.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn defs_mut(&self) -> std::sync::RwLockWriteGuard<'_, Defs> {
        self.defs.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The definition of `table`.
    pub fn table(&self, name: &str) -> Option<Arc<TableDef>> {
        self.defs().tables.get(name).cloned()
    }

    /// Every table, by name.
    pub fn tables(&self) -> Vec<Arc<TableDef>> {
        self.defs().tables.values().cloned().collect()
    }

    /// True while a dropped table's keys are still being removed.
    pub fn is_dropping(&self, table: &str) -> bool {
        self.defs().dropping.contains(table)
    }

    /// Tables whose removal has not finished (resumed at start).
    pub fn dropping(&self) -> Vec<String> {
        self.defs().dropping.iter().cloned().collect()
    }

    /// The indexes of `table`, by name.
    pub fn indexes(&self, table: &str) -> Vec<Arc<IndexDef>> {
        self.defs().indexes.get(table).map(|m| m.values().cloned().collect()).unwrap_or_default()
    }

    /// The TTL indexes of `table` that writes maintain (building or ready); no allocation when
    /// there are none, as on every read of a table without TTL.
    pub fn ttl_indexes(&self, table: &str) -> Vec<Arc<IndexDef>> {
        let defs = self.defs();
        let Some(m) = defs.indexes.get(table) else { return Vec::new() };
        m.values().filter(|d| d.kind == IndexKind::Ttl && d.is_maintained()).cloned().collect()
    }

    /// One index of `table`.
    pub fn index(&self, table: &str, name: &str) -> Option<Arc<IndexDef>> {
        self.defs().indexes.get(table)?.get(name).cloned()
    }

    /// A metric's configuration.
    pub fn metric(&self, name: &str) -> Option<Arc<MetricConfig>> {
        self.defs().metrics.get(name).cloned()
    }

    /// Every configured metric.
    pub fn metrics(&self) -> Vec<Arc<MetricConfig>> {
        self.defs().metrics.values().cloned().collect()
    }

    /// Stages a table definition (new or changed).
    pub fn put_table(self: &Arc<Self>, tx: &mut WriteTx<'_>, def: TableDef) {
        tx.put(Space::Meta, MetaKey::Table(def.name.as_str().into()).encode(), json(&def));
        let this = self.clone();
        tx.on_durable(move || {
            this.defs_mut().tables.insert(def.name.clone(), Arc::new(def));
        });
    }

    /// Stages the removal of a table definition and its index and view definitions, and marks its keys as
    /// being removed (`meta:dropping:{table}`) until [`Catalog::finish_drop`]. The table's purge
    /// removes every index entry and view key too, so pending index and view drops of the table end here (their purges
    /// see their mark gone and stop). The mark's value is the table's changefeed mode (JSON), so
    /// the purge knows whether to log the removed documents' delete events (see
    /// [`Catalog::dropped_changefeed_mode`]).
    pub fn drop_table(self: &Arc<Self>, tx: &mut WriteTx<'_>, name: &str) {
        let mode = self.table(name).map(|t| t.changefeed_mode()).unwrap_or_default();
        tx.delete(Space::Meta, MetaKey::Table(name.into()).encode());
        for index in self.indexes(name) {
            tx.delete(Space::Meta, MetaKey::Index(name.into(), index.name.as_str().into()).encode());
        }
        for (_, index, _) in self.dropping_indexes().into_iter().filter(|(t, ..)| t == name) {
            tx.delete(Space::Meta, MetaKey::IndexDropping(name.into(), index.as_str().into()).encode());
        }
        for view in self.views(name) {
            tx.delete(Space::Meta, MetaKey::View(name.into(), view.name.as_str().into()).encode());
        }
        for (_, view, _) in self.dropping_views().into_iter().filter(|(t, ..)| t == name) {
            tx.delete(Space::Meta, MetaKey::ViewDropping(name.into(), view.as_str().into()).encode());
        }
        let mark = serde_json::to_vec(&mode).unwrap_or_default();
        tx.put(Space::Meta, MetaKey::Dropping(name.into()).encode(), mark);
        let (this, name) = (self.clone(), name.to_owned());
        tx.on_durable(move || {
            let mut defs = this.defs_mut();
            defs.tables.remove(&name);
            defs.indexes.remove(&name);
            defs.dropping_indexes.retain(|(t, _), _| *t != name);
            defs.views.remove(&name);
            defs.dropping_views.retain(|(t, _), _| *t != name);
            defs.dropping.insert(name);
        });
    }

    /// The changefeed mode of a table being dropped, as its drop mark holds it (`keys` for a mark
    /// written before marks held one).
    pub fn dropped_changefeed_mode(&self, tx: &WriteTx<'_>, name: &str) -> Result<ChangefeedMode, CatalogError> {
        let mark = tx.get(Space::Meta, &MetaKey::Dropping(name.into()).encode())?;
        Ok(mark.and_then(|m| serde_json::from_slice(&m).ok()).unwrap_or_default())
    }

    /// Stages the end of a table's removal.
    pub fn finish_drop(self: &Arc<Self>, tx: &mut WriteTx<'_>, name: &str) {
        tx.delete(Space::Meta, MetaKey::Dropping(name.into()).encode());
        let (this, name) = (self.clone(), name.to_owned());
        tx.on_durable(move || {
            this.defs_mut().dropping.remove(&name);
        });
    }

    /// Stages an index definition (new or with a new state).
    pub fn put_index(self: &Arc<Self>, tx: &mut WriteTx<'_>, def: IndexDef) {
        tx.put(Space::Meta, MetaKey::Index(def.table.as_str().into(), def.name.as_str().into()).encode(), json(&def));
        let this = self.clone();
        tx.on_durable(move || {
            this.defs_mut().indexes.entry(def.table.clone()).or_default().insert(def.name.clone(), Arc::new(def));
        });
    }

    /// Stages the removal of an index definition and marks its entries as being removed
    /// (`meta:index_dropping:{table}:{name}`) until [`Catalog::finish_index_drop`]: the mark
    /// survives a crash, so the purge resumes at open, and keeps the name taken meanwhile, so a
    /// new index of that name never has its entries removed by the old one's purge.
    /// The mark holds the dropped definition's `created_at`, so a purge can tell its own mark
    /// from a later drop's.
    pub fn drop_index(self: &Arc<Self>, tx: &mut WriteTx<'_>, def: &IndexDef) {
        let (table, name) = (def.table.as_str(), def.name.as_str());
        tx.delete(Space::Meta, MetaKey::Index(table.into(), name.into()).encode());
        let mark = MetaKey::IndexDropping(table.into(), name.into()).encode();
        tx.put(Space::Meta, mark, def.created_at.to_be_bytes().to_vec());
        let (this, table, name, generation) = (self.clone(), table.to_owned(), name.to_owned(), def.created_at);
        tx.on_durable(move || {
            let mut defs = this.defs_mut();
            if let Some(m) = defs.indexes.get_mut(&table) {
                m.remove(&name);
            }
            defs.dropping_indexes.insert((table, name), generation);
        });
    }

    /// Stages the end of an index's removal.
    pub fn finish_index_drop(self: &Arc<Self>, tx: &mut WriteTx<'_>, table: &str, name: &str) {
        tx.delete(Space::Meta, MetaKey::IndexDropping(table.into(), name.into()).encode());
        let (this, key) = (self.clone(), (table.to_owned(), name.to_owned()));
        tx.on_durable(move || {
            this.defs_mut().dropping_indexes.remove(&key);
        });
    }

    /// While a dropped index's entries are still being removed: the dropped definition's
    /// `created_at`.
    pub fn index_dropping(&self, table: &str, name: &str) -> Option<i64> {
        self.defs().dropping_indexes.iter().find(|((t, n), _)| t == table && n == name).map(|(_, g)| *g)
    }

    /// Index drops that have not finished, as (table, index, `created_at`) (resumed at start).
    pub fn dropping_indexes(&self) -> Vec<(String, String, i64)> {
        self.defs().dropping_indexes.iter().map(|((t, n), g)| (t.clone(), n.clone(), *g)).collect()
    }

    /// Stages a metric configuration.
    pub fn put_metric(self: &Arc<Self>, tx: &mut WriteTx<'_>, config: MetricConfig) {
        tx.put(Space::Meta, MetaKey::Metric(config.name.as_str().into()).encode(), json(&config));
        let this = self.clone();
        tx.on_durable(move || {
            this.defs_mut().metrics.insert(config.name.clone(), Arc::new(config));
        });
    }

    /// Stages the removal of a metric configuration.
    pub fn remove_metric(self: &Arc<Self>, tx: &mut WriteTx<'_>, name: &str) {
        tx.delete(Space::Meta, MetaKey::Metric(name.into()).encode());
        let (this, name) = (self.clone(), name.to_owned());
        tx.on_durable(move || {
            this.defs_mut().metrics.remove(&name);
        });
    }

    /// Takes the next value of sequence `name` (1, 2, 3, …) in the write.
    pub fn next_in_sequence(&self, tx: &mut WriteTx<'_>, name: &str) -> Result<u64, CatalogError> {
        let key = MetaKey::Seq(name.into()).encode();
        let current = match tx.get(Space::Meta, &key)? {
            Some(v) => u64::from_be_bytes(v.as_slice().try_into().map_err(|_| corrupt(&key, "not a u64"))?),
            None => 0,
        };
        tx.put(Space::Meta, key, (current + 1).to_be_bytes().to_vec());
        Ok(current + 1)
    }

    /// Takes the `created_at` of a table, index or view being created, in the write that creates it:
    /// the wall clock in milliseconds, but always above every `created_at` given out before
    /// (kept in `meta:seq:created_at`). It is the identity of that table or index incarnation
    /// (cursor bindings, index drop marks, backfill staleness), so a drop and re-create within one
    /// millisecond, or a clock set back, still gives the new one an identity of its own.
    pub fn next_created_at(&self, tx: &mut WriteTx<'_>) -> Result<i64, CatalogError> {
        let key = MetaKey::Seq(CREATED_AT_SEQ.into()).encode();
        let last = match tx.get(Space::Meta, &key)? {
            Some(v) => i64::from_be_bytes(v.as_slice().try_into().map_err(|_| corrupt(&key, "not an i64"))?),
            None => self.created_at_at_load,
        };
        let next = now_ms().max(last.saturating_add(1));
        tx.put(Space::Meta, key, next.to_be_bytes().to_vec());
        Ok(next)
    }

    /// The current field dictionary: a snapshot to decode with for as long as needed, holding no
    /// lock (names are only ever added, so it decodes every blob committed before it was taken).
    pub fn dict(&self) -> Arc<FieldDict> {
        self.fields.current.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Encodes a document, interning new field names. Safe outside the committer: a write that
    /// stores the blob must call [`Catalog::stage_fields`] in that write, which
    /// stages every interned name not yet known to be committed, so no committed blob ever refers
    /// to an uncommitted name — also when the write that interned it failed.
    ///
    /// Readers never wait for it: a document whose names are all known encodes against the
    /// current snapshot; only one with a new name takes the writers' lock, copies the dictionary
    /// (bounded by `MAX_FIELD_NAMES`), interns into the copy and publishes it.
    pub fn encode_detached(&self, doc: &serde_json::Value, opts: &EncodeOptions<'_>) -> Result<Vec<u8>, entity::Error> {
        self.encode_with(|d| entity::encode_known(doc, d, opts), |d| entity::encode(doc, d, opts))
    }

    /// [`Catalog::encode_detached`] for a document parsed by simd-json (bulk paths).
    pub fn encode_simd_detached(
        &self,
        doc: &simd_json::BorrowedValue<'_>,
        opts: &EncodeOptions<'_>,
    ) -> Result<Vec<u8>, entity::Error> {
        self.encode_with(|d| entity::encode_simd_known(doc, d, opts), |d| entity::encode_simd(doc, d, opts))
    }

    fn encode_with(
        &self,
        known: impl Fn(&FieldDict) -> entity::Result<Option<Vec<u8>>>,
        intern: impl FnOnce(&mut FieldDict) -> entity::Result<Vec<u8>>,
    ) -> Result<Vec<u8>, entity::Error> {
        if let Some(blob) = known(&self.dict())? {
            return Ok(blob);
        }
        let _grow = self.fields.grow.lock().unwrap_or_else(PoisonError::into_inner);
        // Another writer may have added the name meanwhile.
        let latest = self.dict();
        if let Some(blob) = known(&latest)? {
            return Ok(blob);
        }
        let mut next = (*latest).clone();
        let blob = intern(&mut next)?;
        *self.fields.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
        Ok(blob)
    }

    /// Stages every interned field name not yet known to be committed (see
    /// [`Catalog::encode_detached`]).
    pub fn stage_fields(self: &Arc<Self>, tx: &mut WriteTx<'_>) {
        let dict = self.dict();
        let (len, persisted) = (dict.len() as u32, self.fields.persisted.load(Ordering::Acquire));
        if len <= persisted {
            return;
        }
        for (id, name) in dict.names_from(persisted) {
            tx.put(Space::Meta, MetaKey::Field(id).encode(), name.as_bytes().to_vec());
        }
        let this = self.clone();
        // internal (names are never shown by themselves), and staged by ordinary writes
        tx.on_commit(move || {
            this.fields.persisted.fetch_max(len, Ordering::AcqRel);
        });
    }

    /// Runs `f` with a snapshot of the field dictionary (to decode blobs or read single fields);
    /// see [`Catalog::dict`].
    pub fn with_dict<R>(&self, f: impl FnOnce(&FieldDict) -> R) -> R {
        f(&self.dict())
    }

    /// Decodes a stored blob to JSON.
    pub fn decode(&self, blob: &[u8]) -> Result<serde_json::Value, CatalogError> {
        Ok(self.with_dict(|d| entity::decode(blob, d))?)
    }
}

#[cfg(test)]
mod tests;
