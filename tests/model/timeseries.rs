//! Model-based test of time series: random JSON and line-protocol writes (overwrites, duplicates
//! within a request, times before the epoch, refused bodies), series and metric deletes go to the
//! server and to an in-memory map; every read — pages in both orders through their cursors,
//! windows, and every aggregate function over random steps, one entity, all entities together and
//! grouped by entity or by labels, series selected by label matchers — must agree exactly with a
//! brute-force computation, as must the metric list and the series listing; `check` must pass at
//! the end. Between steps the merge task packs points into blocks and a metric's
//! retention may remove every point of it. Values are multiples of 1/4, so sums are exact in any
//! order.

use crate::common::model::Rng;
use crate::common::{TestServer, seg};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// (entity, ts ms, value)
type Pt = (String, i64, f64);
/// (metric, entity, ts ms) → value
type Points = BTreeMap<(String, String, i64), f64>;

const METRICS: &[&str] = &["cpu", "cpu.idle"];
/// Entities written as JSON; line protocol writes the tag sets below (the last entity here is
/// the series line protocol writes for the tag set `rack=r\,1,host=h1`).
const ENTITIES: &[&str] = &["a", "b b", "", "é,x=y", "host=h1,rack=r\\,1"];
/// (tag set as written, entity it becomes)
const TAGS: &[(&str, &str)] = &[
    (",host=h1", "host=h1"),
    (",host=h\\ 2,dc=eu", "dc=eu,host=h 2"),
    ("", ""),
    (",rack=r\\,1,host=h1", "host=h1,rack=r\\,1"),
];
/// The labels of every entity written (those not of the `k=v,k=v` form have none).
fn labels(entity: &str) -> BTreeMap<&'static str, &'static str> {
    let pairs: &[(&str, &str)] = match entity {
        "host=h1" => &[("host", "h1")],
        "dc=eu,host=h 2" => &[("dc", "eu"), ("host", "h 2")],
        "host=h1,rack=r\\,1" => &[("host", "h1"), ("rack", "r,1")],
        _ => &[],
    };
    pairs.iter().copied().collect()
}
/// Selectors, with what they select (a missing label is the empty value).
type Selects = fn(&BTreeMap<&str, &str>) -> bool;
const SELECTORS: &[(&str, Selects)] = &[
    ("{host=\"h1\"}", |l| l.get("host") == Some(&"h1")),
    ("{host=~\"h.*\"}", |l| l.get("host").is_some_and(|h| h.starts_with('h'))),
    ("{dc!=\"eu\"}", |l| l.get("dc") != Some(&"eu")),
    ("{host!~\"h1|\"}", |l| l.get("host").is_some_and(|h| *h != "h1")),
    ("{rack=\"r,1\",host=\"h1\"}", |l| l.get("rack") == Some(&"r,1") && l.get("host") == Some(&"h1")),
    ("{host=\"h1\",rack=\"\"}", |l| l.get("host") == Some(&"h1") && !l.contains_key("rack")),
    ("{}", |_| true),
];
const BY: &[&[&str]] = &[&["host"], &["dc", "host"], &["rack"]];
const FNS: &[&str] = &["avg", "min", "max", "sum", "count", "first", "last"];

fn value(rng: &mut Rng) -> f64 {
    (rng.below(2001) as i64 - 1000) as f64 / 4.0
}

fn ts(rng: &mut Rng) -> i64 {
    rng.below(10_001) as i64 - 5000
}

async fn read_all(s: &TestServer, metric: &str, query: &str, limit: u64) -> Vec<(String, i64, f64)> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut q = format!("/v1/timeseries/{}/points?limit={limit}{query}", seg(metric));
        if let Some(c) = &cursor {
            q.push_str(&format!("&cursor={c}"));
        }
        let (status, page) = s.get(&q).await;
        assert_eq!(status, 200, "{q}: {page}");
        for p in page["points"].as_array().unwrap() {
            out.push((
                p["entity"].as_str().unwrap().to_owned(),
                p["ts"].as_i64().unwrap(),
                p["value"].as_f64().unwrap(),
            ));
        }
        match page["cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return out,
        }
    }
}

