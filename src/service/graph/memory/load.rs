//! The adjacency from the `graph:` keys: loaded at open from the `out` entries alone (each edge
//! once: its `_from`, id, `_to` and weight), and compared with every entry by `check`.

use super::{Adjacency, Entry, TableAdj};
use crate::keys::{AdjValue, Direction, GraphKey};
use crate::storage::{Slice, StorageError};
use std::sync::Arc;

/// An edge table to load: its name and `created_at`.
pub(crate) type TableId = (String, i64);

/// Reads the adjacency of `tables` from their `graph:out` entries (`scan` lists the entries
/// under a key prefix, in key order).
pub(crate) fn from_keys<I>(tables: &[TableId], mut scan: impl FnMut(Vec<u8>) -> I) -> Result<Adjacency, String>
where
    I: Iterator<Item = Result<(Slice, Slice), StorageError>>,
{
    let mut adj = Adjacency::empty();
    {
        let names = adj.names.clone();
        let mut names = names.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (table, created_at) in tables {
            let mut t = TableAdj::new(*created_at);
            let mut inn: Vec<(u32, Entry)> = Vec::new();
            let mut out: Vec<Entry> = Vec::new();
            let mut at: Option<u32> = None;
            for item in scan(GraphKey::table_prefix(Direction::Out, table)) {
                let (key, value) = item.map_err(|e| e.to_string())?;
                let k = GraphKey::decode(&key).map_err(|e| format!("a bad graph key: {e}"))?;
                let v = AdjValue::decode(&value).map_err(|e| format!("a bad adjacency entry: {e}"))?;
                let from = names.intern(&k.vertex);
                if at.is_some_and(|a| a != from) {
                    t.lists[0].set(at.unwrap_or(from), std::mem::take(&mut out));
                }
                at = Some(from);
                let to = names.intern(&v.other);
                let edge = names.add_edge(format!("{table}/{}", k.edge_id));
                let weight = v.weight.unwrap_or(0.0);
                out.push(Entry { other: to, edge, weight });
                inn.push((to, Entry { other: from, edge, weight }));
                t.edges += 1;
            }
            if let Some(a) = at {
                t.lists[0].set(a, out);
            }
            // in lists: by `_to`, then by edge name (the order of the `graph:in` keys)
            inn.sort_unstable_by(|(a, x), (b, y)| {
                a.cmp(b).then_with(|| names.edge_name(x.edge).cmp(names.edge_name(y.edge)))
            });
            let mut rest = &inn[..];
            while let Some(&(to, _)) = rest.first() {
                let n = rest.iter().take_while(|(v, _)| *v == to).count();
                t.lists[1].set(to, rest[..n].iter().map(|(_, e)| *e).collect());
                rest = &rest[n..];
            }
            adj.edges += t.edges;
            adj.tables.insert(table.clone(), Arc::new(t));
        }
    }
    Ok(adj)
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
