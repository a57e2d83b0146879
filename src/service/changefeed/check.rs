//! The change events (`changefeed:`): each key decodes, each value is an event whose `seq` is its
//! key's, whose `op` is `put` or `delete` and whose `txn`/`count` enclose its seq, and the kept
//! seqs are contiguous (retention removes only the oldest; committed events have no gaps) — so
//! `GET /v1/changes/stats`, which counts `last - first + 1`, agrees with what is stored.

use crate::keys::ChangeKey;
use crate::service::changefeed::ChangeEvent;
use crate::service::core::cancel::{Stop, Watched};
use crate::service::core::check_report::{CheckReport, show};
use crate::service::{Result, ServiceError};
use crate::storage::{KeyRange, ReadView, Space};

/// Walks every change event.
pub(crate) fn check_events(view: &ReadView, report: &mut CheckReport, stop: &Stop) -> Result<()> {
    let mut previous: Option<u64> = None;
    let scan = view.scan(Space::Changefeed, KeyRange::Prefix(Vec::new()), false);
    for item in Watched::new(scan.map(|i| i.map_err(ServiceError::from)), stop) {
        let (k, v) = item?;
        report.checked.change_events += 1;
        let key = show(Space::Changefeed, &k);
        let seq = match ChangeKey::decode(&k) {
            Ok(c) => c.seq,
            Err(e) => {
                report.problem("undecodable_event", key, format!("bad key: {e}"));
                continue;
            }
        };
        if let Some(p) = previous
            && seq != p + 1
        {
            report.problem("changefeed_gap", key.clone(), format!("seq {seq} follows {p}"));
        }
        previous = Some(seq);
        let event: ChangeEvent = match serde_json::from_slice(&v) {
            Ok(e) => e,
            Err(e) => {
                report.problem("undecodable_event", key, e.to_string());
                continue;
            }
        };
        let fits = event.seq == seq
            && matches!(event.op.as_str(), "put" | "delete")
            && event.txn <= seq
            && seq < event.txn.saturating_add(event.count)
            && (event.op == "put" || event.document.is_none());
        if !fits {
            report.problem("bad_event", key, format!("event does not fit its key: {}", String::from_utf8_lossy(&v)));
        }
    }
    Ok(())
}
