//! A view as the API shows it.

use crate::catalog::ViewDef;
use serde::Serialize;
use utoipa::ToSchema;

/// A view as the API shows it: its definition and state, its size, and for a group view read
/// by name, a page of its groups.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ViewInfo {
    /// the definition and state
    #[serde(flatten)]
    pub view: ViewDef,
    /// filter views: the number of members (once ready)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// group views: the number of groups (once ready)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_count: Option<u64>,
    /// group views read by name: the page of groups, in key order, each `{"key": {by field:
    /// value}, aggregate: value, …}`
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub groups: Option<Vec<serde_json::Value>>,
    /// group views read by name: the cursor of the next page of groups, if there is one
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// The views of a table.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ViewList {
    /// by name
    pub views: Vec<ViewInfo>,
}
