//! The models' routes as table functions, so that one statement joins them with tables:
//!
//! | function | its route | columns |
//! |---|---|---|
//! | `search(table, query [, limit [, options]])` | `POST …/search` | `_id`, `score`, `doc` |
//! | `knn(table, field, vector [, k [, options]])` | `POST …/vector-search` | `_id`, `distance`, `doc` |
//! | `hybrid_search(table, query, field, vector [, limit [, options]])` | `POST …/search` with `vector` | `_id`, `score`, `doc` |
//! | `traverse(start [, direction [, min_depth [, max_depth [, options]]]])` | `POST /v1/graph/traverse` | `vertex`, `_table`, `_id`, `depth`, `doc` |
//! | `neighbors(vertex [, direction [, options]])` | `GET /v1/graph/neighbors` | `vertex`, `edge`, `direction` |
//! | `shortest_paths(from, to [, k [, options]])` | `POST /v1/graph/shortest-path` | `path`, `cost`, `vertices`, `edges` |
//! | `history(table, id [, from [, to [, limit]]])` | `GET …/documents/{id}/history` | `at`, `op`, `current`, `etag`, `doc` |
//! | `series(metric [, from [, to [, match]]])` | `GET /v1/timeseries/{metric}/points` | `entity`, `ts`, `value`, `tags` |
//! | `as_of(table, time)` | `POST …/query` with `as_of` | the table's own columns, as they were then |
//!
//! Each call becomes the route's own request (`calls.rs`: positional arguments fill its fields;
//! `options`, JSON text, fills the others: `filter`, `edges`, `vertex_filter`, `ef`, `exact` …),
//! checked by the route's own type, so the caps, the validation and the answer are the route's: a
//! kNN with a filter returns k rows whenever k documents match, as the route does. Arguments are
//! constants (or `$n` parameters, or expressions of them); a vector is a JSON array as text
//! (`'[0.1, 0.2]'`) or an SQL array. The route runs when the statement's plan is built, and its
//! answer (at most the route's page) is the relation's rows; `as_of` is a scan like a table's.

mod calls;

pub(super) use calls::Function;

use super::catalog::DbTable;
use super::shape::json_field;
use super::statement::Statement;
use crate::service::Db;
use async_trait::async_trait;
use calls::{Col, Request};
use datafusion::arrow::array::{
    ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array, RecordBatch, StringBuilder, TimestampMillisecondBuilder,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Float64Type, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Result, ScalarValue, plan_err};
use datafusion::datasource::empty::EmptyTable;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::{Expr, TableType};
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::physical_plan::ExecutionPlan;
use serde_json::{Value, json};
use std::sync::Arc;

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
        if self.statement.describe {
            return Ok(Arc::new(EmptyTable::new(schema(self.function))));
        }
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
            schema: schema(self.function),
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
        v if matches!(v.data_type(), DataType::Timestamp(..) | DataType::Date32 | DataType::Date64) => {
            match v.cast_to(&DataType::Timestamp(TimeUnit::Millisecond, None))? {
                ScalarValue::TimestampMillisecond(Some(ms), _) => json!(ms),
                _ => Value::Null,
            }
        }
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

/// The relation's schema.
fn schema(function: Function) -> SchemaRef {
    let fields: Vec<Field> = function
        .columns()
        .iter()
        .map(|&(name, col)| match col {
            Col::Key => Field::new(name, DataType::Utf8, false),
            Col::Text => Field::new(name, DataType::Utf8, true),
            Col::Float => Field::new(name, DataType::Float64, true),
            Col::Int => Field::new(name, DataType::Int64, true),
            Col::Bool => Field::new(name, DataType::Boolean, true),
            Col::Json => json_field(name, true),
            Col::Time => Field::new(name, DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())), true),
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// The route's rows (objects keyed by the columns) as a record batch.
fn batch(function: Function, schema: &SchemaRef, rows: &[Value]) -> Result<RecordBatch> {
    let columns = function
        .columns()
        .iter()
        .map(|&(name, col)| -> ArrayRef {
            let values = rows.iter().map(|row| row.get(name).unwrap_or(&Value::Null));
            match col {
                Col::Float => Arc::new(values.map(Value::as_f64).collect::<Float64Array>()),
                Col::Int => Arc::new(values.map(Value::as_i64).collect::<Int64Array>()),
                Col::Bool => Arc::new(values.map(Value::as_bool).collect::<BooleanArray>()),
                Col::Time => {
                    let mut b = TimestampMillisecondBuilder::with_capacity(rows.len()).with_timezone("UTC");
                    values.for_each(|v| b.append_option(v.as_i64()));
                    Arc::new(b.finish())
                }
                Col::Json => {
                    let mut b = StringBuilder::new();
                    values.for_each(|v| if v.is_null() { b.append_null() } else { b.append_value(v.to_string()) });
                    Arc::new(b.finish())
                }
                Col::Key | Col::Text => {
                    let mut b = StringBuilder::new();
                    values.for_each(|v| match v {
                        Value::String(s) => b.append_value(s),
                        Value::Null if col == Col::Key => b.append_value(""),
                        Value::Null => b.append_null(),
                        other => b.append_value(other.to_string()),
                    });
                    Arc::new(b.finish())
                }
            }
        })
        .collect();
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// `as_of(table, time)`: the table as it was at `time` (RFC 3339 text, ms since the epoch, or a
/// timestamp), scanned as the table is, through `POST …/query` with `as_of`.
pub(super) struct AsOf {
    pub(super) db: Arc<Db>,
    pub(super) statement: Arc<Statement>,
}

impl std::fmt::Debug for AsOf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("as_of()")
    }
}

impl TableFunctionImpl for AsOf {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let values = args
            .exprs()
            .iter()
            .map(|e| json_of(&constant(e, &self.statement.params, "as_of")?, "as_of"))
            .collect::<Result<Vec<_>>>()?;
        let (table, time) = match values.as_slice() {
            [Value::String(table), Value::String(time)] => (table.clone(), time.clone()),
            [Value::String(table), Value::Number(ms)] => (table.clone(), ms.to_string()),
            _ => {
                return plan_err!(
                    "as_of() takes a table and a time (RFC 3339 text, ms since the epoch, or a timestamp)"
                );
            }
        };
        let catalog = &self.db.core.catalog;
        let Some(def) = catalog.table(&table).filter(|_| !catalog.is_dropping(&table)) else {
            return plan_err!("as_of(): table '{table}' not found");
        };
        Ok(Arc::new(DbTable::new(self.db.clone(), &def, self.statement.clone(), Some(time))))
    }
}
