//! The models' routes as table functions, so that one statement joins them with tables:
//!
//! | function | its route | columns |
//! |---|---|---|
//! | `search(table, query [, limit [, options]])` | `POST …/search` | `_id`, `score`, `doc` |
//! | `knn(table, field, vector [, k [, options]])` | `POST …/vector-search` | `_id`, `distance`, `doc` |
//! | `hybrid_search(table, query, field, vector [, limit [, options]])` | `POST …/search` with `vector` | `_id`, `score`, `doc` |
//! | `traverse(start [, direction [, min_depth [, max_depth [, options]]]])` | `POST /v1/graph/traverse` | `vertex`, `_table`, `_id`, `depth`, `doc` |
//!
//! Each call becomes the route's own request (positional arguments fill its fields; `options`,
//! JSON text, fills the others: `filter`, `edges`, `vertex_filter`, `ef`, `exact` …), checked by
//! the route's own type, so the caps, the validation and the answer are the route's: a kNN with a
//! filter returns k rows whenever k documents match, as the route does. Arguments are constants
//! (or `$n` parameters, or expressions of them); a vector is a JSON array as text (`'[0.1, 0.2]'`)
//! or an SQL array. The route runs when the statement's plan is built, and its answer (at most
//! the route's page, 1000 or 10,000 rows) is the relation's rows.

use super::shape::json_field;
use super::statement::Statement;
use crate::service::graph::TraverseRequest;
use crate::service::search::SearchRequest;
use crate::service::{Db, ServiceError, VectorSearchRequest};
use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, AsArray, Float64Builder, Int64Builder, RecordBatch, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Float64Type, Schema, SchemaRef};
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DataFusionError, Result, ScalarValue, plan_err};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::{Expr, TableType};
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::physical_plan::ExecutionPlan;
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// A model's route as a table function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Function {
    Search,
    Knn,
    HybridSearch,
    Traverse,
}

impl Function {
    pub(super) const ALL: [Function; 4] = [Function::Search, Function::Knn, Function::HybridSearch, Function::Traverse];

    pub(super) fn name(self) -> &'static str {
        match self {
            Function::Search => "search",
            Function::Knn => "knn",
            Function::HybridSearch => "hybrid_search",
            Function::Traverse => "traverse",
        }
    }

    /// The positional parameters, and how many of them are required.
    fn params(self) -> (&'static [&'static str], usize) {
        match self {
            Function::Search => (&["table", "query", "limit", "options"], 2),
            Function::Knn => (&["table", "field", "vector", "k", "options"], 3),
            Function::HybridSearch => (&["table", "query", "field", "vector", "limit", "options"], 4),
            Function::Traverse => (&["start", "direction", "min_depth", "max_depth", "options"], 1),
        }
    }

    fn schema(self) -> SchemaRef {
        let text = |name: &str, nullable| Field::new(name, DataType::Utf8, nullable);
        let float = |name: &str| Field::new(name, DataType::Float64, true);
        let fields = match self {
            Function::Search | Function::HybridSearch => {
                vec![text("_id", false), float("score"), json_field("doc", true)]
            }
            Function::Knn => vec![text("_id", false), float("distance"), json_field("doc", true)],
            Function::Traverse => vec![
                text("vertex", false),
                text("_table", false),
                text("_id", false),
                Field::new("depth", DataType::Int64, false),
                json_field("doc", true),
            ],
        };
        Arc::new(Schema::new(fields))
    }

    /// The route's request from the call's arguments.
    fn request(self, args: Vec<Value>) -> Result<Request> {
        let (names, required) = self.params();
        let name = self.name();
        if args.len() < required || args.len() > names.len() {
            let wanted = names.join(", ");
            return plan_err!("{name}() takes {required} to {} arguments ({wanted}), not {}", names.len(), args.len());
        }
        let mut fields = Map::new();
        let mut table = None;
        for (param, value) in names.iter().zip(args) {
            match (*param, value) {
                ("table", Value::String(t)) => table = Some(t),
                ("table", other) => return plan_err!("{name}(): `table` is text, not {other}"),
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
                (param, value) => drop(fields.insert(param.to_owned(), value)),
            }
        }
        let bad = |e: serde_json::Error| DataFusionError::Plan(format!("{name}(): {e}"));
        Ok(match self {
            Function::Search => Request::Search(table.unwrap_or_default(), from(fields).map_err(bad)?),
            Function::Knn => Request::Knn(table.unwrap_or_default(), from(fields).map_err(bad)?),
            Function::HybridSearch => {
                let vector = json!({"field": fields.remove("field"), "vector": fields.remove("vector")});
                fields.insert("vector".into(), vector);
                Request::Hybrid(table.unwrap_or_default(), from(fields).map_err(bad)?)
            }
            Function::Traverse => {
                fields.entry("fields").or_insert_with(|| json!(["*"]));
                Request::Traverse(from(fields).map_err(bad)?)
            }
        })
    }
}

