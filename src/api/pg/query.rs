//! Queries over the wire: the simple protocol (a string of statements) and the extended one
//! (Parse, Bind, Describe, Execute). Every statement runs on the SQL engine as `POST /v1/sql`
//! does, its rows written in the wire's formats by the engine and streamed as they come: an
//! Execute with `max_rows` suspends the portal after so many rows and the next Execute goes on
//! where it stopped, and nothing is gathered whole in memory.

use super::commands::{self, Command};
use super::encode::{PgRows, pg_type};
use super::params;
use super::state::{PgState, Session};
use crate::api::admission::HeavyClass;
use crate::service::sql::{Piece, Query, SqlAnswer, SqlError};
use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::ScalarValue;
use futures_util::{Sink, SinkExt, StreamExt};
use pgwire::api::portal::{Format, Portal, PortalExecutionState};
use pgwire::api::query::{
    ExtendedQueryHandler, SimpleQueryHandler, send_execution_response, send_query_response, send_ready_for_query,
};
use pgwire::api::results::{DataRowEncoder, FieldFormat, FieldInfo, QueryResponse, Response, Tag};
use pgwire::api::stmt::QueryParser;
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::{ClientInfo, ClientPortalStore, DEFAULT_NAME, PgWireConnectionState, Type};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::data::DataRow;
use pgwire::messages::extendedquery::{Execute, PortalSuspended};
use pgwire::messages::response::EmptyQueryResponse;
use pgwire::messages::simplequery::Query as SimpleQuery;
use std::fmt::Debug;
use std::ops::DerefMut;
use std::sync::Arc;

/// A statement the extended protocol parsed: what it is, and (for SQL) its parameters' types
/// and its columns as the planner found them.
#[derive(Debug)]
pub(super) struct Prepared {
    command: Command,
    params: Vec<Option<DataType>>,
    fields: Vec<FieldRef>,
}

/// Runs the queries of every connection.
pub(super) struct Queries {
    state: Arc<PgState>,
    parser: Arc<Parser>,
}

impl Queries {
    pub(super) fn new(state: Arc<PgState>) -> Queries {
        Queries { parser: Arc::new(Parser { state: state.clone() }), state }
    }
}

fn error(code: &str, message: impl Into<String>) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new("ERROR".to_owned(), code.to_owned(), message.into())))
}

/// The SQLSTATE of a statement's failure.
fn sql_error(e: SqlError) -> PgWireError {
    let text = e.to_string();
    let code = match &e {
        SqlError::Invalid(m) if m.contains("table") && m.contains("not found") => "42P01",
        SqlError::Invalid(m) if m.contains("No field named") || m.contains("column") => "42703",
        SqlError::Invalid(m) if m.contains("Expected") || m.contains("sql parser") => "42601",
        SqlError::Invalid(_) => "42000",
        SqlError::ReadOnly(_) => "25006",
        SqlError::Failed(m) if m.contains("Divide by zero") => "22012",
        SqlError::Failed(m) if m.contains("Cannot cast") || m.contains("Cannot parse") => "22P02",
        SqlError::Failed(_) => "22000",
        SqlError::Timeout(_) => "57014",
        SqlError::MemoryExceeded(_) | SqlError::MemoryBusy(_) => "53200",
        SqlError::Service(crate::service::ServiceError::DatabaseNotFound(_)) => "3D000",
        SqlError::Service(_) => "58000",
    };
    error(code, text)
}

fn session<C: ClientInfo>(client: &C) -> PgWireResult<Arc<Session>> {
    client.session_extensions().get::<Session>().ok_or_else(|| error("08P01", "the connection has not started"))
}

/// The format of column (or parameter) `i`: one code for all, or one each (a list too short
/// means text past its end, where pgwire's own lookup would panic).
fn format_at(format: &Format, i: usize) -> FieldFormat {
    match format {
        Format::Individual(codes) => codes.get(i).map_or(FieldFormat::Text, |c| FieldFormat::from(*c)),
        other => other.format_for(i),
    }
}

/// The columns of an answer in the formats asked for.
fn field_infos(fields: &[FieldRef], format: Option<&Format>) -> Vec<FieldInfo> {
    fields
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let format = format.map_or(FieldFormat::Text, |fm| format_at(fm, i));
            FieldInfo::new(f.name().clone(), None, None, pg_type(f), format)
        })
        .collect()
}

