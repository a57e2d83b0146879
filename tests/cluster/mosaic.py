#!/usr/bin/env python3
"""mosaicdb servers on the Patroni cluster of cluster.py: writers through failures, nothing
acknowledged lost.

    MOSAIC_BINARY=/path/to/mosaicdb tests/cluster/mosaic.py --dir /tmp/mcluster [--servers 3]
        [--scenarios kill_primary,kill_leader,isolate_leader,restart_all] [--keep]

One mosaicdb server per app host (10.231.0.21-23:8080, `serve --backend postgres --postgres-url
<the cluster's URL> --advertise-url http://IP:8080`). A writer PUTs documents with fresh ids to
every server in turn (following 307 to the leader, a new id after a 503, a timeout or a refused
connection) and records every id answered 2xx. Each scenario happens under that writer; after it,
every acknowledged id must read back with its body from any server, POST /v1/admin/check must be
clean, and the seconds until writes were acknowledged again are reported.
A binary without cluster mode (no --advertise-url in `serve --help`) runs one server and only the
scenarios that need no second server (kill_primary, restart_all).
Exit status: 0 all passed, 1 a failure, 77 skipped (no MOSAIC_BINARY, or no way to run the cluster).
"""
import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster as C  # noqa: E402

PORT = 8080
TABLE = "acked"
DOCS = f"/v1/tables/{TABLE}/documents"
ALL = ["kill_primary", "kill_leader", "isolate_leader", "restart_all"]
# The longest each failure may keep writes from being acknowledged again (the bound the docs state):
# a PostgreSQL failover (Patroni: ttl 10, loop_wait 1), a mosaicdb leader gone (a follower probes
# the lock every 200 ms), a leader cut off (PostgreSQL's keepalives end its session in ~8 s), every
# process restarted (PostgreSQL's recovery and Patroni's election first).
BOUND = {"kill_primary": 15, "kill_leader": 3, "isolate_leader": 30, "restart_all": 45}
SOLE = ["kill_primary", "restart_all"]  # what one server without cluster mode can go through


