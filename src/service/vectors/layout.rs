//! The keys of a vector index, under `vec:{table}:{index}:` (format 4):
//!
//! | key | value |
//! |-----|-------|
//! | `vec:{table}:{index}:slots` | the graph's slot count (u32, little-endian): every node's slot is below it |
//! | `vec:{table}:{index}:node:{slot}` | the node at a slot: its id (u16 length, big-endian, + UTF-8), then its vector: `dimension` f32, little-endian (normalised for cosine) |
//! | `vec:{table}:{index}:links:{slot}` | its links: level (u8), then per layer 0..=level a u16 count (big-endian) and that many slots (u32, little-endian) |
//!
//! The keys hold the in-memory graph's own numbering (a slot is a node's place in the graph's
//! arrays), so opening an index is two scans in slot order (side by side) straight into those arrays — no id is
//! looked up per link — and a link costs 4 bytes. A slot freed by a delete has no keys and is
//! reused by a later insert; the slot count bounds what a load allocates. The entry point is the
//! node of the highest level (the lowest slot among equals), found at load.
//!
//! Format 3 named nodes and links by document id (`v:{id}`, `l:{id}`); such an index is read
//! (and rewritten at the upgrade) by `vectors::upgrade`.

use super::hnsw::{Changes, Graph, Loader, Params};
use crate::keys::{Component, VecKey};
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, ReadView, Slice, Space, WriteTx};

/// The key of the slot count.
pub fn slots_key(table: &str, index: &str) -> Vec<u8> {
    VecKey::slots(table, index).encode()
}

/// The key of the node at a slot.
pub fn node_key(table: &str, index: &str, slot: u32) -> Vec<u8> {
    VecKey::node(table, index, slot).encode()
}

/// The key of the links of the node at a slot.
pub fn links_key(table: &str, index: &str, slot: u32) -> Vec<u8> {
    VecKey::links(table, index, slot).encode()
}

/// The prefix of the keys of one kind (`node`, `links`, or format 3's `v` and `l`).
pub fn kind_prefix(table: &str, index: &str, kind: &'static str) -> Vec<u8> {
    VecKey::new(table, index, vec![Component::Str(kind.into())]).encode()
}

/// The slot of a `node` or `links` key, which is `prefix` and the slot.
pub fn slot_of(key: &[u8], prefix: &[u8]) -> Option<u32> {
    let mut r = crate::keys::KeyReader::new(key.strip_prefix(prefix)?);
    let slot = r.next_u64().ok()?;
    (r.is_empty()).then_some(u32::try_from(slot).ok()?)
}

/// A node as stored.
pub fn encode_node(id: &str, v: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + id.len() + v.len() * 4);
    out.extend_from_slice(&(id.len() as u16).to_be_bytes());
    out.extend_from_slice(id.as_bytes());
    out.extend(v.iter().flat_map(|x| x.to_le_bytes()));
    out
}

/// A stored node: its id and the bytes of its vector (`None` when it does not parse).
pub fn decode_node(b: &[u8]) -> Option<(&str, &[u8])> {
    let (len, rest) = b.split_first_chunk::<2>()?;
    let (id, vector) = rest.split_at_checked(u16::from_be_bytes(*len) as usize)?;
    Some((std::str::from_utf8(id).ok()?, vector))
}

/// Vector bytes as floats.
pub fn floats(b: &[u8]) -> impl Iterator<Item = f32> + '_ {
    b.as_chunks::<4>().0.iter().map(|c| f32::from_le_bytes(*c))
}

/// Vector bytes as floats, into `buf` (cleared first).
pub fn floats_into<'a>(b: &[u8], buf: &'a mut Vec<f32>) -> &'a [f32] {
    buf.clear();
    buf.extend(floats(b));
    buf
}

/// The links of the node at slot `s` as stored.
pub fn encode_links(graph: &Graph, s: u32) -> Vec<u8> {
    let level = graph.level(s);
    let mut out = vec![level as u8];
    for layer in 0..=level {
        let list = graph.links_at(s, layer);
        out.extend_from_slice(&(list.len() as u16).to_be_bytes());
        out.extend(list.iter().flat_map(|n| n.to_le_bytes()));
    }
    out
}

