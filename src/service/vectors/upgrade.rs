//! Format 3's vector keys, read and rewritten in format 4's (see [`super::layout`]).
//!
//! Format 3 named nodes by document id: `vec:{table}:{index}:v:{id}` held the vector and
//! `vec:{table}:{index}:l:{id}` the links — level (u8), then per layer a u16 count and that many
//! ids (u16 length + UTF-8). Such an index is read here with slots given in id order; the
//! upgrade (in the write that stamps format 4) reads it the same way, so a graph a search loaded
//! before the upgrade committed has the slots the rewritten keys give it.

use super::hnsw::{Graph, Loader, Params};
use super::layout::{self, kind_prefix};
use crate::catalog::{Catalog, IndexKind};
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, ReadView, Space, WriteTx};

/// Walks format 3's stored links: `f(layer, id)` per link; the level, or `None` when the bytes
/// do not parse.
fn walk_links<'a>(b: &'a [u8], mut f: impl FnMut(usize, &'a str)) -> Option<usize> {
    let (&level, mut rest) = b.split_first()?;
    fn take<'a>(rest: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, tail) = rest.split_at_checked(n)?;
        *rest = tail;
        Some(head)
    }
    fn len(rest: &mut &[u8]) -> Option<usize> {
        Some(u16::from_be_bytes(take(rest, 2)?.try_into().ok()?) as usize)
    }
    for layer in 0..=level as usize {
        for _ in 0..len(&mut rest)? {
            let n = len(&mut rest)?;
            f(layer, std::str::from_utf8(take(&mut rest, n)?).ok()?);
        }
    }
    rest.is_empty().then_some(level as usize)
}

/// The id of a format 3 node key, which is `prefix` and the id.
fn node_id<'k>(key: &'k [u8], prefix: &[u8]) -> Result<std::borrow::Cow<'k, str>> {
    let damaged = || ServiceError::damaged("vec", format!("key {}", crate::keys::display("vec", key)));
    let mut r = crate::keys::KeyReader::new(key.strip_prefix(prefix).ok_or_else(damaged)?);
    let id = r.next_str().map_err(|_| damaged())?;
    if r.is_empty() { Ok(id) } else { Err(damaged()) }
}

/// Reads a format 3 index's graph from `items` of its vector keys and `links` of its link keys
/// (both in id order): node `i` (in id order) gets slot `i`.
fn read<I, E>(vectors: I, links: I, vp: &[u8], lp: &[u8], p: Params) -> Result<Graph>
where
    I: Iterator<Item = std::result::Result<(crate::storage::Slice, crate::storage::Slice), E>>,
    ServiceError: From<E>,
{
    let mut links = links.peekable();
    let mut nodes = Vec::new();
    for item in vectors {
        let (key, value) = item?;
        let id = node_id(&key, vp)?.into_owned();
        let found = layout::take_matching(&mut links, &id, |k| Ok(node_id(k, lp)?.into_owned()))?;
        if let Some(lv) = found
            && value.len() == p.dim * 4
            && let Some(level) = walk_links(&lv, |_, _| {})
        {
            nodes.push((id, value, lv, level));
        }
    }
    let (mut loader, mut v) = (Loader::new(p, nodes.len()), Vec::with_capacity(p.dim));
    for (s, (id, value, _, level)) in nodes.iter().enumerate() {
        loader.node(s as u32, id, layout::floats_into(value, &mut v), *level);
    }
    for (s, (_, _, lv, _)) in nodes.iter().enumerate() {
        walk_links(lv, |layer, to| {
            if let Some(to) = loader.slot(to) {
                loader.link(s as u32, layer, to);
            }
        });
    }
    Ok(loader.finish())
}

/// Reads a format 3 index's graph from a read view.
pub(super) fn load(view: &ReadView, table: &str, index: &str, p: Params) -> Result<Graph> {
    let (vp, lp) = (kind_prefix(table, index, "v"), kind_prefix(table, index, "l"));
    let vectors = view.scan(Space::Vec, KeyRange::Prefix(vp.clone()), false);
    let links = view.scan(Space::Vec, KeyRange::Prefix(lp.clone()), false);
    read(vectors, links, &vp, &lp, p)
}

/// Rewrites every vector index still in format 3's keys in format 4's (in the write that stamps
/// the directory; see `service::core::data_format`).
pub(crate) fn upgrade(tx: &mut WriteTx<'_>, found: u32, catalog: &Catalog) -> crate::storage::Result<()> {
    if found >= 4 {
        return Ok(());
    }
    let damaged = |e: ServiceError| crate::storage::StorageError::Corrupt(e.to_string());
    for table in catalog.tables() {
        for def in catalog.indexes(&table.name).iter().filter(|d| d.kind == IndexKind::Vector) {
            let Ok(p) = super::params_of(def) else { continue };
            let (t, i) = (def.table.as_str(), def.name.as_str());
            let (vp, lp) = (kind_prefix(t, i, "v"), kind_prefix(t, i, "l"));
            let graph = {
                let vectors = tx.scan(Space::Vec, KeyRange::Prefix(vp.clone()));
                let links = tx.scan(Space::Vec, KeyRange::Prefix(lp.clone()));
                read(vectors, links, &vp, &lp, p).map_err(damaged)?
            };
            for prefix in [vp, lp] {
                let old: Vec<_> = tx.scan(Space::Vec, KeyRange::Prefix(prefix)).map(|i| i.map(|(k, _)| k)).collect();
                for key in old {
                    tx.delete(Space::Vec, key?.to_vec());
                }
            }
            layout::stage_all(tx, t, i, &graph).map_err(damaged)?;
        }
    }
    Ok(())
}
