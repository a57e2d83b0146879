"""What run.py, models.py and backend.py share: settings from the environment, processes, HTTP, wrk,
PostgreSQL, and the core group's documents (how they are made and loaded, and PostgreSQL's GET and
PUT)."""

import http.client
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import namedtuple
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "benches" / "peers"
OUT = ROOT / "target" / "peers"
PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_PORT = 5544

# Every setting that changes what is measured, with its default. A run with all of them at their
# defaults writes docs/perf; any other run writes target/peers (see `docs_out`).
DEFAULTS = {
    "PEERS_SECS": "10",
    "PEERS_RUNS": "3",
    "PEERS_DOCS": "100000",
    "PEERS_BIG": "1000000",
    "PEERS_ONLY": "core,search,vectors,graph,timeseries,sql,backend,big",
    "PEERS_FT_DOCS": "50000",
    "PEERS_VECTORS": "100000",
    "PEERS_DIM": "64",
    "PEERS_NODES": "100000",
    "PEERS_SERIES": "1000",
    "PEERS_STEPS": "1000",
    "PEERS_TS_SENDERS": "4",
    "PEERS_BACKEND_DOCS": "50000",
    "PEERS_BACKEND_NODES": "20000",
    "PEERS_BACKEND_FT_DOCS": "10000",
    "PEERS_SQL_ROWS": "100000",
    "PEERS_SQL_PAPERS": "20000",
}
GROUPS = DEFAULTS["PEERS_ONLY"].split(",")

# One row of the table. targets: [(reference system, the ratio mosaicdb/reference it should reach,
# or None: the ratio is reported, no target)]; fmt formats the figures; ratio: show the ratios;
# lower: the figures are costs (latencies), lower is better, so the ratio is reference/mosaicdb
# (above 1 still means mosaicdb does better); subject: the system whose figure is over the
# references' (mosaicdb; the backend group's rows: mosaicdb on its PostgreSQL backend).
Workload = namedtuple("Workload", "name unit targets fmt ratio lower subject",
                      defaults=("{:,.0f}", True, False, "mosaicdb"))


def setting(name):
    return os.environ.get(name) or DEFAULTS[name]


def int_setting(name):
    return int(setting(name))


def only():
    groups = [g.strip() for g in setting("PEERS_ONLY").split(",") if g.strip()]
    unknown = sorted(set(groups) - set(GROUPS))
    if unknown:
        raise SystemExit(f"PEERS_ONLY: unknown group(s) {', '.join(unknown)}; the groups are {', '.join(GROUPS)}")
    return groups


def all_defaults():
    return all(setting(k) == v for k, v in DEFAULTS.items())


def docs_out():
    """Where peers.md and peers.png go: PEERS_DOCS_OUT, else docs/perf for a run with every default,
    else target/peers (so a quick run never replaces the published figures)."""
    if os.environ.get("PEERS_DOCS_OUT"):
        return Path(os.environ["PEERS_DOCS_OUT"]).resolve()
    return ROOT / "docs" / "perf" if all_defaults() else OUT


def mosaic_binary():
    """PEERS_BINARY, else the release build of this checkout."""
    given = os.environ.get("PEERS_BINARY")
    return Path(given).resolve() if given else ROOT / "target" / "release" / "mosaicdb"