/// Walks stored links: `f(layer, slot)` for each link, in order; the level, or `None` (after
/// some calls, perhaps) when the bytes do not parse.
pub fn walk_links(b: &[u8], mut f: impl FnMut(usize, u32)) -> Option<usize> {
    let (&level, mut rest) = b.split_first()?;
    for layer in 0..=level as usize {
        let (count, tail) = rest.split_first_chunk::<2>()?;
        let (list, tail) = tail.split_at_checked(u16::from_be_bytes(*count) as usize * 4)?;
        for n in list.as_chunks::<4>().0 {
            f(layer, u32::from_le_bytes(*n));
        }
        rest = tail;
    }
    rest.is_empty().then_some(level as usize)
}

/// The slot count an index's keys record (0 without the key).
pub fn read_slots(view: &ReadView, table: &str, index: &str) -> Result<Option<usize>> {
    let Some(v) = view.get(Space::Vec, &slots_key(table, index))? else { return Ok(None) };
    let bytes: [u8; 4] = v
        .as_ref()
        .try_into()
        .map_err(|_| ServiceError::damaged("vec", format!("vector index {index:?}: its slot count")))?;
    Ok(Some(u32::from_le_bytes(bytes) as usize))
}

/// Reads an index's graph from its keys: the node and links scans, both in slot order, side by
/// side on two threads (the links checked and kept as read), then every node's level and links
/// set straight into the graph's arrays. A node with a vector of the wrong length or at a slot
/// past the slot count is left out, and so is a links value that does not parse or names no
/// node (`check` reports both); a node without links that parse stays, at level 0, without
/// out-links. `None` for an index still in format 3's keys (no slot count: `vectors::upgrade`
/// reads those).
pub fn load(view: &ReadView, table: &str, index: &str, p: Params) -> Result<Option<Graph>> {
    let Some(slots) = read_slots(view, table, index)? else { return Ok(None) };
    let (np, lp) = (kind_prefix(table, index, "node"), kind_prefix(table, index, "links"));
    let read_links = || -> Result<Vec<(u32, usize, Slice)>> {
        // (no more than the keys could fill: a damaged slot count must not allocate much more)
        let mut out = Vec::with_capacity(slots.min(1 << 24));
        for item in view.scan(Space::Vec, KeyRange::Prefix(lp.clone()), false) {
            let (key, value) = item?;
            if let Some(s) = slot_of(&key, &lp)
                && let Some(level) = walk_links(&value, |_, _| {})
            {
                out.push((s, level, value));
            }
        }
        Ok(out)
    };
    let read_nodes = || -> Result<Loader> {
        let (mut loader, mut v) = (Loader::new(p, slots), Vec::with_capacity(p.dim));
        for item in view.scan(Space::Vec, KeyRange::Prefix(np.clone()), false) {
            let (key, value) = item?;
            if let Some(s) = slot_of(&key, &np)
                && let Some((id, vector)) = decode_node(&value)
                && vector.len() == p.dim * 4
            {
                loader.node(s, id, floats_into(vector, &mut v), 0);
            }
        }
        Ok(loader)
    };
    let (links, loader) = std::thread::scope(|scope| {
        let links = scope.spawn(read_links);
        let loader = read_nodes();
        (links.join(), loader)
    });
    let links =
        links.map_err(|_| ServiceError::Internal(format!("vector index {index:?}: reading the links failed")))??;
    let mut loader = loader?;
    // every level first: a link is kept only to a node that has its layer
    for (s, level, _) in &links {
        loader.set_level(*s, *level);
    }
    for (s, _, value) in &links {
        walk_links(value, |layer, to| loader.link(*s, layer, to));
    }
    Ok(Some(loader.finish()))
}

/// The value of the item of `scan` (in key order, at or before the wanted one) whose key
/// `key_of` maps to `want`, if there is one: the items before it are stepped over, one after it
/// is left for the next call. Merges two scans of one index (format 3's nodes and links) in one
/// pass.
pub(super) fn take_matching<K: Ord, E>(
    scan: &mut std::iter::Peekable<impl Iterator<Item = std::result::Result<(Slice, Slice), E>>>,
    want: &K,
    key_of: impl Fn(&[u8]) -> Result<K>,
) -> Result<Option<Slice>>
where
    ServiceError: From<E>,
{
    loop {
        let order = match scan.peek() {
            None => return Ok(None),
            Some(Err(_)) => match scan.next() {
                Some(Err(e)) => return Err(e.into()),
                _ => continue,
            },
            Some(Ok((k, _))) => key_of(k)?.cmp(want),
        };
        match order {
            std::cmp::Ordering::Less => {
                scan.next();
            }
            std::cmp::Ordering::Equal => return Ok(scan.next().and_then(|i| i.ok()).map(|(_, v)| v)),
            std::cmp::Ordering::Greater => return Ok(None),
        }
    }
}

