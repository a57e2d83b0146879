//! The `mosaicdb` binary: serve (default), health, backup, restore, openapi, check, inspect.

use clap::builder::BoolishValueParser;
use clap::{ArgAction, Args, Parser, Subcommand};
use mosaicdb::api::admission::HeavyReads;
use mosaicdb::api::auth::{Access, ENV_KEYS, KeySet};
use mosaicdb::api::{CorsOrigins, HttpLimits};
use mosaicdb::background::TaskConfig;
use mosaicdb::server::{self, ServerConfig};
use mosaicdb::service::DbOptions;
use mosaicdb::service::changefeed::Retention;
use mosaicdb::service::sql::SqlLimits;
use mosaicdb::storage::{Backend, Durability, StorageConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

// The service allocates small, short-lived buffers per request; mimalloc serves them faster than
// glibc's allocator (malloc/free were ~15% of the GET profile).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "mosaicdb", version, about = "A multi-model database over HTTP/JSON")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the HTTP API (the default).
    Serve(Box<ServeArgs>),
    /// Ask a running server whether it is alive: exit 0 when `GET /health` answers 200 within
    /// --timeout-secs, 1 otherwise (a container health check that needs no shell tools).
    Health {
        /// the server's address; an unspecified one (0.0.0.0, [::]) means this machine
        #[arg(long, env = "MOSAIC_ADDR", default_value = "127.0.0.1:8080")]
        addr: SocketAddr,
        /// seconds to wait for the answer
        #[arg(long, default_value_t = 3)]
        timeout_secs: u64,
    },
    /// Stream a consistent backup of a running server to stdout (`mosaicdb backup --url … > file`),
    /// checking the archive's framing and checksum as it arrives: exit 1 with a message on a
    /// refusal, a cut or a corrupt stream (what was written to stdout is then unusable).
    Backup {
        /// the server's base URL, e.g. http://127.0.0.1:8080
        #[arg(long)]
        url: String,
        /// API key, sent as `Authorization: Bearer` (the backup route needs the admin role)
        #[arg(long, env = "MOSAIC_API_KEY", hide_env_values = true)]
        key: Option<String>,
        /// seconds to wait for the answer to start, and for each piece of it
        #[arg(long, default_value_t = 30)]
        timeout_secs: u64,
        /// back up this database (default: the database `default`)
        #[arg(long, conflicts_with = "all")]
        database: Option<String>,
        /// back up every database into this folder instead of stdout: one archive each and
        /// `databases.json`, the list
        #[arg(long, value_name = "DIR")]
        all: Option<PathBuf>,
    },
    /// Restore a backup archive into an empty or absent data directory, then check it (exit 1 if
    /// the archive is refused — nothing is left in the directory then — or the check finds
    /// problems).
    Restore {
        /// the archive (`-`: standard input)
        file: PathBuf,
        /// the data directory to create (must be empty or absent; with `--backend postgres`,
        /// the database must be empty instead); with `--database`, the existing data directory
        /// to add the database to (the server must not be running on it)
        data_dir: PathBuf,
        #[command(flatten)]
        backend: BackendArgs,
        /// restore the archive as this new database of the data directory, instead of as a new
        /// data directory
        #[arg(long, conflicts_with = "all")]
        database: Option<String>,
        /// the archive is a folder of `mosaicdb backup --all`: every database is restored into the
        /// new data directory
        #[arg(long)]
        all: bool,
    },
    /// Print the OpenAPI document.
    Openapi,
    /// Check index and document consistency of a data directory, every database in it (the server
    /// must not be running).
    Check {
        /// the data directory
        data_dir: PathBuf,
        #[command(flatten)]
        backend: BackendArgs,
    },
    /// Print the keys of a data directory (display form) with their decoded values.
    Inspect {
        /// the data directory (the server must not be running on it)
        data_dir: PathBuf,
        /// only keys whose display form starts with this, e.g. `entity:users`
        #[arg(default_value = "")]
        prefix: String,
        #[command(flatten)]
        backend: BackendArgs,
    },
}

