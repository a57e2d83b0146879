//! Why a SQL statement failed, sorted out of DataFusion's errors: the statement's fault (it does
//! not parse or plan, it writes, it fails on the data), a bound it ran into (time, memory), or a
//! failure of the store under it (the service's own error, answered as everywhere else).

use super::memory::Refusal;
use crate::service::ServiceError;
use datafusion::common::DataFusionError;

/// Why a statement failed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// The statement does not parse, or does not plan (unknown table or column, wrong types, a
    /// parameter missing): fix the statement.
    #[error("{0}")]
    Invalid(String),
    /// The statement would write or change a definition: SQL here only reads.
    #[error("{0}")]
    ReadOnly(String),
    /// The statement failed on the data as it ran (a cast of text that is not a number, a
    /// division by zero): fix the statement or the data.
    #[error("{0}")]
    Failed(String),
    /// The statement (its answer included) took longer than `--sql-timeout-secs`: narrow it.
    #[error("the statement ran longer than {0} s (--sql-timeout-secs) and was stopped")]
    Timeout(u64),
    /// The statement needed more memory than one statement may hold (`--sql-memory-mb`): narrow
    /// it (fewer rows to join, group or sort).
    #[error("the statement needs more memory than a statement may hold: {0}")]
    MemoryExceeded(String),
    /// The memory all statements share (`--sql-total-memory-mb`) is held by others: retry shortly.
    #[error("the memory of SQL statements is taken by others now: {0}; retry shortly")]
    MemoryBusy(String),
    /// The store failed under the statement (or the database is going away).
    #[error(transparent)]
    Service(#[from] ServiceError),
}

/// Where a statement was when it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// parsing and planning
    Plan,
    /// running (and planning what runs)
    Run,
}

/// Sorts out a DataFusion error. `service`: the store's error a scan met, if one did (it travels
/// through DataFusion as text); `refusal`: the memory limit that refused a reservation, if one did.
pub(super) fn classify(
    e: DataFusionError,
    phase: Phase,
    service: Option<ServiceError>,
    refusal: Option<Refusal>,
) -> SqlError {
    if let Some(service) = service {
        return SqlError::Service(service);
    }
    let root = e.find_root();
    let text = message(root);
    match root {
        DataFusionError::ResourcesExhausted(_) => match refusal {
            Some(Refusal::Shared) => SqlError::MemoryBusy(text),
            _ => SqlError::MemoryExceeded(text),
        },
        DataFusionError::SQL(..)
        | DataFusionError::Plan(_)
        | DataFusionError::SchemaError(..)
        | DataFusionError::NotImplemented(_)
        | DataFusionError::Configuration(_) => SqlError::Invalid(text),
        DataFusionError::Internal(_) if phase == Phase::Plan => {
            tracing::warn!(error = %root, "DataFusion failed inside while planning a statement");
            SqlError::Invalid(text)
        }
        DataFusionError::Internal(_) | DataFusionError::ExecutionJoin(_) => {
            tracing::warn!(error = %root, "DataFusion failed inside while running a statement");
            SqlError::Failed(text)
        }
        _ => SqlError::Failed(text),
    }
}

/// The error's message without DataFusion's prefixes ("Error during planning: " …) or backtrace.
fn message(e: &DataFusionError) -> String {
    let text = e.strip_backtrace();
    for prefix in [
        "Error during planning: ",
        "Execution error: ",
        "SQL error: ",
        "This feature is not implemented: ",
        "Schema error: ",
        "Arrow error: ",
        "Resources exhausted: ",
        "Invalid or Unsupported Configuration: ",
        "External error: ",
    ] {
        if let Some(rest) = text.strip_prefix(prefix) {
            return rest.to_owned();
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_sorted_by_kind_and_phase() {
        let plan = DataFusionError::Plan("table 'x' not found".into());
        assert!(matches!(classify(plan, Phase::Plan, None, None), SqlError::Invalid(m) if m == "table 'x' not found"));
        let cast = DataFusionError::Execution("Cannot cast string 'a' to value of Int32 type".into());
        assert!(matches!(classify(cast, Phase::Run, None, None), SqlError::Failed(_)));
        let memory = || DataFusionError::ResourcesExhausted("HashJoin needed 10 bytes".into());
        assert!(matches!(classify(memory(), Phase::Run, None, Some(Refusal::Statement)), SqlError::MemoryExceeded(_)));
        assert!(matches!(classify(memory(), Phase::Run, None, Some(Refusal::Shared)), SqlError::MemoryBusy(_)));
        let wrapped = DataFusionError::Context("while running".into(), Box::new(DataFusionError::Plan("p".into())));
        assert!(matches!(classify(wrapped, Phase::Run, None, None), SqlError::Invalid(m) if m == "p"));
        let store = ServiceError::TableNotFound("t".into());
        let failed = DataFusionError::Execution("t".into());
        assert!(matches!(classify(failed, Phase::Run, Some(store), None), SqlError::Service(_)));
    }
}