/// Stages the keys of every slot a change touched — a live node's links (and its node key, if
/// it took the slot: its vector is the graph's, or for a quantized graph the one the change
/// recorded), a freed slot's deletes — and the slot count.
pub fn stage(tx: &mut WriteTx<'_>, table: &str, index: &str, graph: &Graph, changes: &Changes) -> Result<()> {
    for &s in changes.nodes.union(&changes.links) {
        match graph.id(s) {
            Some(id) => {
                if changes.nodes.contains(&s) {
                    let v =
                        changes.vectors.get(&s).map(Vec::as_slice).or_else(|| graph.vector(s)).ok_or_else(|| {
                            ServiceError::Internal(format!("vector index {index:?}: no vector to store for slot {s}"))
                        })?;
                    tx.put(Space::Vec, node_key(table, index, s), encode_node(id, v));
                }
                tx.put(Space::Vec, links_key(table, index, s), encode_links(graph, s));
            }
            None => {
                tx.delete(Space::Vec, node_key(table, index, s));
                tx.delete(Space::Vec, links_key(table, index, s));
            }
        }
    }
    tx.put(Space::Vec, slots_key(table, index), (graph.slots() as u32).to_le_bytes().to_vec());
    Ok(())
}

/// Stages every node of a graph (an index rewritten in this layout; not a quantized graph, which
/// has not kept the floats).
pub fn stage_all(tx: &mut WriteTx<'_>, table: &str, index: &str, graph: &Graph) -> Result<()> {
    let mut all = Changes::default();
    all.nodes.extend((0..graph.slots() as u32).filter(|s| graph.id(*s).is_some()));
    all.links.clone_from(&all.nodes);
    stage(tx, table, index, graph, &all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::vectors::hnsw::Metric;

    #[test]
    fn golden_keys_and_values() {
        let show = |k: &[u8]| crate::keys::display("vec", k);
        assert_eq!(show(&node_key("docs", "emb", 7)), "vec:docs:emb:node:7");
        assert_eq!(show(&links_key("docs", "emb", 7)), "vec:docs:emb:links:7");
        assert_eq!(show(&slots_key("docs", "emb")), "vec:docs:emb:slots");
        assert_eq!(slot_of(&node_key("docs", "emb", 70000), &kind_prefix("docs", "emb", "node")), Some(70000));
        assert!(node_key("d", "e", 9) < node_key("d", "e", 10), "slot order");
        let node = encode_node("ab", &[1.5, -2.0]);
        assert_eq!(node, b"\x00\x02ab\x00\x00\xc0\x3f\x00\x00\x00\xc0");
        let (id, v) = decode_node(&node).unwrap();
        assert_eq!((id, floats(v).collect::<Vec<_>>()), ("ab", vec![1.5, -2.0]));
        assert!(decode_node(b"\x00\x05ab").is_none());
        let p = Params { dim: 2, metric: Metric::L2, m: 4, ef_construction: 16, quantized: false };
        let mut g = Graph::new(p);
        let mut ch = Changes::default();
        for (i, v) in [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]].iter().enumerate() {
            g.insert(&format!("n{i}"), v, &mut ch);
        }
        let bytes = encode_links(&g, 0);
        let mut seen = Vec::new();
        let level = walk_links(&bytes, |layer, to| seen.push((layer, to))).unwrap();
        assert_eq!(level, g.level(0));
        assert!(seen.contains(&(0, 1)) && seen.contains(&(0, 2)), "{seen:?}");
        assert!(walk_links(&bytes[..bytes.len() - 1], |_, _| {}).is_none());
        assert_eq!(walk_links(b"\x00\x00\x01\x05\x00\x00\x00", |_, _| {}), Some(0));
    }
}
