#!/usr/bin/env python3
"""mosaicdb side by side with PostgreSQL 15 and a trivial axum handler, in one run (and, group by
group, with a specialist: tantivy for full-text, hnswlib for kNN, VictoriaMetrics for time series;
and mosaicdb on its PostgreSQL backend beside mosaicdb on fjall and PostgreSQL itself).

    python3 benches/peers/run.py            # everything: about 35 minutes (backend: about 15)
    PEERS_SECS=3 PEERS_RUNS=1 python3 benches/peers/run.py   # a quick look
    PEERS_BINARY=target/release/mosaicdb PEERS_ONLY=graph python3 benches/peers/run.py
    PEERS_ONLY=backend PEERS_RUNS=1 PEERS_SECS=5 python3 benches/peers/run.py   # about 5 minutes

What it does, in order:
1. builds the release server (`cargo build --release`; skipped when PEERS_BINARY names a mosaicdb
   binary to use instead), when the core group runs the ceiling (`benches/peers/ceiling`, a
   trivial axum handler with no layers, same axum/tokio/allocator), and when the search group runs
   the tantivy peer (`benches/peers/tantivy`, a crate of its own: tantivy is a dependency of the
   bench only, never of the server), each into target/peers;
2. installs PostgreSQL 15, pgbench, wrk and (for the graph group) pgRouting from Debian if they are
   missing (needs root or sudo), and numpy (the vectors group) and matplotlib from PyPI into
   target/peers/venv;
3. starts the servers on loopback: mosaicdb with its default flags (sync durability) on a fresh
   data directory, the ceiling, and a fresh PostgreSQL 15 cluster (`shared_buffers=1GB`,
   otherwise defaults: fsync and synchronous_commit on), reached over TCP like the others;
4. per run (PEERS_RUNS, default 3), each workload group against each system, one after the other:
   - core: import of 100k documents of ~200 bytes into a table with a range index on `age` and a
     hash index on `city` (mosaicdb: one NDJSON import request; PostgreSQL: `\\copy` into a JSONB
     table with the two expression indexes); point GET by id (wrk, 2 threads, 32 connections;
     PostgreSQL: pgbench, prepared statements, 32 clients, 2 threads) — and the ceiling's GET;
     durable PUT of new ids (wrk, c32; PostgreSQL: an upsert, c32); the ids of every document with
     `age` in a 3-value range (~3,000 of 100k), 1 client: mosaicdb as one NDJSON stream per query,
     and as pages of 1000; PostgreSQL: a `select`;
   - search, vectors, graph, timeseries: the model workloads (full-text, kNN with its recall,
     depth-3 traversal along out-edges and both ways, weighted shortest path and 5 shortest paths
     against pgRouting, line-protocol ingest), described in benches/peers/models.py; the search
     group also beside tantivy in-process on the same texts: its build rate (one writer thread),
     five query kinds (1 term, 2 terms AND and OR, a 2-word phrase, a 3-letter prefix) on one
     client (mosaicdb: wrk over one connection, and its server-side mean time per search from the
     request histogram of /metrics; tantivy: one thread, top-10 with the exact match count and
     top-10 alone), the c32 queries (tantivy on 2 threads), and the disk of postings and
     dictionary and of everything with the texts (run 1; mosaicdb on a server of its own, port
     18084); the match counts of 20 queries of each kind are compared (a warning where they differ);
   - sql (benches/peers/sql.py, its docstring has the details): `POST /v1/sql` beside PostgreSQL on
     the same rows (GROUP BY and a join over typed tables, GROUP BY over JSON paths), and a
     cross-model statement beside the same question assembled from the REST routes;
   - backend (benches/peers/backend.py, its docstring has the details): mosaicdb on its PostgreSQL
     backend — a second mosaicdb server (port 18085, a data directory of its own) started with
     `--backend postgres --postgres-url` on a fresh database of the same PostgreSQL cluster —
     beside the shared mosaicdb on fjall and beside PostgreSQL used directly: the core documents'
     import, point GET by id and durable PUT of new ids at c32 (the core group's methods,
     PEERS_BACKEND_DOCS documents), the graph group's depth-3 traversal along out-edges on 1 client
     and c32 (PEERS_BACKEND_NODES vertices) and the search group's top-10 of 1 term on 1 client
     (PEERS_BACKEND_FT_DOCS texts), each checked to answer as PostgreSQL does; last, that server
     restarted with `--row-cache-mb 0` for point GETs that all reach PostgreSQL. The rows' ratios
     are mosaicdb on PostgreSQL's figure over mosaicdb on fjall's and over PostgreSQL's (no target);
     PostgreSQL's count of the transactions of that database per request is logged around each
     measurement (`pg_stat_database`, 11 s after it: about 2 minutes of each run), and the PUTs
     per flush to disk of each mosaicdb (its /metrics: an fsync, or on PostgreSQL a group's
     COMMIT) are a row;
5. then (group big) an import of 1M documents into a fresh mosaicdb server, with its peak memory;
6. prints one table (each system's range over the runs, a specialist's in its own column, and the
   ratios per run: mosaicdb's rate over the peer's, or for a latency or a size the peer's figure
   over mosaicdb's, so above 1 is mosaicdb ahead either way), writes it with the machine's
   description to peers.md and draws peers.png (matplotlib): into docs/perf when every setting
   below is at its default, else into target/peers (PEERS_DOCS_OUT=<dir> chooses).

The load generator runs on the same machine as the servers, as a new user would run it. Never
part of CI. Environment:
- PEERS_BINARY: a mosaicdb binary to measure; mosaicdb is then not built;
- PEERS_ONLY: a comma list of the groups to run, of core, search, vectors, graph, timeseries,
  sql, backend, big (default all);
- PEERS_SECS (10 per measurement), PEERS_RUNS (3), PEERS_DOCS (100000, core), PEERS_BIG (1000000;
  0 skips the 1M import);
- the model groups' sizes: PEERS_FT_DOCS (50000 texts), PEERS_VECTORS (100000) and PEERS_DIM (64,
  at most 100: cube's limit), PEERS_NODES (100000, 5 out-edges each), PEERS_SERIES (1000) x
  PEERS_STEPS (1000) points sent by PEERS_TS_SENDERS (4) concurrent senders; the backend group's
  PEERS_BACKEND_DOCS (50000), PEERS_BACKEND_NODES (20000) and PEERS_BACKEND_FT_DOCS (10000); the
  sql group's PEERS_SQL_ROWS (100000 orders) and PEERS_SQL_PAPERS (20000);
- PEERS_DOCS_OUT: where peers.md and peers.png go.
"""