/// Where the keys are kept.
#[derive(Args, Clone)]
struct BackendArgs {
    /// where the keys are kept: `embedded` (fjall, in the data directory) or `postgres` (one
    /// table per key family in the database --postgres-url names)
    #[arg(long, env = "MOSAIC_BACKEND", default_value = "embedded", value_parser = ["embedded", "postgres"])]
    backend: String,
    /// the PostgreSQL database of `--backend postgres`: a URL
    /// (`postgres://user:password@host:5432/database`) or a `key=value` connection string
    #[arg(long, env = "MOSAIC_POSTGRES_URL", hide_env_values = true)]
    postgres_url: Option<String>,
}

impl BackendArgs {
    /// The storage settings for `data_dir` on this backend.
    fn storage(&self, data_dir: &std::path::Path) -> Result<StorageConfig, String> {
        let mut storage = StorageConfig::new(data_dir);
        storage.backend = match (self.backend.as_str(), &self.postgres_url) {
            ("postgres", Some(url)) => Backend::Postgres { url: url.clone() },
            ("postgres", None) => return Err("--backend postgres needs --postgres-url (or MOSAIC_POSTGRES_URL)".into()),
            _ => Backend::Embedded,
        };
        Ok(storage)
    }
}

#[derive(Args, Clone)]
struct ServeArgs {
    /// address to listen on
    #[arg(long, env = "MOSAIC_ADDR", default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// data directory (created if missing)
    #[arg(long, env = "MOSAIC_DATA_DIR", default_value = "./data")]
    data_dir: PathBuf,
    #[command(flatten)]
    backend: BackendArgs,
    /// cluster mode (with `--backend postgres`): the URL at which clients and the other servers
    /// reach this one (`http://10.0.0.5:8080`). Any number of servers may then share the
    /// database: one leads (writes), the others follow (read; writes sent to them are
    /// redirected to the leader), and a follower takes over when the leader goes
    #[arg(long, env = "MOSAIC_ADVERTISE_URL")]
    advertise_url: Option<String>,
    /// sync: acknowledge after fsync (group commit); buffered: after handing the journal to the OS
    #[arg(long, env = "MOSAIC_DURABILITY", default_value = "sync")]
    durability: Durability,
    /// block cache size in MiB
    #[arg(long, env = "MOSAIC_CACHE_MB", default_value_t = 256)]
    cache_mb: u64,
    /// documents kept for reads by id, in MiB (0: none); writes evict what they change
    #[arg(long, env = "MOSAIC_ROW_CACHE_MB", default_value_t = 64)]
    row_cache_mb: u64,
    /// most memory the in-memory graph adjacency may take, in MiB; past it, graph walks read the
    /// adjacency keys instead until the next start (0: never held in memory)
    #[arg(long, env = "MOSAIC_GRAPH_MEMORY_MB", default_value_t = 2048)]
    graph_memory_mb: usize,
    /// memtable size per key family in MiB
    #[arg(long, env = "MOSAIC_MEMTABLE_MB", default_value_t = 16)]
    memtable_mb: u64,
    /// disk space kept free in MiB: while less is free, writes are refused (507) and resume on
    /// their own once space is freed (0: no check)
    #[arg(long, env = "MOSAIC_MIN_FREE_DISK_MB", default_value_t = 64)]
    min_free_disk_mb: u64,
    /// largest request body (and longest import line) in MiB
    #[arg(long, env = "MOSAIC_MAX_BODY_MB", default_value_t = 32)]
    max_body_mb: usize,
    /// request timeout in seconds (imports excepted)
    #[arg(long, env = "MOSAIC_TIMEOUT_SECS", default_value_t = 30)]
    timeout_secs: u64,
    /// longest a client may take to send a request head (from its connection, or from the first
    /// byte of the head on a kept-alive one; the TLS handshake included), in seconds; then the
    /// connection is closed
    #[arg(long, env = "MOSAIC_HEADER_TIMEOUT_SECS", default_value_t = 10)]
    header_timeout_secs: u64,
    /// longest a keep-alive connection may stay idle between requests, in seconds; then it is closed
    #[arg(long, env = "MOSAIC_IDLE_TIMEOUT_SECS", default_value_t = 60)]
    idle_timeout_secs: u64,
    /// most connections served at once; more wait in the listen queue. Default: the open-file
    /// limit less a quarter of it (at least 256) kept for the store, at most 16384; a larger value
    /// is lowered to fit that limit
    #[arg(long, env = "MOSAIC_MAX_CONNECTIONS")]
    max_connections: Option<usize>,
    /// serve HTTPS (HTTP/2 and HTTP/1.1): the certificate chain, PEM; re-read when the file changes
    #[arg(long, env = "MOSAIC_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// the private key of --tls-cert, PEM (PKCS#8, PKCS#1 or SEC1); re-read when the file changes
    #[arg(long, env = "MOSAIC_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// also serve the PostgreSQL wire protocol on this address (psql, psycopg, JDBC, BI tools):
    /// read-only SQL as `POST /v1/sql`; the password is an API key, and off loopback TLS
    /// (--tls-cert) is required. Default: no such listener
    #[arg(long, env = "MOSAIC_PG_ADDR")]
    pg_addr: Option<SocketAddr>,
    /// most PostgreSQL wire connections at once; more wait in the listen queue
    #[arg(long, env = "MOSAIC_PG_MAX_CONNECTIONS", default_value_t = mosaicdb::api::pg::DEFAULT_PG_MAX_CONNECTIONS)]
    pg_max_connections: usize,
    /// an import body must bring at least this many bytes in every --timeout-secs window
    #[arg(long, env = "MOSAIC_IMPORT_MIN_BYTES", default_value_t = mosaicdb::service::DEFAULT_MIN_IMPORT_BYTES)]
    import_min_bytes: usize,
    /// most databases the server holds, `default` among them; beyond, creating one answers 409
    #[arg(long, env = "MOSAIC_MAX_DATABASES", default_value_t = mosaicdb::service::databases::DEFAULT_MAX_DATABASES)]
    max_databases: usize,
    /// most streamed answers (NDJSON query streams and exports, backups) written at once; beyond, 503
    #[arg(long, env = "MOSAIC_MAX_STREAMS", default_value_t = mosaicdb::server::DEFAULT_MAX_STREAMS)]
    max_streams: usize,
    /// most heavy reads of one class (PromQL, InfluxQL, as-of reads, graph walks, queries) run at
    /// once; beyond, a request waits up to a second, then 503 (0: twice the cores)
    #[arg(long, env = "MOSAIC_MAX_HEAVY_READS", default_value_t = 0)]
    max_heavy_reads: usize,
    /// most memory one heavy read (PromQL, InfluxQL) may hold while it works, in MiB; beyond, 422
    /// `query_too_large` (0: no budget)
    #[arg(long, env = "MOSAIC_MAX_QUERY_MEMORY_MB", default_value_t = mosaicdb::service::core::mem_budget::DEFAULT_MAX_QUERY_BYTES >> 20)]
    max_query_memory_mb: usize,
    /// longest a SQL statement (POST /v1/sql) may run, its answer included, in seconds; then 408
    /// `statement_timeout`
    #[arg(long, env = "MOSAIC_SQL_TIMEOUT_SECS", default_value_t = 30)]
    sql_timeout_secs: u64,
    /// most memory one SQL statement may hold (joins, aggregates, sorts; nothing spills to disk),
    /// in MiB; beyond, 422 `sql_memory_exceeded`
    #[arg(long, env = "MOSAIC_SQL_MEMORY_MB", default_value_t = 256)]
    sql_memory_mb: usize,
    /// most memory all SQL statements together may hold, in MiB; beyond, 503 `sql_memory_busy`
    #[arg(long, env = "MOSAIC_SQL_TOTAL_MEMORY_MB", default_value_t = 1024)]
    sql_total_memory_mb: usize,
    /// a query with `allow_scan: false` refuses a full scan of a table with more documents than this
    #[arg(long, env = "MOSAIC_SCAN_THRESHOLD", default_value_t = 1000)]
    scan_threshold: u64,
    /// pause between TTL sweeps (`ms s m h d w`, at least 1s)
    #[arg(long, env = "MOSAIC_TTL_INTERVAL", default_value = "60s", value_parser = interval)]
    ttl_interval: Duration,
    /// pause between time-series retention runs (`ms s m h d w`, at least 1s)
    #[arg(long, env = "MOSAIC_RETENTION_INTERVAL", default_value = "60s", value_parser = interval)]
    retention_interval: Duration,
    /// pause between runs of the time-series merge task, which packs single points into
    /// compressed blocks (`ms s m h d w`, at least 1s)
    #[arg(long, env = "MOSAIC_TS_MERGE_INTERVAL", default_value = "2s", value_parser = interval)]
    ts_merge_interval: Duration,
    /// how long change events are kept (`ms s m h d w`); the changefeed_retention task removes
    /// older ones every --retention-interval
    #[arg(long, env = "MOSAIC_CHANGEFEED_RETENTION", default_value = "24h", value_parser = interval)]
    changefeed_retention: Duration,
    /// the oldest change events are removed while the feed takes more disk space than this, in MiB
    #[arg(long, env = "MOSAIC_CHANGEFEED_MAX_MB", default_value_t = 1024)]
    changefeed_max_mb: u64,
    /// log filter (tracing EnvFilter syntax), e.g. `info` or `mosaicdb=debug,tower_http=debug`
    #[arg(long, env = "MOSAIC_LOG", default_value = "info")]
    log: String,
    /// API keys: a TOML or JSON file of `keys` entries with `name`, `role` (read, write, admin) and
    /// `key` or its `sha256`; combined with MOSAIC_API_KEYS (`name:role:key,...`, env only)
    #[arg(long, env = "MOSAIC_API_KEYS_FILE")]
    api_keys_file: Option<PathBuf>,
    /// serve on an address other than loopback although no API keys are configured
    #[arg(long, env = "MOSAIC_ALLOW_UNAUTHENTICATED", action = ArgAction::SetTrue, value_parser = BoolishValueParser::new())]
    allow_unauthenticated: bool,
    /// GET /metrics answers without an API key (by default it needs the read role)
    #[arg(long, env = "MOSAIC_METRICS_PUBLIC", action = ArgAction::SetTrue, value_parser = BoolishValueParser::new())]
    metrics_public: bool,
    /// browser origins allowed to call the API (CORS): `*`, or origins separated by commas
    /// (`https://app.example.com,http://localhost:5173`); empty: none (no CORS headers)
    #[arg(long, env = "MOSAIC_CORS_ORIGINS", default_value = "", value_parser = CorsOrigins::parse)]
    cors_origins: CorsOrigins,
    /// GET /ready names the leader, the epoch and the state applied to callers without an API
    /// key too (by default only a request with a valid key sees them, when keys are configured)
    #[arg(long, env = "MOSAIC_READY_DETAILS", action = ArgAction::SetTrue, value_parser = BoolishValueParser::new())]
    ready_details: bool,
    /// host names (the `Host` header) a server without API keys answers, besides localhost and
    /// IP addresses, separated by commas (`db.internal,mosaicdb`): the defence against DNS
    /// rebinding; ignored when keys are configured
    #[arg(long, env = "MOSAIC_ALLOWED_HOSTS", default_value = "", value_parser = parse_hosts)]
    allowed_hosts: AllowedHosts,
}

