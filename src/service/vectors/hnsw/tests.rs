//! The graph through churn, planned inserts and reload.

use super::*;

fn clustered(n: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut x = seed;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as f32 / (1u64 << 53) as f32 * 2.0 - 1.0
    };
    let centers: Vec<Vec<f32>> = (0..10).map(|_| (0..dim).map(|_| rnd() * 4.0).collect()).collect();
    (0..n).map(|i| centers[i % 10].iter().map(|c| c + rnd() * 0.5).collect()).collect()
}

fn recall(g: &Graph, data: &[(String, Vec<f32>)], queries: &[Vec<f32>]) -> f64 {
    let mut hit = 0;
    for q in queries {
        let got: BTreeSet<u32> = g.search(q, 10, 64, &mut |_| true).into_iter().map(|x| x.0).collect();
        let want: BTreeSet<u32> = g.exact(q, 10, None, &mut |_| true).into_iter().map(|x| x.0).collect();
        hit += got.intersection(&want).count();
    }
    let _ = data;
    hit as f64 / (queries.len() * 10) as f64
}

/// No link names a freed slot or a layer its node lacks, and `rev` mirrors the links exactly.
fn links_are_mirrored(g: &mut Graph) {
    g.rev();
    let rev = g.rev.as_ref().unwrap();
    let mut reverse = 0;
    for s in 0..g.links.len() as u32 {
        for l in 0..=g.links.level(s) {
            for &n in g.links.get(s, l) {
                assert!(g.id(n).is_some() && g.level(n) >= l);
                assert!(rev.get(n as usize).and_then(|r| r.get(l)).is_some_and(|r| r.contains(&s)));
                reverse += 1;
            }
        }
    }
    assert_eq!(rev.iter().flatten().map(Vec::len).sum::<usize>(), reverse);
}

#[test]
fn recall_holds_through_churn_and_reload() {
    let p = Params { dim: 16, metric: Metric::L2, m: 12, ef_construction: 100, quantized: false };
    let mut g = Graph::new(p);
    // data, queries and replacements from the same clusters
    let mut vs = clustered(4050, 16, 7);
    let queries: Vec<Vec<f32>> = vs.split_off(4000);
    let fresh: Vec<Vec<f32>> = vs.split_off(2000);
    let data: Vec<(String, Vec<f32>)> = vs.into_iter().enumerate().map(|(i, v)| (format!("d{i}"), v)).collect();
    let mut ch = Changes::default();
    for (id, v) in &data {
        g.insert(id, v, &mut ch);
    }
    let r = recall(&g, &data, &queries);
    eprintln!("recall {r}");
    assert!(r >= 0.95, "{r}");
    // delete a third, replace a tenth
    for (i, (id, _)) in data.iter().enumerate() {
        if i % 3 == 0 {
            assert!(g.remove(id, &mut ch));
        } else if i % 10 == 1 {
            g.insert(id, &fresh[i], &mut ch);
        }
    }
    assert_eq!(g.len(), 2000 - 667);
    let r = recall(&g, &data, &queries);
    eprintln!("recall after churn {r}");

    assert!(r >= 0.95, "{r}");
    // no link names a freed slot, and rev mirrors links
    links_are_mirrored(&mut g);
    // inserts planned in batches of 16 on one state, applied after each other
    let more: Vec<(String, Vec<f32>)> =
        clustered(4400, 16, 7)[4050..].iter().enumerate().map(|(i, v)| (format!("p{i}"), v.clone())).collect();
    for batch in more.chunks(16) {
        let plans: Vec<_> = batch.iter().map(|(id, v)| g.plan(id, v)).collect();
        for ((id, v), plan) in batch.iter().zip(plans) {
            match plan {
                Some(plan) => g.apply_plan(id, v, &plan, &mut ch),
                None => g.insert(id, v, &mut ch),
            }
        }
    }
    // and replaces planned the same way
    for batch in data.chunks(16).take(20) {
        let plans: Vec<_> =
            batch.iter().map(|(id, v)| (id, v.iter().map(|x| x + 0.01).collect::<Vec<f32>>())).collect();
        let plans: Vec<_> = plans
            .into_iter()
            .map(|(id, v)| {
                let p = g.plan(id, &v);
                (id, v, p)
            })
            .collect();
        for (id, v, plan) in plans {
            match plan {
                Some(plan) => g.apply_plan(id, &v, &plan, &mut ch),
                None => g.insert(id, &v, &mut ch),
            }
        }
    }
    let r = recall(&g, &data, &queries);
    assert!(r >= 0.95, "after planned inserts {r}");
    links_are_mirrored(&mut g);
    // reloaded slot by slot (free slots between): the same graph, at the same slots
    let mut loader = Loader::new(p, g.slots());
    for s in (0..g.slots() as u32).filter(|s| g.id(*s).is_some()) {
        assert!(loader.node(s, g.id(s).unwrap(), g.vector(s).unwrap(), g.level(s)));
    }
    for s in 0..g.slots() as u32 {
        for layer in 0..=g.level(s) {
            for &to in g.links_at(s, layer) {
                loader.link(s, layer, to);
            }
        }
    }
    let mut h = loader.finish();
    let ids: Vec<Arc<str>> = g.ids().cloned().collect();
    for id in &ids {
        assert_eq!(h.slot(id), g.slot(id));
        assert_eq!(h.links_of(id), g.links_of(id));
        assert_eq!(h.vector(h.slot(id).unwrap()), g.vector(g.slot(id).unwrap()));
    }
    links_are_mirrored(&mut h);
    assert!(recall(&h, &data, &queries) >= 0.95);
    // the free slots are taken first
    let free = h.slots() - h.len();
    assert!(free > 0, "churn left free slots");
    for (i, (_, v)) in data.iter().take(free).enumerate() {
        h.insert(&format!("again{i}"), v, &mut ch);
    }
    assert_eq!((h.slots(), h.len()), (g.slots(), g.len() + free));
    // a node out of slot order or past the slot count, or an id loaded twice, is refused
    let mut l = Loader::new(p, 4);
    let v = [0.0f32; 16];
    assert!(l.node(2, "x", &v, 0));
    assert!(!l.node(1, "y", &v, 0) && !l.node(3, "x", &v, 0) && !l.node(4, "z", &v, 0));
    assert!(l.node(3, "y", &v, 0));
    assert_eq!(l.finish().slots(), 4);
    // a filter keeping a tenth still fills k
    let got = h.search(&queries[0], 10, 64, &mut |s| h.id(s).is_some_and(|id| id.ends_with('7')));
    assert_eq!(got.len(), 10);
}