import http.client
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (HERE, OUT, PG_BIN, ROOT, Postgres, Workload, call, docs_out, import_ndjson, int_setting,  # noqa: E402
                    log, mosaic_table, only, pg_get, pg_import, pg_put, pg_table, run, start_mosaic, stop, venv_python,
                    wait_port, write_data, wrk)
import backend  # noqa: E402
import models  # noqa: E402
import sql  # noqa: E402

SECS = int_setting("PEERS_SECS")
RUNS = int_setting("PEERS_RUNS")
NDOCS = int_setting("PEERS_DOCS")
BIG = int_setting("PEERS_BIG")
MOSAIC = ("127.0.0.1", 18080)
CEILING = ("127.0.0.1", 18081)
MOSAIC_BIG = ("127.0.0.1", 18082)
# the groups run against the shared servers after the core group, by name
GROUPS = {**models.GROUPS, "sql": sql.Sql, "backend": backend.Backend}
NOTES = {**models.NOTES, "sql": sql.NOTES, "backend": backend.NOTES}


def as_root(cmd):
    return cmd if os.geteuid() == 0 else ["sudo", *cmd]


def ensure_tools(groups):
    missing = []
    if not (PG_BIN / "postgres").exists():
        missing += ["postgresql-15", "postgresql-client-15"]
    if "graph" in groups and not Path("/usr/share/postgresql/15/extension/pgrouting.control").exists():
        missing.append("postgresql-15-pgrouting")
    if not shutil.which("pgbench"):
        missing.append("postgresql-client-15")
    if not shutil.which("wrk"):
        missing.append("wrk")
    if "timeseries" in groups and not shutil.which("victoria-metrics"):
        missing.append("victoria-metrics")
    if missing:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        if subprocess.run(as_root(["apt-get", "install", "-y", *sorted(set(missing))]), env=env).returncode != 0:
            run(as_root(["apt-get", "update"]), env=env)
            run(as_root(["apt-get", "install", "-y", *sorted(set(missing))]), env=env)