/// The host names of `--allowed-hosts`.
#[derive(Debug, Clone, Default)]
struct AllowedHosts(Vec<String>);

fn parse_hosts(text: &str) -> Result<AllowedHosts, String> {
    let mut hosts = Vec::new();
    for host in text.split(',').map(str::trim).filter(|h| !h.is_empty()) {
        let ok = host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
        if !ok {
            return Err(format!("{host:?} is not a host name such as db.internal (no scheme, port or path)"));
        }
        hosts.push(host.to_ascii_lowercase());
    }
    Ok(AllowedHosts(hosts))
}

impl ServeArgs {
    /// The server's configuration; fails on keys that cannot be used (reported before serving).
    fn config(&self) -> Result<ServerConfig, String> {
        // MOSAIC_API_KEYS has no flag: a key on a command line shows in `ps`.
        let env_keys = match std::env::var(ENV_KEYS) {
            Ok(value) => Some(value),
            Err(std::env::VarError::NotPresent) => None,
            Err(std::env::VarError::NotUnicode(_)) => return Err(format!("{ENV_KEYS} is not valid UTF-8")),
        };
        let keys = KeySet::load(self.api_keys_file.as_deref(), env_keys.as_deref()).map_err(|e| e.to_string())?;
        let mut storage = self.backend.storage(&self.data_dir)?;
        storage.durability = self.durability;
        storage.cache_bytes = self.cache_mb << 20;
        storage.row_cache_bytes = self.row_cache_mb << 20;
        storage.memtable_bytes = self.memtable_mb.max(1) << 20;
        storage.min_free_bytes = self.min_free_disk_mb.saturating_mul(1 << 20);
        if let Some(url) = &self.advertise_url {
            if !matches!(storage.backend, Backend::Postgres { .. }) {
                return Err(
                    "--advertise-url (cluster mode) needs --backend postgres: servers share its database".into()
                );
            }
            if self.durability != Durability::Sync {
                return Err("--advertise-url (cluster mode) needs --durability sync: a write acknowledged before \
                     PostgreSQL's commit reached its standby would be lost by a failover"
                    .into());
            }
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!("--advertise-url must be an http:// or https:// URL, not {url:?}"));
            }
            storage.advertise = Some(url.trim_end_matches('/').to_owned());
        }
        Ok(ServerConfig {
            addr: self.addr,
            storage,
            limits: HttpLimits {
                max_body_bytes: self.max_body_mb.max(1) << 20,
                timeout: Duration::from_secs(self.timeout_secs.max(1)),
                min_import_bytes: self.import_min_bytes.max(1),
                max_streams: self.max_streams.max(1),
                heavy_reads: match self.max_heavy_reads {
                    0 => HeavyReads::default(),
                    n => HeavyReads { per_class: n, ..HeavyReads::default() },
                },
                sql: SqlLimits {
                    timeout: Duration::from_secs(self.sql_timeout_secs.max(1)),
                    statement_memory: self.sql_memory_mb.max(1).saturating_mul(1 << 20),
                    total_memory: self.sql_total_memory_mb.max(1).saturating_mul(1 << 20),
                },
            },
            options: DbOptions {
                scan_threshold: self.scan_threshold,
                graph_memory_bytes: self.graph_memory_mb << 20,
                max_query_bytes: self.max_query_memory_mb.saturating_mul(1 << 20),
                ..DbOptions::default()
            },
            tasks: TaskConfig {
                ttl_interval: self.ttl_interval,
                retention_interval: self.retention_interval,
                merge_interval: self.ts_merge_interval,
                changefeed: Retention { max_age: self.changefeed_retention, max_bytes: self.changefeed_max_mb << 20 },
            },
            access: Access {
                keys,
                metrics_public: self.metrics_public,
                allow_unauthenticated: self.allow_unauthenticated,
                cors: self.cors_origins.clone(),
                ready_details: self.ready_details,
                allowed_hosts: self.allowed_hosts.0.clone(),
            },
            listener: None,
            max_databases: self.max_databases.max(1),
            max_connections: self.max_connections,
            timeouts: server::ConnTimeouts {
                header: Duration::from_secs(self.header_timeout_secs.max(1)),
                idle: Duration::from_secs(self.idle_timeout_secs.max(1)),
            },
            tls: match (&self.tls_cert, &self.tls_key) {
                (Some(cert), Some(key)) => Some(server::TlsFiles { cert: cert.clone(), key: key.clone() }),
                _ => None,
            },
            pg_addr: self.pg_addr,
            pg_max_connections: self.pg_max_connections.max(1),
        })
    }
}

