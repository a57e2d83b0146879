//! Hybrid search: `POST /v1/tables/{table}/search` with `vector` beside `query` runs the full-text
//! search and the vector search (same `filter` and `fields`) and fuses both rankings by
//! reciprocal rank fusion: a document scores Σ 1 / (k + rank) over the lists that hold it (k = 60
//! by default), ties by `_id`. The two searches read two snapshots taken one after the other.

use super::Vectors;
use super::search::VectorSearchRequest;
use crate::service::search::{Fusion, SearchRequest};
use crate::service::{Result, ServiceError};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// Deepest fused list (`offset + limit`).
const MAX_DEPTH: usize = 1000;

#[derive(Default)]
struct Fused {
    score: f64,
    text: Option<usize>,
    vector: Option<usize>,
    distance: Option<f64>,
    document: Value,
    highlights: Option<Value>,
}

impl Vectors {
    /// A hybrid search (see the module doc); the answer is the JSON text of a `SearchResponse`.
    pub async fn hybrid_search(self: &Arc<Self>, table: String, mut req: SearchRequest) -> Result<Vec<u8>> {
        let bad = |m: &str| Err(ServiceError::InvalidRequest(m.to_owned()));
        let Some(v) = req.vector.take() else { return bad("a hybrid search needs `vector`") };
        let fusion: Fusion = req.fusion.take().unwrap_or_default();
        let rrf_k = fusion.k.unwrap_or(60);
        if !(1..=10_000).contains(&rrf_k) {
            return bad("fusion.k must be 1 to 10000");
        }
        let (limit, offset) = (req.limit.unwrap_or(10), req.offset.unwrap_or(0));
        if limit == 0 || offset.saturating_add(limit) > MAX_DEPTH {
            return bad("a hybrid search pages at most 1000 fused hits: limit 1-1000, offset + limit at most 1000");
        }
        let depth = offset + limit;
        let vk = v.k.unwrap_or(depth.max(10));
        let mut text_req = req.clone();
        (text_req.limit, text_req.offset) = (Some(depth.max(10)), Some(0));
        let text: Value = serde_json::from_slice(&self.search.search(table.clone(), text_req).await?)
            .map_err(|e| ServiceError::Internal(e.to_string()))?;
        let vreq = VectorSearchRequest {
            field: v.field,
            vector: v.vector,
            k: Some(vk),
            ef: v.ef,
            filter: req.filter.clone(),
            fields: req.fields.clone(),
            exact: false,
            oversampling: None,
        };
        let near = self.vector_search(table, vreq).await?;
        let mut fused: HashMap<String, Fused> = HashMap::new();
        let rrf = |rank: usize| 1.0 / (rrf_k + rank) as f64;
        for (i, hit) in text["hits"].as_array().into_iter().flatten().enumerate() {
            let Some(id) = hit["_id"].as_str() else { continue };
            let f = fused.entry(id.to_owned()).or_default();
            f.score += rrf(i + 1);
            f.text = Some(i + 1);
            f.document = hit["document"].clone();
            f.highlights = hit.get("highlights").cloned();
        }
        for (i, hit) in near.hits.into_iter().enumerate() {
            let f = fused.entry(hit.id).or_default();
            f.score += rrf(i + 1);
            f.vector = Some(i + 1);
            f.distance = Some(f64::from(hit.distance));
            if f.document.is_null() {
                f.document = Value::Object(hit.document);
            }
        }
        let total = fused.len();
        let mut ranked: Vec<(String, Fused)> = fused.into_iter().collect();
        ranked.sort_by(|a, b| b.1.score.total_cmp(&a.1.score).then_with(|| a.0.cmp(&b.0)));
        let hits: Vec<Value> = ranked
            .into_iter()
            .skip(offset)
            .take(limit)
            .map(|(id, f)| {
                let mut hit = Map::new();
                hit.insert("_id".into(), Value::String(id));
                hit.insert("score".into(), json!(f.score));
                hit.insert("document".into(), f.document);
                if let Some(h) = f.highlights {
                    hit.insert("highlights".into(), h);
                }
                hit.insert("ranks".into(), json!({"text": f.text, "vector": f.vector}));
                if let Some(d) = f.distance {
                    hit.insert("distance".into(), json!(d));
                }
                Value::Object(hit)
            })
            .collect();
        serde_json::to_vec(&json!({"hits": hits, "total": {"value": total, "relation": "eq"}}))
            .map_err(|e| ServiceError::Internal(e.to_string()))
    }
}