def build(groups):
    if os.environ.get("PEERS_BINARY"):
        log(f"PEERS_BINARY: measuring {os.environ['PEERS_BINARY']}, not building mosaicdb")
    else:
        run(["cargo", "build", "--release", "--quiet"], cwd=ROOT)
    if "core" in groups:
        run(["cargo", "build", "--release", "--quiet", "--manifest-path", str(HERE / "ceiling" / "Cargo.toml"),
             "--target-dir", str(OUT / "ceiling-target")], cwd=ROOT)
    if "search" in groups:
        run(["cargo", "build", "--release", "--quiet", "--manifest-path", str(HERE / "tantivy" / "Cargo.toml"),
             "--target-dir", str(OUT / "tantivy-target")], cwd=ROOT)


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
            cursor = call(addr, "POST", f"/v1/tables/{table}/query", body, conn=c).get("cursor")
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
    binary = os.environ.get("PEERS_BINARY")
    built = f"mosaicdb {binary} (PEERS_BINARY; tree at {rev})" if binary else f"mosaicdb {rev}"
    return (f"{os.cpu_count()} cores ({cpu}), {mem / 1048576:.0f} GiB, Linux {platform.release()}; "
            f"{built}, {pg}; {time.strftime('%Y-%m-%d %H:%M %Z')}")


IMPORT = f"import {NDOCS // 1000}k, 2 indexes"
CORE = [
    Workload(IMPORT, "docs/s", [("postgres", 2.0)]),
    Workload("point GET by id, c32", "req/s", [("ceiling", 0.85), ("postgres", 1.5)]),
    Workload("durable PUT of new ids, c32", "req/s", [("postgres", 2.5)]),
    Workload("age range ~3k ids, 1 client, stream", "answers/s", [("postgres", 1.0)]),
    # the range target is for one streamed request or pages of 1000: the stream's row carries it
    Workload("age range ~3k ids, 1 client, pages of 1000", "answers/s", [("postgres", None)]),
]
CORE_NOTE = ("age range: the target (≥ 1× PostgreSQL) is for one streamed request or pages of 1000; the stream's "
             "row carries it, the pages' ratio is reported.")


def run_core(k, pg, ndjson, tsv, add):
    table = f"docs{k}"
    mosaic_table(MOSAIC, table)
    add(IMPORT, "mosaicdb", NDOCS / import_ndjson(MOSAIC, table, ndjson, NDOCS))
    pg_table(pg, table)
    add(IMPORT, "postgres", pg_import(pg, table, tsv, NDOCS))
    pg.sql(f"vacuum analyze {table}")

    env = {"PEERS_TABLE": table, "PEERS_DOCS": str(NDOCS), "PEERS_RUN": str(k)}
    add("point GET by id, c32", "mosaicdb", wrk(MOSAIC, "/", "get.lua", 32, 2, SECS, env))
    add("point GET by id, c32", "ceiling", wrk(CEILING, "/", None, 32, 2, SECS))
    add("point GET by id, c32", "postgres", pg.bench(pg_get(table, NDOCS), 32, SECS))

    add("durable PUT of new ids, c32", "mosaicdb", wrk(MOSAIC, "/", "put.lua", 32, 2, SECS, env))
    add("durable PUT of new ids, c32", "postgres", pg.bench(pg_put("puts", k), 32, SECS))

    add("age range ~3k ids, 1 client, stream", "mosaicdb", wrk(MOSAIC, "/", "range.lua", 1, 1, SECS, env))
    add("age range ~3k ids, 1 client, pages of 1000", "mosaicdb", mosaic_range_pages(MOSAIC, table, SECS))
    rng_sql = f"\\set a random(0, 97)\nselect id from {table} where (doc->>'age')::int between :a and :a + 2;\n"
    v = pg.bench(rng_sql, 1, SECS)
    add("age range ~3k ids, 1 client, stream", "postgres", v)
    add("age range ~3k ids, 1 client, pages of 1000", "postgres", v)


