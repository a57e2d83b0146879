//! The adjacency from the `graph:` keys: loaded at open from the `out` entries alone (each edge
//! once: its `_from`, id, `_to` and weight), and compared with every entry by `check`.

use super::{Adjacency, Entry, TableAdj};
use crate::keys::{AdjValue, Direction, GraphKey};
use crate::storage::{Slice, StorageError};
use std::sync::Arc;

/// An edge table to load: its name and `created_at`.
pub(crate) type TableId = (String, i64);

/// Entries read per batch handed from the scanning thread to the building one.
const BATCH: usize = 8192;

/// A batch of `graph:out` entries, decoded: their names end to end in `text`, and per entry where
/// its `_from`, `_to` and edge id end there, and its weight.
#[derive(Default)]
struct Batch {
    text: String,
    entries: Vec<([usize; 3], f64)>,
}

impl Batch {
    fn push(&mut self, key: &[u8], value: &[u8]) -> Result<(), String> {
        let k = GraphKey::decode(key).map_err(|e| format!("a bad graph key: {e}"))?;
        let v = AdjValue::decode(value).map_err(|e| format!("a bad adjacency entry: {e}"))?;
        let mut ends = [0; 3];
        for (end, part) in ends.iter_mut().zip([&*k.vertex, &*v.other, &*k.edge_id]) {
            self.text.push_str(part);
            *end = self.text.len();
        }
        self.entries.push((ends, v.weight.unwrap_or(0.0)));
        Ok(())
    }

    /// Each entry's `_from`, `_to`, edge id and weight.
    fn iter(&self) -> impl Iterator<Item = (&str, &str, &str, f64)> {
        let mut start = 0;
        self.entries.iter().map(move |&([from, to, id], weight)| {
            let part = |a: usize, b: usize| self.text.get(a..b).unwrap_or("");
            let entry = (part(start, from), part(from, to), part(to, id), weight);
            start = id;
            entry
        })
    }
}

/// Reads the adjacency of `tables` from their `graph:out` entries (`scan` lists the entries
/// under a key prefix, in key order). One thread scans and decodes the keys while this one numbers
/// the names and builds the lists; the in lists are then sorted by vertex (counting) and, within
/// a vertex, by edge name (the order of the `graph:in` keys).
pub(crate) fn from_keys<I>(tables: &[TableId], scan: impl Fn(Vec<u8>) -> I + Send) -> Result<Adjacency, String>
where
    I: Iterator<Item = Result<(Slice, Slice), StorageError>>,
{
    let mut adj = Adjacency::empty();
    let names = adj.names.clone();
    let mut names = names.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    std::thread::scope(|s| {
        // per table, its batches, then `None`; an error ends the scan
        let (send, batches) = std::sync::mpsc::sync_channel::<Result<Option<Batch>, String>>(4);
        let scanner = s.spawn(move || {
            for (table, _) in tables {
                let mut batch = Batch::default();
                for item in scan(GraphKey::table_prefix(Direction::Out, table)) {
                    let pushed = item.map_err(|e| e.to_string()).and_then(|(k, v)| batch.push(&k, &v));
                    if let Err(e) = pushed {
                        let _ = send.send(Err(e));
                        return;
                    }
                    if batch.entries.len() == BATCH && send.send(Ok(Some(std::mem::take(&mut batch)))).is_err() {
                        return;
                    }
                }
                let sent =
                    (batch.entries.is_empty() || send.send(Ok(Some(batch))).is_ok()) && send.send(Ok(None)).is_ok();
                if !sent {
                    return;
                }
            }
        });
        let built = (|| -> Result<(), String> {
            for (table, created_at) in tables {
                let mut t = TableAdj::new(*created_at);
                // the in entries, by `_to`: counted per vertex, then placed
                let mut inn: Vec<(u32, Entry)> = Vec::new();
                let mut out: Vec<Entry> = Vec::new();
                let mut at: Option<u32> = None;
                while let Some(batch) = batches.recv().map_err(|_| "the adjacency scan stopped".to_owned())?? {
                    for (from, to, id, weight) in batch.iter() {
                        let from = names.intern(from);
                        if at.is_some_and(|a| a != from) {
                            t.lists[0].set(at.unwrap_or(from), std::mem::take(&mut out));
                        }
                        at = Some(from);
                        let to = names.intern(to);
                        let edge = names.add_edge(table, id);
                        out.push(Entry { other: to, edge, weight });
                        inn.push((to, Entry { other: from, edge, weight }));
                        t.edges += 1;
                    }
                }
                if let Some(a) = at {
                    t.lists[0].set(a, out);
                }
                let (placed, starts) = by_vertex(&inn, names.vertices());
                drop(inn);
                for (to, group) in starts.windows(2).enumerate().filter(|(_, w)| w[1] > w[0]) {
                    let mut list = placed[group[0]..group[1]].to_vec();
                    list.sort_unstable_by(|x, y| names.edge_name(x.edge).cmp(names.edge_name(y.edge)));
                    t.lists[1].set(to as u32, list);
                }
                adj.edges += t.edges;
                adj.tables.insert(table.clone(), Arc::new(t));
            }
            Ok(())
        })();
        // an early end drops the receiver: the scanner's next send fails and it stops
        drop(batches);
        let _ = scanner.join();
        built
    })?;
    drop(names);
    Ok(adj)
}

