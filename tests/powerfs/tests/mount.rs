//! Self-tests against a real mount: each test mounts its own powerfs in a
//! temp dir (in this process, on fuser's background thread) and drives it
//! through ordinary std::fs calls, as the database would.

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use powerfs::Mode;

struct Mounted {
    dir: PathBuf,
    session: Option<(fuser::BackgroundSession, powerfs::PowerFs)>,
}

/// Why FUSE cannot be used here, if it cannot.
fn unusable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    if let Err(e) = OpenOptions::new().read(true).write(true).open("/dev/fuse") {
        return Some(format!("/dev/fuse unusable: {e}"));
    }
    None
}

fn mount(mode: Mode) -> Option<Mounted> {
    if let Some(why) = unusable() {
        eprintln!("skipping powerfs mount test: {why}");
        return None;
    }
    static N: AtomicU32 = AtomicU32::new(0);
    let dir =
        std::env::temp_dir().join(format!("powerfs-test-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst)));
    fs::create_dir_all(&dir).unwrap();
    let session = powerfs::mount(mode, &dir).expect("mount");
    Some(Mounted { dir, session: Some(session) })
}

impl Mounted {
    fn p(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    fn ctl(&self, cmd: &str) -> io::Result<()> {
        let mut f = OpenOptions::new().write(true).open(self.p(".powerfs"))?;
        f.write_all(format!("{cmd}\n").as_bytes())
    }

    fn status(&self) -> String {
        fs::read_to_string(self.p(".powerfs")).unwrap()
    }

    fn cut(&self) {
        self.ctl("cut").unwrap();
    }

    fn sync_dir(&self, rel: &str) {
        File::open(self.p(rel)).unwrap().sync_all().unwrap();
    }

    /// Writes a file and fsyncs it (not its directory).
    fn put_synced(&self, rel: &str, data: &[u8]) {
        let mut f = File::create(self.p(rel)).unwrap();
        f.write_all(data).unwrap();
        f.sync_all().unwrap();
    }

    fn read(&self, rel: &str) -> io::Result<Vec<u8>> {
        fs::read(self.p(rel))
    }

    fn exists(&self, rel: &str) -> bool {
        self.p(rel).exists()
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some((s, fs)) = self.session.take() {
            powerfs::unmount(s, &fs, &self.dir, Duration::from_secs(5)).unwrap();
        }
        let _ = fs::remove_dir(&self.dir);
    }
}

fn errno(r: io::Result<impl Sized>) -> i32 {
    r.err().and_then(|e| e.raw_os_error()).unwrap_or(0)
}

fn statvfs(path: &Path) -> libc::statvfs {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string and an out-struct we own.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        assert_eq!(libc::statvfs(c.as_ptr(), &mut s), 0);
        s
    }
}

#[test]
fn data_mode_loses_unsynced_data_and_keeps_the_namespace() {
    let Some(m) = mount(Mode::Data) else { return };
    fs::create_dir(m.p("data")).unwrap();

    // Synced then grown without a sync: back to the synced bytes.
    m.put_synced("data/grown_unsynced", b"v1");
    fs::write(m.p("data/grown_unsynced"), b"v2 and longer").unwrap();
    // Grown (sparse, past a page) and synced: kept.
    let g = OpenOptions::new().create(true).truncate(false).write(true).open(m.p("data/grown_synced")).unwrap();
    g.write_all_at(b"head", 0).unwrap();
    g.set_len(200_000).unwrap();
    g.write_all_at(b"tail", 199_000).unwrap();
    g.sync_all().unwrap();
    drop(g);
    // Truncated and synced: stays short; truncated unsynced: comes back.
    m.put_synced("data/trunc_synced", &[7u8; 150_000]);
    let t = OpenOptions::new().write(true).open(m.p("data/trunc_synced")).unwrap();
    t.set_len(10).unwrap();
    t.sync_data().unwrap();
    m.put_synced("data/trunc_unsynced", &[9u8; 150_000]);
    OpenOptions::new().write(true).open(m.p("data/trunc_unsynced")).unwrap().set_len(5).unwrap();
    // Never synced: exists (namespace is durable) but empty.
    fs::write(m.p("data/never"), b"lost").unwrap();
    // Namespace changes without any directory fsync.
    fs::create_dir(m.p("data/sub")).unwrap();
    m.put_synced("data/old_name", b"renamed");
    fs::rename(m.p("data/old_name"), m.p("data/sub/new_name")).unwrap();
    m.put_synced("data/doomed", b"x");
    fs::remove_file(m.p("data/doomed")).unwrap();

    let mut open_before = File::open(m.p("data/grown_synced")).unwrap();
    m.cut();

    assert_eq!(m.read("data/grown_unsynced").unwrap(), b"v1");
    let g = m.read("data/grown_synced").unwrap();
    assert_eq!(g.len(), 200_000);
    assert_eq!(&g[..4], b"head");
    assert_eq!(&g[199_000..199_004], b"tail");
    assert!(g[4..199_000].iter().all(|&b| b == 0));
    assert_eq!(m.read("data/trunc_synced").unwrap(), vec![7u8; 10]);
    assert_eq!(m.read("data/trunc_unsynced").unwrap(), vec![9u8; 150_000]);
    assert_eq!(m.read("data/never").unwrap(), b"");
    assert_eq!(m.read("data/sub/new_name").unwrap(), b"renamed");
    assert!(!m.exists("data/old_name"));
    assert!(!m.exists("data/doomed"));
    // A handle from before the cut is dead.
    assert_eq!(errno(open_before.read(&mut [0u8; 4])), libc::EIO);
    assert!(m.status().contains("\"cuts\":1"));
}

#[test]
fn dirs_mode_rolls_back_namespace_changes_not_fsynced() {
    let Some(m) = mount(Mode::Dirs) else { return };
    fs::create_dir(m.p("d")).unwrap();
    m.sync_dir("");
    m.put_synced("d/keep", b"keep");
    m.put_synced("d/victim", b"victim");
    m.put_synced("d/gone", b"gone");
    m.put_synced("d/from", b"from");
    m.sync_dir("d");

    // Not fsynced in their directory: rolled back.
    m.put_synced("d/new_unsynced", b"new"); // file synced, dir not
    fs::rename(m.p("d/keep"), m.p("d/keep_renamed")).unwrap();
    fs::create_dir(m.p("d/sub_unsynced")).unwrap();
    fs::remove_file(m.p("d/victim")).unwrap();
    // A directory whose contents were fsynced but whose own entry was not.
    fs::create_dir(m.p("orphan")).unwrap();
    m.put_synced("orphan/f", b"f");
    m.sync_dir("orphan");
    let cut_and_check_rollback = || {
        m.cut();
        assert!(!m.exists("d/new_unsynced"));
        assert_eq!(m.read("d/keep").unwrap(), b"keep");
        assert!(!m.exists("d/keep_renamed"));
        assert!(!m.exists("d/sub_unsynced"));
        assert_eq!(m.read("d/victim").unwrap(), b"victim");
        assert!(!m.exists("orphan"));
    };
    cut_and_check_rollback();

    // The same kinds of change, fsynced: kept.
    m.put_synced("d/new_synced", b"new");
    fs::create_dir(m.p("e")).unwrap();
    fs::rename(m.p("d/from"), m.p("e/to")).unwrap();
    fs::create_dir(m.p("d/sub_synced")).unwrap();
    fs::remove_file(m.p("d/gone")).unwrap();
    m.sync_dir("d");
    m.sync_dir("e");
    m.sync_dir("");
    // A file in the durable namespace that was never fsynced is empty.
    fs::write(m.p("d/empty"), b"unsynced bytes").unwrap();
    m.sync_dir("d");
    m.cut();
    assert_eq!(m.read("d/new_synced").unwrap(), b"new");
    assert_eq!(m.read("e/to").unwrap(), b"from");
    assert!(!m.exists("d/from"));
    assert!(m.p("d/sub_synced").is_dir());
    assert!(!m.exists("d/gone"));
    assert_eq!(m.read("d/empty").unwrap(), b"");
    assert_eq!(m.read("d/keep").unwrap(), b"keep");
}

#[test]
fn held_fsync_blocks_only_the_fsync_and_release_answers_it() {
    let Some(m) = mount(Mode::Data) else { return };
    m.put_synced("other", b"other");
    let held = File::create(m.p("held")).unwrap();
    (&held).write_all(b"held data").unwrap();
    m.ctl("hold-fsync").unwrap();

    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || tx.send(held.sync_all().map_err(|e| e.raw_os_error())));
    std::thread::sleep(Duration::from_millis(200));
    assert!(rx.try_recv().is_err(), "a held fsync returned");
    // Everything else keeps going while it waits.
    assert_eq!(m.read("held").unwrap(), b"held data");
    fs::write(m.p("other"), b"changed").unwrap();
    assert_eq!(m.read("other").unwrap(), b"changed");
    fs::create_dir(m.p("dir")).unwrap();
    assert!(m.status().contains("\"held\":true,\"pending\":1"));
    assert!(rx.try_recv().is_err());

    m.ctl("release-fsync").unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), Ok(()));
    t.join().unwrap().unwrap();

    // A held fsync dropped by a cut fails and makes nothing durable.
    m.ctl("hold-fsync").unwrap();
    let f = File::create(m.p("dropped")).unwrap();
    (&f).write_all(b"never durable").unwrap();
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || tx.send(f.sync_all().map_err(|e| e.raw_os_error())));
    std::thread::sleep(Duration::from_millis(100));
    m.cut();
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), Err(Some(libc::EIO)));
    t.join().unwrap().unwrap();
    m.ctl("release-fsync").unwrap();
    assert_eq!(m.read("held").unwrap(), b"held data");
    assert_eq!(m.read("dropped").unwrap(), b"");
    assert_eq!(m.read("other").unwrap(), b"other");
}

