//! What the parts of one statement share: the statement's switches and the store error a scan
//! met, and the table a relation reads.

use crate::service::{Db, ServiceError};
use datafusion::common::DataFusionError;
use std::sync::{Arc, Mutex};

/// A table of a database.
#[derive(Clone)]
pub(crate) struct TableRef {
    pub(crate) db: Arc<Db>,
    pub(crate) name: String,
}

impl TableRef {
    pub(crate) fn new(db: Arc<Db>, name: String) -> TableRef {
        TableRef { db, name }
    }
}

impl std::fmt::Debug for TableRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TableRef({})", self.name)
    }
}

/// What the parts of one statement share.
#[derive(Debug)]
pub(crate) struct Statement {
    /// conditions, projections and limits go to the scans
    pub(crate) pushdown: bool,
    /// the statement is an EXPLAIN: scans show the planner's choice
    pub(crate) explain: bool,
    /// the statement is only described (its parameters and columns), never run: table
    /// functions answer their columns without calling their routes
    pub(crate) describe: bool,
    /// the values of `$1`, `$2` … (table functions read them while the plan is built)
    pub(crate) params: Vec<datafusion::common::ScalarValue>,
    /// the first store error a scan met
    pub(crate) service: Mutex<Option<ServiceError>>,
}

impl Statement {
    /// Keeps a store error for the answer (the first one), and gives DataFusion its text.
    pub(crate) fn service_error(&self, e: ServiceError) -> DataFusionError {
        let text = e.to_string();
        if let Ok(mut slot) = self.service.lock()
            && slot.is_none()
        {
            *slot = Some(e);
        }
        DataFusionError::Execution(text)
    }

    pub(crate) fn take_service(&self) -> Option<ServiceError> {
        self.service.lock().ok().and_then(|mut s| s.take())
    }
}
