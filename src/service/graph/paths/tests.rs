//! The path algorithms on a small in-memory graph: BFS, Dijkstra one way and from both ends (with
//! bans), Yen, and costs as JSON.

use super::super::walk::memory::TestGraph;
use super::*;

fn costs(paths: &[Path]) -> Vec<f64> {
    paths.iter().map(Path::cost).collect()
}

/// A path's vertex and edge names.
fn named(g: &TestGraph, p: &Path) -> (Vec<String>, Vec<String>) {
    (p.vertices.iter().map(|&v| g.vertex_name(v)).collect(), p.edges.iter().map(|&e| g.edge_name(e)).collect())
}

fn edges(g: &TestGraph, p: &Path) -> Vec<String> {
    named(g, p).1
}

/// A diamond with a shortcut and parallel edges.
fn graph() -> TestGraph {
    TestGraph::new(vec![
        ("e1", "a", "b", 1.0),
        ("e2", "b", "d", 1.0),
        ("e3", "a", "c", 2.0),
        ("e4", "c", "d", 2.0),
        ("e5", "a", "d", 10.0),
        ("e6", "b", "d", 3.0),
        ("e7", "d", "a", 1.0),
    ])
}

fn bfs_named(g: &mut TestGraph, from: &str, to: &str, dir: WalkDirection) -> Option<Path> {
    let (from, to) = (g.vertex(from), g.vertex(to));
    bfs(g, from, to, dir).unwrap()
}

#[test]
fn bfs_finds_fewest_edges_both_ways() {
    let mut g = graph();
    let p = bfs_named(&mut g, "a", "d", WalkDirection::Out).unwrap();
    assert_eq!(named(&g, &p), (vec!["a".to_owned(), "d".to_owned()], vec!["e5".to_owned()]));
    // against the edges: e4 enters d from c
    let p = bfs_named(&mut g, "d", "c", WalkDirection::In).unwrap();
    assert_eq!(edges(&g, &p), ["e4"]);
    let p = bfs_named(&mut g, "c", "b", WalkDirection::Any).unwrap();
    assert_eq!(p.edges.len(), 2);
    // along the edges only through d and back to a
    let p = bfs_named(&mut g, "c", "b", WalkDirection::Out).unwrap();
    assert_eq!(edges(&g, &p), ["e4", "e7", "e1"]);
    assert!(bfs_named(&mut g, "a", "z", WalkDirection::Any).is_none());
    assert_eq!(bfs_named(&mut g, "a", "a", WalkDirection::Out).unwrap().edges.len(), 0);
}

#[test]
fn bfs_long_chain_meets_in_the_middle() {
    let names: Vec<&'static str> = (0..20).map(|i| &*Box::leak(format!("v{i}").into_boxed_str())).collect();
    let ids: Vec<&'static str> = (0..19).map(|i| &*Box::leak(format!("c{i}").into_boxed_str())).collect();
    let mut edges: Vec<_> = (0..19).map(|i| (ids[i], names[i], names[i + 1], 1.0)).collect();
    // a detour of 3 edges around v5 → v8 is no shorter than the chain (3 edges)
    edges.push(("x1", "v5", "w1", 1.0));
    edges.push(("x2", "w1", "v8", 1.0));
    let mut g = TestGraph::new(edges);
    let p = bfs_named(&mut g, "v0", "v19", WalkDirection::Out).unwrap();
    assert_eq!(p.edges.len(), 18, "{p:?}");
    let (vertices, _) = named(&g, &p);
    assert_eq!(vertices.first().map(String::as_str), Some("v0"));
    assert_eq!(vertices.last().map(String::as_str), Some("v19"));
}

#[test]
fn dijkstra_minimises_weight() {
    let mut g = graph();
    let (a, b, d) = (g.vertex("a"), g.vertex("b"), g.vertex("d"));
    let p = dijkstra(&mut g, a, d, WalkDirection::Out, &Banned::default()).unwrap().unwrap();
    assert_eq!((edges(&g, &p), p.cost()), (vec!["e1".to_owned(), "e2".to_owned()], 2.0));
    let banned = Banned { vertices: [b].into_iter().collect(), ..Default::default() };
    let p = dijkstra(&mut g, a, d, WalkDirection::Out, &banned).unwrap().unwrap();
    assert_eq!(p.cost(), 4.0);
    assert_eq!(dijkstra_both_ways(&mut g, a, d, WalkDirection::Out, &banned).unwrap().unwrap().cost(), 4.0);
}