/// The points of `mine` in `[from, to)`.
fn want_all(mine: &[(String, i64, f64)], from: i64, to: i64) -> Vec<(String, i64, f64)> {
    mine.iter().filter(|p| p.1 >= from && p.1 < to).cloned().collect()
}

/// The brute-force buckets of `points` (entity, ts, value), `step` ms.
fn buckets(points: &[(String, i64, f64)], step: i64, func: &str) -> Vec<(i64, f64)> {
    let mut by: BTreeMap<i64, Vec<&(String, i64, f64)>> = BTreeMap::new();
    for p in points {
        by.entry(p.1.div_euclid(step) * step).or_default().push(p);
    }
    by.into_iter()
        .map(|(start, ps)| {
            let vals = ps.iter().map(|p| p.2);
            let v = match func {
                "avg" => vals.clone().sum::<f64>() / ps.len() as f64,
                "min" => vals.fold(f64::INFINITY, f64::min),
                "max" => vals.fold(f64::NEG_INFINITY, f64::max),
                "sum" => vals.sum(),
                "count" => ps.len() as f64,
                "first" => ps.iter().min_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0))).unwrap().2,
                "last" => ps.iter().max_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0))).unwrap().2,
                _ => unreachable!(),
            };
            (start, v)
        })
        .collect()
}

fn as_buckets(v: &Value) -> Vec<(i64, f64)> {
    v.as_array().unwrap().iter().map(|b| (b["ts"].as_i64().unwrap(), b["value"].as_f64().unwrap())).collect()
}

