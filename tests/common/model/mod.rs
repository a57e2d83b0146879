//! The in-memory model of documents and queries that `tests/model/query.rs` checks the server against:
//! its own filter evaluator, sort order, projection and RFC 7396 merge patch — written here from
//! the documented semantics, independently of the server's code — and the random documents,
//! patches and filters the runs send.
#![allow(dead_code)]

pub mod views;

use serde_json::{Map, Value, json};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// A small deterministic PRNG (xorshift64*), so failures reproduce from the seed.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

// ---------- semantics ----------

/// Key order of scalars: null < false < true < numbers < strings; numbers numerically.
fn class(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Bool(_) => 1,
        Value::Number(_) => 2,
        Value::String(_) => 3,
        _ => 4,
    }
}

fn cmp_num(a: &serde_json::Number, b: &serde_json::Number) -> Ordering {
    let int = |n: &serde_json::Number| n.as_i64().map(i128::from).or(n.as_u64().map(i128::from));
    match (int(a), int(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => a.as_f64().unwrap().partial_cmp(&b.as_f64().unwrap()).unwrap(),
    }
}

pub fn cmp_scalar(a: &Value, b: &Value) -> Ordering {
    class(a).cmp(&class(b)).then_with(|| match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Number(x), Value::Number(y)) => cmp_num(x, y),
        (Value::String(x), Value::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        _ => Ordering::Equal,
    })
}

fn is_scalar(v: &Value) -> bool {
    class(v) < 4
}

pub fn get<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(doc, |v, step| v.as_object()?.get(step))
}

/// The scalars a field offers to comparisons: itself, or its array's scalar elements.
fn scalars(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(items) => items.iter().filter(|e| is_scalar(e)).collect(),
        v if is_scalar(v) => vec![v],
        _ => vec![],
    }
}

fn model_eq(field: Option<&Value>, v: &Value) -> bool {
    let Some(f) = field else { return v.is_null() };
    if is_scalar(v) {
        return scalars(f).iter().any(|s| cmp_scalar(s, v) == Ordering::Equal);
    }
    // arrays and objects: the whole value, or an element of an array field
    f == v || f.as_array().is_some_and(|a| a.contains(v))
}

pub fn model_match(doc: &Value, filter: &Value) -> bool {
    filter.as_object().unwrap().iter().all(|(k, v)| match k.as_str() {
        "$and" => v.as_array().unwrap().iter().all(|f| model_match(doc, f)),
        "$or" => v.as_array().unwrap().iter().any(|f| model_match(doc, f)),
        "$not" => !model_match(doc, v),
        path => {
            let field = get(doc, path);
            match v {
                Value::Object(ops) if ops.keys().all(|o| o.starts_with('$')) && !ops.is_empty() => {
                    ops.iter().all(|(op, arg)| model_op(field, op, arg))
                }
                v => model_eq(field, v),
            }
        }
    })
}

/// A document value as a point: `{"lat", "lon"}` or `[lon, lat]`, numbers in range.
fn point(v: &Value) -> Option<(f64, f64)> {
    let (lat, lon) = match v {
        Value::Object(o) => (o.get("lat")?.as_f64()?, o.get("lon")?.as_f64()?),
        Value::Array(a) if a.len() == 2 => (a[1].as_f64()?, a[0].as_f64()?),
        _ => return None,
    };
    ((-90.0..=90.0).contains(&lat) && (-180.0..=180.0).contains(&lon)).then_some((lat, lon))
}

fn in_box(p: (f64, f64), b: &Value) -> bool {
    let f = |k: &str| b[k].as_f64().unwrap();
    let (lat, lon) = p;
    let lon_ok = if f("min_lon") <= f("max_lon") {
        f("min_lon") <= lon && lon <= f("max_lon")
    } else {
        // across the antimeridian
        lon >= f("min_lon") || lon <= f("max_lon")
    };
    f("min_lat") <= lat && lat <= f("max_lat") && lon_ok
}

