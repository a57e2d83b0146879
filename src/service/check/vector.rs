//! `check` for vector indexes: every node key (vector and links) against the documents, read on
//! the check's snapshot. A document with a vector must have a node holding exactly that vector
//! (normalised as the index stores it); a node must have a document with that vector, a links
//! key that parses, and links only to nodes that exist at that layer.

use super::report::{CheckReport, internal, show};
use crate::catalog::IndexDef;
use crate::entity::FieldDict;
use crate::keys::{EntityKey, VecKey};
use crate::service::stop::{Stop, Watched};
use crate::service::vectors::{self, layout};
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, ReadView, Space};
use std::collections::BTreeMap;

/// Checks one ready vector index; returns the nodes walked.
pub(super) fn check_index(
    view: &ReadView,
    dict: &FieldDict,
    def: &IndexDef,
    report: &mut CheckReport,
    stop: &Stop,
) -> Result<u64> {
    let p = vectors::params_of(def)?;
    let (table, index) = (def.table.as_str(), def.name.as_str());
    // the stored nodes: id → (vector, level) and id → links
    let mut vecs: BTreeMap<String, Vec<f32>> = BTreeMap::new();
    let mut links: BTreeMap<String, Option<Vec<Vec<String>>>> = BTreeMap::new();
    let keys = view.scan(Space::Vec, KeyRange::Prefix(VecKey::index_prefix(table, index)), false);
    for item in Watched::new(keys.map(|i| i.map_err(ServiceError::from)), stop) {
        let (key, value) = item?;
        let decoded = VecKey::decode(&key).ok();
        let parts: Vec<String> = decoded.map(|k| k.rest.iter().map(ToString::to_string).collect()).unwrap_or_default();
        match parts.as_slice() {
            [kind, _] if kind == "v" => {
                let id = id_of(&key);
                vecs.insert(id, layout::decode_vector(&value));
            }
            [kind, _] if kind == "l" => {
                links.insert(id_of(&key), layout::decode_links(&value));
            }
            _ => report.problem("orphan_entry", show(Space::Vec, &key), "not a key of the vector index's layout"),
        }
    }
    // documents → nodes
    let docs = view.scan(Space::Entity, KeyRange::Prefix(crate::keys::table_prefix(table)), false);
    let mut with_vector = 0u64;
    for item in Watched::new(docs.map(|i| i.map_err(ServiceError::from)), stop) {
        let (key, blob) = item?;
        let id = EntityKey::decode(&key).map_err(internal)?.id.into_owned();
        let want = vectors::stored_vector(def, &p, &blob, dict);
        let vkey = show(Space::Vec, &layout::vector_key(table, index, &id));
        match (want, vecs.get(&id)) {
            (Some(_), None) => {
                report.problem("missing_entry", vkey, format!("document {id:?} has a vector and no node"))
            }
            (Some(w), Some(have)) if w != *have => {
                report.problem("stale_entry", vkey, "the node's vector differs from the document's")
            }
            (None, Some(_)) => report.problem("orphan_entry", vkey, format!("document {id:?} has no vector")),
            _ => {}
        }
        with_vector += 1;
    }
    let _ = with_vector;
    // nodes → documents and links
    for (id, v) in &vecs {
        let key = EntityKey::new(table, id).encode();
        let vkey = show(Space::Vec, &layout::vector_key(table, index, id));
        if view.get(Space::Entity, &key)?.is_none() {
            report.problem("orphan_entry", vkey.clone(), format!("document {id:?} does not exist"));
        }
        if v.len() != p.dim {
            report.problem("stale_entry", vkey, format!("{} elements; the index takes {}", v.len(), p.dim));
        }
    }
    for (id, l) in &links {
        let lkey = show(Space::Vec, &layout::links_key(table, index, id));
        let Some(layers) = l else {
            report.problem("stale_entry", lkey, "the links do not parse");
            continue;
        };
        if !vecs.contains_key(id) {
            report.problem("orphan_entry", lkey.clone(), "links of a node without a vector");
        }
        for (layer, list) in layers.iter().enumerate() {
            for n in list {
                let level = links.get(n).and_then(Option::as_ref).map(|x| x.len().saturating_sub(1));
                if !vecs.contains_key(n) || level.is_none_or(|lv| lv < layer) {
                    report.problem(
                        "stale_entry",
                        lkey.clone(),
                        format!("layer {layer} links to {n:?}, no node at that layer"),
                    );
                }
            }
        }
    }
    for id in vecs.keys().filter(|id| !links.contains_key(*id)) {
        report.problem("missing_entry", show(Space::Vec, &layout::links_key(table, index, id)), "a node without links");
    }
    Ok(vecs.len() as u64)
}

fn id_of(key: &[u8]) -> String {
    VecKey::decode(key)
        .ok()
        .and_then(|k| match k.rest.get(1) {
            Some(crate::keys::Component::Str(s)) => Some(s.to_string()),
            _ => None,
        })
        .unwrap_or_default()
}
