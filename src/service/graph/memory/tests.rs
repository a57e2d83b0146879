//! The adjacency against a model: every sequence of edge changes leaves exactly the lists the
//! model's edges give, a frozen version never changes after it is frozen, and a compaction
//! renumbers without changing what is held.

use super::*;
use crate::service::graph::memory::oplog::EdgeEnds;
use proptest::prelude::*;
use std::collections::BTreeMap;

type Model = BTreeMap<String, EdgeEnds>;
/// (direction, vertex) → [(edge, other end, weight)], by edge name
type Shown = BTreeMap<(u8, String), Vec<(String, String, u64)>>;

fn shown(adj: &Adjacency) -> Shown {
    let names = adj.names();
    let mut out = Shown::new();
    for (_, t) in adj.tables() {
        for dir in [Direction::Out, Direction::In] {
            for (v, list) in t.all(dir) {
                let entries = list
                    .iter()
                    .map(|e| {
                        (names.edge_name(e.edge).to_owned(), names.vertex_name(e.other).to_owned(), e.weight.to_bits())
                    })
                    .collect();
                out.insert((dir as u8, names.vertex_name(v).to_owned()), entries);
            }
        }
    }
    out
}

fn expected(model: &Model) -> Shown {
    let mut out = Shown::new();
    for (id, e) in model {
        let w = e.weight.unwrap_or(0.0).to_bits();
        out.entry((0, e.from.clone())).or_default().push((format!("t/{id}"), e.to.clone(), w));
        out.entry((1, e.to.clone())).or_default().push((format!("t/{id}"), e.from.clone(), w));
    }
    for list in out.values_mut() {
        list.sort();
    }
    out
}

/// What a load at open reads from the `graph:out` keys of the model's edges.
fn loaded(model: &Model) -> Adjacency {
    use crate::keys::{AdjValue, GraphKey};
    use crate::storage::Slice;
    let mut keys: Vec<(Vec<u8>, Vec<u8>)> = model
        .iter()
        .map(|(id, e)| {
            let key = GraphKey::new(Direction::Out, "t", &e.from, id).encode();
            (key, AdjValue { other: e.to.as_str().into(), weight: e.weight }.encode())
        })
        .collect();
    keys.sort();
    let scan = |prefix: Vec<u8>| {
        let found: Vec<_> = keys
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(k, v)| Ok((Slice::from(k.clone()), Slice::from(v.clone()))))
            .collect();
        found.into_iter()
    };
    load::from_keys(&[("t".into(), 1)], scan).expect("loads")
}

/// One edge change: (edge id, new (from, to, weight) or none to delete).
type Op = (u8, Option<(u8, u8, u8)>);

/// Writes of edge changes, applied in order.
fn ops_strategy() -> impl Strategy<Value = Vec<Vec<Op>>> {
    let op = (0u8..12, prop::option::weighted(0.7, (0u8..6, 0u8..6, 0u8..4)));
    prop::collection::vec(prop::collection::vec(op, 1..6), 1..25)
}

fn ends((from, to, w): (u8, u8, u8)) -> EdgeEnds {
    EdgeEnds { from: format!("v/{from}"), to: format!("v/{to}"), weight: Some(f64::from(w)) }
}

proptest! {
    #[test]
    fn adjacency_follows_its_edges(writes in ops_strategy()) {
        let memory = GraphMemory::new(usize::MAX);
        memory.loaded(Ok(Adjacency::empty()), 0.0);
        let mut model = Model::new();
        let mut frozen: Vec<(Arc<Adjacency>, Shown)> = Vec::new();
        for write in writes {
            let mut ops = Vec::new();
            for (id, new) in write {
                let id = format!("e{id}");
                let old = model.get(&id).cloned();
                let new = new.map(ends);
                if old.is_none() && new.is_none() {
                    continue;
                }
                match &new {
                    Some(n) => model.insert(id.clone(), n.clone()),
                    None => model.remove(&id),
                };
                ops.push(EdgeOp { table: "t".into(), created_at: 1, id, old, new });
            }
            memory.apply(&ops);
            let adj = memory.capture(|_, _| true).expect("on");
            prop_assert_eq!(shown(&adj), expected(&model));
            prop_assert_eq!(adj.edges, model.len());
            prop_assert_eq!(shown(&adj.compacted()), expected(&model));
            prop_assert_eq!(shown(&loaded(&model)), expected(&model));
            frozen.push((adj, expected(&model)));
        }
        for (adj, then) in &frozen {
            prop_assert_eq!(&shown(adj), then);
        }
    }
}

#[test]
fn a_table_made_again_starts_empty_and_a_dropped_one_is_let_go() {
    let memory = GraphMemory::new(usize::MAX);
    memory.loaded(Ok(Adjacency::empty()), 0.0);
    let op = |created_at, id: &str| EdgeOp {
        table: "t".into(),
        created_at,
        id: id.into(),
        old: None,
        new: Some(ends((1, 2, 3))),
    };
    memory.apply(&[op(1, "a"), op(1, "b")]);
    memory.apply(&[op(2, "c")]);
    let adj = memory.capture(|_, _| true).unwrap();
    assert_eq!(adj.edges, 1);
    assert!(adj.table("t", 1).is_none());
    assert_eq!(adj.table("t", 2).map(|t| t.at(Direction::Out, adj.names().vertex("v/1").unwrap()).len()), Some(1));
    let adj = memory.capture(|_, _| false).unwrap();
    assert_eq!((adj.edges, adj.tables().count()), (0, 0));
}

#[test]
fn over_its_limit_it_switches_off() {
    let memory = GraphMemory::new(1000);
    memory.loaded(Ok(Adjacency::empty()), 0.0);
    let ops: Vec<EdgeOp> = (0..100)
        .map(|i| EdgeOp {
            table: "t".into(),
            created_at: 1,
            id: format!("e{i}"),
            old: None,
            new: Some(ends((i, 1, 1))),
        })
        .collect();
    memory.apply(&ops);
    assert!(memory.capture(|_, _| true).is_none());
    assert_eq!(memory.stats().state, "off");
    assert!(memory.off_reason().unwrap().contains("limit"));
    // an inconsistent change (an edge that is not there) switches it off too, never panics
    let memory = GraphMemory::new(usize::MAX);
    memory.loaded(Ok(Adjacency::empty()), 0.0);
    memory.apply(&[EdgeOp { table: "t".into(), created_at: 1, id: "x".into(), old: Some(ends((1, 2, 0))), new: None }]);
    assert_eq!(memory.stats().state, "off");
}
