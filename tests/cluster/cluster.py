#!/usr/bin/env python3
"""A throwaway highly available PostgreSQL cluster in network namespaces, for failover tests.

Three database hosts (mosaic-db1..3: etcd + Patroni + PostgreSQL 15, synchronous_mode_strict) and
up to three application hosts (mosaic-app1..3, for mosaicdb servers), each in its own network
namespace on one bridge. The bridge lives in a namespace of its own (mosaic-sw), so the host's
firewall (Docker's FORWARD policy DROP under br_netfilter) never sees the traffic; the harness
reaches every host through one more veth (10.231.0.1 on `mosaic-up`). Everything on disk is under
--dir. Python standard library only; run as root. See README.md beside this file.

    cluster.py --dir /tmp/mcluster setup          # prints the client URL
    cluster.py --dir /tmp/mcluster kill-primary   # SIGKILL the primary's postmaster
    cluster.py --dir /tmp/mcluster wait-primary   # seconds until a write commits again
    cluster.py --dir /tmp/mcluster demo --runs 3  # setup, writes, failover, check, teardown
    cluster.py --dir /tmp/mcluster teardown [--purge]
Exit status 77 with a line starting `SKIP:` when the machine cannot run the cluster.
"""
import argparse
import glob
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

PREFIX = "mosaic-"
SWITCH = "mosaic-sw"  # the namespace holding the bridge
BRIDGE = "br0"  # inside SWITCH
UPLINK = "mosaic-up"  # the harness's own veth, in the root namespace
NET = "10.231.0"
DB_HOSTS = ["db1", "db2", "db3"]
APP_HOSTS = ["app1", "app2", "app3"]
MARK = ".mosaic-cluster"  # a --dir that holds this file may be wiped by setup
SKIP = 77
# Patroni's timing (seconds). Patroni's rule: ttl > loop_wait + 2 * retry_timeout. primary_start_timeout
# 0: a crashed primary fails over at once instead of being restarted where it was.
# MOSAIC_CLUSTER_TIMING="ttl=6,retry_timeout=2" overrides (a host crash fails over after about ttl).
TIMING = {"ttl": 10, "loop_wait": 1, "retry_timeout": 4, "primary_start_timeout": 0}
TIMING.update({k: int(v) for k, v in (kv.split("=") for kv in
                                      os.environ.get("MOSAIC_CLUSTER_TIMING", "").split(",") if kv)})
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
# urllib without any proxy from the environment: only our own addresses are ever asked.
HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))
PACKAGES = {"etcd": "etcd-server", "etcdctl": "etcd-client", "patroni": "patroni"}


class Skip(Exception):
    """The machine cannot run the cluster (not root, no netns, a tool missing)."""


def log(msg):
    print(f"[cluster {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(*argv, check=True, timeout=60, **kw):
    return subprocess.run([str(a) for a in argv], check=check, timeout=timeout, env=ENV,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, **kw)


def pg_bindir():
    """The bin directory of the highest PostgreSQL installed under /usr/lib/postgresql."""
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"),
                  key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    return os.path.dirname(dirs[-1]) if dirs else None


def preflight(install=False):
    """Raises Skip with the reason when this machine cannot run the cluster. With install (or CI=true),
    installs Debian's patroni, etcd-server, etcd-client and postgresql-15 when missing."""
    if os.geteuid() != 0:
        raise Skip("the cluster needs root (network namespaces, the postgres user)")
    if shutil.which("ip") is None or shutil.which("setpriv") is None:
        raise Skip("iproute2 (ip) or util-linux (setpriv) is missing")
    missing = [pkg for tool, pkg in PACKAGES.items() if shutil.which(tool, path=ENV["PATH"]) is None]
    if pg_bindir() is None:
        missing.append("postgresql-15")
    if missing and (install or os.environ.get("CI") == "true"):
        log(f"installing {' '.join(missing)}")
        env = dict(ENV, DEBIAN_FRONTEND="noninteractive")
        apt = ["apt-get", "install", "-y", "-q", "--no-install-recommends"] + missing
        if subprocess.run(apt, env=env, stdout=subprocess.DEVNULL).returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], env=env, stdout=subprocess.DEVNULL)
            subprocess.run(apt, env=env, stdout=subprocess.DEVNULL)
        missing = [pkg for tool, pkg in PACKAGES.items() if shutil.which(tool, path=ENV["PATH"]) is None]
        if pg_bindir() is None:
            missing.append("postgresql-15")
    if missing:
        raise Skip(f"missing packages: {' '.join(missing)} (apt-get install -y {' '.join(missing)})")
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise Skip("no OS user 'postgres' to run PostgreSQL as") from None
    probe = PREFIX + "probe"
    made = run("ip", "netns", "add", probe, check=False)
    run("ip", "netns", "delete", probe, check=False)
    if made.returncode != 0:
        raise Skip(f"network namespaces do not work here: {made.stderr.strip()}")