/// A task interval: a duration such as `90s` or `5m`, at least one second.
fn interval(text: &str) -> Result<Duration, String> {
    let ms = mosaicdb::service::core::duration::parse_duration_ms(text)
        .ok_or_else(|| format!("{text:?} is not a duration such as 30s, 5m or 1h"))?;
    let d = Duration::from_millis(u64::try_from(ms).map_err(|_| "out of range".to_owned())?);
    if d < mosaicdb::background::MIN_INTERVAL {
        return Err("an interval must be at least 1s".into());
    }
    Ok(d)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Openapi) => match serde_json::to_string_pretty(&mosaicdb::api::openapi()) {
            Ok(json) => {
                println!("{json}");
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
        Some(Command::Inspect { data_dir, prefix, backend }) => {
            let storage = match backend.storage(&data_dir) {
                Ok(storage) => storage,
                Err(e) => return fail(e),
            };
            let mut out = std::io::stdout().lock();
            match mosaicdb::tools::inspect(storage, &prefix, &mut out) {
                Ok(_) => ExitCode::SUCCESS,
                Err(e) => fail(e),
            }
        }
        Some(Command::Check { data_dir, backend }) => match backend.storage(&data_dir) {
            Ok(storage) => check(storage),
            Err(e) => fail(e),
        },
        Some(Command::Health { addr, timeout_secs }) => health(addr, Duration::from_secs(timeout_secs.max(1))),
        Some(Command::Backup { url, key, timeout_secs, all: Some(dir), .. }) => {
            backup_all(&url, key.as_deref(), Duration::from_secs(timeout_secs.max(1)), &dir)
        }
        Some(Command::Backup { url, key, timeout_secs, database, all: None }) => {
            let url = mosaicdb::tools::backup::backup_url(&url, database.as_deref());
            backup(&url, key.as_deref(), Duration::from_secs(timeout_secs.max(1)))
        }
        Some(Command::Restore { file, data_dir, backend, database, all }) => match backend.storage(&data_dir) {
            Ok(storage) if all => restore_all(&file, storage),
            Ok(storage) => restore(file, storage, database),
            Err(e) => fail(e),
        },
        Some(Command::Serve(args)) => serve(&args),
        None => serve(&cli.serve),
    }
}