async fn compare(s: &TestServer, model: &Points, rng: &mut Rng) {
    for metric in METRICS {
        let mine: Vec<(String, i64, f64)> =
            model.iter().filter(|((m, _, _), _)| m == metric).map(|((_, e, t), v)| (e.clone(), *t, *v)).collect();
        let exists = s.get(&format!("/v1/timeseries/{}/retention", seg(metric))).await.0 == 200;
        if !exists {
            assert!(mine.is_empty(), "{metric} has points in the model but does not exist");
            continue;
        }
        // pages, both orders, a random window and entity
        let (from, to) = (ts(rng), ts(rng));
        let entity = rng.chance(40).then(|| rng.pick(ENTITIES).to_string());
        let mut query = format!("&from={from}&to={to}");
        if let Some(e) = &entity {
            query.push_str(&format!("&entity={}", seg(e)));
        }
        let want: Vec<_> = mine
            .iter()
            .filter(|p| p.1 >= from && p.1 < to && entity.as_ref().is_none_or(|e| &p.0 == e))
            .cloned()
            .collect();
        assert_eq!(read_all(s, metric, &query, 1 + rng.below(7)).await, want, "{metric} {query}");
        let mut desc = want.clone();
        desc.reverse();
        assert_eq!(
            read_all(s, metric, &format!("{query}&order=desc"), 1 + rng.below(7)).await,
            desc,
            "{metric} desc {query}"
        );
        assert_eq!(read_all(s, metric, "", 100_000).await, mine, "{metric}: every point");

        // aggregates
        let step = *rng.pick(&[1i64, 7, 250, 1000, 60_000]);
        let func = *rng.pick(FNS);
        let q = format!("/v1/timeseries/{}/aggregate?step={step}ms&fn={func}{query}", seg(metric));
        let (status, got) = s.get(&q).await;
        assert_eq!(status, 200, "{q}: {got}");
        assert_eq!(as_buckets(&got["buckets"]), buckets(&want, step, func), "{q}");
        let (_, grouped) = s.get(&format!("{q}&group_by=entity")).await;
        let mut per: BTreeMap<&str, Vec<(String, i64, f64)>> = BTreeMap::new();
        for p in &want {
            per.entry(&p.0).or_default().push(p.clone());
        }
        let got: Vec<(String, Vec<(i64, f64)>)> = grouped["series"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| (g["entity"].as_str().unwrap().to_owned(), as_buckets(&g["buckets"])))
            .collect();
        let want: Vec<(String, Vec<(i64, f64)>)> =
            per.into_iter().map(|(e, ps)| (e.to_owned(), buckets(&ps, step, func))).collect();
        assert_eq!(got, want, "{q}&group_by=entity");

        // series selected by labels: points, aggregates grouped by labels, the series listing
        let (selector, selects) = *rng.pick(SELECTORS);
        let chosen: Vec<_> = want_all(&mine, from, to).into_iter().filter(|p| selects(&labels(&p.0))).collect();
        let matched = format!("&from={from}&to={to}&match={}", seg(selector));
        assert_eq!(read_all(s, metric, &matched, 1 + rng.below(7)).await, chosen, "{metric} {selector}");
        let by = *rng.pick(BY);
        let q =
            format!("/v1/timeseries/{}/aggregate?step={step}ms&fn={func}{matched}&by={}", seg(metric), by.join(","));
        let (status, got) = s.get(&q).await;
        assert_eq!(status, 200, "{q}: {got}");
        let got: Vec<(Value, Vec<(i64, f64)>)> = got["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| (g["labels"].clone(), as_buckets(&g["buckets"])))
            .collect();
        let mut groups: BTreeMap<Vec<Option<&str>>, Vec<Pt>> = BTreeMap::new();
        for p in &chosen {
            let l = labels(&p.0);
            groups.entry(by.iter().map(|n| l.get(n).copied()).collect()).or_default().push(p.clone());
        }
        let want: Vec<(Value, Vec<(i64, f64)>)> = groups
            .into_iter()
            .map(|(values, ps)| {
                let named: serde_json::Map<String, Value> =
                    (by.iter().zip(values)).filter_map(|(n, v)| v.map(|v| ((*n).to_owned(), json!(v)))).collect();
                (Value::Object(named), buckets(&ps, step, func))
            })
            .collect();
        assert_eq!(got, want, "{q}");
        let (status, listed) = s.get(&format!("/v1/timeseries/{}/series?match={}", seg(metric), seg(selector))).await;
        assert_eq!(status, 200, "{listed}");
        let listed: Vec<(&str, u64)> = listed["series"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["entity"].as_str().unwrap(), e["points"].as_u64().unwrap()))
            .collect();
        let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
        for p in mine.iter().filter(|p| selects(&labels(&p.0))) {
            *counts.entry(&p.0).or_default() += 1;
        }
        assert_eq!(listed, counts.into_iter().collect::<Vec<_>>(), "series {selector}");
    }
    // the list
    let (_, list) = s.get("/v1/timeseries").await;
    for m in list["metrics"].as_array().unwrap() {
        let name = m["name"].as_str().unwrap();
        let mine: Vec<(&String, i64)> = model.keys().filter(|(mm, _, _)| mm == name).map(|(_, e, t)| (e, *t)).collect();
        let series: std::collections::BTreeSet<&String> = mine.iter().map(|p| p.0).collect();
        assert_eq!(m["points"], mine.len(), "{m}");
        assert_eq!(m["series"], series.len(), "{m}");
        assert_eq!(m["first"], json!(mine.iter().map(|p| p.1).min()), "{m}");
        assert_eq!(m["last"], json!(mine.iter().map(|p| p.1).max()), "{m}");
    }
}