/// `entries` grouped by vertex, vertices numbered below `vertices` (a counting sort; each group
/// keeps the entries' order): the entries, and where each vertex's group starts (and ends, at the
/// next vertex's start).
fn by_vertex(entries: &[(u32, Entry)], vertices: usize) -> (Vec<Entry>, Vec<usize>) {
    let mut starts = vec![0usize; vertices + 1];
    for (v, _) in entries {
        starts[*v as usize + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    let mut placed = vec![Entry { other: 0, edge: 0, weight: 0.0 }; entries.len()];
    let mut next = starts.clone();
    for (v, e) in entries {
        placed[next[*v as usize]] = *e;
        next[*v as usize] += 1;
    }
    (placed, starts)
}

/// What differs between `adj` and the entries of `tables` (`scan` as for [`from_keys`]): every
/// entry must be in memory at its vertex, with its other end and weight, and memory must hold no
/// more entries than there are keys, nor a table that is not an edge table. At most `max` problems.
pub(crate) fn compare<I, E>(
    adj: &Adjacency,
    tables: &[TableId],
    mut scan: impl FnMut(Vec<u8>) -> I,
    max: usize,
) -> Result<Vec<String>, E>
where
    I: Iterator<Item = Result<(Slice, Slice), E>>,
{
    let mut problems = Vec::new();
    let mut report = |p: String| {
        if problems.len() < max {
            problems.push(p);
        }
    };
    let names = adj.names();
    for (name, t) in adj.tables() {
        if !tables.iter().any(|(n, c)| n == name && *c == t.created_at) {
            report(format!("memory holds the adjacency of {name:?}, which is no edge table"));
        }
    }
    for (table, created_at) in tables {
        let t = adj.table(table, *created_at);
        for dir in [Direction::Out, Direction::In] {
            let mut keys = 0usize;
            for item in scan(GraphKey::table_prefix(dir, table)) {
                let (key, value) = item?;
                keys += 1;
                let (Ok(k), Ok(v)) = (GraphKey::decode(&key), AdjValue::decode(&value)) else {
                    continue; // the key check reports it
                };
                let edge = format!("{table}/{}", k.edge_id);
                let found = t.zip(names.vertex(&k.vertex)).and_then(|(t, at)| {
                    let list = t.at(dir, at);
                    list.binary_search_by(|e| names.edge_name(e.edge).cmp(&edge)).ok().map(|i| list[i])
                });
                let want = v.weight.unwrap_or(0.0);
                match found {
                    None => report(format!("memory lacks the {dir:?} entry of edge {edge:?} at {:?}", k.vertex)),
                    Some(e) if names.vertex_name(e.other) != v.other || e.weight.to_bits() != want.to_bits() => {
                        report(format!(
                            "memory's {dir:?} entry of edge {edge:?} at {:?} leads to {:?} (weight {}), its key to {:?} (weight {want})",
                            k.vertex,
                            names.vertex_name(e.other),
                            e.weight,
                            v.other
                        ))
                    }
                    Some(_) => {}
                }
            }
            let held: usize = t.map_or(0, |t| t.all(dir).map(|(_, l)| l.len()).sum());
            if held != keys {
                report(format!("memory holds {held} {dir:?} entries of {table:?}, its keys {keys}"));
            }
        }
    }
    Ok(problems)
}
