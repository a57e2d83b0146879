//! One document's change in a write, as every derived family's stage step sees it (see
//! `service::pipeline::write` for the steps and their order).

use mosaic_catalog::TableDef;

/// One document's change in a write: `old` the version stored before (None: created), `new` the
/// version staged (None: deleted).
#[derive(Clone, Copy)]
pub struct Change<'a> {
    pub table: &'a TableDef,
    pub id: &'a str,
    pub old: Option<&'a [u8]>,
    pub new: Option<&'a [u8]>,
}
