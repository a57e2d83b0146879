//! The keys of a vector index, under `vec:{table}:{index}:`:
//!
//! | key | value |
//! |-----|-------|
//! | `vec:{table}:{index}:v:{id}` | the node's vector: `dimension` f32, little-endian (normalised for cosine) |
//! | `vec:{table}:{index}:l:{id}` | its links: level (u8), then per layer 0..=level a u16 count and that many ids (u16 length + UTF-8) |
//!
//! Links name documents, not slots, so the keys hold no in-memory numbering; the entry point is
//! the node of the highest level (the first in id order among equals), found at load.

use super::hnsw::{Changes, Graph};
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

/// Stored links, per layer.
pub fn decode_links(b: &[u8]) -> Option<Vec<Vec<String>>> {
    let (&level, mut rest) = b.split_first()?;
    fn take<'a>(rest: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, tail) = rest.split_at_checked(n)?;
        *rest = tail;
        Some(head)
    }
    let mut layers = Vec::with_capacity(level as usize + 1);
    for _ in 0..=level {
        let count = u16::from_be_bytes(take(&mut rest, 2)?.try_into().ok()?);
        let mut l = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let len = u16::from_be_bytes(take(&mut rest, 2)?.try_into().ok()?);
            l.push(String::from_utf8(take(&mut rest, len as usize)?.to_vec()).ok()?);
        }
        layers.push(l);
    }
    rest.is_empty().then_some(layers)
}

fn id_of(key: &[u8]) -> Result<String> {
    let k = VecKey::decode(key).map_err(|e| ServiceError::Internal(e.to_string()))?;
    match k.rest.get(1) {
        Some(Component::Str(s)) => Ok(s.to_string()),
        _ => Err(ServiceError::Internal(format!("damaged vector key {}", crate::keys::display("vec", key)))),
    }
}

/// Every node of an index as stored: `(id, vector, links)`. A node with a vector of the wrong
/// length or without links is skipped (`check` reports it).
pub fn read_nodes(view: &ReadView, table: &str, index: &str, dim: usize) -> Result<Vec<super::hnsw::StoredNode>> {
    let mut links = view.scan(Space::Vec, KeyRange::Prefix(kind_prefix(table, index, "l")), false).peekable();
    let mut out = Vec::new();
    for item in view.scan(Space::Vec, KeyRange::Prefix(kind_prefix(table, index, "v")), false) {
        let (key, value) = item?;
        let id = id_of(&key)?;
        // the two scans are in id order: skip links without a vector
        let mut found = None;
        while let Some(Ok((lk, lv))) = links.peek() {
            let lid = id_of(lk)?;
            match lid.cmp(&id) {
                std::cmp::Ordering::Less => {
                    links.next();
                }
                std::cmp::Ordering::Equal => {
                    found = decode_links(lv);
                    links.next();
                    break;
                }
                std::cmp::Ordering::Greater => break,
            }
        }
        if let Some(Err(_)) = links.peek()
            && let Some(Err(e)) = links.next()
        {
            return Err(e.into());
        }
        let v = decode_vector(&value);
        if let Some(l) = found
            && v.len() == dim
        {
            out.push((id, v, l));
        }
    }
    Ok(out)
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