#[tokio::test]
async fn time_series_agree_with_the_in_memory_model() {
    let s = TestServer::start_with(|c| {
        c.tasks.merge_interval = Duration::from_secs(1);
        c.tasks.retention_interval = Duration::from_secs(1);
    })
    .await;
    let mut model = Points::new();
    let mut rng = Rng(0x7157_0e1a_2026_1122);
    for step in 0..160 {
        match rng.below(10) {
            0..=3 => {
                let metric = *rng.pick(METRICS);
                let mut batch = Vec::new();
                let mut staged = Vec::new();
                for _ in 0..1 + rng.below(40) {
                    let (e, t, v) = (rng.pick(ENTITIES).to_string(), ts(&mut rng), value(&mut rng));
                    batch.push(json!({"entity": e, "ts": t, "value": v}));
                    staged.push(((metric.to_owned(), e, t), v));
                }
                let (status, body) =
                    s.post(&format!("/v1/timeseries/{}/points", seg(metric)), json!({"points": batch})).await;
                assert_eq!(status, 200, "{body}");
                model.extend(staged);
            }
            4..=6 => {
                let mut body = String::new();
                let mut staged = Vec::new();
                let bad_line = rng.chance(15).then(|| rng.below(10));
                let mut wrote_bad = false;
                for n in 0..1 + rng.below(30) {
                    if bad_line == Some(n) {
                        body.push_str("cpu,host=h1 value=oops 1\n");
                        wrote_bad = true;
                        continue;
                    }
                    let (tags, entity) = *rng.pick(TAGS);
                    let (t, v, idle) = (ts(&mut rng), value(&mut rng), value(&mut rng));
                    body.push_str(&format!("cpu{tags} value={v},idle={idle} {t}\n"));
                    staged.push((("cpu".to_owned(), entity.to_owned(), t), v));
                    staged.push((("cpu.idle".to_owned(), entity.to_owned(), t), idle));
                }
                let r = s.raw(Method::POST, "/v1/timeseries/write?precision=ms", "text/plain", body).await;
                if wrote_bad {
                    assert!(r.is_problem(400, "invalid_line_protocol"), "{}", r.body);
                } else {
                    assert_eq!(r.status, 200, "{}", r.body);
                    model.extend(staged);
                }
            }
            7 => {
                let metric = *rng.pick(METRICS);
                let entity = *rng.pick(ENTITIES);
                let r = s
                    .send(Method::DELETE, &format!("/v1/timeseries/{}?entity={}", seg(metric), seg(entity)), None, &[])
                    .await;
                let known = model.keys().any(|(m, _, _)| m == metric)
                    || s.get(&format!("/v1/timeseries/{}/retention", seg(metric))).await.0 == 200;
                assert_eq!(r.status, if known { 200 } else { 404 }, "{}", r.body);
                model.retain(|(m, e, _), _| !(m == metric && e == entity));
            }
            8 if rng.chance(30) => {
                let metric = *rng.pick(METRICS);
                let r = s.send(Method::DELETE, &format!("/v1/timeseries/{}", seg(metric)), None, &[]).await;
                assert!(r.status == 200 || r.is_problem(404, "metric_not_found"), "{}", r.body);
                model.retain(|(m, _, _), _| m != metric);
            }
            _ => compare(&s, &model, &mut rng).await,
        }
        if step % 40 == 39 {
            compare(&s, &model, &mut rng).await;
        }
        if step % 40 == 20 {
            // the merge task packs what was written so far into blocks
            await_run(&s, "timeseries_merge").await;
            if rng.chance(50) {
                // retention of a metric: every point is older than an hour (times near the epoch)
                let metric = *rng.pick(METRICS);
                let path = format!("/v1/timeseries/{}/retention", seg(metric));
                assert_eq!(s.put(&path, json!({"max_age": "1h"})).await.0, 200);
                await_run(&s, "retention").await;
                assert_eq!(s.put(&path, json!({"max_age": null})).await.0, 200);
                model.retain(|(m, _, _), _| m != metric);
            }
            compare(&s, &model, &mut rng).await;
        }
    }
    await_run(&s, "timeseries_merge").await;
    compare(&s, &model, &mut rng).await;
    let merged = task_runs(&s, "timeseries_merge").await.1;
    assert!(merged > 0, "the merge task merged nothing");
    s.check_ok().await;
}

/// The runs of a periodic task so far, and what they removed (merged) in all.
async fn task_runs(s: &TestServer, name: &str) -> (u64, u64) {
    let tasks = s.get("/v1/admin/tasks").await.1;
    let task = tasks["tasks"].as_array().unwrap().iter().find(|t| t["name"] == name).cloned().unwrap();
    (task["runs"].as_u64().unwrap(), task["removed_total"].as_u64().unwrap())
}

/// Waits until a whole run of task `name` started after this call has ended.
async fn await_run(s: &TestServer, name: &str) {
    let (before, _) = task_runs(s, name).await;
    for _ in 0..100 {
        if task_runs(s, name).await.0 >= before + 2 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {name} did not run");
}