/// The row writer's formats: binary or text, per column.
fn writer_formats(format: &Format) -> Vec<bool> {
    match format {
        Format::UnifiedText => Vec::new(),
        Format::UnifiedBinary => vec![true],
        Format::Individual(codes) if codes.is_empty() => Vec::new(),
        Format::Individual(codes) => {
            let mut each: Vec<bool> = codes.iter().map(|c| FieldFormat::from(*c) == FieldFormat::Binary).collect();
            // past the list: text (a lone entry would otherwise stand for every column)
            each.push(false);
            each
        }
    }
}

impl Queries {
    /// Runs one SQL statement; its rows stream as the engine hands them over, and the
    /// connection's cancel signal or the statement's end stops them.
    async fn run<C: ClientInfo>(
        &self,
        client: &C,
        sql: String,
        params: Vec<ScalarValue>,
        format: &Format,
    ) -> PgWireResult<QueryResponse> {
        let session = session(client)?;
        let shared = &self.state.shared;
        let db = shared.databases.require(&session.db).map_err(|e| sql_error(SqlError::Service(e)))?;
        let permit = shared.admission.enter(HeavyClass::Sql).await.map_err(|_| {
            error("53000", "the server already runs its most SQL statements at once (--max-heavy-reads); retry shortly")
        })?;
        let mut cancel = session.cancel.subscribe();
        cancel.borrow_and_update();
        let writer = Arc::new(PgRows { binary: writer_formats(format) });
        let query = Query { sql, params, pushdown: true, max_rows: None, writer, hold: Some(Box::new(permit)) };
        let answer = tokio::select! {
            answer = shared.sql.run_query(db, &session.db, query) => answer.map_err(sql_error)?,
            _ = cancel.changed() => return Err(PgWireError::QueryCanceled),
        };
        let fields = Arc::new(field_infos(&answer.fields, Some(format)));
        let columns = i16::try_from(answer.fields.len()).map_err(|_| error("54011", "too many columns"))?;
        let rows = Rows { answer, piece: Bytes::new(), cancel, columns, ended: false };
        Ok(QueryResponse::new(fields, futures_util::stream::unfold(rows, Rows::next)))
    }

    /// The response to one statement of a query string.
    async fn respond<C: ClientInfo>(
        &self,
        client: &C,
        command: Command,
        params: Vec<ScalarValue>,
        format: &Format,
    ) -> PgWireResult<Response> {
        Ok(match command {
            Command::Sql(sql) => Response::Query(self.run(client, sql, params, format).await?),
            Command::Done(tag) => Response::Execution(Tag::new(tag)),
            Command::Begin => Response::TransactionStart(Tag::new("BEGIN")),
            Command::End(tag) => Response::TransactionEnd(Tag::new(tag)),
            Command::Show(name, value) => {
                let field = FieldInfo::new(name, None, None, Type::TEXT, format_at(format, 0));
                let fields = Arc::new(vec![field]);
                let mut encoder = DataRowEncoder::new(fields.clone());
                encoder.encode_field(&value)?;
                let row = encoder.take_row();
                let mut response = QueryResponse::new(fields, futures_util::stream::iter([Ok(row)]));
                response.set_command_tag("SHOW");
                Response::Query(response)
            }
        })
    }
}

/// The rows of a running statement.
struct Rows {
    answer: SqlAnswer,
    /// the rest of the piece being handed out
    piece: Bytes,
    cancel: tokio::sync::watch::Receiver<u64>,
    columns: i16,
    ended: bool,
}

impl Rows {
    async fn next(mut self) -> Option<(PgWireResult<DataRow>, Rows)> {
        loop {
            if self.ended {
                return None;
            }
            if self.piece.len() >= 4 {
                let len = u32::from_be_bytes([self.piece[0], self.piece[1], self.piece[2], self.piece[3]]) as usize;
                let row = self.piece.split_to(4 + len.min(self.piece.len() - 4)).split_off(4);
                return Some((Ok(DataRow::new(BytesMut::from(&row[..]), self.columns)), self));
            }
            let piece = tokio::select! {
                piece = self.answer.pieces.recv() => piece,
                _ = self.cancel.changed() => {
                    self.ended = true;
                    return Some((Err(error("57014", "canceling statement due to user request")), self));
                }
            };
            match piece {
                Some(Ok(Piece::Rows(bytes))) => self.piece = Bytes::from(bytes),
                Some(Ok(Piece::Done { .. })) => return None,
                Some(Err(e)) => {
                    self.ended = true;
                    return Some((Err(sql_error(e)), self));
                }
                None => {
                    self.ended = true;
                    return Some((Err(error("57014", "the statement was stopped before its end")), self));
                }
            }
        }
    }
}