def log(msg):
    print(f"[mosaic {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Mosaic:
    def __init__(self, cl, binary, servers=3):
        self.c, self.binary = cl, binary
        help_text = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True,
                                   timeout=30).stdout
        self.cluster_mode = "--advertise-url" in help_text
        self.hosts = cl.apps[:servers] if self.cluster_mode else cl.apps[:1]
        self.max_seq = 0  # the highest X-Mosaic-Seq of an acknowledged write
        self.lock = threading.Lock()

    def base(self, host):
        return f"http://{self.c.ip(host)}:{PORT}"

    def host_of(self, url):
        ip = urllib.parse.urlsplit(url).hostname
        return next((h for h in self.hosts if self.c.ip(h) == ip), None)

    # ---- servers
    def start(self, host):
        data = os.path.join(self.c.hostdir(host), "data")
        os.makedirs(data, exist_ok=True)
        argv = [self.binary, "serve", "--backend", "postgres", "--postgres-url", self.c.url(),
                "--addr", f"{self.c.ip(host)}:{PORT}", "--data-dir", data, "--allow-unauthenticated"]
        if self.cluster_mode:
            argv += ["--advertise-url", self.base(host)]
        env = {k: v for k, v in os.environ.items() if k.startswith(("MOSAIC_LOG", "FAKE_MOSAIC_"))}
        self.c.spawn(host, "mosaicdb", argv, env=dict({"MOSAIC_LOG": "info"}, **env))
        self.c.event(f"start mosaicdb on {host}")

    def kill(self, host):
        self.c.crash_host(host)  # SIGKILL to everything in the app host: the mosaicdb server

    def wait_up(self, hosts, timeout=60):
        start = time.monotonic()
        for host in hosts:
            while self.request("GET", host, "/health", timeout=1, follow=0)[0] != 200:
                if time.monotonic() - start > timeout:
                    raise RuntimeError(f"mosaicdb on {host} does not answer /health within {timeout} s")
                time.sleep(0.1)

    def ready(self, host):
        status, _, body = self.request("GET", host, "/ready", timeout=1, follow=0)
        return body if status == 200 and isinstance(body, dict) else None

    def role(self, ready):
        """The role a /ready answer gives: "role" at its top or in its "cluster" object; without
        cluster mode, a ready server is the leader."""
        if not isinstance(ready, dict):
            return None
        role = ready.get("role") or (ready.get("cluster") or {}).get("role")
        return role or (None if self.cluster_mode else "leader")

    def leader(self):
        """The host whose /ready says it leads."""
        for host in self.hosts:
            if self.role(self.ready(host)) == "leader":
                return host
        return None

    def roles(self):
        return {h: (self.ready(h) or {}) for h in self.hosts}

    # ---- HTTP
    def request(self, method, host, path, body=None, headers=None, timeout=5.0, follow=3):
        """(status, headers, parsed body) of METHOD on HOST, following up to FOLLOW 307s;
        (None, {}, error text) when no answer came."""
        data = None if body is None else json.dumps(body).encode()
        hdrs = dict(headers or {})
        if data is not None:
            hdrs["content-type"] = "application/json"
        for _ in range(follow + 1):
            conn = http.client.HTTPConnection(self.c.ip(host), PORT, timeout=timeout)
            try:
                conn.request(method, path, body=data, headers=hdrs)
                r = conn.getresponse()
                raw = r.read()
                rh = {k.lower(): v for k, v in r.getheaders()}
            except (OSError, http.client.HTTPException) as e:
                return None, {}, f"{type(e).__name__}: {e}"
            finally:
                conn.close()
            if r.status == 307 and "location" in rh:
                target = self.host_of(rh["location"])
                if target is None:
                    return r.status, rh, f"redirect to an unknown server: {rh['location']}"
                host, path = target, urllib.parse.urlsplit(rh["location"]).path or path
                continue
            try:
                parsed = json.loads(raw) if raw else None
            except ValueError:
                parsed = raw.decode(errors="replace")
            return r.status, rh, parsed
        return 307, {}, "too many redirects"

    # ---- the writer
    def writer(self, stop, acked, log_, errors, prefix):
        """PUTs until STOP is set: ACKED[id] = body for each 2xx; LOG_ gets (sent, answered, ok) of
        every request; ERRORS counts the failures by status or error. A server that did not answer
        at all is skipped for 3 s (unless every server is), as a client with a list of servers would."""
        n, down = 0, {}
        while not stop.is_set():
            n += 1
            up = [h for h in self.hosts if down.get(h, 0) < time.monotonic()] or self.hosts
            host = up[n % len(up)]
            doc_id = f"{prefix}-{n}"
            body = {"n": n, "by": host, "at": round(time.time(), 3), "pad": "x" * 64}
            sent = time.monotonic()
            status, rh, answer = self.request("PUT", host, f"{DOCS}/{doc_id}", body, timeout=4)
            ok = status is not None and 200 <= status < 300
            with self.lock:
                log_.append((sent, time.monotonic(), ok))
                if ok:
                    acked[doc_id] = body
                    seq = rh.get("x-mosaic-seq")
                    if seq and seq.isdigit():
                        self.max_seq = max(self.max_seq, int(seq))
                else:
                    key = str(status) if status is not None else str(answer).split(":")[0]
                    errors[key] = errors.get(key, 0) + 1
                    if status is not None:  # what a server answered, once per status
                        self.samples.setdefault(key, f"{host}: {str(answer)[:300]}")
            if status is None:
                down[host] = time.monotonic() + 3
            if not ok:
                time.sleep(0.05)

    @staticmethod
    def outage(log_, t0, t1):
        """Seconds from T0 (the failure's start) until writes were acknowledged again: to the first
        ack of a write sent after T1 (the failure complete) and after the first failed write sent
        after T0 (a write in flight at the failure may still be acknowledged and say nothing); 0
        when no write failed. None: not yet."""
        after = [e for e in log_ if e[0] >= t0]
        first_fail = next((e for e in after if not e[2]), None)
        if first_fail is None:
            # none failed yet: a request may hang for its whole timeout (4 s) before it does
            return 0.0 if [e for e in after if e[0] >= t1 + 5] else None
        ack = next((e for e in after if e[2] and e[0] > max(first_fail[0], t1)), None)
        return None if ack is None else ack[1] - t0

    # ---- checks
    def verify(self, acked):
        """Every acknowledged id read back with its body, from every server in turn; returns the
        list of problems."""
        problems = []
        hosts = [h for h in self.hosts if self.ready(h) is not None] or self.hosts
        headers = {"x-mosaic-min-seq": str(self.max_seq)} if self.max_seq else {}
        for i, (doc_id, body) in enumerate(sorted(acked.items())):
            host = hosts[i % len(hosts)]
            for _ in range(20):
                status, _, doc = self.request("GET", host, f"{DOCS}/{doc_id}", headers=headers, timeout=10)
                if status is not None and status != 503:
                    break
                time.sleep(0.25)
            if status != 200 or not isinstance(doc, dict):
                problems.append(f"{doc_id} from {host}: {status} {str(doc)[:200]}")
            elif any(doc.get(k) != v for k, v in body.items()):
                problems.append(f"{doc_id} from {host}: body {doc} is not {body}")
            if len(problems) > 20:
                problems.append("… (stopped after 20)")
                break
        return problems

    def feed(self, acked):
        """The changefeed read from the leader from its start: None if its seqs have no gap and
        every acknowledged id has an event, else what is wrong."""
        host = self.leader() or self.hosts[0]
        since, seqs, ids = 0, [], set()
        while True:
            status, _, page = self.request("GET", host, f"/v1/changes?since={since}&limit=10000", timeout=30)
            if status != 200 or not isinstance(page, dict):
                return f"GET /v1/changes: {status} {str(page)[:300]}"
            events = page.get("events") or []
            seqs += [e["seq"] for e in events]
            ids |= {e.get("id") for e in events if e.get("table") == TABLE}
            if not events or page.get("next", since) == since:
                break
            since = page["next"]
        gaps = [(a, b) for a, b in zip(seqs, seqs[1:]) if b != a + 1]
        if gaps:
            return f"the changefeed has gaps: {gaps[:10]}"
        missing = [i for i in acked if i not in ids]
        if missing:
            return f"{len(missing)} acknowledged writes have no change event: {missing[:10]}"
        return None

    def check(self):
        """POST /v1/admin/check on the leader: None if clean, else what it said."""
        host = self.leader() or self.hosts[0]
        status, _, answer = self.request("POST", host, "/v1/admin/check", timeout=60)
        if status == 200 and isinstance(answer, dict) and answer.get("ok") and not answer.get("problem_count"):
            return None
        return f"{status} {str(answer)[:500]}"

    def wait_leader(self, timeout=60, exclude=None):
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            host = self.leader()
            if host is not None and host != exclude:
                return host
            time.sleep(0.2)
        raise RuntimeError(f"no mosaicdb leader within {timeout} s: {self.roles()}")

    # ---- scenarios: each causes its failure, sets self.failed_at to its start and self.injected_at
    # to when it is complete, and returns what it did and what to do once writes are back (heal,
    # restart), or None.
    def scenario(self, name):
        self.failed_at = self.injected_at = time.monotonic()
        if name == "kill_primary":
            return {"db_primary": self.c.kill_primary()}, None
        if name == "kill_leader":
            victim = self.wait_leader()
            self.failed_at = self.injected_at = time.monotonic()
            self.kill(victim)

            def after():
                self.start(victim)
                self.wait_up([victim])
            return {"killed": victim}, after
        if name == "isolate_leader":
            victim = self.wait_leader()
            self.failed_at = self.injected_at = time.monotonic()
            self.c.isolate(victim)

            def after():
                self.c.heal(victim)
                # the old leader must come back as a follower of the new one, or lead again alone
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    r = self.roles()
                    leaders = [h for h, x in r.items() if self.role(x) == "leader"]
                    if len(leaders) == 1 and r[victim]:
                        return
                    time.sleep(0.5)
                raise RuntimeError(f"after heal, not one leader: {self.roles()}")
            return {"isolated": victim}, after
        if name == "restart_all":
            self.c.crash_all()
            self.injected_at = time.monotonic()
            self.c.start_db_hosts()
            db = time.monotonic() - self.injected_at
            for host in self.hosts:
                self.start(host)
            self.wait_up(self.hosts)
            return {"db_restart_seconds": round(db, 2)}, None
        raise ValueError(name)

    def run_scenario(self, name, acked, settle=3.0, timeout=90):
        stop, log_, errors = threading.Event(), [], {}
        self.samples = {}
        self.runs = getattr(self, "runs", 0) + 1  # ids unique across runs of the same scenario
        t = threading.Thread(target=self.writer, args=(stop, acked, log_, errors, f"{self.runs}-{name}"),
                             daemon=True)
        t.start()
        result = {"scenario": name}
        try:
            deadline = time.monotonic() + 20
            while sum(e[2] for e in log_) < 20:  # writes flow before the failure
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no writes acknowledged before {name}: {errors}")
                time.sleep(0.1)
            info, after = self.scenario(name)
            result.update(info)
            t0 = self.failed_at
            time.sleep(1)  # room for the first failures to show
            while (seconds := self.outage(log_, t0, self.injected_at)) is None:
                if time.monotonic() - t0 > timeout:
                    raise RuntimeError(f"writes not acknowledged again within {timeout} s: {errors}")
                time.sleep(0.05)
            result["seconds_to_writes"] = round(seconds, 2)
            if after:
                after()
            mark = time.monotonic()
            time.sleep(settle)
            flowing = sum(e[2] for e in log_ if e[0] >= mark)
            result["new_leader"] = self.leader()
        finally:
            stop.set()
            t.join(30)
        result["acked_total"], result["errors"] = len(acked), errors
        if self.samples:
            result["error_samples"] = self.samples
        problems = self.verify(acked)
        bad_check = self.check()
        bad_feed = self.feed(acked)
        slow = result.get("seconds_to_writes", 0) > BOUND[name]
        result["ok"] = not problems and bad_check is None and bad_feed is None and flowing > 0 and not slow
        if bad_feed:
            result["changefeed"] = bad_feed
        if slow:
            result["too_slow"] = f"writes came back after {result['seconds_to_writes']} s, over the bound {BOUND[name]} s"
        if not flowing:
            result["stalled"] = f"no write acknowledged in the {settle} s after the scenario"
        if problems:
            result["lost_or_wrong"] = problems
        if bad_check:
            result["check"] = bad_check
        return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=os.environ.get("MOSAIC_CLUSTER_DIR", "/tmp/mcluster"))
    ap.add_argument("--servers", type=int, default=3)
    ap.add_argument("--scenarios", default=",".join(ALL))
    ap.add_argument("--keep", action="store_true", help="leave the cluster running at the end")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a CI timeout still tears down
    binary = os.environ.get("MOSAIC_BINARY")
    if not binary or not os.access(binary, os.X_OK):
        print("SKIP: set MOSAIC_BINARY to a mosaicdb binary (e.g. target/release/mosaicdb)")
        return C.SKIP
    try:
        C.preflight()
    except C.Skip as e:
        print(f"SKIP: {e}")
        return C.SKIP
    cl = C.Cluster(a.dir, apps=a.servers)
    m = Mosaic(cl, os.path.abspath(binary), a.servers)
    wanted = [s for s in a.scenarios.split(",") if s]
    if not m.cluster_mode:
        skipped = [s for s in wanted if s not in SOLE]
        wanted = [s for s in wanted if s in SOLE]
        print(f"{binary} has no cluster mode (no --advertise-url in `serve --help`): one server; "
              f"skipped: {', '.join(skipped) or 'none'}", flush=True)
    results, failed = [], 0
    ok = False
    try:
        cl.setup()
        for host in m.hosts:
            m.start(host)
        m.wait_up(m.hosts)
        leader = m.wait_leader()
        log(f"servers up; leader {leader}; roles {json.dumps(m.roles())}")
        status, _, answer = m.request("POST", leader, "/v1/tables", {"name": TABLE}, timeout=30)
        if status not in (200, 201):
            raise RuntimeError(f"creating table {TABLE}: {status} {answer}")
        acked = {}
        for name in wanted:
            log(f"scenario {name}")
            try:
                r = m.run_scenario(name, acked)
            except Exception as e:  # noqa: BLE001 — reported, then the next scenario
                r = {"scenario": name, "ok": False, "error": str(e)}
            print(json.dumps(r), flush=True)
            results.append(r)
            failed += not r["ok"]
        ok = failed == 0
    finally:
        if not ok:
            cl.dump_logs()
        if not a.keep:
            cl.teardown(purge=ok)
    passed = len(results) - failed
    print("seconds until writes were acknowledged again: " +
          ", ".join(f"{r['scenario']} {r.get('seconds_to_writes')}" for r in results))
    print(f"cluster: {passed} passed, {failed} failed")
    return 0 if ok and results else 1


if __name__ == "__main__":
    sys.exit(main())