#[test]
fn faults_return_their_errno_and_clear_when_off() {
    let Some(m) = mount(Mode::Data) else { return };
    // Capacity: writes and size growth past it fail; statfs follows it.
    m.ctl("capacity 409600").unwrap();
    let s = statvfs(&m.dir);
    assert_eq!((s.f_blocks, s.f_bfree, s.f_bsize), (100, 100, 4096));
    let f = File::create(m.p("big")).unwrap();
    f.write_all_at(&[1u8; 300_000], 0).unwrap();
    assert_eq!(statvfs(&m.dir).f_bfree, (409_600 - 300_000) / 4096);
    assert_eq!(errno(f.write_all_at(&[1u8; 200_000], 300_000)), libc::ENOSPC);
    assert_eq!(errno(f.set_len(500_000)), libc::ENOSPC);
    f.set_len(100).unwrap();
    f.write_all_at(&[1u8; 200_000], 100).unwrap();
    m.ctl("capacity off").unwrap();
    f.write_all_at(&[1u8; 500_000], 0).unwrap();
    assert!(statvfs(&m.dir).f_blocks > 1 << 30);

    for (name, code) in [("enospc", libc::ENOSPC), ("eio", libc::EIO)] {
        m.ctl(&format!("fail-write {name}")).unwrap();
        assert_eq!(errno(f.write_all_at(b"x", 0)), code);
        m.ctl("fail-write off").unwrap();
        f.write_all_at(b"x", 0).unwrap();

        m.ctl(&format!("fail-fsync {name}")).unwrap();
        assert_eq!(errno(f.sync_all()), code);
        assert_eq!(errno(File::open(&m.dir).unwrap().sync_all()), code);
        m.ctl("fail-fsync off").unwrap();
    }
    // A failed fsync made nothing durable.
    m.cut();
    assert_eq!(m.read("big").unwrap(), b"");

    m.put_synced("secret.journal", b"s");
    m.put_synced("plain", b"p");
    m.ctl("fail-read eio journal").unwrap();
    assert_eq!(errno(m.read("secret.journal")), libc::EIO);
    assert_eq!(m.read("plain").unwrap(), b"p");
    m.ctl("fail-read off").unwrap();
    assert_eq!(m.read("secret.journal").unwrap(), b"s");

    assert_eq!(errno(m.ctl("no-such-command")), libc::EINVAL);
    assert_eq!(errno(m.ctl("flip nope 0")), libc::ENOENT);
    assert!(m.status().contains("\"injected\":7"), "{}", m.status());
}

