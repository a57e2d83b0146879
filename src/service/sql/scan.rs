//! The scan of one table: an `ExecutionPlan` leaf that runs the query planner's stream
//! ([`Query::query_stream`](crate::service::query::Query::query_stream)) with the pushed filter
//! and projection, on the blocking pool, turning the documents into Arrow record batches as they
//! come. Batches go through a channel of two, so a scan holds a couple of batches at most: a
//! consumer that stops (LIMIT met, an error, a timeout, a client gone) stops the scan at its next
//! document.

use super::shape::ColumnKind;
use super::statement::{Statement, TableRef};
use crate::catalog::ColumnType;
use crate::service::QueryRequest;
use crate::service::query::PlanSummary;
use datafusion::arrow::array::{
    ArrayRef, BooleanBuilder, Float64Builder, Int64Builder, StringBuilder, TimestampMillisecondBuilder,
};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchReceiverStreamBuilder;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, EmptyRecordBatchStream, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use serde_json::Value;
use std::io::{self, Write};
use std::sync::Arc;
use tokio::sync::mpsc::Sender;

/// Rows of one batch at most.
const BATCH_ROWS: usize = 4096;
/// Bytes of documents one batch holds before it is sent, whatever its rows.
const BATCH_BYTES: usize = 4 << 20;

/// What a scan reads: the table, the columns, the pushed filter and limit.
#[derive(Debug, Clone)]
pub(super) struct ScanSpec {
    pub(super) table: TableRef,
    /// the projected columns, in the order of the scan's schema
    pub(super) kinds: Vec<ColumnKind>,
    /// the pushed conditions, in the filter language of `POST …/query`
    pub(super) filter: Option<Value>,
    /// rows enough for the statement (only when every filter was pushed exactly)
    pub(super) limit: Option<usize>,
    /// the planner's choice (for EXPLAIN)
    pub(super) plan: Option<PlanSummary>,
    /// the table as it was then (`as_of(table, time)`): the time as `POST …/query` takes it
    pub(super) as_of: Option<String>,
}

/// The scan's plan node.
#[derive(Debug)]
pub(super) struct ScanExec {
    spec: ScanSpec,
    schema: SchemaRef,
    statement: Arc<Statement>,
    properties: Arc<PlanProperties>,
}

impl ScanExec {
    pub(super) fn new(spec: ScanSpec, schema: SchemaRef, statement: Arc<Statement>) -> ScanExec {
        let properties = PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        ScanExec { spec, schema, statement, properties: Arc::new(properties) }
    }

    /// The fields the query returns: none but `_id` when only ids (or nothing) are needed, the
    /// projected columns of a typed table, every field when the document or an edge's ends are.
    fn fields(&self) -> Option<Vec<String>> {
        let mut fields = Vec::new();
        for kind in &self.spec.kinds {
            match kind {
                ColumnKind::Id => {}
                ColumnKind::Typed(name, _) => fields.push(name.clone()),
                ColumnKind::End(_) | ColumnKind::Doc => return None,
            }
        }
        Some(fields)
    }
}

