//! Entity blob format: encode / decode / field access against serde_json.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use mosaicdb::entity::{EncodeOptions, FieldDict, decode, encode, encode_simd, get_path};
use serde_json::{Value, json};

fn samples() -> Vec<(&'static str, Value, Vec<&'static str>, Vec<&'static str>)> {
    let user = json!({
        "name": "Alice Johnson",
        "email": "alice.johnson@example.com",
        "age": 34,
        "city": "San Francisco",
        "active": true,
        "signup_ts": 1714060800,
        "tags": ["admin", "beta", "premium"],
        "score": 87.65,
        "address": {"street": "742 Evergreen Terrace", "city": "Springfield", "zip": "94107"},
    });
    let order = json!({
        "id": "ord_8f3k2j9x",
        "customer": "cus_19283",
        "status": "shipped",
        "total": 149.94,
        "items": [
            {"sku": "SKU-1001", "qty": 2, "price": 29.99},
            {"sku": "SKU-2002", "qty": 1, "price": 59.99},
            {"sku": "SKU-3003", "qty": 3, "price": 9.99},
        ],
    });
    let event = json!({
        "type": "page_view",
        "ts": 1714060812345i64,
        "user_id": "u_48213",
        "props": {"path": "/pricing", "referrer": "google", "duration_ms": 5320, "mobile": false, "ab": "B"},
    });
    vec![
        ("user", user, vec!["city"], vec!["address", "zip"]),
        ("order", order, vec!["total"], vec!["items"]),
        ("event", event, vec!["ts"], vec!["props", "ab"]),
    ]
}

fn bench(c: &mut Criterion) {
    let opts = EncodeOptions::default();
    let samples = samples();
    // Pre-warm the dictionary, as in a running server.
    let mut dict = FieldDict::new();
    for (_, doc, _, _) in &samples {
        let _ = encode(doc, &mut dict, &opts);
    }
    for (name, doc, _, _) in &samples {
        let json_len = serde_json::to_vec(doc).map(|v| v.len()).unwrap_or(0);
        let blob_len = encode(doc, &mut dict, &opts).map(|b| b.len()).unwrap_or(0);
        eprintln!(
            "{name}: compact JSON {json_len} B, blob {blob_len} B, ratio {:.1}%",
            100.0 * blob_len as f64 / json_len as f64
        );
    }

    for (name, doc, top, nested) in &samples {
        let mut g = c.benchmark_group(*name);
        let Ok(blob) = encode(doc, &mut dict, &opts) else {
            eprintln!("{name}: encode failed");
            continue;
        };
        let Ok(text) = serde_json::to_vec(doc) else {
            continue;
        };
        let mut simd_buf = text.clone();
        let Ok(simd_doc) = simd_json::to_borrowed_value(&mut simd_buf) else {
            continue;
        };

        g.bench_function("encode", |b| b.iter(|| encode(black_box(doc), &mut dict, &opts)));
        g.bench_function("encode_simd", |b| b.iter(|| encode_simd(black_box(&simd_doc), &mut dict, &opts)));
        g.bench_function("decode", |b| b.iter(|| decode(black_box(&blob), &dict)));
        g.bench_function("get_path_top", |b| b.iter(|| get_path(black_box(&blob), &dict, top).map(|v| v.is_some())));
        g.bench_function("get_path_nested", |b| {
            b.iter(|| get_path(black_box(&blob), &dict, nested).map(|v| v.is_some()))
        });
        g.bench_function("serde_json_to_vec", |b| b.iter(|| serde_json::to_vec(black_box(doc))));
        g.bench_function("serde_json_from_slice", |b| b.iter(|| serde_json::from_slice::<Value>(black_box(&text))));
        // The import path: one NDJSON line to a blob, through serde_json or simd-json.
        g.bench_function("line_to_blob_serde", |b| {
            b.iter(|| {
                let v: Value = serde_json::from_slice(black_box(&text)).unwrap_or_default();
                encode(&v, &mut dict, &opts)
            })
        });
        g.bench_function("line_to_blob_simd", |b| {
            b.iter_batched(
                || text.clone(),
                |mut line| simd_json::to_borrowed_value(&mut line).ok().map(|v| encode_simd(&v, &mut dict, &opts)),
                criterion::BatchSize::SmallInput,
            )
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
