//! The official InfluxDB client libraries, from PyPI, against a server with API keys:
//! `influx_clients.py` beside this file pings, checks the health, writes and meets errors with
//! `influxdb-client` 1.50.0 (InfluxDB 2.x's) and `influxdb` 5.3.2 (1.x's), which also reads back
//! what both wrote with InfluxQL on `/query`. The libraries are
//! installed once into a venv under the target directory; where python3, its venv module or PyPI
//! cannot be had, the test says so and is skipped.

use crate::common::{ADMIN_KEY, READ_KEY, TestServer, WRITE_KEY};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The libraries, pinned so that a new release changes this test only when this line does.
const PACKAGES: [&str; 2] = ["influxdb-client==1.50.0", "influxdb==5.3.2"];

/// The venv's python with [`PACKAGES`] installed, or why there is none.
fn python_with_clients() -> Result<PathBuf, String> {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("influx-clients-venv");
    let python = venv.join("bin/python");
    if versions_match(&python) {
        return Ok(python);
    }
    let made = Command::new("python3").args(["-m", "venv", "--clear"]).arg(&venv).output();
    match made {
        Ok(out) if out.status.success() => {}
        Ok(out) => return Err(format!("python3 -m venv failed: {}", String::from_utf8_lossy(&out.stderr).trim())),
        Err(e) => return Err(format!("no python3: {e}")),
    }
    let pip = Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", "--timeout", "30", "--retries", "2"])
        .args(PACKAGES)
        .output()
        .map_err(|e| format!("pip did not run: {e}"))?;
    if !pip.status.success() {
        let said = String::from_utf8_lossy(&pip.stderr);
        return Err(format!("pip could not install {PACKAGES:?} (no network?): {}", said.trim()));
    }
    if versions_match(&python) { Ok(python) } else { Err("the installed packages are not the pinned versions".into()) }
}

/// Whether the venv holds exactly the pinned versions.
fn versions_match(python: &Path) -> bool {
    let script = "import importlib.metadata as m, sys; print(' '.join(f'{p}=={m.version(p)}' for p in sys.argv[1:]))";
    let names = PACKAGES.map(|p| p.split_once("==").unwrap().0);
    Command::new(python)
        .args(["-c", script])
        .args(names)
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == PACKAGES.join(" "))
}

#[tokio::test]
async fn official_influx_clients_ping_check_health_write_query_and_read_errors() {
    let python = match python_with_clients() {
        Ok(python) => python,
        Err(why) => {
            eprintln!("the Influx client libraries test is skipped: {why}");
            return;
        }
    };
    let s = TestServer::start_with_keys(|_| {}).await;
    assert_eq!(s.post("/v1/databases", serde_json::json!({"name": "shop"})).await.0, 201);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/process/influx_clients.py");
    let out = Command::new(&python)
        .arg(script)
        .env("MOSAIC_URL", &s.base)
        .env("MOSAIC_ADMIN_KEY", ADMIN_KEY)
        .env("MOSAIC_WRITE_KEY", WRITE_KEY)
        .env("MOSAIC_READ_KEY", READ_KEY)
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{:?}\n{stdout}\n{stderr}", out.status);
    assert_eq!(stdout, "influxdb-client 1.50.0 ok\ninfluxdb 5.3.2 ok\n", "{stderr}");
}