class Cluster:
    def __init__(self, workdir, apps=3):
        self.dir = os.path.abspath(workdir)
        self.apps = APP_HOSTS[:apps]
        self.bindir = pg_bindir()
        self.procs = []  # Popen objects of this process's children, reaped by reap()

    # ---- names and addresses
    @staticmethod
    def ip(host):
        if host in DB_HOSTS:
            return f"{NET}.{11 + DB_HOSTS.index(host)}"
        return f"{NET}.{21 + APP_HOSTS.index(host)}"

    @staticmethod
    def ns(host):
        return PREFIX + host

    def url(self, dbname="mosaic", timeout=2):
        """A libpq/rust-postgres URL that reaches whichever host is the primary (each host with its
        port: the form both libpq and rust-postgres 0.19 parse)."""
        hosts = ",".join(f"{self.ip(h)}:5432" for h in DB_HOSTS)
        return (f"postgresql://mosaic@{hosts}/{dbname}"
                f"?target_session_attrs=read-write&connect_timeout={timeout}")

    def hostdir(self, host):
        return os.path.join(self.dir, host)

    def event(self, what):
        with open(os.path.join(self.dir, "events.log"), "a") as f:
            f.write(f"{time.time():.3f} {what}\n")

    # ---- network
    def _network_up(self):
        run("ip", "netns", "add", SWITCH)
        run("ip", "-n", SWITCH, "link", "add", BRIDGE, "type", "bridge")
        run("ip", "-n", SWITCH, "link", "set", BRIDGE, "up")
        run("ip", "-n", SWITCH, "link", "set", "lo", "up")
        run("ip", "link", "add", UPLINK, "type", "veth", "peer", "name", "p-up", "netns", SWITCH)
        run("ip", "-n", SWITCH, "link", "set", "p-up", "master", BRIDGE, "up")
        run("ip", "addr", "add", f"{NET}.1/24", "dev", UPLINK)
        run("ip", "link", "set", UPLINK, "up")
        for host in DB_HOSTS + self.apps:
            ns = self.ns(host)
            run("ip", "netns", "add", ns)
            run("ip", "-n", SWITCH, "link", "add", f"p-{host}", "type", "veth", "peer", "name", "eth0",
                "netns", ns)
            run("ip", "-n", SWITCH, "link", "set", f"p-{host}", "master", BRIDGE, "up")
            run("ip", "-n", ns, "addr", "add", f"{self.ip(host)}/24", "dev", "eth0")
            run("ip", "-n", ns, "link", "set", "eth0", "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")

    def isolate(self, host):
        """Cuts HOST off the bridge: its packets go nowhere, nothing answers (no reset either)."""
        run("ip", "-n", SWITCH, "link", "set", f"p-{host}", "down")
        self.event(f"isolate {host}")

    def heal(self, host):
        run("ip", "-n", SWITCH, "link", "set", f"p-{host}", "up")
        self.event(f"heal {host}")

    # ---- processes
    def spawn(self, host, name, argv, user=None, env=None):
        """Starts argv inside HOST's namespace (as USER), output to DIR/HOST/NAME.log; returns the pid."""
        pre = ["ip", "netns", "exec", self.ns(host)]
        if user:
            pre += ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--"]
        logf = open(os.path.join(self.hostdir(host), f"{name}.log"), "ab")
        p = subprocess.Popen(pre + [str(a) for a in argv], stdin=subprocess.DEVNULL, stdout=logf,
                             stderr=subprocess.STDOUT, start_new_session=True, cwd="/",
                             env=dict(ENV, HOME=self.hostdir(host), **(env or {})))
        logf.close()
        self.procs.append(p)
        with open(os.path.join(self.hostdir(host), f"{name}.pid"), "w") as f:
            f.write(str(p.pid))
        return p.pid

    def reap(self):
        self.procs = [p for p in self.procs if p.poll() is None]

    def ns_pids(self, ns):
        out = run("ip", "netns", "pids", ns, check=False).stdout.split()
        return [int(p) for p in out if p.isdigit()]

    def kill_ns(self, ns, sig=signal.SIGKILL, timeout=10):
        """Sends SIG to every process in namespace NS (all of them were started here) and waits
        until they are gone."""
        deadline = time.monotonic() + timeout
        while True:
            pids = self.ns_pids(ns)
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            self.reap()
            if time.monotonic() > deadline:
                raise RuntimeError(f"processes in {ns} do not end: {pids}")
            time.sleep(0.05)
        self.reap()

    def crash_host(self, host):
        """A power cut of HOST's processes: SIGKILL to all of them (etcd, Patroni, PostgreSQL, mosaicdb)."""
        self.kill_ns(self.ns(host))
        self.event(f"crash {host}")

    # ---- etcd, Patroni
    def start_etcd(self, host):
        cluster = ",".join(f"{h}=http://{self.ip(h)}:2380" for h in DB_HOSTS)
        ip = self.ip(host)
        self.spawn(host, "etcd", [
            "etcd", "--name", host, "--data-dir", os.path.join(self.hostdir(host), "etcd"),
            "--listen-client-urls", f"http://{ip}:2379", "--advertise-client-urls", f"http://{ip}:2379",
            "--listen-peer-urls", f"http://{ip}:2380", "--initial-advertise-peer-urls", f"http://{ip}:2380",
            "--initial-cluster", cluster, "--initial-cluster-token", "mosaic-cluster",
            "--initial-cluster-state", "new", "--heartbeat-interval", "100", "--election-timeout", "1000",
            "--logger", "zap", "--log-outputs", "stderr"])

    def patroni_config(self, host):
        d, ip = self.hostdir(host), self.ip(host)
        hba = ["local all all trust", "host all all 127.0.0.1/32 trust", f"host all all {NET}.0/24 trust",
               "local replication all trust", f"host replication all {NET}.0/24 trust"]
        params = {"max_connections": 200, "shared_buffers": "64MB", "wal_level": "replica",
                  "hot_standby": "on", "max_wal_senders": 10, "max_replication_slots": 10,
                  "wal_keep_size": "128MB", "wal_log_hints": "on", "fsync": "on",
                  "synchronous_commit": "on", "password_encryption": "scram-sha-256",
                  # a standby retries its WAL source this often (default 5 s): after a failover the
                  # first standby to follow the new primary is what lets writes commit again
                  "wal_retrieve_retry_interval": "250ms",
                  # a client cut off (an isolated app host) loses its session, and its locks,
                  # within about 10 s instead of the kernel's hours
                  "tcp_keepalives_idle": 3, "tcp_keepalives_interval": 1, "tcp_keepalives_count": 3,
                  "tcp_user_timeout": 8000}
        return {
            "scope": "mosaic", "namespace": "/mosaic/", "name": host,
            "log": {"level": "INFO"},
            "restapi": {"listen": f"{ip}:8008", "connect_address": f"{ip}:8008"},
            "etcd3": {"hosts": [f"{self.ip(h)}:2379" for h in DB_HOSTS]},
            "bootstrap": {
                "dcs": dict(TIMING, synchronous_mode=True, synchronous_mode_strict=True,
                            synchronous_node_count=1, maximum_lag_on_failover=1048576,
                            postgresql={"use_pg_rewind": True, "use_slots": False, "parameters": params}),
                "initdb": [{"encoding": "UTF8"}, {"locale": "C"}, "data-checksums"],
                "post_bootstrap": os.path.join(self.dir, "post-bootstrap.sh"),
            },
            "postgresql": {
                "listen": f"{ip}:5432", "connect_address": f"{ip}:5432",
                "data_dir": os.path.join(d, "data"), "bin_dir": self.bindir,
                "pgpass": os.path.join(d, "pgpass"),
                "authentication": {"superuser": {"username": "mosaic", "password": "mosaic"},
                                   "replication": {"username": "replicator", "password": "replicator"},
                                   "rewind": {"username": "mosaic", "password": "mosaic"}},
                "parameters": {"unix_socket_directories": d},
                "pg_hba": hba,
                "basebackup": [{"checkpoint": "fast"}],  # a new replica does not wait for a spread checkpoint
                "remove_data_directory_on_rewind_failure": True,
                "remove_data_directory_on_diverged_timelines": True,
            },
            "watchdog": {"mode": "off"},
        }

    def start_patroni(self, host):
        path = os.path.join(self.hostdir(host), "patroni.yml")
        with open(path, "w") as f:  # JSON is YAML
            json.dump(self.patroni_config(host), f, indent=1)
        self.spawn(host, "patroni", ["patroni", path], user="postgres")

    def start_db_host(self, host):
        self.start_etcd(host)
        self.start_patroni(host)
        self.event(f"start {host}")

    def api(self, host, path, timeout=1.0):
        """GET http://HOST:8008/PATH of Patroni: (status, json or None); (None, None) when unreachable."""
        try:
            with HTTP.open(f"http://{self.ip(host)}:8008{path}", timeout=timeout) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            try:
                return e.code, json.loads(e.read() or b"null")
            except ValueError:
                return e.code, None
        except (OSError, ValueError):
            return None, None

    def members(self):
        """Patroni's view of the cluster (GET /cluster) from the first member that answers."""
        for host in DB_HOSTS:
            status, body = self.api(host, "/cluster")
            if status == 200 and body:
                return body.get("members", [])
        return []

    def primary(self):
        """The database host whose Patroni says it runs the primary (GET /primary answers 200)."""
        for host in DB_HOSTS:
            if self.api(host, "/primary", timeout=0.5)[0] == 200:
                return host
        return None

    def postmaster_pid(self, host):
        try:
            with open(os.path.join(self.hostdir(host), "data", "postmaster.pid")) as f:
                return int(f.readline())
        except (OSError, ValueError):
            return None

    def kill_primary(self, whole_host=False):
        """SIGKILL the current primary's postmaster (whole_host: every process of its host, etcd
        and Patroni too, as a power cut). Returns the host."""
        host = self.primary()
        if host is None:
            raise RuntimeError("no primary to kill")
        if whole_host:
            self.crash_host(host)
        else:
            pid = self.postmaster_pid(host)
            if pid is None:
                raise RuntimeError(f"no postmaster.pid on primary {host}")
            os.kill(pid, signal.SIGKILL)
            self.event(f"kill postmaster {pid} on {host}")
        return host

    # ---- SQL through psql
    def psql(self, sql, dbname="postgres", host=None, timeout=6):
        """Runs SQL with psql (from HOST's namespace, else from the harness's own address) on the
        primary; returns the CompletedProcess (returncode None when it timed out)."""
        argv = ([] if host is None else ["ip", "netns", "exec", self.ns(host)]) + [
            os.path.join(self.bindir, "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
            "-d", self.url(dbname), "-c", sql]
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=ENV,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:  # psql killed: its transaction was never acknowledged
            return subprocess.CompletedProcess(argv, None, e.stdout or "", "timeout")

    def wait_primary(self, timeout=60, host=None):
        """Seconds until a write commits (synchronously replicated) on the primary; raises after TIMEOUT."""
        start = time.monotonic()
        while True:
            r = self.psql("CREATE TABLE IF NOT EXISTS harness_probe (t timestamptz);"
                          "INSERT INTO harness_probe VALUES (now())", host=host, timeout=5)
            if r.returncode == 0:
                return time.monotonic() - start
            if time.monotonic() - start > timeout:
                raise RuntimeError(f"no writable primary within {timeout} s: {r.stderr.strip()}")
            time.sleep(0.1)

    def wait_ready(self, timeout=120, want=3):
        """Waits until Patroni shows a running leader, a running sync standby and WANT members
        running, and a write commits."""
        start = time.monotonic()
        while True:
            members = self.members()
            running = [m for m in members if m.get("state") in ("running", "streaming")]
            roles = {m["role"] for m in running}
            if len(running) >= want and "leader" in roles and "sync_standby" in roles:
                break
            if time.monotonic() - start > timeout:
                raise RuntimeError(f"the cluster is not ready within {timeout} s: {members}")
            time.sleep(0.25)
        return self.wait_primary(max(5, timeout - (time.monotonic() - start))) + \
            (time.monotonic() - start)

    # ---- whole cluster
    def setup(self, timeout=120):
        preflight()
        if len(self.dir) > 80:  # PostgreSQL's socket, DIR/dbN/.s.PGSQL.5432, has at most 107 bytes
            raise RuntimeError(f"--dir is too long for a unix socket path (80 bytes at most): {self.dir}")
        self.teardown(purge=True)
        os.makedirs(self.dir, exist_ok=True)
        open(os.path.join(self.dir, MARK), "w").close()
        # The postgres user must reach its directories: search (not list) permission on each parent.
        os.chmod(self.dir, 0o755)
        p = self.dir
        while p != "/":
            p = os.path.dirname(p)
            mode = os.stat(p).st_mode
            if not mode & 0o001:
                os.chmod(p, mode | 0o001)
        pg = pwd.getpwnam("postgres")
        for host in DB_HOSTS + self.apps:
            os.makedirs(self.hostdir(host))
            if host in DB_HOSTS:
                os.chown(self.hostdir(host), pg.pw_uid, pg.pw_gid)
                os.chmod(self.hostdir(host), 0o700)
        # Patroni runs it once, on the host that initialises the cluster, with a connection string
        with open(os.path.join(self.dir, "post-bootstrap.sh"), "w") as f:
            f.write(f"#!/bin/sh\nexec {self.bindir}/psql -X -q -v ON_ERROR_STOP=1 -d \"$1\" "
                    "-c 'CREATE DATABASE mosaic'\n")
        os.chmod(os.path.join(self.dir, "post-bootstrap.sh"), 0o755)
        with open(os.path.join(self.dir, "state.json"), "w") as f:
            json.dump({"apps": self.apps, "url": self.url()}, f)
        t0 = time.monotonic()
        self._network_up()
        for host in DB_HOSTS:
            self.start_etcd(host)
        for host in DB_HOSTS:
            self.start_patroni(host)
        try:
            self.wait_ready(timeout)
            r = self.psql("SELECT 1 FROM pg_database WHERE datname = 'mosaic'")
            if r.stdout.strip() != "1":
                r = self.psql("CREATE DATABASE mosaic", timeout=30)
                if r.returncode != 0:
                    raise RuntimeError(f"CREATE DATABASE mosaic: {r.stderr.strip()}")
        except Exception:
            self.dump_logs()
            raise
        log(f"cluster ready in {time.monotonic() - t0:.1f} s, primary {self.primary()}; URL {self.url()}")
        self.event("setup done")
        return self.url()

    def restart_all(self, timeout=120):
        """Power cut of every host (SIGKILL to all processes, app hosts too), then the database hosts
        start again; returns the seconds from the cut until a write commits. The app hosts are the
        caller's to restart."""
        t0 = time.monotonic()
        self.crash_all()
        self.start_db_hosts(timeout)
        return time.monotonic() - t0

    def crash_all(self):
        """SIGKILL to every process of every host (database and app hosts)."""
        for host in DB_HOSTS + self.apps:
            self.kill_ns(self.ns(host))
        self.event("crash all")

    def start_db_hosts(self, timeout=120):
        """Starts etcd and Patroni on every database host and waits until a write commits."""
        for host in DB_HOSTS:
            self.start_db_host(host)
        self.wait_ready(timeout)

    def teardown(self, purge=False):
        """Kills every process in our namespaces, removes the namespaces (the bridge and the veths go
        with them) and, with purge, --dir. Idempotent; also cleans a setup that died half-way."""
        listed = run("ip", "netns", "list", check=False).stdout.split("\n")
        ours = [line.split()[0] for line in listed if line.startswith(PREFIX)]
        for ns in ours:
            self.kill_ns(ns)
        for ns in ours:
            run("ip", "netns", "delete", ns, check=False)
        if run("ip", "link", "show", UPLINK, check=False).returncode == 0:
            run("ip", "link", "delete", UPLINK, check=False)
        if purge and os.path.isdir(self.dir):
            if os.listdir(self.dir) and not os.path.exists(os.path.join(self.dir, MARK)):
                raise RuntimeError(f"{self.dir} is not empty and was not made by this harness: not removing it")
            shutil.rmtree(self.dir)
        elif os.path.isdir(self.dir):
            self.event("teardown")

    def dump_logs(self, lines=25):
        for path in sorted(glob.glob(os.path.join(self.dir, "*", "*.log"))):
            with open(path, "rb") as f:
                tail = f.read().decode(errors="replace").splitlines()[-lines:]
            print(f"---- {path}\n" + "\n".join(tail), file=sys.stderr)


def load(workdir):
    """The Cluster that setup made in WORKDIR (its app host count from state.json)."""
    try:
        with open(os.path.join(workdir, "state.json")) as f:
            return Cluster(workdir, apps=len(json.load(f)["apps"]))
    except OSError:
        return Cluster(workdir)


def demo(workdir, rows=200, kill_at=100, whole_host=False):
    """setup → ROWS inserts, one psql each from app1, each acknowledged or not → the primary killed
    after KILL_AT acknowledgements → every acknowledged row present → teardown. Returns a summary."""
    c = Cluster(workdir, apps=1)
    c.setup()
    ok = False
    try:
        r = c.psql("CREATE TABLE harness_demo (id int PRIMARY KEY, at timestamptz DEFAULT now())",
                   host="app1")
        assert r.returncode == 0, r.stderr
        acked, failed, attempt = [], 0, 0
        killed_at = resumed_at = victim = None
        write_gap = 0.0
        while len(acked) < rows:
            if len(acked) == kill_at and killed_at is None:
                victim, killed_at = c.kill_primary(whole_host), time.monotonic()
                log(f"killed the primary on {victim}")
            attempt += 1
            t = time.monotonic()
            r = c.psql(f"INSERT INTO harness_demo (id) VALUES ({attempt})", host="app1", timeout=5)
            if r.returncode == 0:
                acked.append(attempt)
                if killed_at is not None and resumed_at is None:
                    resumed_at = time.monotonic()
            else:
                failed += 1
                write_gap = max(write_gap, time.monotonic() - t)
                time.sleep(0.05)  # a new id on the retry: the failed one may or may not have committed
        r = c.psql("SELECT id FROM harness_demo", host="app1")
        assert r.returncode == 0, r.stderr
        present = {int(x) for x in r.stdout.split()}
        lost = sorted(set(acked) - present)
        summary = {"old_primary": victim, "new_primary": c.primary(), "acked": len(acked),
                   "failed_attempts": failed, "present": len(present), "lost": lost,
                   "present_unacked": len(present - set(acked)),
                   "failover_seconds": round(resumed_at - killed_at, 2)}
        ok = not lost
        return summary
    finally:
        if not ok:
            c.dump_logs()
        c.teardown(purge=ok)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=os.environ.get("MOSAIC_CLUSTER_DIR", "/tmp/mcluster"))
    ap.add_argument("--apps", type=int, default=3, help="application hosts (0-3)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("preflight", help="exit 0 if the cluster can run here, else 77 and why")
    sub.add_parser("install", help="install the missing Debian packages")
    sub.add_parser("setup", help="(re)make the cluster; prints the client URL")
    sub.add_parser("teardown").add_argument("--purge", action="store_true", help="remove --dir too")
    sub.add_parser("url")
    sub.add_parser("primary")
    sub.add_parser("status")
    sub.add_parser("kill-primary").add_argument("--whole-host", action="store_true")
    for name in ("isolate", "heal", "crash-host", "start-host"):
        sub.add_parser(name).add_argument("host", choices=DB_HOSTS + APP_HOSTS)
    sub.add_parser("restart-all")
    sub.add_parser("wait-primary").add_argument("--timeout", type=float, default=60)
    d = sub.add_parser("demo", help="setup, writes through a failover, check, teardown")
    d.add_argument("--runs", type=int, default=1)
    d.add_argument("--whole-host", action="store_true", help="power-cut the primary's host instead")
    a = ap.parse_args()
    # SIGTERM (a CI timeout) ends as an exception would: demo's teardown still runs
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        if a.cmd in ("preflight", "install"):
            preflight(install=a.cmd == "install")
            print("ok")
            return 0
        if a.cmd == "setup":
            print(Cluster(a.dir, a.apps).setup())
            return 0
        if a.cmd == "demo":
            preflight()
            results = []
            for i in range(a.runs):
                s = demo(a.dir, whole_host=a.whole_host)
                print(json.dumps(s), flush=True)
                results.append(s)
            bad = [s for s in results if s["lost"]]
            times = [s["failover_seconds"] for s in results]
            print(f"failover seconds: {times}; runs losing acknowledged rows: {len(bad)}")
            print(f"demo: {len(results) - len(bad)} passed, {len(bad)} failed")
            return 1 if bad else 0
        c = load(a.dir)
        if a.cmd == "teardown":
            c.teardown(purge=a.purge)
        elif a.cmd == "url":
            print(c.url())
        elif a.cmd == "primary":
            print(c.primary() or "none")
        elif a.cmd == "status":
            print(json.dumps(c.members(), indent=1))
        elif a.cmd == "kill-primary":
            print(c.kill_primary(a.whole_host))
        elif a.cmd == "isolate":
            c.isolate(a.host)
        elif a.cmd == "heal":
            c.heal(a.host)
        elif a.cmd == "crash-host":
            c.crash_host(a.host)
        elif a.cmd == "start-host":
            if a.host not in DB_HOSTS:
                sys.exit("start-host starts database hosts only (app hosts: mosaic.py starts mosaicdb)")
            c.start_db_host(a.host)
        elif a.cmd == "restart-all":
            print(f"{c.restart_all():.2f}")
        elif a.cmd == "wait-primary":
            print(f"{c.wait_primary(a.timeout):.2f}")
        return 0
    except Skip as e:
        print(f"SKIP: {e}", flush=True)
        return SKIP


if __name__ == "__main__":
    sys.exit(main())
