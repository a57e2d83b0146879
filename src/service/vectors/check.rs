//! `check` for vector indexes: every key of the slot layout (`service::vectors::layout`) against
//! the documents, read on the check's snapshot. A document with a vector must have exactly one
//! node holding exactly that vector (normalised as the index stores it); a node must sit below
//! the slot count, parse, have a document with that vector, a links key that parses, and links
//! only to nodes that exist at that layer.

use crate::catalog::IndexDef;
use crate::entity::FieldDict;
use crate::keys::{EntityKey, VecKey};
use crate::service::core::cancel::{Stop, Watched};
use crate::service::core::check_report::{CheckReport, internal, show};
use crate::service::vectors::{self, layout};
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, ReadView, Space};
use std::collections::{BTreeMap, HashMap};

/// A stored node: its id and vector.
struct Node {
    id: String,
    vector: Vec<f32>,
}

/// A node's stored level and its links as (layer, slot).
type StoredLinks = (usize, Vec<(usize, u32)>);

/// Checks one ready vector index; returns the nodes walked.
pub(crate) fn check_index(
    view: &ReadView,
    dict: &FieldDict,
    def: &IndexDef,
    report: &mut CheckReport,
    stop: &Stop,
) -> Result<u64> {
    let p = vectors::params_of(def)?;
    let (table, index) = (def.table.as_str(), def.name.as_str());
    let slots_key = show(Space::Vec, &layout::slots_key(table, index));
    let slots = match layout::read_slots(view, table, index) {
        Ok(s) => s,
        Err(e) => {
            report.problem("stale_entry", slots_key.clone(), e.to_string());
            None
        }
    };
    // the stored nodes by slot, and their level and links (None: they do not parse)
    let (np, lp) = (layout::kind_prefix(table, index, "node"), layout::kind_prefix(table, index, "links"));
    let mut nodes: BTreeMap<u32, Node> = BTreeMap::new();
    let mut links: BTreeMap<u32, Option<StoredLinks>> = BTreeMap::new();
    let keys = view.scan(Space::Vec, KeyRange::Prefix(VecKey::index_prefix(table, index)), false);
    for item in Watched::new(keys.map(|i| i.map_err(ServiceError::from)), stop) {
        let (key, value) = item?;
        let shown = show(Space::Vec, &key);
        if let Some(s) = layout::slot_of(&key, &np) {
            match layout::decode_node(&value) {
                Some((id, v)) => {
                    let vector = layout::floats(v).collect();
                    nodes.insert(s, Node { id: id.to_owned(), vector });
                }
                None => report.problem("stale_entry", shown, "the node does not parse"),
            }
        } else if let Some(s) = layout::slot_of(&key, &lp) {
            let mut list = Vec::new();
            let parsed = layout::walk_links(&value, |layer, to| list.push((layer, to)));
            links.insert(s, parsed.map(|level| (level, list)));
        } else if *key != *layout::slots_key(table, index) {
            report.problem("orphan_entry", shown, "not a key of the vector index's layout");
        }
    }
    if slots.is_none() && !nodes.is_empty() {
        report.problem("missing_entry", slots_key, "nodes without a slot count");
    }
    let level_of = |s: u32| links.get(&s).and_then(Option::as_ref).map(|(level, _)| *level);
    let mut by_id: HashMap<&str, u32> = HashMap::with_capacity(nodes.len());
    for (&s, node) in &nodes {
        let key = show(Space::Vec, &layout::node_key(table, index, s));
        if slots.is_some_and(|n| s as usize >= n) {
            report.problem("stale_entry", key.clone(), "a slot past the slot count");
        }
        if let Some(first) = by_id.insert(&node.id, s) {
            report.problem(
                "stale_entry",
                key.clone(),
                format!("document {:?} is also the node at slot {first}", node.id),
            );
        }
        if node.vector.len() != p.dim {
            report.problem("stale_entry", key, format!("{} elements; the index takes {}", node.vector.len(), p.dim));
        }
    }
    // documents → nodes
    let docs = view.scan(Space::Entity, KeyRange::Prefix(crate::keys::table_prefix(table)), false);
    for item in Watched::new(docs.map(|i| i.map_err(ServiceError::from)), stop) {
        let (key, blob) = item?;
        let id = EntityKey::decode(&key).map_err(internal)?.id.into_owned();
        let want = vectors::stored_vector(def, &p, &blob, dict);
        let node = by_id.remove(id.as_str());
        let shown = |s: u32| show(Space::Vec, &layout::node_key(table, index, s));
        match (want, node) {
            (Some(_), None) => report.problem(
                "missing_entry",
                show(Space::Entity, &key),
                format!("document {id:?} has a vector and no node in index {index:?}"),
            ),
            (Some(w), Some(s)) if nodes.get(&s).is_some_and(|n| n.vector != w) => {
                report.problem("stale_entry", shown(s), "the node's vector differs from the document's")
            }
            (None, Some(s)) => report.problem("orphan_entry", shown(s), format!("document {id:?} has no vector")),
            _ => {}
        }
    }
    // nodes left are of documents that do not exist
    for (id, s) in by_id {
        let key = show(Space::Vec, &layout::node_key(table, index, s));
        report.problem("orphan_entry", key, format!("document {id:?} does not exist"));
    }
    // links
    for (&s, l) in &links {
        let lkey = show(Space::Vec, &layout::links_key(table, index, s));
        let Some((_, list)) = l else {
            report.problem("stale_entry", lkey, "the links do not parse");
            continue;
        };
        if !nodes.contains_key(&s) {
            report.problem("orphan_entry", lkey.clone(), "links of a slot without a node");
        }
        for &(layer, to) in list {
            if !nodes.contains_key(&to) || level_of(to).is_none_or(|lv| lv < layer) {
                report.problem(
                    "stale_entry",
                    lkey.clone(),
                    format!("layer {layer} links to slot {to}, no node at that layer"),
                );
            }
        }
    }
    for &s in nodes.keys().filter(|s| !links.contains_key(s)) {
        report.problem("missing_entry", show(Space::Vec, &layout::links_key(table, index, s)), "a node without links");
    }
    Ok(nodes.len() as u64)
}
