//! Reading views: a page of groups (or one group), a page of a filter view's members — each from
//! one snapshot, costing what the answer holds.

use super::def::compiled;
use super::info::ViewInfo;
use super::maintain::decode_u64;
use super::state::GroupState;
use super::{ViewList, Views};
use crate::catalog::{ViewDef, ViewKind};
use crate::keys::{Component, EntityKey, KeyReader, KeyWriter, MetaKey, ViewKey, ViewPart, prefix_successor};
use crate::service::core::Handle;
use crate::service::core::cursor::{Binding, open, seal};
use crate::service::core::expiry::{Expiry, now_ms};
use crate::service::core::render::RawPage;
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, ReadView, Space};
use serde::Deserialize;
use serde_json::Value;
use std::ops::Bound;
use std::sync::Arc;
use utoipa::{IntoParams, ToSchema};

/// Most groups or documents of one page.
pub const MAX_PAGE: usize = 1000;
const DEFAULT_PAGE: usize = 100;

/// How to read a group view (`GET …/views/{name}`).
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GroupQuery {
    /// groups per page, 1-1000 (default 100)
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<usize>,
    /// the `cursor` of the previous page
    pub cursor: Option<String>,
    /// one group: its key as JSON, an array of values in `by` order (`["Oslo"]`) or an object
    /// by field (`{"city":"Oslo"}`); the answer holds that group, or no group if no document is
    /// in it
    pub key: Option<String>,
}

/// How to page a filter view's members (`GET …/views/{name}/documents`).
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// documents per page, 1-1000 (default 100)
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<usize>,
    /// the `cursor` of the previous page
    pub cursor: Option<String>,
    /// fields to return, comma-separated dotted paths (`_id` always comes back)
    pub fields: Option<String>,
}

/// A page of a filter view's members, in `_id` order.
#[derive(Debug, Clone, ToSchema, serde::Serialize)]
pub struct ViewDocuments {
    /// the documents
    #[schema(value_type = Vec<Object>)]
    pub documents: Vec<Value>,
    /// the cursor of the next page, if there is one
    pub cursor: Option<String>,
}

fn limit_of(limit: Option<usize>) -> Result<usize> {
    let limit = limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ServiceError::InvalidRequest(format!("limit must be between 1 and {MAX_PAGE}")));
    }
    Ok(limit)
}

/// Refuses a view that is not of `kind` (422) or not ready (409 `view_not_ready`).
pub(crate) fn readable(def: &ViewDef, kind: ViewKind) -> Result<()> {
    if def.kind != kind {
        let what = match kind {
            ViewKind::Filter => "a filter view's members (this is a group view: read its groups)",
            ViewKind::Group => "a group view's groups (this is a filter view: page its documents)",
        };
        return Err(ServiceError::InvalidView(format!("view {:?}: this reads {what}", def.name)));
    }
    if !def.is_ready() {
        return Err(ServiceError::ViewNotReady { table: def.table.clone(), view: def.name.clone() });
    }
    Ok(())
}

/// The definition of a view as the snapshot holds it, so what is read agrees with its state.
pub(crate) fn snapshot_def(view: &ReadView, table: &str, name: &str) -> Result<ViewDef> {
    let key = MetaKey::View(table.into(), name.into()).encode();
    let value = view
        .get(Space::Meta, &key)?
        .ok_or_else(|| ServiceError::ViewNotFound { table: table.to_owned(), view: name.to_owned() })?;
    serde_json::from_slice(&value).map_err(|e| ServiceError::Internal(e.to_string()))
}

/// The cursor binding of a view: its table, name and incarnation, and what is paged.
fn binding(def: &ViewDef, what: &str) -> Binding {
    Binding::new(&[def.table.as_bytes(), def.name.as_bytes(), &def.created_at.to_be_bytes(), what.as_bytes()])
}

/// A `key` parameter as the group's components.
fn parse_key(def: &ViewDef, text: &str) -> Result<Vec<Component<'static>>> {
    let bad = |why: &str| ServiceError::InvalidRequest(format!("key: {why}"));
    let v: Value = serde_json::from_str(text).map_err(|_| bad("not JSON: give an array in `by` order or an object"))?;
    let values: Vec<Value> = match v {
        Value::Array(items) => items,
        Value::Object(mut map) => {
            let values = def.by.iter().map(|f| map.remove(f).unwrap_or(Value::Null)).collect();
            if !map.is_empty() {
                return Err(bad("an object names only `by` fields"));
            }
            values
        }
        _ => return Err(bad("give an array in `by` order or an object")),
    };
    if values.len() != def.by.len() {
        return Err(bad(&format!("the view groups by {} fields", def.by.len())));
    }
    values
        .iter()
        .map(|v| crate::service::core::filter::scalar(v).ok_or_else(|| bad("a group's values are scalars")))
        .collect()
}