impl DisplayAs for ScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "MosaicScan: table={}", self.spec.table.name)?;
        if let Some(at) = &self.spec.as_of {
            write!(f, ", as_of={at}, strategy=as_of_scan")?;
        }
        match &self.spec.filter {
            Some(filter) => write!(f, ", filter={filter}")?,
            None => write!(f, ", filter=none")?,
        }
        if let Some(plan) = &self.spec.plan {
            write!(f, ", strategy={}", plan.strategy)?;
            for scan in &plan.scans {
                write!(f, ", index={} ({})", scan.index, scan.condition)?;
            }
            if let Some(rows) = plan.estimated_rows {
                write!(f, ", estimated_rows={rows}")?;
            }
        }
        match self.fields() {
            Some(fields) => write!(f, ", fields=[_id{}]", fields.iter().map(|c| format!(", {c}")).collect::<String>())?,
            None => write!(f, ", fields=all")?,
        }
        if let Some(limit) = self.spec.limit {
            write!(f, ", limit={limit}")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for ScanExec {
    fn name(&self) -> &str {
        "MosaicScan"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(self: Arc<Self>, _children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(&self, _partition: usize, _context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        if self.spec.limit == Some(0) {
            return Ok(Box::pin(EmptyRecordBatchStream::new(self.schema.clone())));
        }
        let mut builder = RecordBatchReceiverStreamBuilder::new(self.schema.clone(), 2);
        let tx = builder.tx();
        let spec = self.spec.clone();
        let schema = self.schema.clone();
        let statement = self.statement.clone();
        let req = QueryRequest {
            filter: spec.filter.clone(),
            fields: self.fields(),
            as_of: spec.as_of.clone(),
            ..QueryRequest::default()
        };
        builder.spawn(async move {
            let query = spec.table.db.query.clone();
            let mut stream =
                query.query_stream(spec.table.name.clone(), req).await.map_err(|e| statement.service_error(e))?;
            // dropped with this task (the consumer went away): the stream stops at its next look
            let _abandon = stream.abandon_guard();
            let mut writer = BatchWriter::new(schema, spec.kinds, tx, spec.limit);
            let (result, writer) = tokio::task::spawn_blocking(move || {
                let result = stream.write_to(&mut writer);
                (result, writer)
            })
            .await
            .map_err(|e| DataFusionError::Execution(format!("the scan stopped: {e}")))?;
            match (result, writer.ended) {
                (Ok(_), _) | (Err(_), true) => Ok(()),
                (Err(e), false) => Err(match e.into_inner() {
                    Some(inner) => match inner.downcast::<crate::service::ServiceError>() {
                        Ok(service) => statement.service_error(*service),
                        Err(other) => DataFusionError::Execution(other.to_string()),
                    },
                    None => DataFusionError::Execution("the scan failed".into()),
                }),
            }
        });
        Ok(builder.build())
    }
}

/// One column being built.
enum Builder {
    Text(StringBuilder),
    Int(Int64Builder),
    Float(Float64Builder),
    Bool(BooleanBuilder),
    Time(TimestampMillisecondBuilder),
}

impl Builder {
    fn of(kind: &ColumnKind) -> Builder {
        match kind {
            ColumnKind::Typed(_, ColumnType::Int) => Builder::Int(Int64Builder::new()),
            ColumnKind::Typed(_, ColumnType::Float) => Builder::Float(Float64Builder::new()),
            ColumnKind::Typed(_, ColumnType::Bool) => Builder::Bool(BooleanBuilder::new()),
            ColumnKind::Typed(_, ColumnType::Timestamp) => {
                Builder::Time(TimestampMillisecondBuilder::new().with_timezone("UTC"))
            }
            _ => Builder::Text(StringBuilder::new()),
        }
    }

    /// Appends a document's value; a value the column's type cannot hold (a document older than
    /// the column's declaration) is NULL.
    fn push(&mut self, value: Option<&Value>) {
        match self {
            Builder::Text(b) => match value {
                None | Some(Value::Null) => b.append_null(),
                Some(Value::String(s)) => b.append_value(s),
                Some(other) => b.append_value(other.to_string()),
            },
            Builder::Int(b) => b.append_option(value.and_then(Value::as_i64)),
            Builder::Float(b) => b.append_option(value.and_then(Value::as_f64)),
            Builder::Bool(b) => b.append_option(value.and_then(Value::as_bool)),
            Builder::Time(b) => b.append_option(value.and_then(Value::as_i64)),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::Text(b) => Arc::new(b.finish()),
            Builder::Int(b) => Arc::new(b.finish()),
            Builder::Float(b) => Arc::new(b.finish()),
            Builder::Bool(b) => Arc::new(b.finish()),
            Builder::Time(b) => Arc::new(b.finish()),
        }
    }
}

/// Takes the query stream's NDJSON (one document per line) and sends record batches.
struct BatchWriter {
    schema: SchemaRef,
    kinds: Vec<ColumnKind>,
    builders: Vec<Builder>,
    tx: Sender<Result<RecordBatch>>,
    /// the line being received
    line: Vec<u8>,
    rows: usize,
    bytes: usize,
    /// rows still wanted (with a pushed limit)
    wanted: Option<usize>,
    /// true once the scan ended on purpose: the limit met, or nobody reads the batches any more
    ended: bool,
}

impl BatchWriter {
    fn new(schema: SchemaRef, kinds: Vec<ColumnKind>, tx: Sender<Result<RecordBatch>>, limit: Option<usize>) -> Self {
        let builders = kinds.iter().map(Builder::of).collect();
        BatchWriter { schema, kinds, builders, tx, line: Vec::new(), rows: 0, bytes: 0, wanted: limit, ended: false }
    }

    fn stop(&mut self, why: &str) -> io::Error {
        self.ended = true;
        io::Error::new(io::ErrorKind::BrokenPipe, why.to_owned())
    }

    /// One document: its columns appended.
    fn row(&mut self) -> io::Result<()> {
        let line = std::mem::take(&mut self.line);
        let doc: Value = serde_json::from_slice(&line).map_err(io::Error::other)?;
        for (kind, builder) in self.kinds.iter().zip(&mut self.builders) {
            match kind {
                ColumnKind::Id => builder.push(doc.get("_id")),
                ColumnKind::End(name) => builder.push(doc.get(*name)),
                ColumnKind::Typed(name, ColumnType::Json | ColumnType::Vector(_)) => match doc.get(name) {
                    None | Some(Value::Null) => builder.push(None),
                    Some(v) => builder.push(Some(&Value::String(v.to_string()))),
                },
                ColumnKind::Typed(name, _) => builder.push(doc.get(name)),
                ColumnKind::Doc => match (builder, std::str::from_utf8(&line)) {
                    (Builder::Text(b), Ok(text)) => b.append_value(text),
                    (b, _) => b.push(None),
                },
            }
        }
        self.rows += 1;
        self.bytes += line.len();
        self.line = line;
        self.line.clear();
        if self.rows >= BATCH_ROWS || self.bytes >= BATCH_BYTES {
            self.send()?;
        }
        if let Some(wanted) = &mut self.wanted {
            *wanted -= 1;
            if *wanted == 0 {
                self.send()?;
                return Err(self.stop("the limit is met"));
            }
        }
        Ok(())
    }

    /// Sends the rows built so far as one batch, waiting while the consumer is behind.
    fn send(&mut self) -> io::Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let columns: Vec<ArrayRef> = self.builders.iter_mut().map(Builder::finish).collect();
        let options = RecordBatchOptions::new().with_row_count(Some(self.rows));
        let batch =
            RecordBatch::try_new_with_options(self.schema.clone(), columns, &options).map_err(io::Error::other)?;
        (self.rows, self.bytes) = (0, 0);
        if self.tx.blocking_send(Ok(batch)).is_err() {
            return Err(self.stop("nobody reads the scan any more"));
        }
        Ok(())
    }
}

impl Write for BatchWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.ended {
            return Err(self.stop("the scan has ended"));
        }
        let mut rest = bytes;
        while let Some(at) = rest.iter().position(|b| *b == b'\n') {
            self.line.extend_from_slice(&rest[..at]);
            self.row()?;
            rest = &rest[at + 1..];
        }
        self.line.extend_from_slice(rest);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.ended { Ok(()) } else { self.send() }
    }
}