def measure_shared(core, model_groups, add):
    """Every run of the core and model groups, against one mosaicdb, one PostgreSQL (and the ceiling)."""
    if core:
        ndjson, tsv = write_data(NDOCS, f"docs{NDOCS}")
    for g in model_groups:
        g.prepare()
    mdir = Path(tempfile.mkdtemp(prefix="mosaic-peers-data-", dir=OUT))
    mosaic, ceiling, pg = start_mosaic(MOSAIC, mdir), None, None
    try:
        pg = Postgres()
        if core:
            ceiling = subprocess.Popen([str(OUT / "ceiling-target" / "release" / "mosaic-ceiling"),
                                        f"{CEILING[0]}:{CEILING[1]}"])
            wait_port(CEILING, ceiling, "ceiling")
            pg.sql("create table puts (id text primary key, doc jsonb not null)")
            call(MOSAIC, "POST", "/v1/tables", {"name": "puts"})
        for g in model_groups:
            g.setup(pg)
        for k in range(1, RUNS + 1):
            log(f"run {k} of {RUNS}")
            if core:
                run_core(k, pg, ndjson, tsv, add)
            for g in model_groups:
                g.run(k, add)
    finally:
        for g in model_groups:
            getattr(g, "close", lambda: None)()
        stop(mosaic)
        stop(ceiling)
        if pg:
            pg.close()
        shutil.rmtree(mdir, ignore_errors=True)


def measure_big():
    """The import of BIG documents into a fresh server: (docs/s, peak RSS in MiB)."""
    ndjson_big, _ = write_data(BIG, f"docs{BIG}")
    bdir = Path(tempfile.mkdtemp(prefix="mosaic-peers-big-", dir=OUT))
    proc = start_mosaic(MOSAIC_BIG, bdir)
    try:
        mosaic_table(MOSAIC_BIG, "big")
        rate = BIG / import_ndjson(MOSAIC_BIG, "big", ndjson_big, BIG)
        big = (rate, peak_rss_mb(proc.pid))
        log(f"import of {BIG:,}: {rate:,.0f} docs/s, peak RSS {big[1]:.0f} MiB")
        return big
    finally:
        stop(proc)
        shutil.rmtree(bdir, ignore_errors=True)


def measure(groups):
    results = {}

    def add(w, system, value):
        results.setdefault(w, {}).setdefault(system, []).append(value)
        log(f"{w} / {system}: {value:,.3f}")

    core = "core" in groups
    model_groups = [GROUPS[g](MOSAIC, SECS) for g in groups if g in GROUPS]
    if core or model_groups:
        measure_shared(core, model_groups, add)
    big = measure_big() if BIG and "big" in groups else None
    workloads = [w for w in CORE + [w for g in model_groups for w in g.workloads()] if w.name in results]
    return workloads, results, big


def span(values, fmt="{:,.0f}"):
    lo, hi = min(values), max(values)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}–{fmt.format(hi)}"