impl Views {
    /// Every view of a table, with its size once ready.
    pub async fn list_views(self: &Arc<Self>, table: String) -> Result<ViewList> {
        self.core.catalog.table(&table).ok_or_else(|| ServiceError::TableNotFound(table.clone()))?;
        self.read(move |model| {
            let views = model.core.catalog.views(&table);
            let views = views.iter().map(|v| model.view_info(v)).collect::<Result<_>>()?;
            Ok(ViewList { views })
        })
        .await
    }

    /// A view's definition, state and size (no groups).
    fn view_info(&self, def: &ViewDef) -> Result<ViewInfo> {
        let size = if def.is_ready() {
            let key = ViewKey::count(&def.table, &def.name).encode();
            Some(decode_u64(self.core.store.get(Space::View, &key)?.as_deref()))
        } else {
            None
        };
        let (count, group_count) = match def.kind {
            ViewKind::Filter => (size, None),
            ViewKind::Group => (None, size),
        };
        Ok(ViewInfo { view: def.clone(), count, group_count, groups: None, cursor: None })
    }

    /// One view: definition, state and size; a ready group view also a page of its groups (or
    /// the one group `query.key` names).
    pub async fn get_view(self: &Arc<Self>, table: String, name: String, query: GroupQuery) -> Result<ViewInfo> {
        self.core.catalog.table(&table).ok_or_else(|| ServiceError::TableNotFound(table.clone()))?;
        let def = self.core.catalog.view(&table, &name).ok_or(ServiceError::ViewNotFound { table, view: name })?;
        if def.kind == ViewKind::Filter || !def.is_ready() {
            if query.key.is_some() || query.cursor.is_some() || query.limit.is_some() {
                readable(&def, ViewKind::Group)?;
            }
            return self.read(move |views| views.view_info(&def)).await;
        }
        self.read(move |views| views.read_groups(&def, &query)).await
    }