fn from<T: serde::de::DeserializeOwned>(fields: Map<String, Value>) -> serde_json::Result<T> {
    serde_json::from_value(Value::Object(fields))
}

/// A call, as its route's request.
#[derive(Debug, Clone)]
enum Request {
    Search(String, SearchRequest),
    Knn(String, VectorSearchRequest),
    Hybrid(String, SearchRequest),
    Traverse(TraverseRequest),
}

impl Request {
    /// Runs the route: its rows, as the objects of its answer.
    async fn run(self, db: &Db) -> crate::service::Result<Vec<Value>> {
        let parse = |bytes: Vec<u8>| {
            serde_json::from_slice::<Value>(&bytes).map_err(|e| ServiceError::Internal(format!("a search answer: {e}")))
        };
        let answer = match self {
            Request::Search(table, req) => parse(db.search.search(table, req).await?)?,
            Request::Hybrid(table, req) => parse(db.vectors.hybrid_search(table, req).await?)?,
            Request::Knn(table, req) => json!(db.vectors.vector_search(table, req).await?),
            Request::Traverse(req) => json!(db.graph.traverse(req).await?),
        };
        let list = if answer.get("vertices").is_some() { "vertices" } else { "hits" };
        match answer {
            Value::Object(mut answer) => match answer.remove(list) {
                Some(Value::Array(rows)) => Ok(rows),
                _ => Ok(Vec::new()),
            },
            _ => Ok(Vec::new()),
        }
    }
}

/// A table function of the models, for one statement.
pub(super) struct ModelFunction {
    pub(super) function: Function,
    pub(super) db: Arc<Db>,
    pub(super) statement: Arc<Statement>,
}

impl std::fmt::Debug for ModelFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}()", self.function.name())
    }
}

impl TableFunctionImpl for ModelFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let name = self.function.name();
        let values = args
            .exprs()
            .iter()
            .map(|e| json_of(&constant(e, &self.statement.params, name)?, name))
            .collect::<Result<Vec<_>>>()?;
        let request = self.function.request(values)?;
        Ok(Arc::new(Called {
            function: self.function,
            request,
            db: self.db.clone(),
            statement: self.statement.clone(),
            schema: self.function.schema(),
        }))
    }
}

/// An argument's value: a constant, a parameter, or an expression of them.
fn constant(expr: &Expr, params: &[ScalarValue], name: &str) -> Result<ScalarValue> {
    let bound = expr
        .clone()
        .transform(|e| match e {
            Expr::Placeholder(p) => {
                let n = p.id.trim_start_matches('$').parse::<usize>().ok().filter(|n| (1..=params.len()).contains(n));
                match n {
                    Some(n) => Ok(Transformed::yes(Expr::Literal(params[n - 1].clone(), None))),
                    None => plan_err!("{name}(): no value for the parameter {}", p.id),
                }
            }
            other => Ok(Transformed::no(other)),
        })?
        .data;
    match ExprSimplifier::new(SimplifyContext::default()).simplify(bound)? {
        Expr::Literal(value, _) => Ok(value),
        other => plan_err!("{name}(): an argument is a constant or a parameter, not {other}"),
    }
}