fn model_op(field: Option<&Value>, op: &str, arg: &Value) -> bool {
    let cmp = |ok: fn(Ordering) -> bool| {
        field.is_some_and(|f| scalars(f).iter().any(|s| class(s) == class(arg) && ok(cmp_scalar(s, arg))))
    };
    match op {
        "$eq" => model_eq(field, arg),
        "$ne" => !model_eq(field, arg),
        "$gt" => cmp(Ordering::is_gt),
        "$gte" => cmp(Ordering::is_ge),
        "$lt" => cmp(Ordering::is_lt),
        "$lte" => cmp(Ordering::is_le),
        "$in" => arg.as_array().unwrap().iter().any(|a| model_eq(field, a)),
        "$nin" => !arg.as_array().unwrap().iter().any(|a| model_eq(field, a)),
        "$exists" => field.is_some() == arg.as_bool().unwrap(),
        "$prefix" => field.is_some_and(|f| {
            scalars(f).iter().any(|s| s.as_str().is_some_and(|s| s.starts_with(arg.as_str().unwrap())))
        }),
        // a substring of a string, or an element of an array
        "$contains" => match field {
            Some(Value::String(s)) => arg.as_str().is_some_and(|sub| s.contains(sub)),
            Some(Value::Array(items)) if is_scalar(arg) => {
                scalars(&Value::Array(items.clone())).iter().any(|s| cmp_scalar(s, arg) == Ordering::Equal)
            }
            Some(Value::Array(items)) => items.contains(arg),
            _ => false,
        },
        "$box" => field.and_then(point).is_some_and(|p| in_box(p, arg)),
        other => panic!("model has no {other}"),
    }
}

/// Sort value: smallest scalar ascending, largest descending; null when none.
fn sort_value(doc: &Value, field: &str, desc: bool) -> Value {
    let mut vals: Vec<Value> = get(doc, field).map(|f| scalars(f).into_iter().cloned().collect()).unwrap_or_default();
    vals.sort_by(cmp_scalar);
    let v = if desc { vals.last() } else { vals.first() };
    v.cloned().unwrap_or(Value::Null)
}

