//! Exact distances for a quantized index, whose graph ranks by int8 codes (see `search`): from
//! the floats of the snapshot's `vec:` node keys, or from the documents' own vectors.

use super::hnsw::Params;
use super::layout;
use crate::catalog::IndexDef;
use crate::entity::FieldDict;
use crate::service::Result;
use crate::service::core::cancel::Stop;
use crate::storage::{KeyRange, ReadView, Slice, Space};
use std::sync::Arc;

/// Every node of the index in the snapshot with its exact distance to `q`, nearest first (a
/// node key that does not parse is left out: `check` reports it).
pub(super) fn scan(
    view: &ReadView,
    def: &IndexDef,
    p: &Params,
    q: &[f32],
    stop: &Stop,
) -> Result<Vec<(Arc<str>, f32)>> {
    let prefix = layout::kind_prefix(&def.table, &def.name, "node");
    let (mut out, mut v): (Vec<(Arc<str>, f32)>, _) = (Vec::new(), Vec::with_capacity(p.dim));
    for (i, item) in view.scan(Space::Vec, KeyRange::Prefix(prefix), false).enumerate() {
        if i % 1024 == 1023 {
            stop.check()?;
        }
        let (_, value) = item?;
        if let Some((id, bytes)) = layout::decode_node(&value)
            && bytes.len() == p.dim * 4
        {
            out.push((Arc::from(id), p.metric.distance(q, layout::floats_into(bytes, &mut v))));
        }
    }
    out.sort_unstable_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    Ok(out)
}

/// The `k` nearest of `found` (accepted candidates with their documents): for a quantized index
/// ranked again by the distance of each document's own vector to `q` (a document without one is
/// left out); otherwise `found`'s first `k`, as ranked.
pub(super) fn rank(
    mut found: Vec<(Arc<str>, f32, Slice)>,
    def: &IndexDef,
    p: &Params,
    q: &[f32],
    dict: &FieldDict,
    k: usize,
) -> Vec<(Arc<str>, f32, Slice)> {
    if p.quantized {
        found = found
            .into_iter()
            .filter_map(|(id, _, blob)| {
                let v = super::stored_vector(def, p, &blob, dict)?;
                Some((id, p.metric.distance(q, &v), blob))
            })
            .collect();
        found.sort_unstable_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    }
    found.truncate(k);
    found
}