/// A constant as JSON: text, numbers, booleans, NULL, and lists of numbers (vectors).
fn json_of(value: &ScalarValue, name: &str) -> Result<Value> {
    if value.is_null() {
        return Ok(Value::Null);
    }
    let number = |v: &ScalarValue, to: &DataType| v.cast_to(to);
    Ok(match value {
        ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) | ScalarValue::Utf8View(Some(s)) => json!(s),
        ScalarValue::Boolean(Some(b)) => json!(b),
        v if v.data_type().is_integer() => match number(v, &DataType::Int64)? {
            ScalarValue::Int64(Some(i)) => json!(i),
            _ => Value::Null,
        },
        v if v.data_type().is_numeric() => match number(v, &DataType::Float64)? {
            ScalarValue::Float64(Some(f)) => json!(f),
            _ => Value::Null,
        },
        ScalarValue::List(_) | ScalarValue::LargeList(_) | ScalarValue::FixedSizeList(_) => {
            let list = value.to_array()?;
            let values: ArrayRef = match list.data_type() {
                DataType::List(_) => list.as_list::<i32>().value(0),
                DataType::LargeList(_) => list.as_list::<i64>().value(0),
                _ => list.as_fixed_size_list().value(0),
            };
            let floats = cast(&values, &DataType::Float64)?;
            Value::Array(floats.as_primitive::<Float64Type>().iter().map(|f| json!(f)).collect())
        }
        other => return plan_err!("{name}(): an argument of type {} is not taken", other.data_type()),
    })
}

/// One call's relation: the route runs when the scan is planned.
struct Called {
    function: Function,
    request: Request,
    db: Arc<Db>,
    statement: Arc<Statement>,
    schema: SchemaRef,
}

impl std::fmt::Debug for Called {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Called").field("request", &self.request).finish_non_exhaustive()
    }
}

#[async_trait]
impl TableProvider for Called {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let rows = self.request.clone().run(&self.db).await.map_err(|e| self.statement.service_error(e))?;
        let batch = batch(self.function, &self.schema, &rows)?;
        Ok(MemorySourceConfig::try_new_exec(&[vec![batch]], self.schema.clone(), projection.cloned())?)
    }
}

/// The route's rows as a record batch of the function's columns.
fn batch(function: Function, schema: &SchemaRef, rows: &[Value]) -> Result<RecordBatch> {
    let cell = |row: &Value, column: &str| -> Value {
        let key = match (function, column) {
            (_, "doc") => "document",
            (Function::Traverse, "vertex" | "_table" | "_id") => "_id",
            (_, other) => other,
        };
        let value = row.get(key).cloned().unwrap_or(Value::Null);
        match (function, column, &value) {
            (Function::Traverse, "_table", Value::String(v)) => json!(v.split_once('/').map_or("", |(t, _)| t)),
            (Function::Traverse, "_id", Value::String(v)) => json!(v.split_once('/').map_or(v.as_str(), |(_, id)| id)),
            _ => value,
        }
    };
    let columns = schema
        .fields()
        .iter()
        .map(|field| -> ArrayRef {
            let values = rows.iter().map(|row| cell(row, field.name()));
            match field.data_type() {
                DataType::Float64 => {
                    let mut b = Float64Builder::with_capacity(rows.len());
                    values.for_each(|v| b.append_option(v.as_f64()));
                    Arc::new(b.finish())
                }
                DataType::Int64 => {
                    let mut b = Int64Builder::with_capacity(rows.len());
                    values.for_each(|v| b.append_option(v.as_i64()));
                    Arc::new(b.finish())
                }
                _ if field.metadata().contains_key("ARROW:extension:name") => {
                    let mut b = StringBuilder::new();
                    values.for_each(|v| if v.is_null() { b.append_null() } else { b.append_value(v.to_string()) });
                    Arc::new(b.finish())
                }
                _ => {
                    let mut b = StringBuilder::new();
                    values.for_each(|v| match v {
                        Value::String(s) => b.append_value(s),
                        Value::Null => b.append_value(""),
                        other => b.append_value(other.to_string()),
                    });
                    Arc::new(b.finish())
                }
            }
        })
        .collect();
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}
