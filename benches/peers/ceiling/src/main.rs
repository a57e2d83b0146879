//! A trivial JSON handler on the address given as the first argument: what the same HTTP stack
//! serves when a request does no work. `GET /` (and any path) → `{"status":"ok"}`.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:18081".into());
    let app = axum::Router::new()
        .fallback(axum::routing::get(|| async { axum::Json(serde_json::json!({"status": "ok"})) }));
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    axum::serve(listener, app).await
}
