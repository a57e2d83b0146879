"""The backend group of benches/peers: mosaicdb on its PostgreSQL backend (`--backend postgres`)
beside mosaicdb on fjall (the shared server, its default backend) and beside PostgreSQL used
directly, in one run.

A second mosaicdb server (port 18085, a data directory of its own, its other flags the defaults:
sync durability, so each group of writes commits with `synchronous_commit = on`) keeps its keys in
a fresh database, `mosaic_backend`, of the harness's PostgreSQL cluster. Each run, on the three
systems, with the core and model groups' data and methods at smaller sizes:
- the core documents (PEERS_BACKEND_DOCS, 50k, two indexes): their import (mosaicdb: one NDJSON
  import; PostgreSQL: `\\copy` into the JSONB table with its two expression indexes), point GET by
  id at c32 once every document was read once (each mosaicdb's document cache holds them all:
  what a GET costs past its warm-up) and durable PUT of new ids at c32 (wrk; PostgreSQL: pgbench,
  prepared, the core group's statements), with the PUTs per flush to disk of each mosaicdb (its
  /metrics: writes and fsyncs; on PostgreSQL an "fsync" is a group's COMMIT);
- the graph group's graph at PEERS_BACKEND_NODES (20k) vertices with 5 out-edges each: the depth-3
  traversal along out-edges, 1 client and c32 (PostgreSQL: the recursive CTE), after the same
  vertices are reached from 5 starts on each mosaicdb server and in PostgreSQL;
- the search group's texts at PEERS_BACKEND_FT_DOCS (10k): top-10 of 1 term, 1 client (wrk on one
  connection, the search group's 500 1-term queries; PostgreSQL: its GIN query on the same
  queries), after both servers and PostgreSQL count the same matches for 20 queries;
- last, the second server restarted with `--row-cache-mb 0` on the same database: point GET again,
  every read a PostgreSQL statement (beside PostgreSQL's GET figure of the run).
The rows' ratios are mosaicdb on PostgreSQL's figure over mosaicdb on fjall's and over
PostgreSQL's (above 1: mosaicdb on PostgreSQL ahead).

Round trips: around each measurement on the PostgreSQL backend, PostgreSQL's own count of the
transactions of its database (`pg_stat_database`: xact_commit, xact_rollback, read once idle
backends have reported them: after 11 s) per request is logged: a read view is one rolled-back
transaction, a statement outside any transaction one committed, a group of writes one committed
(and one more per statement its first write reads before the group's BEGIN). The statements per
request, counted with pg_stat_statements, are in NOTES.
"""

import http.client
import shutil
import tempfile
import threading
import time
from pathlib import Path

from common import (OUT, Workload, call, import_ndjson, int_setting, log, mosaic_table, pg_get, pg_import, pg_put,
                    pg_table, start_mosaic, stop, write_data, wrk)
import models

PG_BACKEND = ("127.0.0.1", 18085)
SYSTEM = "mosaicdb on pg"  # the rows' subject: mosaicdb on its PostgreSQL backend
DATABASE = "mosaic_backend"
PUTS = "bk_puts"
TERMS = "bk_ft_terms"  # PostgreSQL's table of the 1-term queries
# PostgreSQL's backends report their counts at most once a second, and an idle one 10 s after its
# last report at the latest
STATS_DELAY = 11