/// The ids matching `filter`, in `sort` order (ties by `_id` in the first key's direction).
pub fn model_query(model: &BTreeMap<String, Value>, filter: &Value, sort: &[(String, bool)]) -> Vec<String> {
    let mut hits: Vec<(&String, &Value)> = model.iter().filter(|(_, d)| model_match(d, filter)).collect();
    hits.sort_by(|(ia, a), (ib, b)| {
        for (field, desc) in sort {
            let o = cmp_scalar(&sort_value(a, field, *desc), &sort_value(b, field, *desc));
            let o = if *desc { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        let by_id = ia.as_bytes().cmp(ib.as_bytes());
        if sort.first().is_some_and(|(_, desc)| *desc) { by_id.reverse() } else { by_id }
    });
    hits.into_iter().map(|(id, _)| id.clone()).collect()
}

/// RFC 7396: objects merge member by member, `null` deletes, anything else replaces.
pub fn merge_patch(target: &Value, patch: &Value) -> Value {
    let Value::Object(p) = patch else { return patch.clone() };
    let mut out = match target {
        Value::Object(t) => t.clone(),
        _ => Map::new(),
    };
    for (k, v) in p {
        if v.is_null() {
            out.remove(k);
        } else {
            let merged = merge_patch(out.get(k).unwrap_or(&Value::Null), v);
            out.insert(k.clone(), merged);
        }
    }
    Value::Object(out)
}

/// The document as a query with `fields` returns it: `_id`, then each present path.
pub fn project(id: &str, doc: &Value, fields: Option<&[&str]>) -> Value {
    let mut out = match fields {
        None => doc.as_object().unwrap().clone(),
        Some(fields) => {
            let mut out = Map::new();
            for f in fields {
                if let Some(v) = get(doc, f) {
                    let steps: Vec<&str> = f.split('.').collect();
                    let mut at = &mut out;
                    for step in &steps[..steps.len() - 1] {
                        at = at.entry(*step).or_insert_with(|| json!({})).as_object_mut().unwrap();
                    }
                    at.insert(steps[steps.len() - 1].to_owned(), v.clone());
                }
            }
            out
        }
    };
    out.insert("_id".into(), json!(id));
    Value::Object(out)
}

// ---------- random documents, patches and filters ----------

const NUMS: &[&str] = &[
    "0",
    "-0.0",
    "1",
    "1.0",
    "-1",
    "-2.5",
    "2.5",
    "3",
    "7",
    "100",
    "9223372036854775807",
    "18446744073709551615",
    "-9223372036854775808",
    "0.1",
    "1e10",
];
const STRS: &[&str] = &["", "a", "ab", "abc", "b", "ba", "é", "🦀", "10", "Z", "xab"];

/// Points: near the antimeridian, at the poles, `[lon, lat]` arrays, and values that are no point.
const POINTS: &[&str] = &[
    r#"{"lat": 59.9, "lon": 10.75}"#,
    r#"{"lat": 60.4, "lon": 5.3}"#,
    r#"[10.2, 59.7]"#,
    r#"{"lat": -17.7, "lon": 178.1}"#,
    r#"{"lat": -13.8, "lon": -172.1}"#,
    r#"[180, 0]"#,
    r#"[-180, 1.5]"#,
    r#"{"lat": 90, "lon": 0}"#,
    r#"{"lat": -45.5, "lon": 179.99}"#,
    r#"{"lat": 91, "lon": 0}"#,
    r#"{"lat": "59", "lon": 10}"#,
    r#"[1, 2, 3]"#,
    r#""oslo""#,
];

/// Boxes, some across the antimeridian (`min_lon > max_lon`).
const BOXES: &[&str] = &[
    r#"{"min_lat": 59, "min_lon": 5, "max_lat": 61, "max_lon": 11}"#,
    r#"{"min_lat": -20, "min_lon": 170, "max_lat": 0, "max_lon": -170}"#,
    r#"{"min_lat": -90, "min_lon": 179, "max_lat": 90, "max_lon": -179}"#,
    r#"{"min_lat": -60, "min_lon": 178, "max_lat": 10, "max_lon": 180}"#,
    r#"{"min_lat": 0, "min_lon": -180, "max_lat": 90, "max_lon": 180}"#,
    r#"{"min_lat": 89, "min_lon": -10, "max_lat": 90, "max_lon": 10}"#,
];

/// One of `texts`, parsed.
fn pick_json(rng: &mut Rng, texts: &[&str]) -> Value {
    serde_json::from_str(texts[rng.below(texts.len() as u64) as usize]).unwrap()
}

pub fn num(rng: &mut Rng) -> Value {
    pick_json(rng, NUMS)
}

pub fn scalar(rng: &mut Rng) -> Value {
    match rng.below(10) {
        0 => Value::Null,
        1 => Value::Bool(rng.chance(50)),
        2..=5 => num(rng),
        _ => Value::String(rng.pick(STRS).to_string()),
    }
}

/// An array of small ints, or of mixed types with nested containers now and then.
fn tags(rng: &mut Rng) -> Value {
    let n = rng.below(4);
    if rng.chance(70) {
        return Value::Array((0..n).map(|_| json!(rng.below(6))).collect());
    }
    Value::Array(
        (0..n)
            .map(|_| match rng.below(6) {
                0 => json!([rng.below(6)]),
                1 => json!({"x": rng.below(3)}),
                2 => json!(rng.below(6)),
                _ => scalar(rng),
            })
            .collect(),
    )
}

pub fn nested(rng: &mut Rng) -> Value {
    json!({"v": rng.below(5), "w": scalar(rng)})
}

pub fn document(rng: &mut Rng) -> Value {
    let mut d = Map::new();
    if !rng.chance(10) {
        d.insert("a".into(), if rng.chance(80) { num(rng) } else { scalar(rng) });
    }
    if !rng.chance(10) {
        d.insert("b".into(), json!(rng.pick(&["x", "y", "z", "w"])));
    }
    if rng.chance(80) {
        d.insert("c".into(), json!(rng.below(4)));
    }
    if rng.chance(70) {
        d.insert("s".into(), json!(rng.pick(STRS)));
    }
    if rng.chance(60) {
        d.insert("tags".into(), tags(rng));
    } else if rng.chance(30) {
        d.insert("tags".into(), json!(rng.below(6)));
    }
    if rng.chance(70) {
        d.insert("u".into(), json!(format!("u{}", rng.below(40))));
    }
    if rng.chance(30) {
        d.insert("n".into(), nested(rng));
    }
    if rng.chance(60) {
        d.insert("loc".into(), pick_json(rng, POINTS));
    }
    Value::Object(d)
}

/// A merge patch: new values, `null`s that delete, and a nested object that merges into `n`.
pub fn patch(rng: &mut Rng) -> Value {
    let mut p = document(rng).as_object().unwrap().clone();
    p.retain(|_, _| rng.chance(50));
    for field in ["a", "tags", "u", "loc", "s"] {
        if rng.chance(15) {
            p.insert(field.into(), Value::Null);
        }
    }
    match rng.below(4) {
        0 => {
            p.insert("n".into(), json!({"v": rng.below(5)}));
        }
        1 => {
            p.insert("n".into(), json!({"w": null, "v": rng.below(5)}));
        }
        2 => {
            p.insert("n".into(), Value::Null);
        }
        _ => {}
    }
    Value::Object(p)
}

fn condition(rng: &mut Rng) -> Value {
    let field = *rng.pick(&["a", "b", "c", "s", "tags", "u", "n.v", "n", "loc", "missing"]);
    let arg = match field {
        "b" => json!(rng.pick(&["x", "y", "z", "q"])),
        "c" | "n.v" => json!(rng.below(6)),
        "s" => json!(rng.pick(STRS)),
        "u" => json!(format!("u{}", rng.below(40))),
        // equality with a whole array or object, or a scalar
        "tags" if rng.chance(30) => tags(rng),
        "tags" => json!(rng.below(6)),
        "n" => nested(rng),
        "loc" => pick_json(rng, POINTS),
        _ => scalar(rng),
    };
    let scalar_arg = if arg.is_null() || !(arg.is_number() || arg.is_string()) { json!(1) } else { arg.clone() };
    let mut m = Map::new();
    let cond = match rng.below(15) {
        0 | 1 => arg,
        2 => json!({"$ne": arg}),
        3 => json!({"$gt": scalar_arg}),
        4 => json!({"$gte": scalar_arg}),
        5 => json!({"$lt": scalar_arg}),
        6 => json!({"$lte": scalar_arg, "$gt": num(rng)}),
        7 => json!({"$in": [arg, scalar(rng)]}),
        8 => json!({"$nin": [arg]}),
        9 => json!({"$exists": rng.chance(50)}),
        10 => json!({"$prefix": rng.pick(&["", "a", "b", "é"])}),
        11 => {
            let what = match rng.below(4) {
                0 => json!(rng.pick(&["a", "b", "ab", "", "🦀"])),
                1 => json!({"x": rng.below(3)}),
                2 => json!([rng.below(6)]),
                _ => scalar(rng),
            };
            json!({"$contains": what})
        }
        12 | 13 => {
            m.insert("loc".into(), json!({"$box": pick_json(rng, BOXES)}));
            return Value::Object(m);
        }
        _ => json!({"$gte": num(rng), "$lte": num(rng)}),
    };
    m.insert(field.to_owned(), cond);
    Value::Object(m)
}

/// A filter, with `$and` / `$or` / `$not` nested up to `depth` levels.
pub fn filter(rng: &mut Rng, depth: u32) -> Value {
    let sub = |rng: &mut Rng| if depth > 0 && rng.chance(40) { filter(rng, depth - 1) } else { condition(rng) };
    match rng.below(13) {
        0 => json!({}),
        1..=4 => condition(rng),
        5 | 6 => {
            let (mut a, b) = (condition(rng), condition(rng));
            // two fields (or the same one twice) under an implicit AND
            for (k, v) in b.as_object().unwrap() {
                a.as_object_mut().unwrap().entry(k.clone()).or_insert(v.clone());
            }
            a
        }
        7 => json!({"$and": [sub(rng), sub(rng)]}),
        8 | 12 => json!({"$or": [sub(rng), sub(rng), sub(rng)]}),
        // branches an index can serve, overlapping on purpose
        9 | 10 => {
            json!({"$or": [{"b": rng.pick(&["x", "y"])}, {"c": {"$in": [rng.below(4), rng.below(4)]}}, {"s": {"$prefix": "a"}}]})
        }
        _ => json!({"$not": sub(rng)}),
    }
}

pub fn sort(rng: &mut Rng) -> Vec<(String, bool)> {
    (0..rng.below(3)).map(|_| (rng.pick(&["a", "b", "c", "s", "tags", "n.v"]).to_string(), rng.chance(50))).collect()
}

/// A projection (`None`: whole documents).
pub fn fields(rng: &mut Rng) -> Option<&'static [&'static str]> {
    *rng.pick(&[
        None,
        Some(&["c"][..]),
        Some(&["a", "tags", "loc"][..]),
        Some(&["n.v", "b", "missing"][..]),
        Some(&["n"][..]),
    ])
}
