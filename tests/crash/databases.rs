//! Databases and crashes: each database (`POST /v1/databases`) is a store of its own under
//! `databases/{id}/`, registered in `default`'s catalog, and what was acknowledged of it — its
//! creation, its writes, its drop — must survive a crash like `default`'s own writes do.
//!
//! - **SIGKILL under writers** (sync durability): `default` and two databases, `one` and `two`,
//!   each with the same table and the same keys; concurrent writers PUT and DELETE in all three
//!   (acknowledged = the whole response arrived), the server is SIGKILLed at a random moment,
//!   `mosaicdb check` must pass offline for every database, and after a restart every key of every
//!   database must be as its last acknowledged write left it (or as the write in flight would
//!   have), each document in its own database only (the listing, a query on an index, the count
//!   and `/v1/db/{db}/admin/check` agree). Several rounds on the same directory.
//! - **SIGKILL right after a create or a drop is acknowledged**, while writers go on in the other
//!   databases: a created database exists after the restart (empty, or with the writes it
//!   acknowledged), a dropped one answers 404 `database_not_found` and its folder goes (the
//!   removal resumes at the start) — and stays gone when the crash came after the removal; a
//!   name used again after a drop starts empty. And creates cut short (SIGKILL a few
//!   milliseconds in): the database is there or not, empty, to the offline check and the
//!   restarted server alike.
//! - **Power loss** (powerfs, as `power_loss.rs`; in `data` and `dirs` modes): a fresh data
//!   directory, a database created and the power cut at once with nothing else written; then
//!   databases created while writers run in the others, with and without writes of their own,
//!   cuts at random moments, a cut right after a drop and one after the removal of the dropped
//!   database's folder: after each cut and restart every database acknowledged exists with every
//!   acknowledged write, and a dropped one stays dropped, its folder gone.
//! - **Power loss inside a create**: powerfs holds every fsync and lets the create's through one
//!   at a time, and the power goes at the first, the second, ... of them (the catalog's, then
//!   those making the store): the database is there (whole, empty) or not, alike to the check and
//!   the server.
//!
//! After every restart `databases/` holds exactly the folders of the databases served: none is
//! left of a drop, nor of a create cut short.
//! `MOSAIC_CRASH_SEED` replays a run; the power trials (`MOSAIC_POWER_TRIALS`, default 2) use
//! seed + `t`, as in `power_loss.rs`. The power tests need root, `/dev/fuse` and powerfs
//! (`MOSAIC_POWERFS`), and say so on stderr where one is missing.

use crate::mount::PowerFs;
use crate::process::{ServerProc, kill, kill_and, start};
use crate::workload::{self, Outcome, Rng, State, WAIT, join_writers, keys_of, lost, offline_check};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// The table every database has (the same name in each, so a key read from the wrong store
/// would show).
const TABLE: &str = "items";
/// Writers per database.
const WRITERS: usize = 3;
const KEYS_PER_WRITER: usize = 6;
const DEFAULT: &str = "default";

/// The path prefix of database `db`'s routes: plain `/v1` for `default`.
fn prefix(db: &str) -> String {
    if db == DEFAULT { "/v1".into() } else { format!("/v1/db/{db}") }
}

fn doc_url(base: &str, db: &str, id: &str) -> String {
    format!("{base}{}/tables/{TABLE}/documents/{}", prefix(db), id.replace('/', "%2F"))
}

/// A document of database `db`, stamped with the write that made it.
fn document(db: &str, w: usize, stamp: u64) -> Value {
    json!({"db": db, "w": w, "stamp": stamp, "text": format!("{db} writer {w} stamp {stamp}")})
}

/// Every key of every writer, absent.
fn empty_state() -> State {
    (0..WRITERS).flat_map(|w| (0..KEYS_PER_WRITER).map(move |k| (workload::key(w, k), None))).collect()
}

