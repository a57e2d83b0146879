#!/usr/bin/env python3
"""Cluster mode's figures: read and write throughput with 1, 2 and 3 mosaicdb servers on one
PostgreSQL database, and the time a follower takes to lead after the leader is SIGKILLed.

    python3 benches/peers/cluster_scale.py
    CS_SECS=10 CS_DOCS=50000 PEERS_BINARY=target/release/mosaicdb python3 benches/peers/cluster_scale.py

A throwaway PostgreSQL cluster (`.ci/postgres`, on this machine), then for n = 1, 2, 3: a fresh
database, n servers in cluster mode (`--advertise-url`, sync durability), CS_DOCS (20k) core
documents imported through the leader, every document read once through each server; then
- reads: point GETs of random ids at 32 connections in all, split evenly over the n servers (one
  wrk per server, run at once; their rates summed);
- writes: durable PUTs of new ids at 32 connections, sent to the leader (a client of a follower
  is redirected there: writes scale with the leader alone).
Last, leader loss: two servers, the leader SIGKILLed CS_KILLS (5) times (restarted as a follower
after each); the time from the kill to the first PUT acknowledged through the surviving server.
Never part of CI. The machine's cores are shared by PostgreSQL, the servers and wrk: with 2
cores, more servers add no CPU, so what the reads figure shows is the cost of a follower's reads
(each a PostgreSQL statement: followers keep no document cache) against the leader's.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import OUT, ROOT, import_ndjson, mosaic_binary, stop, wait_port, write_data, wrk  # noqa: E402

SECS = int(os.environ.get("CS_SECS", "5"))
DOCS = int(os.environ.get("CS_DOCS", "20000"))
KILLS = int(os.environ.get("CS_KILLS", "5"))
PORTS = [18111, 18112, 18113]


def request(method, port, path, body=None, timeout=5):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, None
    except OSError:
        return None, None


def start(port, url, data_dir):
    proc = subprocess.Popen([str(mosaic_binary()), "--data-dir", data_dir, "--addr", f"127.0.0.1:{port}",
                             "--log", "warn", "--backend", "postgres", "--postgres-url", url,
                             "--advertise-url", f"http://127.0.0.1:{port}"])
    wait_port(("127.0.0.1", port), proc, f"mosaicdb :{port}")
    return proc


def role(port):
    status, body = request("GET", port, "/ready", timeout=1)
    return body["cluster"]["role"] if status == 200 and body else None


def wait_role(port, wanted, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if role(port) == wanted:
            return
        time.sleep(0.02)
    raise SystemExit(f"mosaicdb :{port} is not {wanted}")


def database(admin, name):
    subprocess.run(["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {name}", "-c", f"CREATE DATABASE {name}"],
                   check=True, capture_output=True)
    base, _, query = admin.partition("?")
    return base.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else "")


def scale(admin, n, ndjson, dirs):
    url = database(admin, f"cs{n}")
    procs = [start(PORTS[0], url, dirs[0])]
    wait_role(PORTS[0], "leader")
    for i in range(1, n):
        procs.append(start(PORTS[i], url, dirs[i]))
        wait_role(PORTS[i], "follower")
    try:
        assert request("POST", PORTS[0], "/v1/tables", {"name": "docs"})[0] == 201
        assert request("POST", PORTS[0], "/v1/tables", {"name": "puts"})[0] == 201
        import_ndjson(("127.0.0.1", PORTS[0]), "docs", ndjson, DOCS)
        env = {"PEERS_DOCS": str(DOCS), "PEERS_TABLE": "docs"}
        for port in PORTS[:n]:  # every document read once through each server
            wrk(("127.0.0.1", port), "/", "get.lua", 8, 1, 2, env)
        rates, threads = [], []
        for port in PORTS[:n]:
            t = threading.Thread(target=lambda p=port: rates.append(
                wrk(("127.0.0.1", p), "/", "get.lua", 32 // n, 1, SECS, env)))
            threads.append(t)
            t.start()
        for t in threads:
            t.join()
        reads = sum(rates)
        writes = wrk(("127.0.0.1", PORTS[0]), "/", "put.lua", 32, 2, SECS, {"PEERS_PUTS": "puts", "PEERS_RUN": str(n)})
        return reads, [round(r) for r in rates], writes
    finally:
        for p in procs:
            stop(p)


def failover(admin, dirs):
    url = database(admin, "csfail")
    procs = {PORTS[0]: start(PORTS[0], url, dirs[0])}
    wait_role(PORTS[0], "leader")
    procs[PORTS[1]] = start(PORTS[1], url, dirs[1])
    wait_role(PORTS[1], "follower")
    assert request("POST", PORTS[0], "/v1/tables", {"name": "f"})[0] == 201
    times, k = [], 0
    try:
        for _ in range(KILLS):
            leader = next(p for p in procs if role(p) == "leader")
            other = next(p for p in procs if p != leader)
            procs[leader].kill()
            procs[leader].wait()
            killed = time.perf_counter()
            while True:
                k += 1
                status, _ = request("PUT", other, f"/v1/tables/f/documents/k{k}", {"k": k}, timeout=2)
                if status in (200, 201):
                    break
                time.sleep(0.005)
            times.append(time.perf_counter() - killed)
            procs[leader] = start(leader, url, dirs[PORTS.index(leader)])
            wait_role(leader, "follower")
    finally:
        for p in procs.values():
            stop(p)
    return times


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    ndjson, _ = write_data(DOCS, f"cs{DOCS}")
    pg_dir = tempfile.mkdtemp(prefix="cs-pg-", dir="/tmp")
    out = subprocess.run([str(ROOT / ".ci" / "postgres"), "start", pg_dir], check=True, capture_output=True,
                         text=True).stdout
    admin = out.strip().split("=", 1)[1].strip("'\"")
    try:
        rows = []
        for n in (1, 2, 3):
            dirs = [tempfile.mkdtemp(prefix="cs-", dir=OUT) for _ in range(n)]
            reads, each, writes = scale(admin, n, ndjson, dirs)
            rows.append((n, reads, each, writes))
            print(f"{n} server(s): reads {reads:,.0f}/s {each}, writes {writes:,.0f}/s", flush=True)
        dirs = [tempfile.mkdtemp(prefix="cs-", dir=OUT) for _ in range(2)]
        times = failover(admin, dirs)
        print(f"leader SIGKILLed -> first write acknowledged through the follower: median "
              f"{statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms "
              f"({[round(t * 1000) for t in times]} ms)", flush=True)
    finally:
        subprocess.run([str(ROOT / ".ci" / "postgres"), "stop", pg_dir], capture_output=True)


if __name__ == "__main__":
    main()