class Backend:
    def __init__(self, addr, secs):
        self.addr, self.secs = addr, secs
        self.ndocs = int_setting("PEERS_BACKEND_DOCS")
        self.graph = models.Graph(addr, secs, int_setting("PEERS_BACKEND_NODES"))
        self.search = models.Search(addr, secs, int_setting("PEERS_BACKEND_FT_DOCS"))
        self.search.queries_table = "bk_ft_queries"
        g = self.graph
        size = f"{g.n // 1000}k nodes, {g.n * g.OUT_DEGREE // 1000}k edges"
        self.imported = f"backend: import {self.ndocs // 1000}k documents, 2 indexes"
        self.get = "backend: point GET by id, c32, document cache warm"
        self.put = "backend: durable PUT of new ids, c32"
        self.walks = [f"backend: traversal to depth {g.DEPTH}, {size}, {c}" for c in ("1 client", "c32")]
        self.term = f"backend: full-text top-10 of 1 term, 1 client, {self.search.n // 1000}k texts"
        self.cold = "backend: point GET by id, c32, mosaicdb on pg with --row-cache-mb 0"
        self.flush = "backend: durable PUTs per flush to disk, c32 (fjall: fsync; pg: a group's COMMIT)"
        self.proc, self.cache, self.mark = None, None, None

    def workloads(self):
        both = [("mosaicdb", None), ("postgres", None)]
        rows = [Workload(w, unit, both, subject=SYSTEM) for w, unit in
                [(self.imported, "docs/s"), (self.get, "req/s"), (self.put, "req/s"),
                 *((w, "walks/s") for w in self.walks), (self.term, "queries/s")]]
        return rows + [Workload(self.cold, "req/s", [("postgres", None)], subject=SYSTEM),
                       Workload(self.flush, "PUTs", [("mosaicdb", None)], "{:,.1f}", False, subject=SYSTEM)]

    def prepare(self):
        self.ndjson, self.tsv = write_data(self.ndocs, f"docs{self.ndocs}")
        self.graph.prepare()
        self.search.prepare()
        self.terms = self.search.kind_files["term"]
        self.nterms = len(self.terms.read_text().splitlines())

    def setup(self, pg):
        self.pg = pg
        pg.sql(f"create database {DATABASE}")
        self.dir = Path(tempfile.mkdtemp(prefix="mosaic-peers-backend-", dir=OUT))
        self.serve(cache=True)
        pg.sql(f"create table {PUTS} (id text primary key, doc jsonb not null)")
        for addr in (self.addr, PG_BACKEND):
            call(addr, "POST", "/v1/tables", {"name": PUTS})
        self.graph.pg = pg  # not its setup: no pgRouting here
        self.search.setup(pg)
        pg.sql(f"create table {TERMS} (qid serial primary key, q text not null)")
        pg.copy_in(f"{TERMS} (q)", [self.terms])

    def serve(self, cache):
        """The server on PostgreSQL running, with its document cache (the default) or without."""
        if self.proc is not None and self.proc.poll() is None and self.cache == cache:
            return
        stop(self.proc)
        flags = ["--backend", "postgres", "--postgres-url", self.pg.url(DATABASE)]
        self.proc = start_mosaic(PG_BACKEND, self.dir, *flags, *([] if cache else ["--row-cache-mb", "0"]))
        self.cache, self.mark = cache, None

    def close(self):
        stop(self.proc)
        if getattr(self, "dir", None):
            shutil.rmtree(self.dir, ignore_errors=True)

    def transactions(self):
        """PostgreSQL's count of the committed and rolled-back transactions of the backend's database."""
        row = self.pg.sql(f"select xact_commit, xact_rollback from pg_stat_database where datname = '{DATABASE}'")
        return tuple(int(x) for x in row.strip().split("|"))

    def settled(self):
        time.sleep(STATS_DELAY)
        return self.transactions()

    def each(self, row, add, measure, requests=None):
        """`measure(system, address)` (a rate per second) of each mosaicdb server, fjall's first; on
        PostgreSQL's, its transactions in the database meanwhile, per request (`requests`, else
        the rate times PEERS_SECS), logged; returns them (commits, rollbacks)."""
        add(row, "mosaicdb", measure("mosaicdb", self.addr))
        before = self.mark or self.settled()
        rate = measure(SYSTEM, PG_BACKEND)
        self.mark = after = self.settled()
        add(row, SYSTEM, rate)
        n = requests or rate * self.secs
        commits, rollbacks = ((a - b) / n for a, b in zip(after, before))
        log(f"{row} / {SYSTEM}: PostgreSQL transactions per {'document' if requests else 'request'}: "
            f"{commits:.3f} committed, {rollbacks:.3f} rolled back")
        return commits, rollbacks

    def run(self, k, add):
        pg, secs = self.pg, self.secs
        self.serve(cache=True)
        servers = {"mosaicdb": self.addr, SYSTEM: PG_BACKEND}

        table = f"bk_docs{k}"
        for addr in servers.values():
            mosaic_table(addr, table)
        self.mark = None
        self.each(self.imported, add, lambda _, a: self.ndocs / import_ndjson(a, table, self.ndjson, self.ndocs),
                  self.ndocs)
        pg_table(pg, table)
        add(self.imported, "postgres", pg_import(pg, table, self.tsv, self.ndocs))
        pg.sql(f"vacuum analyze {table}")

        for addr in servers.values():
            warm(addr, table, self.ndocs)
        self.mark = None
        env = {"PEERS_TABLE": table, "PEERS_DOCS": str(self.ndocs), "PEERS_RUN": str(k), "PEERS_PUTS": PUTS}
        self.each(self.get, add, lambda _, a: wrk(a, "/", "get.lua", 32, 2, secs, env))
        got = pg.bench(pg_get(table, self.ndocs), 32, secs)
        add(self.get, "postgres", got)

        def put(system, addr):
            before = store_counters(addr)
            rate = wrk(addr, "/", "put.lua", 32, 2, secs, env)
            writes, fsyncs, took = (a - b for a, b in zip(store_counters(addr), before))
            if fsyncs:
                add(self.flush, system, writes / fsyncs)
                log(f"{self.put} / {system}: {writes:,.0f} writes, {fsyncs:,.0f} flushes to disk of "
                    f"{took / fsyncs * 1e6:,.0f} µs each")
            return rate
        self.each(self.put, add, put)
        add(self.put, "postgres", pg.bench(pg_put(PUTS, k), 32, secs))

        g, nodes, edges = self.graph, f"bk_nodes{k}", f"bk_links{k}"
        for system, addr in servers.items():
            log(f"backend: graph import on {system}: {g.load_mosaic(addr, nodes, edges):,.0f} edges/s")
        g.load_pg(nodes, edges)
        for system, addr in servers.items():
            g.check_walks(k, "out", nodes, edges, addr, system)
        self.mark = None
        env = g.walk_env("out", nodes, edges)
        for (conns, threads), row in zip(((1, 1), (32, 2)), self.walks):
            self.each(row, add, lambda _, a: wrk(a, "/", "traverse.lua", conns, threads, secs, env))
            add(row, "postgres", pg.bench(g.walk_script("out", edges), conns, secs))

        s, ft = self.search, f"bk_ft{k}"
        for system, addr in servers.items():
            log(f"backend: full-text import on {system}: {s.load_mosaic(addr, ft):,.0f} texts/s")
        s.load_pg(ft)
        for system, addr in servers.items():
            s.check(k, ft, addr, system)
        self.mark = None
        env = {"PEERS_TABLE": ft, "PEERS_QUERIES": str(self.terms), "PEERS_KIND": "term"}
        self.each(self.term, add, lambda _, a: wrk(a, "/", "search.lua", 1, 1, secs, env))
        add(self.term, "postgres", pg.bench(s.pg_search(ft, TERMS, self.nterms), 1, secs))

        # every GET a statement: the second server without its document cache, on the same database
        self.serve(cache=False)
        env = {"PEERS_TABLE": table, "PEERS_DOCS": str(self.ndocs)}
        before = self.settled()
        rate = wrk(PG_BACKEND, "/", "get.lua", 32, 2, secs, env)
        self.mark = after = self.settled()
        add(self.cold, SYSTEM, rate)
        add(self.cold, "postgres", got)
        commits, rollbacks = ((a - b) / (rate * secs) for a, b in zip(after, before))
        log(f"{self.cold} / {SYSTEM}: PostgreSQL transactions per request: {commits:.3f} committed, "
            f"{rollbacks:.3f} rolled back")


