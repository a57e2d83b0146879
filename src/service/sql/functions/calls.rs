//! Each table function of a model: its parameters, its columns, how a call becomes its route's
//! request, and the rows of the route's answer (JSON objects keyed by the function's columns).

use crate::service::graph::{NeighborsRequest, ShortestPathRequest, TraverseRequest, WalkDirection};
use crate::service::search::SearchRequest;
use crate::service::timeseries::{MAX_POINTS_LIMIT, PointsRequest};
use crate::service::{Db, ServiceError, VectorSearchRequest};
use datafusion::common::{DataFusionError, Result, plan_err};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// A model's route as a table function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::service::sql) enum Function {
    Search,
    Knn,
    HybridSearch,
    Traverse,
    Neighbors,
    ShortestPaths,
    History,
    Series,
}

/// The type of a function's column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Col {
    /// text, never NULL
    Key,
    Text,
    Float,
    Int,
    Bool,
    Json,
    /// a UTC timestamp (ms)
    Time,
}

impl Function {
    pub(in crate::service::sql) const ALL: [Function; 8] = [
        Function::Search,
        Function::Knn,
        Function::HybridSearch,
        Function::Traverse,
        Function::Neighbors,
        Function::ShortestPaths,
        Function::History,
        Function::Series,
    ];

