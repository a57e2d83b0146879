//! A vector index's options: checked at creation, stored with defaults filled in, read back as
//! the graph's parameters.

use super::hnsw::{Metric, Params};
use crate::catalog::IndexDef;
use crate::service::{Result, ServiceError};
use serde_json::{Map, Value};

/// Longest vector an index takes.
pub const MAX_DIMENSION: usize = 4096;
/// Default links per node (`m`).
pub const DEFAULT_M: usize = 16;
/// Default `ef_construction`.
pub const DEFAULT_EF_CONSTRUCTION: usize = 200;

/// The parsed options of a vector index.
pub fn params_of(def: &IndexDef) -> Result<Params> {
    parse_options(&def.options).map(|(p, _)| p)
}

/// Checks a vector index's options; returns its parameters and the options to store (defaults
/// filled in): `dimension` (required, 1-4096), `metric` (`cosine` (default), `l2`, `dot`), `m`
/// (2-64, default 16), `ef_construction` (8-2000, default 200), `quantization` (`none` (default)
/// or `int8`: vectors held in memory as int8 codes, searches rescored on the documents' vectors).
pub fn parse_options(options: &Map<String, Value>) -> Result<(Params, Map<String, Value>)> {
    let bad = |m: &str| Err(ServiceError::InvalidRequest(format!("vector index options: {m}")));
    const KNOWN: [&str; 5] = ["dimension", "metric", "m", "ef_construction", "quantization"];
    if let Some(k) = options.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return bad(&format!("unknown option {k:?} ({})", KNOWN.join(", ")));
    }
    let int = |name: &str, default: Option<u64>, lo: u64, hi: u64| -> Result<u64> {
        match options.get(name) {
            None => default
                .ok_or_else(|| ServiceError::InvalidRequest(format!("vector index options: `{name}` is required"))),
            Some(v) => v.as_u64().filter(|n| (lo..=hi).contains(n)).ok_or_else(|| {
                ServiceError::InvalidRequest(format!(
                    "vector index options: `{name}` must be an integer from {lo} to {hi}"
                ))
            }),
        }
    };
    let dim = int("dimension", None, 1, MAX_DIMENSION as u64)? as usize;
    let m = int("m", Some(DEFAULT_M as u64), 2, 64)? as usize;
    let ef_construction = int("ef_construction", Some(DEFAULT_EF_CONSTRUCTION as u64), 8, 2000)? as usize;
    let metric = match options.get("metric").map(|v| v.as_str()) {
        None | Some(Some("cosine")) => Metric::Cosine,
        Some(Some("l2")) => Metric::L2,
        Some(Some("dot")) => Metric::Dot,
        _ => return bad("`metric` must be \"cosine\", \"l2\" or \"dot\""),
    };
    let quantized = match options.get("quantization").map(|v| v.as_str()) {
        None | Some(Some("none")) => false,
        Some(Some("int8")) => true,
        _ => return bad("`quantization` must be \"none\" or \"int8\""),
    };
    let name = match metric {
        Metric::Cosine => "cosine",
        Metric::L2 => "l2",
        Metric::Dot => "dot",
    };
    let mut out = Map::new();
    out.insert("dimension".into(), dim.into());
    out.insert("metric".into(), name.into());
    out.insert("m".into(), m.into());
    out.insert("ef_construction".into(), ef_construction.into());
    out.insert("quantization".into(), if quantized { "int8" } else { "none" }.into());
    Ok((Params { dim, metric, m, ef_construction, quantized }, out))
}