#[async_trait]
impl SimpleQueryHandler for Queries {
    /// Each statement of the string runs and streams its rows before the next one starts (so a
    /// string of many statements holds one statement's resources at a time); the first that
    /// fails ends the string, as in PostgreSQL.
    async fn on_query<C>(&self, client: &mut C, query: SimpleQuery) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if !matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
            return Err(PgWireError::NotReadyForQuery);
        }
        client.set_state(PgWireConnectionState::QueryInProgress);
        let mut status = client.transaction_status();
        let commands = commands::split(&query.query);
        if commands.is_empty() {
            client.feed(PgWireBackendMessage::EmptyQueryResponse(EmptyQueryResponse::new())).await?;
        }
        for command in commands {
            let sent = match self.respond(client, command, Vec::new(), &Format::UnifiedText).await {
                Ok(Response::Query(rows)) => send_query_response(client, rows, true).await,
                Ok(Response::TransactionStart(tag)) => {
                    status = status.to_in_transaction_state();
                    send_execution_response(client, tag).await
                }
                Ok(Response::TransactionEnd(tag)) => {
                    status = status.to_idle_state();
                    send_execution_response(client, tag).await
                }
                Ok(Response::Execution(tag)) => send_execution_response(client, tag).await,
                Ok(_) => Ok(()),
                Err(e) => Err(e),
            };
            match sent {
                Ok(()) => {}
                Err(PgWireError::UserError(e)) => {
                    client.feed(PgWireBackendMessage::ErrorResponse((*e).into())).await?;
                    status = status.to_error_state();
                    break;
                }
                Err(PgWireError::QueryCanceled) => {
                    let e = PgWireError::QueryCanceled;
                    client.feed(PgWireBackendMessage::ErrorResponse(ErrorInfo::from(e).into())).await?;
                    status = status.to_error_state();
                    break;
                }
                Err(e) => {
                    client.set_state(PgWireConnectionState::ReadyForQuery);
                    return Err(e);
                }
            }
        }
        client.set_state(PgWireConnectionState::ReadyForQuery);
        client.set_transaction_status(status);
        send_ready_for_query(client, status).await
    }

    /// Not used: [`Self::on_query`] answers each statement as it runs.
    async fn do_query<C>(&self, _client: &mut C, _query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        Err(error("0A000", "simple queries are answered statement by statement"))
    }
}

/// Parses and describes statements of the extended protocol.
pub(super) struct Parser {
    state: Arc<PgState>,
}

#[async_trait]
impl QueryParser for Parser {
    type Statement = Arc<Prepared>;

    async fn parse_sql<C>(&self, client: &C, sql: &str, _types: &[Option<Type>]) -> PgWireResult<Option<Arc<Prepared>>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let mut commands = commands::split(sql);
        if commands.len() != 1 {
            return Err(error("42601", "cannot insert multiple commands into a prepared statement"));
        }
        let command = commands.remove(0);
        let (params, fields) = match &command {
            Command::Sql(sql) => {
                let session = session(client)?;
                let shared = &self.state.shared;
                let db = shared.databases.require(&session.db).map_err(|e| sql_error(SqlError::Service(e)))?;
                let described = shared.sql.describe(db, &session.db, sql).await.map_err(sql_error)?;
                (described.params, described.fields)
            }
            Command::Show(name, _) => (Vec::new(), vec![Arc::new(Field::new(name, DataType::Utf8, true))]),
            _ => (Vec::new(), Vec::new()),
        };
        Ok(Some(Arc::new(Prepared { command, params, fields })))
    }

    fn get_parameter_types(&self, stmt: &Arc<Prepared>) -> PgWireResult<Vec<Type>> {
        Ok(stmt.params.iter().map(|p| params::described(p.as_ref())).collect())
    }

    fn get_result_schema(&self, stmt: &Arc<Prepared>, format: Option<&Format>) -> PgWireResult<Vec<FieldInfo>> {
        Ok(field_infos(&stmt.fields, format))
    }
}