    pub(in crate::service::sql) fn name(self) -> &'static str {
        match self {
            Function::Search => "search",
            Function::Knn => "knn",
            Function::HybridSearch => "hybrid_search",
            Function::Traverse => "traverse",
            Function::Neighbors => "neighbors",
            Function::ShortestPaths => "shortest_paths",
            Function::History => "history",
            Function::Series => "series",
        }
    }

    /// The positional parameters, and how many of them are required. A first parameter `table`
    /// or `metric` names what the route reads; `options` (JSON text) fills the route's other
    /// fields.
    fn params(self) -> (&'static [&'static str], usize) {
        match self {
            Function::Search => (&["table", "query", "limit", "options"], 2),
            Function::Knn => (&["table", "field", "vector", "k", "options"], 3),
            Function::HybridSearch => (&["table", "query", "field", "vector", "limit", "options"], 4),
            Function::Traverse => (&["start", "direction", "min_depth", "max_depth", "options"], 1),
            Function::Neighbors => (&["vertex", "direction", "options"], 1),
            Function::ShortestPaths => (&["from", "to", "k", "options"], 2),
            Function::History => (&["table", "id", "from", "to", "limit"], 2),
            Function::Series => (&["metric", "from", "to", "match"], 1),
        }
    }

    /// The columns of the relation.
    pub(super) fn columns(self) -> &'static [(&'static str, Col)] {
        match self {
            Function::Search | Function::HybridSearch => {
                &[("_id", Col::Key), ("score", Col::Float), ("doc", Col::Json)]
            }
            Function::Knn => &[("_id", Col::Key), ("distance", Col::Float), ("doc", Col::Json)],
            Function::Traverse => &[
                ("vertex", Col::Key),
                ("_table", Col::Key),
                ("_id", Col::Key),
                ("depth", Col::Int),
                ("doc", Col::Json),
            ],
            Function::Neighbors => &[("vertex", Col::Key), ("edge", Col::Key), ("direction", Col::Key)],
            Function::ShortestPaths => {
                &[("path", Col::Int), ("cost", Col::Float), ("vertices", Col::Json), ("edges", Col::Json)]
            }
            Function::History => {
                &[("at", Col::Time), ("op", Col::Key), ("current", Col::Bool), ("etag", Col::Text), ("doc", Col::Json)]
            }
            Function::Series => &[("entity", Col::Key), ("ts", Col::Time), ("value", Col::Float), ("tags", Col::Json)],
        }
    }

    /// The route's request from the call's arguments (as JSON).
    pub(super) fn request(self, args: Vec<Value>) -> Result<Request> {
        let (names, required) = self.params();
        let name = self.name();
        if args.len() < required || args.len() > names.len() {
            let wanted = names.join(", ");
            return plan_err!("{name}() takes {required} to {} arguments ({wanted}), not {}", names.len(), args.len());
        }
        let mut fields = Map::new();
        let mut target = String::new();
        for (param, value) in names.iter().zip(args) {
            match (*param, value) {
                ("table" | "metric", Value::String(t)) => target = t,
                ("table" | "metric", other) => return plan_err!("{name}(): `{param}` is text, not {other}"),
                (_, Value::Null) => {}
                ("options", Value::String(text)) => match serde_json::from_str(&text) {
                    Ok(Value::Object(options)) => {
                        for (key, v) in options {
                            if fields.contains_key(&key) || names.contains(&key.as_str()) {
                                return plan_err!("{name}(): `{key}` is an argument of its own, not an option");
                            }
                            fields.insert(key, v);
                        }
                    }
                    _ => return plan_err!("{name}(): `options` is a JSON object as text, e.g. '{{\"filter\": {{}}}}'"),
                },
                ("options", other) => return plan_err!("{name}(): `options` is JSON text, not {other}"),
                ("vector", Value::String(text)) => match serde_json::from_str::<Value>(&text) {
                    Ok(v @ Value::Array(_)) => drop(fields.insert("vector".into(), v)),
                    _ => return plan_err!("{name}(): `vector` is a JSON array of numbers, e.g. '[0.1, 0.2]'"),
                },
                // times: RFC 3339 text, or ms since the epoch (a number or a timestamp)
                ("from" | "to", Value::Number(n)) if self != Function::ShortestPaths => {
                    drop(fields.insert((*param).into(), json!(n.to_string())))
                }
                (param, value) => drop(fields.insert(param.to_owned(), value)),
            }
        }
        let bad = |e: serde_json::Error| DataFusionError::Plan(format!("{name}(): {e}"));
        Ok(match self {
            Function::Search => Request::Search(target, from(fields).map_err(bad)?),
            Function::Knn => Request::Knn(target, from(fields).map_err(bad)?),
            Function::HybridSearch => {
                let vector = json!({"field": fields.remove("field"), "vector": fields.remove("vector")});
                fields.insert("vector".into(), vector);
                Request::Hybrid(target, from(fields).map_err(bad)?)
            }
            Function::Traverse => {
                fields.entry("fields").or_insert_with(|| json!(["*"]));
                Request::Traverse(from(fields).map_err(bad)?)
            }
            Function::Neighbors => {
                let a: NeighborsArgs = from(fields).map_err(bad)?;
                let limit = a.limit.unwrap_or(100);
                Request::Neighbors(NeighborsRequest {
                    vertex: a.vertex,
                    direction: a.direction,
                    edges: a.edges,
                    limit,
                    cursor: None,
                })
            }
            Function::ShortestPaths => Request::Paths(from(fields).map_err(bad)?),
            Function::History => Request::History(target, from(fields).map_err(bad)?),
            Function::Series => {
                let a: SeriesArgs = from(fields).map_err(bad)?;
                let req = PointsRequest {
                    selector: a.selector,
                    from: a.from,
                    to: a.to,
                    limit: Some(MAX_POINTS_LIMIT),
                    ..PointsRequest::default()
                };
                Request::Series(target, req)
            }
        })
    }
}

fn from<T: serde::de::DeserializeOwned>(fields: Map<String, Value>) -> serde_json::Result<T> {
    serde_json::from_value(Value::Object(fields))
}

/// `neighbors(vertex [, direction [, options]])`: the query parameters of `GET /v1/graph/neighbors`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NeighborsArgs {
    vertex: String,
    #[serde(default)]
    direction: WalkDirection,
    edges: Option<Vec<String>>,
    limit: Option<usize>,
}