#[test]
fn flip_changes_exactly_one_byte_durably() {
    let Some(m) = mount(Mode::Dirs) else { return };
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8).collect();
    m.put_synced("f", &data);
    m.sync_dir("");
    m.ctl("flip f 70000").unwrap();
    let mut want = data.clone();
    want[70_000] ^= 0xFF;
    assert_eq!(m.read("f").unwrap(), want);
    m.cut();
    assert_eq!(m.read("f").unwrap(), want);
    assert_eq!(errno(m.ctl("flip f 100000")), libc::EINVAL);
}

#[test]
fn binary_prints_ready_and_unmounts_at_stdin_eof() {
    if let Some(why) = unusable() {
        eprintln!("skipping powerfs binary test: {why}");
        return;
    }
    let dir = std::env::temp_dir().join(format!("powerfs-bin-{}", std::process::id()));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_powerfs"))
        .args(["--mode", "dirs"])
        .arg(&dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = [0u8; 6];
    child.stdout.take().unwrap().read_exact(&mut line).unwrap();
    assert_eq!(&line, b"ready\n");
    fs::write(dir.join("x"), b"x").unwrap();
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    let mounts = fs::read_to_string("/proc/mounts").unwrap();
    assert!(!mounts.contains(dir.to_str().unwrap()));
    fs::remove_dir(&dir).unwrap();
}

/// `POWERFS_BENCH=1 cargo test --release -- --nocapture bench`: the database's
/// journal pattern, 4 KiB appends each followed by fdatasync on a 64 MiB
/// preallocated file (a measurement, so it runs only when asked for).
#[test]
fn bench_append_fdatasync() {
    if std::env::var_os("POWERFS_BENCH").is_none() {
        eprintln!("bench_append_fdatasync: a measurement, skipped (set POWERFS_BENCH=1 to run it)");
        return;
    }
    let Some(m) = mount(Mode::Dirs) else { return };
    let f = File::create(m.p("journal")).unwrap();
    f.set_len(64 << 20).unwrap();
    f.sync_all().unwrap();
    let block = [0xABu8; 4096];
    let n = 10_000u64;
    let start = Instant::now();
    for i in 0..n {
        f.write_all_at(&block, i * 4096).unwrap();
        f.sync_data().unwrap();
    }
    let t = start.elapsed();
    println!(
        "{n} x (4 KiB pwrite + fdatasync) on a 64 MiB file: {t:?} ({:.1} us each)",
        t.as_secs_f64() * 1e6 / n as f64
    );
}
