//! The keys of a vector index, under `vec:{table}:{index}:`:
//!
//! | key | value |
//! |-----|-------|
//! | `vec:{table}:{index}:v:{id}` | the node's vector: `dimension` f32, little-endian (normalised for cosine) |
//! | `vec:{table}:{index}:l:{id}` | its links: level (u8), then per layer 0..=level a u16 count and that many ids (u16 length + UTF-8) |
//!
//! Links name documents, not slots, so the keys hold no in-memory numbering; the entry point is
//! the node of the highest level (the first in id order among equals), found at load.

use super::hnsw::{Changes, Graph, Loader, Params};
use crate::keys::{Component, VecKey};
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, ReadView, Space, WriteTx};

/// The key of a node's vector.
pub fn vector_key(table: &str, index: &str, id: &str) -> Vec<u8> {
    VecKey::vector(table, index, id).encode()
}

/// The key of a node's links.
pub fn links_key(table: &str, index: &str, id: &str) -> Vec<u8> {
    VecKey::links(table, index, id).encode()
}

fn kind_prefix(table: &str, index: &str, kind: &'static str) -> Vec<u8> {
    VecKey::new(table, index, vec![Component::Str(kind.into())]).encode()
}

/// A vector as stored.
pub fn encode_vector(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A stored vector.
pub fn decode_vector(b: &[u8]) -> Vec<f32> {
    b.as_chunks::<4>().0.iter().map(|c| f32::from_le_bytes(*c)).collect()
}

/// Links as stored.
pub fn encode_links(layers: &[Vec<std::sync::Arc<str>>]) -> Vec<u8> {
    let mut out = vec![layers.len().saturating_sub(1) as u8];
    for l in layers {
        out.extend_from_slice(&(l.len() as u16).to_be_bytes());
        for id in l {
            out.extend_from_slice(&(id.len() as u16).to_be_bytes());
            out.extend_from_slice(id.as_bytes());
        }
    }
    out
}

/// Stored links, per layer (for `check`, which reports what does not parse).
pub fn decode_links(b: &[u8]) -> Option<Vec<Vec<String>>> {
    let mut layers: Vec<Vec<String>> = Vec::new();
    let level = walk_links(b, |layer, id| {
        layers.resize_with(layers.len().max(layer + 1), Vec::new);
        if let Some(l) = layers.get_mut(layer) {
            l.push(id.to_owned());
        }
    })?;
    layers.resize_with(level + 1, Vec::new);
    Some(layers)
}

/// Walks stored links without copying them: `f(layer, id)` for each link, in order; the level,
/// or `None` (after some calls, perhaps) when the bytes do not parse.
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

/// The id of a node key, which is `prefix` and the id.
fn node_id<'k>(key: &'k [u8], prefix: &[u8]) -> Result<std::borrow::Cow<'k, str>> {
    let damaged = || ServiceError::Internal(format!("damaged vector key {}", crate::keys::display("vec", key)));
    let mut r = crate::keys::KeyReader::new(key.strip_prefix(prefix).ok_or_else(damaged)?);
    let id = r.next_str().map_err(|_| damaged())?;
    if r.is_empty() { Ok(id) } else { Err(damaged()) }
}

/// Reads an index's graph from its keys: the vector and links scans, both in id order, side by
/// side. A node with a vector of the wrong length, or without links that parse, is left out
/// (`check` reports it). Nothing is copied per link: links are resolved to slots straight from
/// the stored bytes once every node is in (see [`Loader`]).
pub fn load(view: &ReadView, table: &str, index: &str, p: Params) -> Result<Graph> {
    let (vp, lp) = (kind_prefix(table, index, "v"), kind_prefix(table, index, "l"));
    let mut links = view.scan(Space::Vec, KeyRange::Prefix(lp.clone()), false).peekable();
    let mut loader = Loader::new(p);
    let mut kept = Vec::new();
    for item in view.scan(Space::Vec, KeyRange::Prefix(vp.clone()), false) {
        let (key, value) = item?;
        let id = node_id(&key, &vp)?;
        let mut found = None;
        while let Some(Ok((lk, lv))) = links.peek() {
            match node_id(lk, &lp)?.as_ref().cmp(id.as_ref()) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => found = Some(lv.clone()),
                std::cmp::Ordering::Greater => break,
            }
            links.next();
            if found.is_some() {
                break;
            }
        }
        if let Some(Err(_)) = links.peek()
            && let Some(Err(e)) = links.next()
        {
            return Err(e.into());
        }
        if let Some(lv) = found
            && value.len() == p.dim * 4
            && let Some(level) = walk_links(&lv, |_, _| {})
        {
            let floats = value.as_chunks::<4>().0.iter().map(|c| f32::from_le_bytes(*c));
            kept.push((loader.node(&id, floats, level), lv));
        }
    }
    for (s, lv) in kept {
        walk_links(&lv, |layer, to| loader.link(s, layer, to));
    }
    Ok(loader.finish())
}

/// Stages the keys of every node a change touched: a live node's links (and vector, if it is
/// new), a removed node's deletes.
pub fn stage(tx: &mut WriteTx<'_>, table: &str, index: &str, graph: &Graph, changes: &Changes) {
    for id in changes.nodes.union(&changes.links) {
        match (graph.vector_of(id), graph.links_of(id)) {
            (Some(v), Some(links)) => {
                if changes.nodes.contains(id) {
                    tx.put(Space::Vec, vector_key(table, index, id), encode_vector(v));
                }
                tx.put(Space::Vec, links_key(table, index, id), encode_links(&links));
            }
            _ => {
                tx.delete(Space::Vec, vector_key(table, index, id));
                tx.delete(Space::Vec, links_key(table, index, id));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_keys_and_values() {
        assert_eq!(crate::keys::display("vec", &vector_key("docs", "emb", "a")), "vec:docs:emb:v:a");
        assert_eq!(crate::keys::display("vec", &links_key("docs", "emb", "a")), "vec:docs:emb:l:a");
        let links = vec![vec!["b".into(), "cd".into()], vec![]];
        let bytes = encode_links(&links);
        assert_eq!(bytes, b"\x01\x00\x02\x00\x01b\x00\x02cd\x00\x00");
        assert_eq!(decode_links(&bytes).unwrap(), vec![vec!["b".to_owned(), "cd".to_owned()], vec![]]);
        assert!(decode_links(&bytes[..bytes.len() - 1]).is_none());
        assert!(decode_links(b"\x00\x00\x00\x01").is_none());
        assert_eq!(decode_vector(&encode_vector(&[1.5, -2.0])), [1.5, -2.0]);
    }
}