/// `history(table, id [, from [, to [, limit]]])`: those of `GET …/documents/{id}/history`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HistoryArgs {
    id: String,
    from: Option<String>,
    to: Option<String>,
    limit: Option<usize>,
}

/// `series(metric [, from [, to [, match]]])`: those of `GET /v1/timeseries/{metric}/points`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SeriesArgs {
    from: Option<String>,
    to: Option<String>,
    #[serde(rename = "match")]
    selector: Option<String>,
}

/// A call, as its route's request.
#[derive(Debug, Clone)]
pub(super) enum Request {
    Search(String, SearchRequest),
    Knn(String, VectorSearchRequest),
    Hybrid(String, SearchRequest),
    Traverse(TraverseRequest),
    Neighbors(NeighborsRequest),
    Paths(ShortestPathRequest),
    History(String, HistoryArgs),
    Series(String, PointsRequest),
}

impl Request {
    /// Runs the route: its rows, each an object keyed by the function's columns.
    pub(super) async fn run(self, db: &Db) -> crate::service::Result<Vec<Value>> {
        let parse = |bytes: Vec<u8>| {
            serde_json::from_slice::<Value>(&bytes).map_err(|e| ServiceError::Internal(format!("a search answer: {e}")))
        };
        let list = |mut answer: Value, key: &str| match answer.get_mut(key).map(Value::take) {
            Some(Value::Array(rows)) => rows,
            _ => Vec::new(),
        };
        let hits = |answer: Value, key: &str| -> Vec<Value> {
            let rows = list(answer, "hits");
            rows.into_iter().map(|h| json!({"_id": h["_id"], key: h[key], "doc": h["document"]})).collect()
        };
        Ok(match self {
            Request::Search(table, req) => hits(parse(db.search.search(table, req).await?)?, "score"),
            Request::Hybrid(table, req) => hits(parse(db.vectors.hybrid_search(table, req).await?)?, "score"),
            Request::Knn(table, req) => hits(json!(db.vectors.vector_search(table, req).await?), "distance"),
            Request::Traverse(req) => list(json!(db.graph.traverse(req).await?), "vertices")
                .into_iter()
                .map(|v| {
                    let vertex = v["_id"].as_str().unwrap_or_default();
                    let (table, id) = vertex.split_once('/').unwrap_or(("", vertex));
                    json!({"vertex": vertex, "_table": table, "_id": id, "depth": v["depth"], "doc": v["document"]})
                })
                .collect(),
            Request::Neighbors(req) => list(json!(db.graph.neighbors(req).await?), "neighbors"),
            Request::Paths(req) => list(json!(db.graph.shortest_path(req).await?), "paths")
                .into_iter()
                .enumerate()
                .map(|(i, p)| json!({"path": i + 1, "cost": p["cost"], "vertices": p["vertices"], "edges": p["edges"]}))
                .collect(),
            Request::History(table, a) => {
                let time = |name, t: Option<String>, none| match t {
                    Some(t) => crate::service::history::parse_time(name, &t),
                    None => Ok(none),
                };
                let span = (time("from", a.from, i64::MIN)?, time("to", a.to, i64::MAX)?);
                let page = db.history.history(table, a.id, span, a.limit.unwrap_or(100), None).await?;
                list(json!(page), "versions")
                    .into_iter()
                    .map(|v| {
                        let at = v["at_us"].as_i64().map(|us| us.div_euclid(1000));
                        json!({"at": at, "op": v["op"], "current": v["current"], "etag": v["etag"], "doc": v["document"]})
                    })
                    .collect()
            }
            Request::Series(metric, req) => {
                let page = db.timeseries.read_points(metric, req).await?;
                if page.cursor.is_some() {
                    return Err(ServiceError::InvalidRequest(format!(
                        "series() reads at most {MAX_POINTS_LIMIT} points: narrow `from`/`to` or `match`"
                    )));
                }
                list(json!(page), "points")
            }
        })
    }
}
