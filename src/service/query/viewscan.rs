//! `$view`: a filter view's member keys as an access path of the planner.

use super::plan::{Access, Plan, Range, estimate, estimate_of, prefix_range};
use crate::service::Result;
use crate::storage::{ReadView, Space};
use std::ops::Bound;

/// The scan of a filter view's member keys (`view:{table}:{view}:m:{id}`), in id order.
#[derive(Debug, Clone)]
pub struct ViewScan {
    /// the table
    pub table: String,
    /// the view
    pub view: String,
    /// the member keys to scan
    pub range: Range,
    /// member keys counted (capped like index estimates)
    pub estimate: u64,
}

impl ViewScan {
    /// The scan of every member of `view`, with its estimate.
    pub fn new(snapshot: &ReadView, table: &str, view: &str, prefix: Vec<u8>) -> Result<ViewScan> {
        let range = prefix_range(prefix);
        let estimate = estimate(snapshot, Space::View, std::slice::from_ref(&range))?;
        Ok(ViewScan { table: table.to_owned(), view: view.to_owned(), range, estimate })
    }

    /// Narrows the scan to the members after document `id`.
    pub fn seek_after(&mut self, id: &str) {
        self.range.0 = Bound::Excluded(crate::service::views::member_after(&self.table, &self.view, id));
    }
}

/// A plan that starts from a filter view's members when they are fewer than the keys the
/// planner's own choice would read (always instead of a full scan).
pub fn with_view(plan: Plan, scan: ViewScan) -> Plan {
    match estimate_of(&plan.access) {
        Some(e) if e < scan.estimate => plan,
        _ => Plan { access: Access::View(scan), sort_by_index: false },
    }
}