/// From both ends, the cost is the one-way search's, whatever the pair, direction and bans;
/// zero weights (ties everywhere) still give a loop-free path.
#[test]
fn dijkstra_from_both_ends_agrees_with_one_way() {
    let zeros = TestGraph::new(graph().edges.into_iter().map(|(id, f, t, w)| (id, f, t, w * 0.0)).collect());
    for mut g in [graph(), zeros] {
        let all: Vec<u32> = ["a", "b", "c", "d", "z"].iter().map(|v| g.vertex(v)).collect();
        let every_edge: Vec<u32> = {
            let mut steps = Vec::new();
            for &v in &all {
                g.steps(v, WalkDirection::Out, &mut steps).unwrap();
            }
            steps.iter().map(|s| s.edge).collect()
        };
        let bans = [
            Banned::default(),
            Banned { vertices: [all[1]].into_iter().collect(), ..Default::default() },
            Banned { edges: every_edge.iter().copied().step_by(2).collect(), ..Default::default() },
        ];
        for banned in &bans {
            for &from in &all {
                for &to in &all {
                    if banned.vertices.contains(&from) || banned.vertices.contains(&to) {
                        continue; // Yen never bans the spur's ends
                    }
                    for dir in [WalkDirection::Out, WalkDirection::In, WalkDirection::Any] {
                        let one = dijkstra(&mut g, from, to, dir, banned).unwrap();
                        let both = dijkstra_both_ways(&mut g, from, to, dir, banned).unwrap();
                        assert_eq!(one.as_ref().map(Path::cost), both.as_ref().map(Path::cost), "{from} {to} {dir:?}");
                        if let Some(p) = both {
                            let distinct: HashSet<&u32> = p.vertices.iter().collect();
                            assert_eq!(distinct.len(), p.vertices.len(), "{p:?}");
                            assert_eq!((p.vertices[0], *p.vertices.last().unwrap()), (from, to));
                            assert_eq!(p.edges.len() + 1, p.vertices.len());
                            assert!(p.edges.iter().all(|e| !banned.edges.contains(e)));
                        }
                    }
                }
            }
        }
    }
    let cut =
        loop_free(Path { vertices: vec![1, 2, 3, 2, 4], edges: vec![1, 2, 3, 4], weights: vec![1.0, 0.0, 0.0, 2.0] });
    assert_eq!((cut.vertices, cut.edges, cut.weights), (vec![1, 2, 4], vec![1, 4], vec![1.0, 2.0]));
}

#[test]
fn yen_lists_every_loop_free_path_by_cost() {
    let mut g = graph();
    let (a, d) = (g.vertex("a"), g.vertex("d"));
    let first = dijkstra(&mut g, a, d, WalkDirection::Out, &Banned::default()).unwrap().unwrap();
    let all = yen(&mut g, first.clone(), d, WalkDirection::Out, 32).unwrap();
    // a→b→d twice (parallel e2, e6), a→c→d, a→d
    assert_eq!(costs(&all), [2.0, 4.0, 4.0, 10.0]);
    let listed: Vec<Vec<String>> = all.iter().map(|p| edges(&g, p)).collect();
    assert!(listed.contains(&vec!["e1".to_owned(), "e6".to_owned()]));
    assert!(listed.contains(&vec!["e3".to_owned(), "e4".to_owned()]));
    // ties by edge ids: e1,e6 before e3,e4
    assert_eq!(listed[1], ["e1", "e6"]);
    assert_eq!(yen(&mut g, first, d, WalkDirection::Out, 2).unwrap().len(), 2);
    // undirected: also a→(e7 reversed)→d, and longer loop-free routes through d's neighbours
    let first = dijkstra(&mut g, a, d, WalkDirection::Any, &Banned::default()).unwrap().unwrap();
    assert_eq!(first.cost(), 1.0);
    let all = yen(&mut g, first, d, WalkDirection::Any, 32).unwrap();
    assert_eq!(costs(&all), [1.0, 2.0, 4.0, 4.0, 10.0]);
    for p in &all {
        let distinct: HashSet<&u32> = p.vertices.iter().collect();
        assert_eq!(distinct.len(), p.vertices.len(), "loop-free: {p:?}");
    }
}

#[test]
fn costs_are_integers_when_whole() {
    assert_eq!(cost_json(3.0), Value::from(3));
    assert_eq!(cost_json(2.5), serde_json::json!(2.5));
}