#[test]
fn a_plan_made_on_another_graph_is_searched_again() {
    let p = Params { dim: 8, metric: Metric::L2, m: 4, ef_construction: 32, quantized: false };
    let vs = clustered(260, 8, 3);
    let mut ch = Changes::default();
    // the old graph (before a rebuild) and the new one, filled again under other slots
    let mut old = Graph::new(p);
    for (i, v) in vs[..200].iter().enumerate() {
        old.insert(&format!("a{i}"), v, &mut ch);
    }
    let fill = |g: &mut Graph, ch: &mut Changes| {
        for (i, v) in vs[200..250].iter().enumerate() {
            g.insert(&format!("b{i}"), v, ch);
        }
    };
    let (mut fresh, mut planned) = (Graph::new(p), Graph::new(p));
    fill(&mut fresh, &mut ch);
    fill(&mut planned, &mut ch);
    let plan = old.plan("new", &vs[255]).expect("a plan");
    fresh.insert("new", &vs[255], &mut ch);
    planned.apply_plan("new", &vs[255], &plan, &mut ch);
    for id in fresh.ids() {
        assert_eq!(fresh.links_of(id), planned.links_of(id), "{id}");
    }
    assert!(!planned.links_of("new").unwrap().is_empty());
}

#[test]
fn a_quantized_graph_finds_the_float_neighbours_once_rescored() {
    let p = Params { dim: 16, metric: Metric::L2, m: 12, ef_construction: 100, quantized: true };
    let mut g = Graph::new(p);
    let mut vs = clustered(3050, 16, 11);
    let queries: Vec<Vec<f32>> = vs.split_off(3000);
    let mut ch = Changes::default();
    for (i, v) in vs.iter().enumerate() {
        g.insert(&format!("d{i}"), v, &mut ch);
    }
    // the floats are not kept: every new node's vector is in the change, for its node key
    assert_eq!(g.vector(0), None);
    assert_eq!(ch.vectors.len(), 3000);
    assert_eq!(ch.vectors[&g.slot("d5").unwrap()], vs[5]);
    let exact = |q: &[f32], n: usize| -> Vec<usize> {
        let mut all: Vec<(f32, usize)> = vs.iter().enumerate().map(|(i, v)| (Metric::L2.distance(q, v), i)).collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0));
        all.into_iter().take(n).map(|x| x.1).collect()
    };
    let (mut raw, mut rescored) = (0, 0);
    for q in &queries {
        let want: BTreeSet<usize> = exact(q, 10).into_iter().collect();
        let found: Vec<usize> = g
            .search(q, 30, 64, &mut |_| true)
            .into_iter()
            .map(|(s, _)| g.id(s).unwrap()[1..].parse().unwrap())
            .collect();
        raw += found.iter().take(10).filter(|i| want.contains(i)).count();
        let mut again: Vec<(f32, usize)> = found.iter().map(|&i| (Metric::L2.distance(q, &vs[i]), i)).collect();
        again.sort_by(|a, b| a.0.total_cmp(&b.0));
        rescored += again.iter().take(10).filter(|(_, i)| want.contains(i)).count();
    }
    let (raw, rescored) = (raw as f64 / 500.0, rescored as f64 / 500.0);
    eprintln!("int8 recall: {raw} by the codes, {rescored} rescored");
    assert!(raw >= 0.9 && rescored >= 0.95, "{raw} {rescored}");
    // a vector coded alike is not re-inserted, but its node key takes the new floats
    let mut ch = Changes::default();
    let s = g.slot("d5").unwrap();
    let mut nudged = vs[5].clone();
    let least = (0..16).min_by(|a, b| nudged[*a].abs().total_cmp(&nudged[*b].abs())).unwrap();
    nudged[least] += 1e-6;
    g.insert("d5", &nudged, &mut ch);
    assert_eq!((g.slot("d5"), ch.links.len()), (Some(s), 0));
    assert_eq!(ch.vectors.get(&s), Some(&nudged));
    assert!(ch.nodes.contains(&s));
}