/// The parameters of a portal as SQL values.
fn bound(portal: &Portal<Arc<Prepared>>) -> PgWireResult<Vec<ScalarValue>> {
    let statement = &portal.statement;
    let prepared = &statement.statement;
    if portal.parameters.len() != prepared.params.len().max(statement.parameter_types.len()) {
        return Err(error(
            "08P01",
            format!(
                "bind message supplies {} parameters, but the prepared statement requires {}",
                portal.parameters.len(),
                prepared.params.len()
            ),
        ));
    }
    portal
        .parameters
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            let want = prepared.params.get(i).and_then(Option::as_ref);
            let declared = statement.parameter_types.get(i).cloned().flatten();
            let ty = declared.unwrap_or_else(|| params::described(want));
            let binary = format_at(&portal.parameter_format, i) == FieldFormat::Binary;
            params::decode(bytes.as_deref(), &ty, binary, want).map_err(|m| error("22P02", m))
        })
        .collect()
}

#[async_trait]
impl ExtendedQueryHandler for Queries {
    type Statement = Arc<Prepared>;
    type QueryParser = Parser;

    fn query_parser(&self) -> Arc<Parser> {
        self.parser.clone()
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Arc<Prepared>>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let params = bound(portal)?;
        let command = portal.statement.statement.command.clone();
        self.respond(client, command, params, &portal.result_column_format).await
    }

    /// pgwire's own Execute gathers every row of the portal in memory before sending them:
    /// this one sends them as they come, stopping after `max_rows` (the portal suspended).
    async fn on_execute<C>(&self, client: &mut C, message: Execute) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if !matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
            return Err(PgWireError::NotReadyForQuery);
        }
        let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
        let portal = match client.portal_store().get_portal(name) {
            Some(Entry::Value(portal)) => portal,
            Some(Entry::Empty) => {
                client.send(PgWireBackendMessage::EmptyQueryResponse(EmptyQueryResponse::new())).await?;
                return Ok(());
            }
            None => return Err(PgWireError::PortalNotFound(name.to_owned())),
        };
        client.set_state(PgWireConnectionState::QueryInProgress);
        let state = portal.state();
        let mut state = state.lock().await;
        if matches!(*state, PortalExecutionState::Finished) {
            // executed to its end already: no more rows
            client.set_state(PgWireConnectionState::ReadyForQuery);
            client.send(PgWireBackendMessage::CommandComplete(Tag::new("SELECT").with_rows(0).into())).await?;
            return Ok(());
        }
        if matches!(*state, PortalExecutionState::Initial) {
            let response = match ExtendedQueryHandler::do_query(self, client, &portal, 0).await {
                Ok(response) => response,
                Err(e) => {
                    client.set_state(PgWireConnectionState::ReadyForQuery);
                    return Err(e);
                }
            };
            let mut status = client.transaction_status();
            match response {
                Response::Query(rows) => *state = PortalExecutionState::Suspended(rows),
                Response::TransactionStart(tag) => {
                    send_execution_response(client, tag).await?;
                    status = status.to_in_transaction_state();
                }
                Response::TransactionEnd(tag) => {
                    send_execution_response(client, tag).await?;
                    status = status.to_idle_state();
                }
                Response::Execution(tag) => send_execution_response(client, tag).await?,
                Response::Error(e) => client.send(PgWireBackendMessage::ErrorResponse((*e).into())).await?,
                _ => client.send(PgWireBackendMessage::EmptyQueryResponse(EmptyQueryResponse::new())).await?,
            }
            client.set_transaction_status(status);
        }
        let max_rows = usize::try_from(message.max_rows).unwrap_or(0);
        let mut sent = 0usize;
        let outcome = match state.deref_mut() {
            PortalExecutionState::Suspended(response) => loop {
                if max_rows > 0 && sent == max_rows {
                    break Ok(true);
                }
                match response.data_rows().next().await {
                    Some(Ok(row)) => {
                        client.feed(PgWireBackendMessage::DataRow(row)).await?;
                        sent += 1;
                    }
                    Some(Err(e)) => break Err(e),
                    None => break Ok(false),
                }
            },
            _ => Ok(false),
        };
        client.set_state(PgWireConnectionState::ReadyForQuery);
        match outcome {
            Ok(true) => client.send(PgWireBackendMessage::PortalSuspended(PortalSuspended::new())).await?,
            Ok(false) => {
                if let PortalExecutionState::Suspended(response) = state.deref_mut() {
                    let tag = Tag::new(response.command_tag()).with_rows(sent);
                    *state = PortalExecutionState::Finished;
                    client.send(PgWireBackendMessage::CommandComplete(tag.into())).await?;
                }
            }
            Err(e) => {
                *state = PortalExecutionState::Finished;
                return Err(e);
            }
        }
        Ok(())
    }
}
