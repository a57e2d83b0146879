#!/usr/bin/env python3
"""mosaicdb side by side with PostgreSQL 15 and a trivial axum handler, in one run.

    python3 benches/peers/run.py            # everything: about 8 minutes
    PEERS_SECS=3 PEERS_RUNS=1 python3 benches/peers/run.py   # a quick look

What it does, in order:
1. builds the release server (`cargo build --release`) and the ceiling (`benches/peers/ceiling`,
   a trivial axum handler with no layers, same axum/tokio/allocator);
2. installs PostgreSQL 15, pgbench and wrk from Debian if they are missing (needs root or sudo);
3. starts the three servers on loopback: mosaicdb with its default flags (sync durability) on a
   fresh data directory, the ceiling, and a fresh PostgreSQL 15 cluster (`shared_buffers=1GB`,
   otherwise defaults: fsync and synchronous_commit on), reached over TCP like the others;
4. per run (PEERS_RUNS, default 3), each workload against each system, one after the other:
   - import of 100k documents of ~200 bytes into a table with a range index on `age` and a hash
     index on `city` (mosaicdb: one NDJSON import request; PostgreSQL: `\\copy` into a JSONB table
     with the two expression indexes);
   - point GET by id (wrk, 2 threads, 32 connections; PostgreSQL: pgbench, prepared statements,
     32 clients, 2 threads) — and the ceiling's GET;
   - durable PUT of new ids (wrk, c32; PostgreSQL: an upsert, c32);
   - the ids of every document with `age` in a 3-value range (~3,000 of 100k), 1 client:
     mosaicdb as one NDJSON stream per query, and as pages of 1000; PostgreSQL: a `select`;
5. then an import of 1M documents into a fresh mosaicdb server, with its peak resident memory;
6. prints one table (each system's range over the runs, and the ratios per run), writes it with
   the machine's description to `docs/perf/peers.md`, and draws `docs/perf/peers.png`
   (matplotlib, installed from PyPI into target/peers/venv).

The load generator runs on the same machine as the servers, as a new user would run it. Never
part of CI. Environment: PEERS_SECS (10 per measurement), PEERS_RUNS (3), PEERS_DOCS (100000),
PEERS_BIG (1000000; 0 skips the 1M import).
"""

import http.client
import json
import os
import platform
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "benches" / "peers"
OUT = ROOT / "target" / "peers"
DOCS_OUT = ROOT / "docs" / "perf"
PG_BIN = Path("/usr/lib/postgresql/15/bin")
SECS = int(os.environ.get("PEERS_SECS", "10"))
RUNS = int(os.environ.get("PEERS_RUNS", "3"))
NDOCS = int(os.environ.get("PEERS_DOCS", "100000"))
BIG = int(os.environ.get("PEERS_BIG", "1000000"))
MOSAIC = ("127.0.0.1", 18080)
CEILING = ("127.0.0.1", 18081)
MOSAIC_BIG = ("127.0.0.1", 18082)
PG_PORT = 5544
CITIES = ["Oslo", "Bergen", "Lyon", "Porto"]
TAGS = ["a", "b", "c", "d", "e"]