def log(msg):
    print(f"[peers] {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw):
    log(" ".join(str(c) for c in cmd))
    return subprocess.run(cmd, check=True, **kw)


def wait_port(addr, proc, what, timeout=60, poll=0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(addr, timeout=0.5).close()
            return
        except OSError:
            time.sleep(poll)
    raise SystemExit(f"{what} did not listen on {addr}")


def call(addr, method, path, body=None, headers=None, conn=None):
    """One request; `conn` reuses a keep-alive connection. The JSON answer, or SystemExit past 299."""
    c = conn or http.client.HTTPConnection(*addr, timeout=600)
    h = {"Content-Type": "application/json", **(headers or {})}
    c.request(method, path, body=json.dumps(body) if isinstance(body, (dict, list)) else body, headers=h)
    r = c.getresponse()
    data = r.read()
    if conn is None:
        c.close()
    if r.status >= 300:
        raise SystemExit(f"{method} {path}: {r.status} {data[:300]!r}")
    return json.loads(data) if data and r.getheader("content-type", "").startswith("application/json") else data


def import_ndjson(addr, table, ndjson, n):
    """One streamed NDJSON import; the seconds it took (SystemExit unless all `n` lines went in)."""
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
        raise SystemExit(f"import into {table}: {r.status} {str(report)[:500]}")
    return took


def start_mosaic(addr, data_dir, *flags):
    """mosaicdb on `data_dir`, listening on `addr`: its default flags, and `flags`."""
    proc = subprocess.Popen([str(mosaic_binary()), "--data-dir", str(data_dir),
                             "--addr", f"{addr[0]}:{addr[1]}", "--log", "warn", *flags])
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

    def url(self, database):
        """The URL of `database` (mosaicdb's --postgres-url)."""
        return f"postgres://postgres@127.0.0.1:{PG_PORT}/{database}"

    def sql(self, text, database="postgres"):
        r = subprocess.run(["psql", *self.args(), "-d", database, "-v", "ON_ERROR_STOP=1", "-qAtc", text],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"psql: {text[:300]}\n{r.stderr}")
        return r.stdout

    def copy_in(self, table, files):
        """`\\copy` of each file into `table`, all at once (one psql per file); the seconds it took."""
        t0 = time.perf_counter()
        procs = [subprocess.Popen(["psql", *self.args(), "-v", "ON_ERROR_STOP=1", "-qAtc",
                                   f"\\copy {table} from '{f}'"]) for f in files]
        codes = [p.wait() for p in procs]
        if any(codes):
            raise SystemExit(f"\\copy into {table}: exit codes {codes}")
        return time.perf_counter() - t0

    def timed(self, queries):
        """Each query in turn on one connection, timed by psql (`\\timing`, round trip as the client
        sees it): [(its rows, milliseconds)]."""
        f = OUT / "timed.sql"
        f.write_text("\\timing on\n" + "".join(q + ";\n" for q in queries))
        r = subprocess.run(["psql", *self.args(), "-v", "ON_ERROR_STOP=1", "-qAt", "-f", str(f)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"psql -f {f}:\n{r.stderr[-2000:]}")
        out, rows = [], []
        for line in r.stdout.splitlines():
            m = re.match(r"Time: ([\d.]+) ms", line)
            if m:
                out.append((rows, float(m.group(1))))
                rows = []
            elif line:
                rows.append(line)
        if len(out) != len(queries):
            raise SystemExit(f"psql -f {f}: {len(out)} timings for {len(queries)} queries")
        return out

    def bench(self, script, clients, secs):
        f = OUT / "pgbench.sql"
        f.write_text(script)
        r = subprocess.run(["pgbench", *self.args(), "-n", "-M", "prepared", "-c", str(clients),
                            "-j", str(min(clients, 2)), "-T", str(secs), "-f", str(f), "postgres"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"pgbench {f}:\n{script}\n{r.stderr[-2000:]}")
        out = r.stdout
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
    # in the scripts' folder, where they load their shared part (threads.lua)
    out = subprocess.run([*cmd, f"http://{addr[0]}:{addr[1]}{path}"], check=True, capture_output=True, text=True,
                         env=dict(os.environ, **(env or {})), cwd=HERE / "wrk").stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    if bad or errors:
        raise SystemExit(f"wrk {path}: not every answer was a success:\n{out}")
    return rate


def venv_python(*packages):
    """target/peers/venv's python, with `packages` installed from PyPI if missing."""
    venv = OUT / "venv"
    py = venv / "bin" / "python"
    if not py.exists():
        run([sys.executable, "-m", "venv", str(venv)])
    for p in packages:
        if subprocess.run([str(py), "-c", f"import {p}"], capture_output=True).returncode != 0:
            run([str(py), "-m", "pip", "install", "--quiet", p])
    return py


# The core group's documents, also the backend group's.
CITIES = ["Oslo", "Bergen", "Lyon", "Porto"]
TAGS = ["a", "b", "c", "d", "e"]


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


def mosaic_table(addr, name):
    call(addr, "POST", "/v1/tables", {"name": name})
    call(addr, "POST", f"/v1/tables/{name}/indexes", {"name": "by_age", "kind": "range", "fields": ["age"]})
    call(addr, "POST", f"/v1/tables/{name}/indexes", {"name": "by_city", "kind": "hash", "fields": ["city"]})


def pg_table(pg, name):
    pg.sql(f"create table {name} (id text primary key, doc jsonb not null);"
           f"create index {name}_age on {name} (((doc->>'age')::int));"
           f"create index {name}_city on {name} using hash ((doc->>'city'));")


def pg_import(pg, table, tsv, n):
    took = pg.copy_in(table, [tsv])
    got = int(pg.sql(f"select count(*) from {table}"))
    if got != n:
        raise SystemExit(f"postgres import: {got} rows of {n}")
    return n / took


def pg_get(table, n):
    """PostgreSQL's point GET (pgbench): a random one of the `n` documents of `table` by id."""
    return f"\\set n random(0, {n - 1})\nselect doc from {table} where id = 'd' || :n;\n"


def pg_put(table, k):
    """PostgreSQL's durable PUT of a new id (pgbench): an upsert into `table` (id, doc) in run `k`."""
    return ("\\set n random(1, 2000000000)\n"
            f"insert into {table} values ('r{k}c' || :client_id || '-' || :n, "
            "'{\"name\":\"user\",\"age\":42,\"city\":\"Oslo\",\"tags\":[\"a\",\"c\"],\"pad\":\"" + "x" * 100 + "\"}') "
            "on conflict (id) do update set doc = excluded.doc;\n")