def report(workloads, results, big, notes):
    lines = [f"Machine: {machine()}.", "",
             f"{RUNS} run(s) of {SECS} s per measurement; wrk 2 threads / 32 connections (1 for the 1-client rows), "
             "pgbench prepared, the same concurrency; everything on the same cores.", "",
             "| workload | mosaicdb | ceiling (axum, no layers) | PostgreSQL 15 | specialist | ratio per run | target "
             "| met |",
             "|---|---|---|---|---|---|---|---|"]
    unmet = []
    for w in workloads:
        r = results[w.name]
        m = r.get(w.subject, [])
        ratios, met, wanted = [], True, False
        for ref, want in w.targets:
            # the subject (mosaicdb) over the reference; for a latency (lower is better) the reference
            # over the subject
            per_run = [b / a if w.lower else a / b for a, b in zip(m, r.get(ref, [])) if (a if w.lower else b)]
            if per_run and w.ratio:
                ratios.append(f"{span(per_run, '{:.2f}')}× {ref}")
            if want is not None:
                wanted = True
                met &= bool(per_run) and min(per_run) >= want
        if ratios and w.subject != "mosaicdb":
            ratios[0] = f"{w.subject}: {ratios[0]}"
        if wanted and not met:
            unmet.append(w.name)
        target = ", ".join(f"≥ {want}× {ref}" for ref, want in w.targets if want is not None) or "— (reported)"
        cell = (lambda s: span(r[s], w.fmt) if s in r else "—")
        # a system other than these three: the specialist the row compares with, by name
        special = "; ".join(f"{cell(s)} ({s})" for s in r if s not in ("mosaicdb", "ceiling", "postgres")) or "—"
        lines.append(f"| {w.name} ({w.unit}) | {cell('mosaicdb')} | {cell('ceiling')} | {cell('postgres')} | {special} | "
                     f"{'; '.join(ratios) or '—'} | {target} | {('yes' if met else 'no') if wanted else '—'} |")
    if big:
        lines.append(f"| import {BIG:,} documents, 2 indexes (docs/s; peak RSS) | {big[0]:,.0f}; {big[1]:.0f} MiB | — | — | — | — "
                     f"| peak RSS ≤ 512 MiB | {'yes' if big[1] <= 512 else 'no'} |")
        if big[1] > 512:
            unmet.append(f"import {BIG:,} documents (peak RSS)")
    if unmet:
        lines += ["", f"Not met in every run: {'; '.join(unmet)}. What bounds each of these (the profiles) and what "
                  "would move it: docs/performance.md, \"Where the core targets stand\"."]
    if notes:
        lines += ["", *[f"- {n}" for n in notes]]
    return "\n".join(lines)


def chart(workloads, results, path):
    py = venv_python("matplotlib")
    data = OUT / "chart.json"
    data.write_text(json.dumps({"results": results,
                                "workloads": [[textwrap.fill(w.name, 34), w.unit, w.name] for w in workloads]}))
    script = r'''
import json, math, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
d = json.loads(open(sys.argv[1]).read()); out = sys.argv[2]
ws = d["workloads"]; colors = {"mosaicdb": "#2a7ab9", "ceiling": "#9aa5b1", "postgres": "#d98c2b"}
others = "#6a994e"
cols = min(5, len(ws)); rows = math.ceil(len(ws) / cols)
fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.9 * rows), squeeze=False)
for ax in axes.flat[len(ws):]:
    ax.axis("off")
for ax, (title, unit, w) in zip(axes.flat, ws):
    r = d["results"][w]; names = [s for s in ("mosaicdb", "ceiling", "postgres") if s in r]
    names += [s for s in r if s not in names]
    mid = [sorted(r[s])[len(r[s]) // 2] for s in names]
    err = [[m - min(r[s]) for s, m in zip(names, mid)], [max(r[s]) - m for s, m in zip(names, mid)]]
    ax.bar(names, mid, yerr=err, color=[colors.get(s, others) for s in names], capsize=4)
    ax.set_title(title, fontsize=9); ax.set_ylabel(unit, fontsize=8); ax.tick_params(labelsize=8)
fig.suptitle("mosaicdb, PostgreSQL 15 and a bare axum handler: median of the runs, bars from min to max", fontsize=10)
fig.tight_layout(); fig.savefig(out, dpi=110)
'''
    log(f"drawing {path}")
    subprocess.run([str(py), "-c", script, str(data), str(path)], check=True)


def main():
    groups = only()
    OUT.mkdir(parents=True, exist_ok=True)
    ensure_tools(groups)
    build(groups)
    workloads, results, big = measure(groups)
    notes = [CORE_NOTE] * ("core" in groups) + [n for g in groups if g in GROUPS for n in NOTES[g]]
    table = report(workloads, results, big, notes)
    print(table)
    out = docs_out()
    out.mkdir(parents=True, exist_ok=True)
    log(f"writing {out / 'peers.md'} and {out / 'peers.png'}")
    (out / "peers.md").write_text("# mosaicdb beside PostgreSQL 15 (`python3 benches/peers/run.py`)\n\n"
                                  + table + "\n\n![chart](peers.png)\n")
    (OUT / "results.json").write_text(json.dumps({"results": results, "big": big}, indent=1))
    try:
        chart(workloads, results, out / "peers.png")
    except (subprocess.CalledProcessError, OSError) as e:
        log(f"no chart: {e}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        raise SystemExit(__doc__)
    main()