def log(msg):
    print(f"[peers] {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw):
    log(" ".join(str(c) for c in cmd))
    return subprocess.run(cmd, check=True, **kw)


def as_root(cmd):
    return cmd if os.geteuid() == 0 else ["sudo", *cmd]


def ensure_tools():
    missing = []
    if not (PG_BIN / "postgres").exists():
        missing += ["postgresql-15", "postgresql-client-15"]
    if not shutil.which("pgbench"):
        missing.append("postgresql-client-15")
    if not shutil.which("wrk"):
        missing.append("wrk")
    if missing:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        if subprocess.run(as_root(["apt-get", "install", "-y", *sorted(set(missing))]), env=env).returncode != 0:
            run(as_root(["apt-get", "update"]), env=env)
            run(as_root(["apt-get", "install", "-y", *sorted(set(missing))]), env=env)


def build():
    run(["cargo", "build", "--release", "--quiet"], cwd=ROOT)
    run(["cargo", "build", "--release", "--quiet", "--manifest-path", str(HERE / "ceiling" / "Cargo.toml"),
         "--target-dir", str(OUT / "ceiling-target")], cwd=ROOT)


def document(i, rng):
    return {"_id": f"d{i}", "name": f"user{i}", "age": rng.randrange(100), "city": rng.choice(CITIES),
            "tags": rng.sample(TAGS, 2), "pad": "x" * 100}


def write_data(n, name):
    """The documents as NDJSON (mosaicdb) and as COPY text, id TAB json (PostgreSQL)."""
    ndjson, tsv = OUT / f"{name}.ndjson", OUT / f"{name}.tsv"
    if not ndjson.exists() or not tsv.exists():
        rng = random.Random(42)
        with open(ndjson, "w") as nd, open(tsv, "w") as ts:
            for i in range(n):
                d = document(i, rng)
                line = json.dumps(d, separators=(",", ":"))
                nd.write(line + "\n")
                body = {k: v for k, v in d.items() if k != "_id"}
                ts.write(f"{d['_id']}\t{json.dumps(body, separators=(',', ':'))}\n")
    return ndjson, tsv


def wait_port(addr, proc, what, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(addr, timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{what} did not listen on {addr}")


def call(addr, method, path, body=None, headers=None):
    c = http.client.HTTPConnection(*addr, timeout=600)
    h = {"Content-Type": "application/json", **(headers or {})}
    c.request(method, path, body=json.dumps(body) if isinstance(body, (dict, list)) else body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    if r.status >= 300:
        raise SystemExit(f"{method} {path}: {r.status} {data[:300]!r}")
    return json.loads(data) if data and r.getheader("content-type", "").startswith("application/json") else data


def start_mosaic(addr, data_dir):
    proc = subprocess.Popen([str(ROOT / "target" / "release" / "mosaicdb"), "--data-dir", str(data_dir),
                             "--addr", f"{addr[0]}:{addr[1]}", "--log", "warn"])
    wait_port(addr, proc, "mosaicdb")
    return proc


def stop(proc):
    if proc and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()


class Postgres:
    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="mosaic-peers-pg-"))
        self.user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.user:
            shutil.chown(self.dir, "postgres", "postgres")
        run([*self.user, str(PG_BIN / "initdb"), "-D", str(self.dir / "data"), "-U", "postgres", "--auth=trust",
             "-E", "UTF8"], stdout=subprocess.DEVNULL)
        self.proc = subprocess.Popen([*self.user, str(PG_BIN / "postgres"), "-D", str(self.dir / "data"),
                                      "-c", "shared_buffers=1GB", "-c", f"port={PG_PORT}",
                                      "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.dir}",
                                      "-c", "max_connections=100"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(("127.0.0.1", PG_PORT), self.proc, "postgres")
        time.sleep(1)

    def args(self):
        return ["-h", "127.0.0.1", "-p", str(PG_PORT), "-U", "postgres"]

    def sql(self, text):
        return subprocess.run(["psql", *self.args(), "-v", "ON_ERROR_STOP=1", "-qAtc", text], check=True,
                              capture_output=True, text=True).stdout

    def bench(self, script, clients, secs):
        f = OUT / "pgbench.sql"
        f.write_text(script)
        out = subprocess.run(["pgbench", *self.args(), "-n", "-M", "prepared", "-c", str(clients),
                              "-j", str(min(clients, 2)), "-T", str(secs), "-f", str(f), "postgres"],
                             check=True, capture_output=True, text=True).stdout
        m = re.search(r"tps = ([\d.]+) \(without initial connection time\)", out)
        failed = re.search(r"number of failed transactions: (\d+)", out)
        if not m or (failed and int(failed.group(1)) > 0):
            raise SystemExit(f"pgbench: {out}")
        return float(m.group(1))

    def close(self):
        stop(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)


def wrk(addr, path, script, conns, threads, secs, env=None):
    cmd = ["wrk", f"-t{threads}", f"-c{conns}", f"-d{secs}s"]
    if script:
        cmd += ["-s", str(HERE / "wrk" / script)]
    out = subprocess.run([*cmd, f"http://{addr[0]}:{addr[1]}{path}"], check=True, capture_output=True, text=True,
                         env=dict(os.environ, **(env or {}))).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    if bad or errors:
        raise SystemExit(f"wrk {path}: not every answer was a success:\n{out}")
    return rate


def mosaic_table(addr, name):
    call(addr, "POST", "/v1/tables", {"name": name})
    call(addr, "POST", f"/v1/tables/{name}/indexes", {"name": "by_age", "kind": "range", "fields": ["age"]})
    call(addr, "POST", f"/v1/tables/{name}/indexes", {"name": "by_city", "kind": "hash", "fields": ["city"]})


def mosaic_import(addr, table, ndjson, n):
    c = http.client.HTTPConnection(*addr, timeout=3600)
    size = ndjson.stat().st_size
    t0 = time.perf_counter()
    with open(ndjson, "rb") as f:
        c.request("POST", f"/v1/tables/{table}/import", body=f,
                  headers={"Content-Type": "application/x-ndjson", "Content-Length": str(size)})
        r = c.getresponse()
        report = json.loads(r.read())
    took = time.perf_counter() - t0
    c.close()
    if r.status != 200 or report.get("inserted") != n:
        raise SystemExit(f"import: {r.status} {report}")
    return n / took


def pg_table(pg, name):
    pg.sql(f"create table {name} (id text primary key, doc jsonb not null);"
           f"create index {name}_age on {name} (((doc->>'age')::int));"
           f"create index {name}_city on {name} using hash ((doc->>'city'));")


def pg_import(pg, table, tsv, n):
    t0 = time.perf_counter()
    pg.sql(f"\\copy {table} from '{tsv}'")
    took = time.perf_counter() - t0
    got = int(pg.sql(f"select count(*) from {table}"))
    if got != n:
        raise SystemExit(f"postgres import: {got} rows of {n}")
    return n / took


def mosaic_range_pages(addr, table, secs):
    """Complete answers per second: every page of 1000 until the cursor ends."""
    c = http.client.HTTPConnection(*addr, timeout=60)
    rng = random.Random(7)
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < secs:
        a = rng.randrange(98)
        cursor = None
        while True:
            body = {"filter": {"age": {"$gte": a, "$lte": a + 2}}, "fields": ["_id"], "limit": 1000}
            if cursor:
                body["cursor"] = cursor
            c.request("POST", f"/v1/tables/{table}/query", body=json.dumps(body),
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            page = json.loads(r.read())
            if r.status != 200:
                raise SystemExit(f"query: {r.status} {page}")
            cursor = page.get("cursor")
            if not cursor:
                break
        done += 1
    took = time.perf_counter() - t0
    c.close()
    return done / took


def peak_rss_mb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def machine():
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), platform.processor())
    mem = next((int(l.split()[1]) for l in Path("/proc/meminfo").read_text().splitlines()
                if l.startswith("MemTotal")), 0)
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    pg = subprocess.run([str(PG_BIN / "postgres"), "--version"], capture_output=True, text=True).stdout.strip()
    return (f"{os.cpu_count()} cores ({cpu}), {mem / 1048576:.0f} GiB, Linux {platform.release()}; "
            f"mosaicdb {rev}, {pg}; {time.strftime('%Y-%m-%d %H:%M %Z')}")


# (workload, unit, target: the ratio mosaicdb/reference it should reach, the reference's key)
IMPORT = f"import {NDOCS // 1000}k, 2 indexes"
WORKLOADS = [
    (IMPORT, "docs/s", [("postgres", 2.0)]),
    ("point GET by id, c32", "req/s", [("ceiling", 0.85), ("postgres", 1.5)]),
    ("durable PUT of new ids, c32", "req/s", [("postgres", 2.5)]),
    ("age range ~3k ids, 1 client, stream", "answers/s", [("postgres", 1.0)]),
    ("age range ~3k ids, 1 client, pages of 1000", "answers/s", [("postgres", 1.0)]),
]


def measure():
    results = {w: {} for w, _, _ in WORKLOADS}

    def add(w, system, value):
        results[w].setdefault(system, []).append(value)
        log(f"{w} / {system}: {value:,.1f}")

    ndjson, tsv = write_data(NDOCS, f"docs{NDOCS}")
    mdir = Path(tempfile.mkdtemp(prefix="mosaic-peers-data-", dir=OUT))
    mosaic = start_mosaic(MOSAIC, mdir)
    ceiling = subprocess.Popen([str(OUT / "ceiling-target" / "release" / "mosaic-ceiling"), f"{CEILING[0]}:{CEILING[1]}"])
    wait_port(CEILING, ceiling, "ceiling")
    pg = Postgres()
    try:
        pg.sql("create table puts (id text primary key, doc jsonb not null)")
        call(MOSAIC, "POST", "/v1/tables", {"name": "puts"})
        for k in range(1, RUNS + 1):
            log(f"run {k} of {RUNS}")
            table = f"docs{k}"
            mosaic_table(MOSAIC, table)
            add(IMPORT, "mosaicdb", mosaic_import(MOSAIC, table, ndjson, NDOCS))
            pg_table(pg, table)
            add(IMPORT, "postgres", pg_import(pg, table, tsv, NDOCS))
            pg.sql(f"vacuum analyze {table}")

            env = {"PEERS_TABLE": table, "PEERS_DOCS": str(NDOCS), "PEERS_RUN": str(k)}
            add("point GET by id, c32", "mosaicdb", wrk(MOSAIC, "/", "get.lua", 32, 2, SECS, env))
            add("point GET by id, c32", "ceiling", wrk(CEILING, "/", None, 32, 2, SECS))
            add("point GET by id, c32", "postgres", pg.bench(
                f"\\set n random(0, {NDOCS - 1})\nselect doc from {table} where id = 'd' || :n;\n", 32, SECS))

            add("durable PUT of new ids, c32", "mosaicdb", wrk(MOSAIC, "/", "put.lua", 32, 2, SECS, env))
            add("durable PUT of new ids, c32", "postgres", pg.bench(
                "\\set n random(1, 2000000000)\n"
                f"insert into puts values ('r{k}c' || :client_id || '-' || :n, "
                "'{\"name\":\"user\",\"age\":42,\"city\":\"Oslo\",\"tags\":[\"a\",\"c\"],\"pad\":\"" + "x" * 100 + "\"}') "
                "on conflict (id) do update set doc = excluded.doc;\n", 32, SECS))

            add("age range ~3k ids, 1 client, stream", "mosaicdb", wrk(MOSAIC, "/", "range.lua", 1, 1, SECS, env))
            add("age range ~3k ids, 1 client, pages of 1000", "mosaicdb", mosaic_range_pages(MOSAIC, table, SECS))
            rng_sql = f"\\set a random(0, 97)\nselect id from {table} where (doc->>'age')::int between :a and :a + 2;\n"
            v = pg.bench(rng_sql, 1, SECS)
            add("age range ~3k ids, 1 client, stream", "postgres", v)
            add("age range ~3k ids, 1 client, pages of 1000", "postgres", v)
    finally:
        stop(mosaic)
        stop(ceiling)
        pg.close()
        shutil.rmtree(mdir, ignore_errors=True)

    big = None
    if BIG:
        ndjson_big, _ = write_data(BIG, f"docs{BIG}")
        bdir = Path(tempfile.mkdtemp(prefix="mosaic-peers-big-", dir=OUT))
        proc = start_mosaic(MOSAIC_BIG, bdir)
        try:
            mosaic_table(MOSAIC_BIG, "big")
            rate = mosaic_import(MOSAIC_BIG, "big", ndjson_big, BIG)
            big = (rate, peak_rss_mb(proc.pid))
            log(f"import of {BIG:,}: {rate:,.0f} docs/s, peak RSS {big[1]:.0f} MiB")
        finally:
            stop(proc)
            shutil.rmtree(bdir, ignore_errors=True)
    return results, big


def span(values, fmt="{:,.0f}"):
    lo, hi = min(values), max(values)
    return fmt.format(lo) if lo == hi else f"{fmt.format(lo)}–{fmt.format(hi)}"


def report(results, big):
    lines = [f"Machine: {machine()}.", "",
             f"{RUNS} runs of {SECS} s per measurement; wrk 2 threads / 32 connections (1 for the range), pgbench "
             "prepared, the same concurrency; everything on the same cores.", "",
             "| workload | mosaicdb | ceiling (axum, no layers) | PostgreSQL 15 | ratio per run | target | met |",
             "|---|---|---|---|---|---|---|"]
    for w, unit, targets in WORKLOADS:
        r = results[w]
        m = r.get("mosaicdb", [])
        ratios, met = [], True
        for ref, want in targets:
            per_run = [a / b for a, b in zip(m, r.get(ref, [])) if b]
            if per_run:
                ratios.append(f"{span(per_run, '{:.2f}')}× {ref}")
                met &= min(per_run) >= want
        target = ", ".join(f"≥ {want}× {ref}" for ref, want in targets)
        lines.append(f"| {w} ({unit}) | {span(m)} | {span(r['ceiling']) if 'ceiling' in r else '—'} | "
                     f"{span(r['postgres'])} | {'; '.join(ratios)} | {target} | {'yes' if met else 'no'} |")
    if big:
        lines.append(f"| import {BIG:,} documents, 2 indexes (docs/s; peak RSS) | {big[0]:,.0f}; {big[1]:.0f} MiB | — | — | — "
                     f"| peak RSS ≤ 512 MiB | {'yes' if big[1] <= 512 else 'no'} |")
    return "\n".join(lines)


def chart(results, path):
    venv = OUT / "venv"
    py = venv / "bin" / "python"
    if not py.exists():
        run([sys.executable, "-m", "venv", str(venv)])
    if subprocess.run([str(py), "-c", "import matplotlib"], capture_output=True).returncode != 0:
        run([str(py), "-m", "pip", "install", "--quiet", "matplotlib"])
    data = json.dumps({"results": results, "workloads": [[w, u] for w, u, _ in WORKLOADS]})
    script = r'''
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
d = json.loads(sys.argv[1]); out = sys.argv[2]
ws = d["workloads"]; colors = {"mosaicdb": "#2a7ab9", "ceiling": "#9aa5b1", "postgres": "#d98c2b"}
fig, axes = plt.subplots(1, len(ws), figsize=(3.2 * len(ws), 4.2))
for ax, (w, unit) in zip(axes, ws):
    r = d["results"][w]; names = [s for s in ("mosaicdb", "ceiling", "postgres") if s in r]
    mid = [sorted(r[s])[len(r[s]) // 2] for s in names]
    err = [[m - min(r[s]) for s, m in zip(names, mid)], [max(r[s]) - m for s, m in zip(names, mid)]]
    ax.bar(names, mid, yerr=err, color=[colors[s] for s in names], capsize=4)
    ax.set_title(w, fontsize=9); ax.set_ylabel(unit, fontsize=8); ax.tick_params(labelsize=8)
fig.suptitle("mosaicdb, PostgreSQL 15 and a bare axum handler: median of the runs, bars from min to max", fontsize=10)
fig.tight_layout(); fig.savefig(out, dpi=110)
'''
    run([str(py), "-c", script, data, str(path)])


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    ensure_tools()
    build()
    results, big = measure()
    table = report(results, big)
    print(table)
    DOCS_OUT.mkdir(parents=True, exist_ok=True)
    (DOCS_OUT / "peers.md").write_text("# mosaicdb beside PostgreSQL 15 (`python3 benches/peers/run.py`)\n\n"
                                       + table + "\n\n![chart](peers.png)\n")
    (OUT / "results.json").write_text(json.dumps({"results": results, "big": big}, indent=1))
    try:
        chart(results, DOCS_OUT / "peers.png")
    except (subprocess.CalledProcessError, OSError) as e:
        log(f"no chart: {e}")


if __name__ == "__main__":
    main()
