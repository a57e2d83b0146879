//! What a client sends besides queries, answered by the listener itself as a read-only server
//! would: `SET`, `RESET`, `DISCARD` and `DEALLOCATE` are taken (and change nothing: every session
//! reads in UTC, UTF-8, with the `public` schema of its database); `BEGIN`, `COMMIT` and `ROLLBACK`
//! mark a transaction for the client (every statement reads the committed state as it starts);
//! `SHOW` of the settings clients ask for answers their values. Everything else is a statement
//! for the SQL engine.

use datafusion::sql::sqlparser::ast::Statement;
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// The version clients are told (what they check features against).
pub(super) const SERVER_VERSION: &str = "15.0 (mosaicdb)";

/// One statement of a query string.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Command {
    /// a statement for the SQL engine, as text
    Sql(String),
    /// a setting changed or reset: answered with its tag (`SET`, `RESET` …), nothing changes
    Done(&'static str),
    /// `BEGIN` / `START TRANSACTION`
    Begin,
    /// `COMMIT`, `ROLLBACK`, `END`, `ABORT`: the tag to answer
    End(&'static str),
    /// `SHOW name`: the setting and its value
    Show(String, String),
}

/// The statements of `sql` (several in one simple query, separated by `;`); text that does not
/// parse is one statement, for the engine to report.
pub(super) fn split(sql: &str) -> Vec<Command> {
    let Ok(statements) = Parser::parse_sql(&PostgreSqlDialect {}, sql) else {
        return vec![Command::Sql(sql.to_owned())];
    };
    let single = statements.len() == 1;
    statements.into_iter().map(|s| classify(s, single.then_some(sql))).collect()
}

/// `original`: the statement's own text when it was the only one (kept as the client wrote it).
fn classify(statement: Statement, original: Option<&str>) -> Command {
    match &statement {
        Statement::Set(_) => Command::Done("SET"),
        Statement::Reset(_) => Command::Done("RESET"),
        Statement::Discard { .. } => Command::Done("DISCARD ALL"),
        Statement::Deallocate { .. } => Command::Done("DEALLOCATE"),
        Statement::Close { .. } => Command::Done("CLOSE CURSOR"),
        Statement::StartTransaction { .. } => Command::Begin,
        Statement::Commit { .. } => Command::End("COMMIT"),
        Statement::Rollback { .. } => Command::End("ROLLBACK"),
        Statement::ShowVariable { variable } => {
            let name = variable.iter().map(|i| i.value.to_ascii_lowercase()).collect::<Vec<_>>().join(" ");
            match setting(&name) {
                Some(value) => Command::Show(name, value.to_owned()),
                None => Command::Sql(original.map_or_else(|| statement.to_string(), str::to_owned)),
            }
        }
        _ => Command::Sql(original.map_or_else(|| statement.to_string(), str::to_owned)),
    }
}

/// The value of a setting clients read with `SHOW` (or `current_setting`).
pub(super) fn setting(name: &str) -> Option<&'static str> {
    Some(match name {
        "server_version" => SERVER_VERSION,
        "server_version_num" => "150000",
        "server_encoding" | "client_encoding" => "UTF8",
        "standard_conforming_strings" | "integer_datetimes" => "on",
        "transaction_read_only" | "default_transaction_read_only" => "on",
        "search_path" => "public",
        "timezone" => "UTC",
        "datestyle" => "ISO, MDY",
        "intervalstyle" => "postgres",
        "transaction isolation level" | "transaction_isolation" | "default_transaction_isolation" => "read committed",
        "max_identifier_length" => "63",
        "is_superuser" => "off",
        "extra_float_digits" => "1",
        "lc_collate" | "lc_ctype" => "C",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_statements_are_answered_and_queries_pass() {
        assert_eq!(split("SET extra_float_digits = 3"), vec![Command::Done("SET")]);
        assert_eq!(split("BEGIN READ ONLY"), vec![Command::Begin]);
        assert_eq!(split("commit"), vec![Command::End("COMMIT")]);
        assert_eq!(
            split("SHOW TRANSACTION ISOLATION LEVEL"),
            vec![Command::Show("transaction isolation level".into(), "read committed".into())]
        );
        assert_eq!(split("SELECT 1 AS \"x;y\""), vec![Command::Sql("SELECT 1 AS \"x;y\"".into())]);
        let two = split("SET a = 1; SELECT 2");
        assert_eq!(two, vec![Command::Done("SET"), Command::Sql("SELECT 2".into())]);
        assert_eq!(split("SELEC nonsense"), vec![Command::Sql("SELEC nonsense".into())]);
    }
}
