//! Acknowledged writes survive a SIGKILL of the real server: the `mosaicdb` binary serves an
//! indexed table while concurrent clients PUT, PATCH, DELETE, batch and import; a write counts
//! as acknowledged only once its whole HTTP response has arrived. At a random moment the server
//! is killed; then `mosaicdb check` runs offline on the data directory, the server is started
//! again, and every document must read back as its last acknowledged write left it — or as the
//! write that was in flight at the kill left it (a batch wholly or not at all). In sync mode and
//! in buffered mode (which promises to survive a process crash, not a power loss).

use crate::common::model::merge_patch;
use crate::process::{kill, start};
use crate::workload;
use serde_json::json;
use workload::{
    Rng, State, TABLE, acknowledged, create_table, empty_state, in_flight, join_writers, offline_check, seed,
    spawn_writers, start_late_index, verify, wait_index_ready,
};

async fn crash_rounds(durability: &str, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let client = reqwest::Client::builder().timeout(workload::WAIT).build().unwrap();
    let mut rng = Rng(seed | 1);
    let server = start(&data, durability, &client).await;
    create_table(&client, &server.base, json!({"name": TABLE})).await;
    let mut state: State = empty_state();
    let mut server = Some(server);
    for round in 0..3 {
        let label = format!("{durability} (seed {seed}) round {round}");
        let live = server.take().unwrap();
        // from the second round on, an index is built over the existing documents as the
        // writers start
        let building = if round > 0 { Some(start_late_index(&client, &live.base, round).await) } else { None };
        let tasks = spawn_writers(&client, &live.base, round, &state, &mut rng);
        // let the writers run a random while, then kill the server under them
        tokio::time::sleep(std::time::Duration::from_millis(300 + rng.below(900))).await;
        kill(live);
        let outcomes = join_writers(tasks).await;
        let acknowledged = acknowledged(&outcomes);
        assert!(acknowledged >= 20, "{label}: only {acknowledged} writes were acknowledged");

        let (ok, report) = offline_check(&data);
        assert!(ok && report["ok"] == true, "{label}: check after the kill: {report}");

        let live = start(&data, durability, &client).await;
        if let Some(building) = building {
            // the build, should the kill have interrupted it, resumes and completes
            wait_index_ready(&client, &live.base, &building, &label).await;
        }
        state = verify(&client, &live.base, &state, &outcomes, &label).await;
        let in_flight = in_flight(&outcomes);
        eprintln!("{durability} round {round}: {acknowledged} writes acknowledged, {in_flight} in flight at the kill");
        server = Some(live);
    }
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_http_writes_survive_sigkill_in_sync_mode() {
    crash_rounds("sync", seed()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_http_writes_survive_sigkill_in_buffered_mode() {
    crash_rounds("buffered", seed()).await;
}

#[test]
fn the_merge_patch_model_follows_rfc_7396() {
    // the RFC's appendix A examples that matter here
    let cases = [
        (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
        (json!({"a": "b"}), json!({"b": "c"}), json!({"a": "b", "b": "c"})),
        (json!({"a": "b"}), json!({"a": null}), json!({})),
        (json!({"a": {"b": "c"}}), json!({"a": {"b": "d", "c": null}}), json!({"a": {"b": "d"}})),
        (json!({"a": [{"b": "c"}]}), json!({"a": [1]}), json!({"a": [1]})),
        (json!({"e": null}), json!({"a": 1}), json!({"e": null, "a": 1})),
        (json!({}), json!({"a": {"bb": {"ccc": null}}}), json!({"a": {"bb": {}}})),
    ];
    for (target, patch, want) in cases {
        assert_eq!(merge_patch(&target, &patch), want, "{target} + {patch}");
    }
}