/// A PUT of `doc` (or a DELETE, `None`) of `id` in `db`: its status once the whole response has
/// arrived, else `None` (the server is gone).
async fn write(client: &reqwest::Client, base: &str, db: &str, id: &str, doc: Option<&Value>) -> Option<StatusCode> {
    let url = doc_url(base, db, id);
    let request = match doc {
        Some(doc) => client.put(url).json(doc),
        None => client.delete(url),
    };
    let resp = request.send().await.ok()?;
    let status = resp.status();
    resp.bytes().await.ok()?;
    Some(status)
}

/// What a write answers, given whether its document existed.
fn expected_status(existed: bool, put: bool) -> StatusCode {
    match (put, existed) {
        (true, false) => StatusCode::CREATED,
        (true, true) => StatusCode::OK,
        (false, true) => StatusCode::NO_CONTENT,
        (false, false) => StatusCode::NOT_FOUND,
    }
}

/// One writer of database `db`: PUTs (70%) and DELETEs on its own keys, one at a time, until the
/// server stops answering.
async fn writer(
    client: reqwest::Client,
    base: String,
    db: String,
    w: usize,
    round: u64,
    mut acked: State,
    mut rng: Rng,
) -> Outcome {
    let mut out = Outcome::default();
    for i in 1u64.. {
        let stamp = round * 100_000_000 + i * 100 + w as u64;
        let id = workload::key(w, rng.below(KEYS_PER_WRITER as u64) as usize);
        let doc = rng.chance(70).then(|| document(&db, w, stamp));
        out.in_flight = Some((State::from([(id.clone(), doc.clone())]), false));
        let Some(status) = write(&client, &base, &db, &id, doc.as_ref()).await else { break };
        out.in_flight = None;
        out.acknowledged += 1;
        let existed = acked[&id].is_some();
        assert_eq!(
            status,
            expected_status(existed, doc.is_some()),
            "{db}: writer {w} on {id} ({})",
            workload::show(&doc)
        );
        acked.insert(id, doc);
    }
    out.acked = acked;
    out
}