fn serve(args: &ServeArgs) -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_new(&args.log).unwrap_or_else(|_| "info".into());
    // colours only on a terminal: a container's log collector gets plain text
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    let config = match args.config() {
        Ok(config) => config,
        Err(e) => return fail(e),
    };
    match runtime.block_on(server::run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

/// Every database of a data directory, opened for a tool: no background job resumed, no periodic
/// task started (call from within a tokio runtime).
fn offline(
    storage: StorageConfig,
) -> Result<std::sync::Arc<mosaicdb::service::databases::Databases>, mosaicdb::service::ServiceError> {
    let options = DbOptions { background_jobs: false, ..DbOptions::default() };
    let attach: mosaicdb::service::databases::Attach = std::sync::Arc::new(|_| Box::new(|| Box::pin(async {})));
    mosaicdb::service::databases::Databases::open(storage, options, usize::MAX, attach)
}

fn check(storage: StorageConfig) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    let result = runtime.block_on(async {
        // every database, and nothing started or resumed: the check changes nothing
        let databases = offline(storage)?;
        let mut reports = Vec::new();
        for (name, db) in databases.all() {
            reports.push((name, mosaicdb::service::check(&db).await?));
        }
        let unopened = databases.unopened();
        databases.shutdown().await?;
        Ok::<_, mosaicdb::service::ServiceError>((reports, unopened))
    });
    let (reports, unopened) = match result {
        Ok(found) => found,
        Err(e) => return fail(e),
    };
    // `default`'s report, with every other database's under `databases` and those that could
    // not be opened under `unopened`; `ok` for all of them
    let ok = reports.iter().all(|(_, r)| r.ok) && unopened.is_empty();
    let mut reports = reports.into_iter();
    let mut out = match reports.next().map(|(_, r)| serde_json::to_value(r)) {
        Some(Ok(serde_json::Value::Object(out))) => out,
        _ => return fail("the check made no report"),
    };
    let others: serde_json::Map<_, _> =
        reports.map(|(name, r)| (name, serde_json::to_value(r).unwrap_or_default())).collect();
    if !others.is_empty() {
        out.insert("databases".into(), others.into());
    }
    if !unopened.is_empty() {
        let unopened = unopened.into_iter().map(|(name, why)| serde_json::json!({"database": name, "error": why}));
        out.insert("unopened".into(), unopened.collect());
    }
    out.insert("ok".into(), ok.into());
    println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

fn health(mut addr: SocketAddr, timeout: Duration) -> ExitCode {
    if addr.ip().is_unspecified() {
        addr.set_ip(if addr.is_ipv4() { [127, 0, 0, 1].into() } else { std::net::Ipv6Addr::LOCALHOST.into() });
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    let url = format!("http://{addr}/health");
    let answer = runtime.block_on(mosaicdb::tools::client::send(
        axum::http::Method::GET,
        &url,
        None,
        Default::default(),
        timeout,
    ));
    match answer {
        Ok(response) if response.status().is_success() => ExitCode::SUCCESS,
        Ok(response) => fail(format!("{url} answered {}", response.status())),
        Err(e) => fail(e),
    }
}

fn backup(url: &str, key: Option<&str>, timeout: Duration) -> ExitCode {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        return fail("the archive is binary: redirect stdout to a file (mosaicdb backup --url … > backup.file)");
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    let mut out = std::io::stdout().lock();
    match runtime.block_on(mosaicdb::tools::backup::backup(url, key, timeout, &mut out)) {
        Ok((header, summary)) => {
            eprintln!(
                "mosaicdb: backup of {} records ({} bytes) as of {}, sha256 {}",
                summary.records,
                summary.bytes,
                header.created_at,
                summary.sha256_hex()
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(format!("backup failed: {e}")),
    }
}

fn backup_all(url: &str, key: Option<&str>, timeout: Duration, dir: &std::path::Path) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    match runtime.block_on(mosaicdb::tools::backup_all::backup_all(url, key, timeout, dir)) {
        Ok(archived) => {
            for a in &archived {
                eprintln!("mosaicdb: backup of {:?} in {}, sha256 {}", a.name, dir.join(&a.file).display(), a.sha256);
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

fn restore_all(dir: &std::path::Path, storage: StorageConfig) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    match runtime.block_on(mosaicdb::tools::backup_all::restore_all(dir, storage)) {
        Ok(restored) => {
            let reports: serde_json::Map<_, _> = restored
                .iter()
                .map(|(name, r)| (name.clone(), serde_json::to_value(&r.check).unwrap_or_default()))
                .collect();
            println!("{}", serde_json::to_string_pretty(&reports).unwrap_or_default());
            if restored.iter().all(|(_, r)| r.check.ok) {
                ExitCode::SUCCESS
            } else {
                fail("the check of the restored data found problems")
            }
        }
        Err(e) => fail(format!("restore failed: {e}")),
    }
}

fn restore(file: PathBuf, storage: StorageConfig, database: Option<String>) -> ExitCode {
    let target = match (&database, &storage.backend) {
        (Some(db), _) => format!("the new database {db:?}"),
        (None, Backend::Embedded) => storage.path.display().to_string(),
        (None, Backend::Postgres { .. }) => "the PostgreSQL database".to_owned(),
    };
    let source: Box<dyn std::io::Read + Send> = if file.as_os_str() == "-" {
        Box::new(std::io::stdin())
    } else {
        match std::fs::File::open(&file) {
            Ok(f) => Box::new(f),
            Err(e) => return fail(format!("cannot open {}: {e}", file.display())),
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    let restoring = async move {
        let Some(name) = database else {
            return mosaicdb::service::backup::restore(source, storage).await;
        };
        let databases = offline(storage)?;
        let restored = databases.restore_as(&name, source, None).await;
        databases.shutdown().await?;
        restored
    };
    match runtime.block_on(restoring) {
        Ok(restored) => {
            eprintln!(
                "mosaicdb: restored {} records as of {} (written by mosaicdb {}) into {}",
                restored.summary.records, restored.header.created_at, restored.header.server_version, target
            );
            println!("{}", serde_json::to_string_pretty(&restored.check).unwrap_or_default());
            if restored.check.ok { ExitCode::SUCCESS } else { fail("the check of the restored data found problems") }
        }
        Err(e) => fail(format!("restore failed: {e}")),
    }
}

fn fail(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("mosaicdb: {e}");
    ExitCode::FAILURE
}
