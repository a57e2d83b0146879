//! Key encoding: encode and decode of the hot key families, and the debugging display form.
//!
//! Run with `cargo bench --bench keys`. Every key and its bytes are built outside the timed loop.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use mosaicdb::keys::{Component, EntityKey, KeyReader, Number, RidxKey, TsKey, display};

fn entity(c: &mut Criterion) {
    let mut g = c.benchmark_group("entity_key");
    let key = EntityKey::new("users", "01890a5d-ac96-774b-bcce-b302099a8057");
    let bytes = key.encode();
    g.bench_function("encode", |b| b.iter(|| black_box(&key).encode()));
    g.bench_function("decode", |b| b.iter(|| EntityKey::decode(black_box(&bytes)).map(|k| k.id.len())));
    g.bench_function("display", |b| b.iter(|| display("entity", black_box(&bytes))));
    g.finish();
}

fn ridx(c: &mut Criterion) {
    let mut g = c.benchmark_group("ridx_key");
    let key = RidxKey::new("orders", "by_total", Component::Num(Number::Float(149.94)), "ord_8f3k2j9x");
    let bytes = key.encode();
    g.bench_function("encode", |b| b.iter(|| black_box(&key).encode()));
    g.bench_function("decode", |b| b.iter(|| RidxKey::decode(black_box(&bytes)).map(|k| k.id.len())));
    g.finish();
}

fn ts(c: &mut Criterion) {
    let mut g = c.benchmark_group("ts_key");
    let key = TsKey::new("cpu.user", "host-0042", 1_714_060_812_345);
    let bytes = key.encode();
    g.bench_function("encode", |b| b.iter(|| black_box(&key).encode()));
    g.bench_function("decode", |b| b.iter(|| TsKey::decode(black_box(&bytes)).map(|k| k.ts)));
    g.finish();
}

/// The generic reader over a whole key, as the inspect tool uses it.
fn reader(c: &mut Criterion) {
    let bytes = RidxKey::new("orders", "by_total", Component::Num(Number::Float(149.94)), "ord_8f3k2j9x").encode();
    c.bench_function("key_reader_rest/ridx", |b| b.iter(|| KeyReader::new(black_box(&bytes)).rest().map(|p| p.len())));
}

criterion_group!(benches, entity, ridx, ts, reader);
criterion_main!(benches);