    /// A page of a ready group view's groups (see [`GroupQuery`]), read from one snapshot.
    pub(super) fn read_groups(&self, cached: &ViewDef, query: &GroupQuery) -> Result<ViewInfo> {
        let limit = limit_of(query.limit)?;
        let view = self.core.store.snapshot();
        let def = snapshot_def(&view, &cached.table, &cached.name)?;
        readable(&def, ViewKind::Group)?;
        let c = compiled(&def)?;
        let (table, name) = (def.table.as_str(), def.name.as_str());
        let prefix = ViewKey::groups_prefix(table, name);
        let (lo, hi, take) = match (&query.key, &query.cursor) {
            (Some(key), _) => {
                let key = ViewKey::group(table, name, parse_key(&def, key)?).encode();
                (Bound::Included(key.clone()), Bound::Included(key), 1)
            }
            (None, Some(cursor)) => {
                let mut after = prefix.clone();
                after.extend_from_slice(&open(binding(&def, "groups"), cursor)?);
                (Bound::Excluded(after), prefix_successor(&prefix).map_or(Bound::Unbounded, Bound::Excluded), limit)
            }
            (None, None) => (
                Bound::Included(prefix.clone()),
                prefix_successor(&prefix).map_or(Bound::Unbounded, Bound::Excluded),
                limit,
            ),
        };
        let mut groups = Vec::new();
        let (mut cursor, mut last) = (None, None);
        for item in view.scan(Space::View, KeyRange::Between(lo, hi), false) {
            let (key, value) = item?;
            if groups.len() == take {
                // the next page starts after the last group of this one
                cursor = last.map(|k: crate::storage::Slice| seal(binding(&def, "groups"), &k[prefix.len()..]));
                break;
            }
            last = Some(key.clone());
            let Ok(ViewKey { part: ViewPart::Group(group), .. }) = ViewKey::decode(&key, def.by.len()) else {
                return Err(ServiceError::damaged("view", format!("key {}", crate::keys::display("view", &key))));
            };
            let state = GroupState::decode(&value, c.sum_fields.len())
                .ok_or_else(|| ServiceError::damaged("view", "a group's state"))?;
            let mut extremes = Vec::with_capacity(c.range_fields.len());
            for field in &c.range_fields {
                let p = ViewKey::values_prefix(table, name, field, &group);
                let end = |reverse: bool| -> Result<Option<Component<'static>>> {
                    let Some(item) = view.scan(Space::View, KeyRange::Prefix(p.clone()), reverse).next() else {
                        return Ok(None);
                    };
                    let (k, _) = item?;
                    let mut r = KeyReader::new(&k[p.len()..]);
                    Ok(Some(r.next_component().map_err(|e| ServiceError::Internal(e.to_string()))?.into_owned()))
                };
                extremes.push((end(false)?, end(true)?));
            }
            groups.push(state.to_json(&c, &group, &extremes));
        }
        let size = decode_u64(view.get(Space::View, &ViewKey::count(table, name).encode())?.as_deref());
        Ok(ViewInfo { view: def, count: None, group_count: Some(size), groups: Some(groups), cursor })
    }

    /// A page of a ready filter view's members, in `_id` order, from one snapshot.
    pub async fn view_documents(self: &Arc<Self>, table: String, name: String, query: PageQuery) -> Result<RawPage> {
        let limit = limit_of(query.limit)?;
        let fields: Option<Vec<String>> = query
            .fields
            .as_deref()
            .map(|f| f.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect());
        if let Some(fields) = &fields
            && (fields.len() > crate::service::core::filter::MAX_FIELDS
                || fields.iter().any(|f| f.is_empty() || f.split('.').any(str::is_empty)))
        {
            return Err(ServiceError::InvalidRequest("fields: at most 256 non-empty dotted paths".into()));
        }
        self.core.catalog.table(&table).ok_or_else(|| ServiceError::TableNotFound(table.clone()))?;
        self.read(move |views| {
            let view = views.core.store.snapshot();
            let def = snapshot_def(&view, &table, &name)?;
            readable(&def, ViewKind::Filter)?;
            let prefix = ViewKey::members_prefix(&table, &name);
            let lo = match &query.cursor {
                Some(c) => {
                    let id = String::from_utf8(open(binding(&def, "documents"), c)?)
                        .map_err(|_| crate::service::core::cursor::invalid("it is not one this server handed out"))?;
                    Bound::Excluded(ViewKey::member(&table, &name, &id).encode())
                }
                None => Bound::Included(prefix.clone()),
            };
            let hi = prefix_successor(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
            let mut documents = Vec::with_capacity(limit.min(64));
            let mut cursor = None;
            let mut last: Option<String> = None;
            views.core.catalog.with_dict(|dict| -> Result<()> {
                let (rules, now) = (Expiry::of(&views.core.catalog, dict, &table), now_ms());
                for item in view.scan(Space::View, KeyRange::Between(lo, hi), false) {
                    let (key, _) = item?;
                    let Ok(ViewKey { part: ViewPart::Member(id), .. }) = ViewKey::decode(&key, 0) else {
                        return Err(ServiceError::damaged("view", "a member key"));
                    };
                    let Some(blob) = view.get(Space::Entity, &EntityKey::new(&table, &id).encode())? else {
                        continue; // a member without its document: `check` reports it
                    };
                    // an expired document not yet swept is not returned (its sweep removes it)
                    if rules.as_ref().map(|r| r.expired(&blob, dict, now)).transpose()? == Some(true) {
                        continue;
                    }
                    if documents.len() == limit {
                        cursor = last.as_deref().map(|id| seal(binding(&def, "documents"), id.as_bytes()));
                        break;
                    }
                    documents.push(crate::service::core::filter::project(&blob, dict, &id, fields.as_deref())?);
                    last = Some(id.into_owned());
                }
                Ok(())
            })?;
            Ok(RawPage { documents, cursor })
        })
        .await
    }
}

/// The member range of a ready filter view for a query's `$view` (a key range of the `view`
/// keyspace whose keys end in the ids, in id order), with the view's filter.
pub(crate) fn member_scan(view: &ReadView, table: &str, name: &str) -> Result<(ViewDef, Vec<u8>)> {
    let def = snapshot_def(view, table, name)?;
    readable(&def, ViewKind::Filter)?;
    Ok((def, ViewKey::members_prefix(table, name)))
}

/// The start of the member keys after document `id`.
pub(crate) fn member_after(table: &str, name: &str, id: &str) -> Vec<u8> {
    let mut k = ViewKey::members_prefix(table, name);
    k.extend_from_slice(&KeyWriter::default().str(id).finish());
    k
}