def warm(addr, table, n, clients=8):
    """Reads each document of `table` (d0 … d{n-1}) once, from `clients` connections: mosaicdb's
    document cache then holds them all."""
    failed = []

    def reader(ids):
        c = http.client.HTTPConnection(*addr, timeout=60)
        try:
            for i in ids:
                call(addr, "GET", f"/v1/tables/{table}/documents/d{i}", conn=c)
        except (SystemExit, OSError) as e:
            failed.append(e)
        finally:
            c.close()

    threads = [threading.Thread(target=reader, args=(range(t, n, clients),)) for t in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        raise SystemExit(f"reading every document of {table} once: {failed[0]}")


def store_counters(addr):
    """mosaicdb's writes, flushes to disk (fsyncs; on PostgreSQL, group commits) and their seconds, from /metrics."""
    _, text = models.get_raw(addr, "/metrics")
    got = dict(line.split()[:2] for line in text.decode().splitlines() if line.startswith("mosaicdb_storage_"))
    return tuple(float(got.get(f"mosaicdb_storage_{name}", 0)) for name in
                 ("writes_total", "fsyncs_total", "fsync_seconds_total"))


NOTES = [
    "backend: mosaicdb on its PostgreSQL backend (`--backend postgres`, a database of the same PostgreSQL 15 "
    "cluster, sync durability: `synchronous_commit = on`) beside mosaicdb on fjall (the shared server: the "
    "mosaicdb column) and beside PostgreSQL used directly; the ratios are mosaicdb on pg's figure over each. "
    "Same data and statements as the core, graph and search groups, smaller (PEERS_BACKEND_DOCS documents, "
    "PEERS_BACKEND_NODES vertices, PEERS_BACKEND_FT_DOCS texts). The GETs read a warm document cache (each "
    "document read once before); last, the server on PostgreSQL restarted with `--row-cache-mb 0`: every GET a "
    "statement.",
    "backend, what bounds mosaicdb on pg: its round trips to PostgreSQL (statements per request counted with "
    "pg_stat_statements, requests one at a time; a round trip is a statement, or a string of them sent as one "
    "simple query). Durable PUT: 5 per write on the committer's one connection, one after the other (the old "
    "document and the table's count read, then one upsert per key family written: the document, the count, the "
    "change event), and 2 per group (BEGIN; the state row's UPDATE with the COMMIT, which waits for the WAL "
    "flush) — the committer waits for each, the COMMIT included, before the next group (nothing overlaps the "
    "flush as fjall's fsync thread does); the committer is a thread of its own, so no block_in_place. Import: "
    "one read per document (its id, on the committer) and one upsert per key family per chunk. Point GET: none "
    "with the document cache warm (the same path as on fjall); without it one statement on a pooled "
    "connection, made from the request's async worker through block_in_place (the worker's other tasks go to "
    "another thread for the call). Traversal to depth 3: 3, the adjacency being in memory as on fjall (the read "
    "view's BEGIN REPEATABLE READ with the SELECT of the state row, the start vertex's existence, the ROLLBACK "
    "that ends the view), each through block_in_place (the walk runs on the worker). Top-10 of 1 term: about "
    "7 (the view's begin and end, the index's state, about 3.7 point reads of the index's statistics, 0.4 "
    "postings pages), each through block_in_place (a small search runs on the worker).",
]