/// What a round does besides (or instead of) its writers, then the crash at once.
#[derive(Debug, Clone, Copy)]
enum Action {
    /// the crash at a random moment
    Nothing,
    /// the crash right after the database's creation is acknowledged
    Create(&'static str),
    /// create it, its table, a few writes; the crash right after the last one is acknowledged
    CreateAndWrite(&'static str),
    /// the crash right after the drop is acknowledged
    Drop(&'static str),
    /// the crash once the dropped database's folder is gone (its removal done, the drop mark
    /// cleared or about to be)
    DropAndRemove(&'static str),
    /// the crash a few milliseconds into the database's creation, its answer most likely not
    /// arrived: then it may exist or not, but empty, and the same to the check and the server
    CreateInFlight(&'static str),
    /// powerfs only: the power cut while the database's creation waits in one of its fsyncs
    /// (each let through one at a time): the one after as many as given, else a random one of the
    /// first 260 (the catalog's, then those making its store, some 250). It may exist or not, but
    /// empty, and the same to the check and the server
    CreateCut(&'static str, Option<u64>),
}

/// `POST /v1/databases` in the background: its status once the whole answer arrived.
fn spawn_create(client: &reqwest::Client, base: &str, name: &str) -> JoinHandle<Option<StatusCode>> {
    let req = client.post(format!("{base}/v1/databases")).json(&json!({"name": name}));
    tokio::spawn(async move {
        let resp = req.send().await.ok()?;
        let status = resp.status();
        resp.bytes().await.ok()?;
        Some(status)
    })
}

/// What is known of a live database.
struct Known {
    /// its id (`default`: 0)
    id: u32,
    /// its table's documents by key; `None`: it has no table yet
    table: Option<State>,
}

/// A run: a data directory, what its databases must hold, and the crash rounds on it.
struct Run<'f> {
    /// powerfs, when the data directory is on it
    fs: Option<&'f PowerFs>,
    data: PathBuf,
    client: reqwest::Client,
    rng: Rng,
    label: String,
    /// every live database, `default` included
    dbs: BTreeMap<String, Known>,
    /// every acknowledged drop: name and id
    dropped: Vec<(String, u32)>,
    acknowledged: u64,
    in_flight: u64,
    /// the longest an acknowledged create took: a create in flight is cut within about that
    create_micros: u64,
}

impl<'f> Run<'f> {
    fn new(fs: Option<&'f PowerFs>, data: PathBuf, label: String, seed: u64) -> Run<'f> {
        let client = reqwest::Client::builder().timeout(WAIT).build().unwrap();
        let dbs = BTreeMap::from([(DEFAULT.to_owned(), Known { id: 0, table: None })]);
        let dropped = Vec::new();
        let rng = Rng(seed | 1);
        Run { fs, data, client, rng, label, dbs, dropped, acknowledged: 0, in_flight: 0, create_micros: 0 }
    }

    /// `POST /v1/databases`: 201, recorded as live with no table.
    async fn create_database(&mut self, base: &str, name: &str) {
        let started = Instant::now();
        let r = self.client.post(format!("{base}/v1/databases")).json(&json!({"name": name})).send().await.unwrap();
        let status = r.status();
        let body: Value = r.json().await.unwrap();
        self.create_micros = self.create_micros.max(started.elapsed().as_micros() as u64);
        assert_eq!(status, StatusCode::CREATED, "{}: create {name}: {body}", self.label);
        assert_eq!((&body["name"], &body["tables"]), (&json!(name), &json!(0)), "{}: {body}", self.label);
        let id = body["id"].as_u64().unwrap() as u32;
        assert!(id > 0 && self.dropped.iter().all(|&(_, d)| d != id), "{}: id {id} given again: {body}", self.label);
        self.dbs.insert(name.to_owned(), Known { id, table: None });
    }

    /// The table (with a hash index on `db`) in database `db`, recorded empty.
    async fn create_table(&mut self, base: &str, db: &str) {
        let p = prefix(db);
        let r = self.client.post(format!("{base}{p}/tables")).json(&json!({"name": TABLE})).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::CREATED, "{}: table in {db}: {}", self.label, r.text().await.unwrap());
        let index = json!({"name": "by_db", "kind": "hash", "fields": ["db"]});
        let r = self.client.post(format!("{base}{p}/tables/{TABLE}/indexes")).json(&index).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::CREATED, "{}: index in {db}: {}", self.label, r.text().await.unwrap());
        self.dbs.get_mut(db).unwrap().table = Some(empty_state());
    }

    /// One round: writers in every database (but one being dropped) if `writers`, `action`,
    /// `crash`, the offline check, a restart and the verification of every database.
    async fn round(
        &mut self,
        live: ServerProc,
        round: u64,
        writers: bool,
        action: Action,
        crash: &dyn Fn(ServerProc),
    ) -> ServerProc {
        let label = format!("{} round {round} ({action:?})", self.label);
        let base = live.base.clone();
        let skip = match action {
            Action::Drop(name) | Action::DropAndRemove(name) => Some(name),
            _ => None,
        };
        // the writers, by database
        let mut tasks: Vec<(String, JoinHandle<Outcome>)> = Vec::new();
        if writers {
            let names: Vec<String> = self.dbs.keys().filter(|n| Some(n.as_str()) != skip).cloned().collect();
            for name in names {
                if self.dbs[&name].table.is_none() {
                    self.create_table(&base, &name).await;
                }
                let state = self.dbs[&name].table.clone().unwrap();
                for w in 0..WRITERS {
                    let seed = Rng(self.rng.next() | 1);
                    let task =
                        writer(self.client.clone(), base.clone(), name.clone(), w, round, keys_of(&state, w), seed);
                    tasks.push((name.clone(), tokio::spawn(task)));
                }
            }
            let wait = match action {
                Action::Nothing => 300 + self.rng.below(900),
                _ => 50 + self.rng.below(500),
            };
            tokio::time::sleep(Duration::from_millis(wait)).await;
        }
        // the writes the action itself made, all acknowledged
        let mut direct: Option<(String, Outcome)> = None;
        let mut creating: Option<JoinHandle<Option<StatusCode>>> = None;
        let mut held = None;
        let mut passed = None;
        match action {
            Action::Nothing => {}
            Action::CreateInFlight(name) => {
                creating = Some(spawn_create(&self.client, &base, name));
                let within = self.create_micros.max(2000) * 5 / 4;
                tokio::time::sleep(Duration::from_micros(self.rng.below(within))).await;
            }
            Action::CreateCut(name, passes) => {
                let fs = self.fs.expect("a cut in a create needs powerfs");
                let passes = passes.unwrap_or_else(|| self.rng.below(260));
                held = Some(fs.hold());
                let task = spawn_create(&self.client, &base, name);
                let mut n = 0;
                loop {
                    // the next fsync held, or the create answered
                    let deadline = Instant::now() + WAIT;
                    while fs.status()["pending"] == 0 && !task.is_finished() {
                        assert!(Instant::now() < deadline, "{label}: no fsync and no answer");
                        tokio::time::sleep(Duration::from_micros(200)).await;
                    }
                    if n == passes || task.is_finished() {
                        break;
                    }
                    // let it through (one that comes in between may pass too) and hold the next
                    fs.ctl("release-fsync");
                    fs.ctl("hold-fsync");
                    n += 1;
                }
                passed = Some(n);
                creating = Some(task);
            }
            Action::Create(name) => self.create_database(&base, name).await,
            Action::CreateAndWrite(name) => {
                self.create_database(&base, name).await;
                self.create_table(&base, name).await;
                let mut out = Outcome { acked: empty_state(), ..Outcome::default() };
                for i in 0..8 {
                    let w = self.rng.below(WRITERS as u64) as usize;
                    let id = workload::key(w, self.rng.below(KEYS_PER_WRITER as u64) as usize);
                    let doc = self.rng.chance(80).then(|| document(name, w, round * 100_000_000 + 99_000_000 + i));
                    let status = write(&self.client, &base, name, &id, doc.as_ref()).await;
                    let existed = out.acked[&id].is_some();
                    assert_eq!(status, Some(expected_status(existed, doc.is_some())), "{label}: {id}");
                    out.acked.insert(id, doc);
                    out.acknowledged += 1;
                }
                direct = Some((name.to_owned(), out));
            }
            Action::Drop(name) | Action::DropAndRemove(name) => {
                let r = self.client.delete(format!("{base}/v1/databases/{name}")).send().await.unwrap();
                let status = r.status();
                let body = r.text().await.unwrap();
                assert_eq!(status, StatusCode::NO_CONTENT, "{label}: drop {name}: {body}");
                let known = self.dbs.remove(name).unwrap();
                self.dropped.push((name.to_owned(), known.id));
                if let Action::DropAndRemove(_) = action {
                    let folder = self.data.join("databases").join(known.id.to_string());
                    let deadline = Instant::now() + WAIT;
                    while folder.exists() {
                        assert!(Instant::now() < deadline, "{label}: the folder of the dropped {name} stays");
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    tokio::time::sleep(Duration::from_millis(self.rng.below(200))).await;
                }
            }
        }
        crash(live);
        drop(held);
        // whether the crash came before the background removal of a dropped database's folder
        // (then the restart resumes it) or after
        let left = match action {
            Action::Drop(_) | Action::DropAndRemove(_) => {
                let &(_, id) = self.dropped.last().unwrap();
                let left = self.data.join("databases").join(id.to_string()).exists();
                format!(", the dropped database's folder {} at the crash", if left { "still there" } else { "gone" })
            }
            _ => String::new(),
        };
        let mut outcomes: BTreeMap<String, Vec<Outcome>> = BTreeMap::new();
        let (names, handles): (Vec<String>, Vec<JoinHandle<Outcome>>) = tasks.into_iter().unzip();
        for (name, outcome) in names.into_iter().zip(join_writers(handles).await) {
            outcomes.entry(name).or_default().push(outcome);
        }
        if let Some((name, outcome)) = direct {
            outcomes.entry(name).or_default().push(outcome);
        }
        let acknowledged: u64 = outcomes.values().flatten().map(|o| o.acknowledged).sum();
        let in_flight = outcomes.values().flatten().filter(|o| o.in_flight.is_some()).count() as u64;
        if writers {
            assert!(acknowledged >= 10, "{label}: only {acknowledged} writes were acknowledged");
        }

        // a create in flight: whether it happened, by the check (and then the server must agree)
        let maybe = match (action, creating) {
            (Action::CreateInFlight(name) | Action::CreateCut(name, _), Some(task)) => {
                let answer = tokio::time::timeout(WAIT, task).await.expect("the create hung after the crash").unwrap();
                assert!(matches!(answer, None | Some(StatusCode::CREATED)), "{label}: create {name}: {answer:?}");
                Some((name, answer.is_some()))
            }
            _ => None,
        };
        let created = self.check_offline(&label, maybe);
        let live = start(&self.data, "sync", &self.client).await;
        let mut left = left;
        if let Some((name, acknowledged)) = maybe {
            left = format!(", its create {}", if acknowledged { "acknowledged" } else { "in flight" });
            if let Some(n) = passed {
                left.push_str(&format!(", cut after {n} of its fsyncs"));
            }
            if created {
                let r = self.client.get(format!("{}/v1/databases/{name}", live.base)).send().await.unwrap();
                let body: Value = r.json().await.unwrap();
                let id = body["id"].as_u64().unwrap_or_else(|| panic!("{label}: {name} was checked offline: {body}"));
                self.dbs.insert(name.to_owned(), Known { id: id as u32, table: None });
                left.push_str(", made");
            } else {
                left.push_str(", not made");
            }
        }
        let not_made = maybe.filter(|_| !created).map(|(name, _)| name);
        self.verify(&live.base, &outcomes, not_made, &label).await;
        eprintln!(
            "{label}: {acknowledged} writes acknowledged in {} databases, {in_flight} in flight at the crash{left}",
            outcomes.len()
        );
        self.acknowledged += acknowledged;
        self.in_flight += in_flight;
        live
    }

    /// `mosaicdb check` with the server down: ok for every live database, and only those — and
    /// `maybe`, a database whose create was in flight (with whether it was acknowledged after
    /// all), if it was made. Returns whether it was.
    fn check_offline(&self, label: &str, maybe: Option<(&str, bool)>) -> bool {
        let (ok, report) = offline_check(&self.data);
        assert!(ok && report["ok"] == true, "{label}: check after the crash: {report}");
        let mut others: BTreeSet<&str> = self.dbs.keys().map(String::as_str).filter(|&n| n != DEFAULT).collect();
        let checked: BTreeSet<&str> =
            report["databases"].as_object().map(|m| m.keys().map(String::as_str).collect()).unwrap_or_default();
        let made = match maybe {
            Some((name, acknowledged)) => {
                let made = checked.contains(name);
                assert!(made || !acknowledged, "{label}: {name}'s create was acknowledged: {report}");
                if made {
                    others.insert(name);
                }
                made
            }
            None => false,
        };
        assert_eq!(checked, others, "{label}: the databases the check covered: {report}");
        for name in &others {
            assert_eq!(report["databases"][name]["ok"], true, "{label}: check of {name}: {report}");
        }
        made
    }

    /// After the restart: the databases listed are exactly the live ones with their ids, each
    /// holds what its writers acknowledged and nothing else, every dropped one answers 404 and
    /// its folder goes. Records what each holds for the next round.
    /// `not_made`: a database whose create was in flight at the crash, found not made.
    async fn verify(
        &mut self,
        base: &str,
        outcomes: &BTreeMap<String, Vec<Outcome>>,
        not_made: Option<&str>,
        label: &str,
    ) {
        let client = self.client.clone();
        let list: Value = client.get(format!("{base}/v1/databases")).send().await.unwrap().json().await.unwrap();
        let listed: BTreeMap<String, u64> = list["databases"]
            .as_array()
            .unwrap_or_else(|| panic!("{label}: {list}"))
            .iter()
            .map(|d| (d["name"].as_str().unwrap().to_owned(), d["id"].as_u64().unwrap()))
            .collect();
        let known: BTreeMap<String, u64> = self.dbs.iter().map(|(n, k)| (n.clone(), u64::from(k.id))).collect();
        assert_eq!(listed, known, "{label}: the databases after the restart: {list}");

        let names: Vec<String> = self.dbs.keys().cloned().collect();
        for name in &names {
            let p = prefix(name);
            let Some(before) = self.dbs[name].table.clone() else {
                // created, nothing written: it exists, empty
                let tables: Value = client.get(format!("{base}{p}/tables")).send().await.unwrap().json().await.unwrap();
                assert_eq!(tables["tables"], json!([]), "{label}: {name} should have no table: {tables}");
                continue;
            };
            let found = read_back(&client, base, name, before.keys()).await;
            // a database without writers this round keeps what it held
            let still = [Outcome { acked: before.clone(), ..Outcome::default() }];
            let mine = outcomes.get(name).map_or(&still[..], Vec::as_slice);
            let problems = lost(mine, &found, &format!("{label}: database {name}"));
            assert!(problems.is_empty(), "{}", problems.join("\n"));
            let present: BTreeSet<&String> = found.iter().filter(|(_, d)| d.is_some()).map(|(id, _)| id).collect();
            // the listing holds exactly those, each of this database
            let listing = list_documents(&client, base, name).await;
            let listed: BTreeSet<&String> = listing.keys().collect();
            assert_eq!(listed, present, "{label}: the listing of {name}");
            for (id, doc) in &listing {
                assert_eq!(doc["db"], json!(name), "{label}: {name} lists {id} as {doc}");
            }
            // the index finds this database's documents, and none of another's
            for other in self.dbs.keys().chain(self.dropped.iter().map(|(n, _)| n)) {
                let q = json!({"filter": {"db": other}, "limit": 1000});
                let url = format!("{base}{p}/tables/{TABLE}/query");
                let r: Value = client.post(url).json(&q).send().await.unwrap().json().await.unwrap();
                let ids: BTreeSet<&str> =
                    r["documents"].as_array().unwrap().iter().map(|d| d["_id"].as_str().unwrap()).collect();
                let want: BTreeSet<&str> =
                    if other == name { present.iter().map(|s| s.as_str()).collect() } else { BTreeSet::new() };
                assert_eq!(ids, want, "{label}: in {name}, the documents of {other}: {r}");
            }
            let info: Value =
                client.get(format!("{base}{p}/tables/{TABLE}")).send().await.unwrap().json().await.unwrap();
            assert_eq!(info["documents"], present.len(), "{label}: {name}: {info}");
            let r = client.post(format!("{base}{p}/admin/check")).json(&json!({})).send().await.unwrap();
            let report: Value = r.json().await.unwrap();
            assert_eq!(report["ok"], true, "{label}: {name}: check after the restart: {report}");
            self.dbs.get_mut(name).unwrap().table = Some(found);
        }

        for (name, id) in &self.dropped {
            if !self.dbs.contains_key(name) {
                for url in [format!("{base}/v1/databases/{name}"), doc_url(base, name, "w0/k0")] {
                    let r = client.get(&url).send().await.unwrap();
                    let status = r.status();
                    let body: Value = r.json().await.unwrap_or(Value::Null);
                    assert_eq!(
                        (status, &body["code"]),
                        (StatusCode::NOT_FOUND, &json!("database_not_found")),
                        "{label}: GET {url} of the dropped {name}: {body}"
                    );
                }
            }
            // the removal resumes at the start
            let folder = self.data.join("databases").join(id.to_string());
            let deadline = Instant::now() + WAIT;
            while folder.exists() {
                assert!(
                    Instant::now() < deadline,
                    "{label}: the folder of the dropped {name} (id {id}) is still there"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        // and no folder is left of a database that is not (a create in flight included): the
        // start removes such stores in the background, so this waits a while for it
        let live: BTreeSet<String> = self.dbs.values().filter(|k| k.id != 0).map(|k| k.id.to_string()).collect();
        let read_folders = || -> BTreeSet<String> {
            match std::fs::read_dir(self.data.join("databases")) {
                Ok(dir) => dir.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeSet::new(),
                Err(e) => panic!("{label}: {e}"),
            }
        };
        let deadline = Instant::now() + WAIT;
        let mut folders = read_folders();
        while folders.difference(&live).next().is_some() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
            folders = read_folders();
        }
        let missing: Vec<&String> = live.difference(&folders).collect();
        assert!(missing.is_empty(), "{label}: no folder under databases/ for the live database ids {missing:?}");
        let stray: Vec<String> = folders
            .difference(&live)
            .map(|id| {
                let folder = self.data.join("databases").join(id);
                let mut files: Vec<String> = std::fs::read_dir(&folder)
                    .map(|d| d.filter_map(Result::ok).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
                    .unwrap_or_default();
                files.sort();
                format!("databases/{id} holding {files:?}")
            })
            .collect();
        if !stray.is_empty() {
            // which id a create of the database in flight gets now: past the stray folder's, the
            // catalog had given that id to it (durably) before the crash
            let probe = match not_made {
                Some(name) => {
                    let r = client.post(format!("{base}/v1/databases")).json(&json!({"name": name})).send().await;
                    let answer = match r {
                        Ok(r) => format!("{} {}", r.status(), r.text().await.unwrap_or_default()),
                        Err(e) => e.to_string(),
                    };
                    format!("; {name}, whose create was in flight, answers 404 and a create of it now gives {answer}")
                }
                None => String::new(),
            };
            panic!(
                "{label}: folders of no database the server serves, the offline check checks or a drop removes: {}{probe}",
                stray.join(", ")
            );
        }
    }
}

/// Each key of `db`'s table read back (without `_id`).
async fn read_back<'a>(client: &reqwest::Client, base: &str, db: &str, ids: impl Iterator<Item = &'a String>) -> State {
    workload::read_back_from(client, &format!("{base}{}/tables/{TABLE}", prefix(db)), ids).await
}

/// Every document of `db`'s table, by id, page by page.
async fn list_documents(client: &reqwest::Client, base: &str, db: &str) -> BTreeMap<String, Value> {
    let mut all = BTreeMap::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut url =
            reqwest::Url::parse(&format!("{base}{}/tables/{TABLE}/documents?limit=1000", prefix(db))).unwrap();
        if let Some(c) = &cursor {
            url.query_pairs_mut().append_pair("cursor", c);
        }
        let page: Value = client.get(url).send().await.unwrap().json().await.unwrap();
        for d in page["documents"].as_array().unwrap_or_else(|| panic!("{db}: {page}")) {
            all.insert(d["_id"].as_str().unwrap().to_owned(), d.clone());
        }
        match page["cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return all,
        }
    }
}

// ---------- SIGKILL ----------

/// A fresh directory with `one` and `two` made at the start, then `rounds` of SIGKILL.
async fn sigkill_rounds(what: &str, rounds: &[(bool, Action)]) {
    let seed = workload::seed();
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let mut run = Run::new(None, dir.path().join("data"), format!("databases, SIGKILL, {what} (seed {seed})"), seed);
    let mut live = start(&run.data, "sync", &run.client).await;
    for name in ["one", "two"] {
        run.create_database(&live.base, name).await;
    }
    for (round, &(writers, action)) in rounds.iter().enumerate() {
        live = run.round(live, round as u64, writers, action, &kill).await;
    }
    drop(live);
    eprintln!(
        "databases, SIGKILL, {what}: {} rounds, {} acknowledged writes ({} in flight at a kill), 0 lost, {:.1} s (seed {seed})",
        rounds.len(),
        run.acknowledged,
        run.in_flight,
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_in_every_database_survive_sigkill_each_in_its_own() {
    sigkill_rounds("writers", &[(true, Action::Nothing); 4]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledged_create_or_drop_of_a_database_survives_sigkill() {
    use Action::*;
    let rounds = [
        (true, Create("c0")),
        (true, CreateAndWrite("c1")),
        (true, Drop("c1")),
        (true, Drop("c0")),
        // a name used again starts empty: nothing of the dropped database comes back
        (true, CreateAndWrite("c1")),
        (true, Drop("one")),
        (true, Create("one")),
        (true, CreateAndWrite("c2")),
        (true, DropAndRemove("c2")),
        (true, DropAndRemove("two")),
        (true, CreateInFlight("u0")),
        (true, CreateInFlight("u1")),
        (true, CreateInFlight("u2")),
        (true, Nothing),
    ];
    sigkill_rounds("create and drop", &rounds).await;
}

// ---------- power loss ----------

/// `rounds` on a fresh data directory on powerfs in `mode`, the power cut at the end of each;
/// `MOSAIC_POWER_TRIALS` times (default 2), trial `t` with seed + `t`.
async fn power_cuts(mode: &str, what: &str, rounds: &[(bool, Action)]) {
    if PowerFs::binary().is_none() {
        return;
    }
    let trials: u64 = std::env::var("MOSAIC_POWER_TRIALS").ok().map_or(2, |s| s.parse().expect("MOSAIC_POWER_TRIALS"));
    let seed = workload::seed();
    let started = Instant::now();
    let (mut acknowledged, mut in_flight) = (0, 0);
    for t in 0..trials {
        let seed = seed.wrapping_add(t);
        eprintln!(
            "databases, power loss, {what} ({mode}) trial {t}: MOSAIC_CRASH_SEED={seed} MOSAIC_POWER_TRIALS=1 replays it"
        );
        let fs = PowerFs::mount(mode);
        let label = format!("databases, power loss, {what} ({mode}, seed {seed})");
        let mut run = Run::new(Some(&fs), fs.data(), label, seed);
        let cut = |live: ServerProc| kill_and(live, || fs.ctl("cut"));
        let mut live = start(&run.data, "sync", &run.client).await;
        for (round, &(writers, action)) in rounds.iter().enumerate() {
            live = run.round(live, round as u64, writers, action, &cut).await;
        }
        drop(live);
        acknowledged += run.acknowledged;
        in_flight += run.in_flight;
    }
    eprintln!(
        "databases, power loss, {what} ({mode}): {trials} trials of {} cuts, {acknowledged} acknowledged writes ({in_flight} in \
         flight at a cut), 0 lost, {:.1} s (seed {seed})",
        rounds.len(),
        started.elapsed().as_secs_f64()
    );
}

/// Databases made (the first with nothing else written, the power cut right after), written,
/// dropped, made again and made in flight, with writers in the others.
const POWER_ROUNDS: [(bool, Action); 10] = [
    // the first thing on a fresh directory: the database is made, and the power goes
    (false, Action::Create("p0")),
    // made while the others are written, nothing written to it
    (true, Action::Create("p1")),
    (true, Action::CreateAndWrite("p2")),
    (true, Action::Nothing),
    (true, Action::Drop("p1")),
    (false, Action::Create("p1")),
    (true, Action::DropAndRemove("p2")),
    (true, Action::CreateInFlight("u0")),
    (false, Action::CreateInFlight("u1")),
    (true, Action::Nothing),
];

/// The power cut inside creates: at each of their first fsyncs (the catalog's, those that make
/// the store's folder and files), then at random ones.
const CREATE_CUTS: [(bool, Action); 10] = [
    (false, Action::CreateCut("x0", Some(0))),
    (false, Action::CreateCut("x1", Some(1))),
    (false, Action::CreateCut("x2", Some(2))),
    (false, Action::CreateCut("x3", Some(3))),
    (false, Action::CreateCut("x4", Some(4))),
    (false, Action::CreateCut("x5", Some(5))),
    (false, Action::CreateCut("x6", Some(6))),
    (false, Action::CreateCut("x7", Some(7))),
    (false, Action::CreateCut("x8", None)),
    (false, Action::CreateCut("x9", None)),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_databases_and_their_writes_survive_power_loss_in_data_mode() {
    power_cuts("data", "creates, writes and drops", &POWER_ROUNDS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_databases_and_their_writes_survive_power_loss_in_dirs_mode() {
    power_cuts("dirs", "creates, writes and drops", &POWER_ROUNDS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_cut_short_by_power_loss_leaves_the_database_whole_or_absent_in_data_mode() {
    power_cuts("data", "creates cut short", &CREATE_CUTS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_cut_short_by_power_loss_leaves_the_database_whole_or_absent_in_dirs_mode() {
    power_cuts("dirs", "creates cut short", &CREATE_CUTS).await;
}
