"""The model workloads of benches/peers: full-text, kNN, graph traversal and shortest paths,
time-series ingest.

Each group is a class: `prepare()` writes its data files once (deterministic, cached under
target/peers), `setup(pg)` creates what every run shares, `run(k, add)` loads a fresh copy into
both systems (mosaicdb tables/metric and PostgreSQL tables suffixed with the run number `k`), checks
that both hold and answer the same, and measures. No target is claimed for these rows: the issue
gives none, so the table shows each ratio to PostgreSQL and "—" under "met".

- search: PEERS_FT_DOCS (50k) texts of 30-60 words drawn from a Zipf(1) vocabulary of 4,000
  made-up words (no English stop word among them, so PostgreSQL's stop list changes nothing).
  mosaicdb: a `fulltext` index (english), created before one NDJSON import (faster than building
  it after: about 14k against 9k texts/s on the 2-core machine of docs/perf); top-10 BM25 searches
  with every term required (`mode: all`). PostgreSQL: a stored generated `tsvector` column
  (`to_tsvector('english', body)`), `\\copy`, then a GIN index; `plainto_tsquery` (every term
  required), `order by ts_rank(...) desc limit 10`. Queries: 1,000 fixed ones, half one term of
  frequency rank 10-1,000, half two terms of rank 5-200; both return the ids of the top 10.
  Beside tantivy (crates.io, benches/peers/tantivy, in-process; its docstring has the details):
  the same texts (the .tsv file) with an analyzer as close to the index's as tantivy's filters go
  (words split on what is not alphanumeric, lowercased, folded to ASCII, longer than 128 bytes
  dropped, tantivy's English Snowball stemmer, no stop words: the index's `language: english`
  leaves them on), positions kept, the texts stored, one writer thread
  (`writer_with_num_threads(1, 100 MB)`, the doc store compressed on it, commit and merges
  included). Five query kinds, 500 queries each (`ft50000.<kind>.q`): the 1-term and the 2-term
  lines above, the 2-term ones with every term required (AND) and with any (OR, `mode: any`),
  2-word phrases taken from the texts, and 3-letter prefixes of words of rank 10-1,000 (`kim*`:
  about 5 terms, each scored). mosaicdb: wrk on one connection for PEERS_SECS/2 per kind, and its
  server-side mean time per search (the request histogram of /metrics, sum over count around that
  run: from the router to the response head); tantivy: one thread, PEERS_SECS/4 each, every query
  built from its text (analysis, prefix expansion) and its 10 ids read, top-10 by BM25 with the
  exact match count (`(TopDocs, Count)`: every match visited, as mosaicdb's `total`) and top-10
  alone (block-max WAND skips blocks), then the c32 queries on 2 threads beside mosaicdb's c32.
  The match counts of the first 20 queries of each kind are compared (a warning where they
  differ). Disk (run 1): postings and dictionary (mosaicdb: the ftidx and ftstat families'
  table files, document lengths and token lists included; tantivy: .idx, .pos, .term and
  .fieldnorm files) and everything with the texts (mosaicdb: every family; tantivy: the index
  directory), mosaicdb's on a server of its own holding only that table, restarted so that every
  memtable is flushed.
- vectors: PEERS_VECTORS (100k) vectors of PEERS_DIM (64) dimensions, a gaussian mixture
  (vectors_data.py, numpy). mosaicdb: one import, then a `vector` index (l2, default m and
  ef_construction) built over it (its inserts planned on every core); top-10 searches with the
  default `ef` (64 at 100k, growing with the index). PostgreSQL: pgvector is not among
  Debian's packages, so the `cube` contrib extension (exact kNN: `order by c <-> q limit 10` on a
  GiST index), `\\copy` then the index. Recall@10 of both over 200 queries against exact answers
  computed with numpy. Beside hnswlib (PyPI, in-process; hnsw_peer.py): the same M (16) and
  ef_construction (200), built on every core; the smallest swept `ef` reaching recall@10 0.95 for
  each and the queries per second there on one client (mosaicdb over HTTP on one connection,
  hnswlib in-process on one thread), the index's disk (mosaicdb: the `vec` family's table
  files; hnswlib: its saved index file), the restart to the first search (mosaicdb: a second
  server started on a backup of the run's data restored into a fresh directory, until its first
  vector search answers; hnswlib: `load_index`) and the memory then (mosaicdb: that server's
  resident set, every table of the run included; hnswlib: its process's peak, with the data).
  Then the same vectors in a table of their own under an int8-quantized index
  (`"quantization": "int8"`): its build rate and queries per second at recall 0.95 (rescored at
  the default oversampling) beside hnswlib's float index, and its graph's memory beside the float
  index's (`mosaicdb_vector_index_memory_bytes` in /metrics).
- graph: PEERS_NODES (100k) vertices with 5 out-edges each to uniformly random other vertices,
  each with a weight `w`, a random integer 1-100. mosaicdb: a vertex table and an edge table
  declaring `w` its weight field, one import each; `POST /v1/graph/traverse`, depths 0-3, each
  vertex once, along out-edges and both ways (`direction: any`). PostgreSQL: `nodes(id)` and
  `edges(id, src, dst, cost)`, `\\copy`, then indexes on src and dst (mosaicdb keeps both
  directions); a `with recursive` CTE with a depth bound and `union` (both ways: joined on src or
  dst), `select distinct` the vertices. Both return the ids of every vertex reached (about 150 out,
  about 900 both ways); five starts are compared per direction. Then, against Debian's pgRouting
  (3.4, with the PostGIS it requires), one request at a time over a keep-alive connection (psql's
  `\\timing` for PostgreSQL) between seeded pairs of vertices that have a path: the least-`w`
  path (mosaicdb `POST /v1/graph/shortest-path` with `weight` and `max_visited` at its largest,
  10M, as pgRouting has no such bound; `pgr_dijkstra` directed; 20 pairs) and the 5 least (`k: 5`,
  `pgr_KSP` directed; 5 of those pairs). Every pair's costs are compared (the 5 sorted); the rows
  are the median milliseconds, and their ratio is PostgreSQL's over mosaicdb's.
- timeseries: PEERS_SERIES (1000) series x PEERS_STEPS (1000) timestamps 10 s apart, tags host,
  region and dc, one float field, in timestamp order. mosaicdb: line protocol (`precision=s`),
  5,000 lines per request, PEERS_TS_SENDERS (4) concurrent senders on keep-alive connections.
  PostgreSQL: `points(series text, ts timestamptz, value double precision)` with an index on
  (series, ts), the same number of concurrent `\\copy` streams. Counts are checked after. Beside
  VictoriaMetrics (Debian's `victoria-metrics`): the same bodies to its Influx `/write`, then the
  1-minute averages of one series and of all series (mosaicdb's aggregate route against
  `/api/v1/query_range`, p50 of 15 one at a time, every bucket compared) and disk per point.
"""

import http.client
import json
import os
import random
import statistics
import subprocess
import threading
import time
from pathlib import Path

import shutil
import tempfile
import urllib.parse

from common import (HERE, OUT, Workload, call, import_ndjson, int_setting, log, mosaic_binary, start_mosaic, stop,
                    venv_python, wait_port, wrk)

VM = ("127.0.0.1", 18090)


def wait_ready(addr, table, index):
    """Polls a created index until it is ready (an index on an empty table is at once)."""
    while True:
        state = call(addr, "GET", f"/v1/tables/{table}/indexes/{index}").get("state")
        if state == "ready":
            return
        if state not in ("building", None):
            raise SystemExit(f"index {table}/{index}: {state}")
        time.sleep(0.2)


def ratio_rows(names_units):
    return [Workload(name, unit, [("postgres", None)]) for name, unit in names_units]


class Search:
    # the query kinds measured beside tantivy: (file suffix, label, mosaicdb's mode, how a line
    # becomes mosaicdb's query text)
    KINDS = [("term", "1 term", "all", "{}"), ("and", "2 terms AND", "all", "{}"), ("or", "2 terms OR", "any", "{}"),
             ("phrase", "2-word phrase", "all", '"{}"'), ("prefix", "3-letter prefix", "all", "{}*")]
    COUNTED = 20  # queries of each kind whose match counts mosaicdb and tantivy must agree on
    DISK = ("127.0.0.1", 18084)  # the server that measures the disk of one table (run 1)

    def __init__(self, addr, secs, n=None):
        self.addr, self.secs = addr, secs
        self.n = n or int_setting("PEERS_FT_DOCS")
        # PostgreSQL's table of the queries (qid, q), which `check` reads
        self.queries_table = "ft_queries"
        size = f"{self.n // 1000}k texts"
        self.load = f"full-text: import {size} + index"
        self.query = "full-text: top-10 of 1-2 terms, c32"
        self.one = {kind: f"full-text: top-10 of {label}, 1 client" for kind, label, _, _ in self.KINDS}
        self.server = {kind: f"full-text: top-10 of {label}, time per query" for kind, label, _, _ in self.KINDS}
        self.postings = f"full-text: postings + dictionary on disk, {size} (MB)"
        self.whole = f"full-text: disk with the texts, {size} (MB)"

    def workloads(self):
        tantivy = [("tantivy", None), ("tantivy top-10 only", None)]
        rows = [Workload(self.load, "docs/s", [("postgres", None), ("tantivy", None)]),
                Workload(self.query, "queries/s", [("postgres", None), *tantivy])]
        for kind, _, _, _ in self.KINDS:
            rows += [Workload(self.one[kind], "queries/s", tantivy),
                     Workload(self.server[kind], "µs, lower is better", tantivy, "{:,.1f}", True, True)]
        return rows + [Workload(self.postings, "lower is better", [("tantivy", None)], "{:,.1f}", True, True),
                       Workload(self.whole, "lower is better", [("tantivy", None)], "{:,.1f}", True, True)]

    @staticmethod
    def vocabulary(rng):
        """4,000 distinct made-up words of 2-4 consonant-vowel syllables (vowels a, i, o, u): no
        English stop word has that shape, and the English stemmer leaves most of them whole."""
        onsets, vowels = "bdfgklmnprstvz", "aiou"
        words, seen = [], set()
        while len(words) < 4000:
            w = "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(rng.randint(2, 4)))
            if w not in seen:
                seen.add(w)
                words.append(w)
        return words

    def prepare(self):
        base = OUT / f"ft{self.n}"
        self.ndjson, self.tsv, self.queries = (base.with_suffix(s) for s in (".ndjson", ".tsv", ".queries"))
        self.kind_files = {kind: Path(f"{base}.{kind}.q") for kind, _, _, _ in self.KINDS}
        if not (self.ndjson.exists() and self.tsv.exists() and self.queries.exists()):
            rng = random.Random(11)
            words = self.vocabulary(rng)
            cum, total = [], 0.0
            for r in range(len(words)):
                total += 1.0 / (r + 1)
                cum.append(total)
            with open(self.ndjson, "w") as nd, open(self.tsv, "w") as ts:
                for i in range(self.n):
                    body = " ".join(rng.choices(words, cum_weights=cum, k=rng.randint(30, 60)))
                    nd.write(json.dumps({"_id": f"t{i}", "body": body}) + "\n")
                    ts.write(f"t{i}\t{body}\n")
            with open(self.queries, "w") as f:
                for q in range(1000):
                    if q % 2:
                        f.write(" ".join(rng.sample(words[5:200], 2)) + "\n")
                    else:
                        f.write(rng.choice(words[10:1000]) + "\n")
        if not all(f.exists() for f in self.kind_files.values()):
            self.write_kinds()

    def write_kinds(self):
        """The queries of each kind, 500 each, one a line: the 1-term and 2-term lines of the c32
        queries (2 terms: AND and OR), two consecutive words of a random text (phrases, so each
        matches at least once), and the first 3 letters of a word of frequency rank 10-1,000
        (prefixes: one syllable and the next consonant, about 5 words each)."""
        mixed = self.queries.read_text().splitlines()
        rng = random.Random(13)
        texts = [line.split("\t", 1)[1].split() for line in self.tsv.read_text().splitlines()]
        phrases = []
        for _ in range(500):
            t = rng.choice(texts)
            i = rng.randrange(len(t) - 1)
            phrases.append(f"{t[i]} {t[i + 1]}")
        words = self.vocabulary(random.Random(11))
        lines = {"term": [q for q in mixed if " " not in q], "and": [q for q in mixed if " " in q],
                 "phrase": phrases, "prefix": [rng.choice(words[10:1000])[:3] for _ in range(500)]}
        lines["or"] = lines["and"]
        for kind, path in self.kind_files.items():
            path.write_text("".join(q + "\n" for q in lines[kind]))

    def setup(self, pg):
        self.pg = pg
        pg.sql(f"create table {self.queries_table} (qid serial primary key, q text not null)")
        pg.copy_in(f"{self.queries_table} (q)", [self.queries])

    def create(self, addr, table):
        call(addr, "POST", "/v1/tables", {"name": table})
        call(addr, "POST", f"/v1/tables/{table}/indexes", {"name": "body_ft", "kind": "fulltext", "fields": ["body"],
                                                           "options": {"language": "english"}})
        wait_ready(addr, table, "body_ft")

    def run(self, k, add):
        a, pg, table = self.addr, self.pg, f"ft{k}"
        add(self.load, "mosaicdb", self.load_mosaic(a, table))
        add(self.load, "postgres", self.load_pg(table))
        self.check(k, table)

        env = {"PEERS_TABLE": table, "PEERS_QUERIES": str(self.queries)}
        add(self.query, "mosaicdb", wrk(a, "/", "search.lua", 32, 2, self.secs, env))
        add(self.query, "postgres", pg.bench(self.pg_search(table, self.queries_table, 1000), 32, self.secs))
        self.against_tantivy(k, table, add)

    def load_mosaic(self, addr, table):
        """The texts into a new table of the server at `addr`, its fulltext index created first: texts/s."""
        t0 = time.perf_counter()
        self.create(addr, table)
        import_ndjson(addr, table, self.ndjson, self.n)
        return self.n / (time.perf_counter() - t0)

    def load_pg(self, table):
        """The texts into a new PostgreSQL table, then its GIN index: texts/s (analyzed after)."""
        pg = self.pg
        t0 = time.perf_counter()
        pg.sql(f"create table {table} (id text primary key, body text not null, "
               "tsv tsvector generated always as (to_tsvector('english', body)) stored)")
        pg.copy_in(f"{table} (id, body)", [self.tsv])
        pg.sql(f"create index {table}_tsv on {table} using gin (tsv)")
        rate = self.n / (time.perf_counter() - t0)
        pg.sql(f"vacuum analyze {table}")
        return rate

    @staticmethod
    def pg_search(table, queries, count):
        """PostgreSQL's top-10 search (pgbench) of a random one of the `count` queries of the table
        `queries` (qid, q), every term required, ranked by ts_rank."""
        return (f"\\set n random(1, {count})\n"
                f"select d.id from {table} d, (select plainto_tsquery('english', q) tq from {queries} where qid = :n) x "
                "where d.tsv @@ x.tq order by ts_rank(d.tsv, x.tq) desc limit 10;\n")

    def check(self, k, table, addr=None, system="mosaicdb"):
        """The server at `addr` (mosaicdb's) and PostgreSQL count the same matches for the first 20
        queries (the rankings differ: BM25 and ts_rank)."""
        queries = self.queries.read_text().splitlines()[:20]
        for qid, q in enumerate(queries, 1):
            got = call(addr or self.addr, "POST", f"/v1/tables/{table}/search",
                       {"query": q, "mode": "all", "limit": 10, "fields": ["_id"], "total": "exact"})["total"]
            got = got["value"] if isinstance(got, dict) else got
            want = int(self.pg.sql(f"select count(*) from {table} d, {self.queries_table} x "
                                   f"where x.qid = {qid} and d.tsv @@ plainto_tsquery('english', x.q)"))
            if got != want:
                raise SystemExit(f"full-text: {q!r} matches {got} texts in {system}, {want} in PostgreSQL")
        if k == 1:
            log(f"full-text: {system} and PostgreSQL count the same matches for {len(queries)} queries")

    def body(self, kind, q):
        _, _, mode, form = next(x for x in self.KINDS if x[0] == kind)
        return {"query": form.format(q), "mode": mode, "limit": 10, "fields": ["_id"]}

    def against_tantivy(self, k, table, add):
        """Beside tantivy (benches/peers/tantivy, in-process): each query kind on one client
        (mosaicdb: wrk, one connection, and its server-side mean time per search from the request
        histogram of /metrics around that run), the match counts of the first 20 queries of each
        kind compared, the c32 queries on tantivy's 2 threads, the build rate and the disk."""
        a = self.addr
        secs = max(1, self.secs // 2)
        for kind, _, _, _ in self.KINDS:
            env = {"PEERS_TABLE": table, "PEERS_QUERIES": str(self.kind_files[kind]), "PEERS_KIND": kind}
            before = search_time(a)
            add(self.one[kind], "mosaicdb", wrk(a, "/", "search.lua", 1, 1, secs, env))
            took, count = (x - y for x, y in zip(search_time(a), before))
            if count:
                add(self.server[kind], "mosaicdb", took / count * 1e6)
        ours = {}
        c = http.client.HTTPConnection(*a, timeout=60)
        for kind, _, _, _ in self.KINDS:
            queries = self.kind_files[kind].read_text().splitlines()[:self.COUNTED]
            ours[kind] = [call(a, "POST", f"/v1/tables/{table}/search", self.body(kind, q), conn=c)["total"]
                          for q in queries]
        c.close()

        d = Path(tempfile.mkdtemp(prefix="mosaic-peers-tantivy-", dir=OUT))
        try:
            out = subprocess.run([str(OUT / "tantivy-target" / "release" / "mosaic-tantivy-peer"), str(self.tsv),
                                  str(d), str(max(0.5, self.secs / 4)), str(self.queries),
                                  *(f"{kind}={path}" for kind, path in self.kind_files.items())],
                                 check=True, capture_output=True, text=True).stdout
        finally:
            shutil.rmtree(d, ignore_errors=True)
        theirs = json.loads(out)
        add(self.load, "tantivy", theirs["build"])
        add(self.query, "tantivy", theirs["mixed"]["2"]["count"]["qps"])
        add(self.query, "tantivy top-10 only", theirs["mixed"]["2"]["top10"]["qps"])
        for kind, _, _, _ in self.KINDS:
            t = theirs["kinds"][kind]
            add(self.one[kind], "tantivy", t["count"]["qps"])
            add(self.one[kind], "tantivy top-10 only", t["top10"]["qps"])
            add(self.server[kind], "tantivy", t["count"]["mean_us"])
            add(self.server[kind], "tantivy top-10 only", t["top10"]["mean_us"])
            self.compare_counts(kind, ours[kind], t["counts"])
        mixed = theirs["mixed"]
        log(f"full-text: tantivy {theirs['tantivy']}: {theirs['segments']} segment(s), files by extension "
            f"{theirs['by_ext']}, peak RSS {theirs['rss'] / 1e6:.0f} MB; the c32 queries in-process on 1 and 2 "
            f"threads: {mixed['1']['count']['qps']:,.0f} and {mixed['2']['count']['qps']:,.0f} queries/s with the "
            f"count, {mixed['1']['top10']['qps']:,.0f} and {mixed['2']['top10']['qps']:,.0f} top-10 only; p50/p99 "
            "µs with the count: " + ", ".join(f"{kind} {t['count']['p50_us']:.0f}/{t['count']['p99_us']:.0f}"
                                              for kind, t in theirs["kinds"].items()))
        if k == 1:
            # the first run only: a server of its own, one table
            postings, whole = self.disk()
            add(self.postings, "mosaicdb", postings / 1e6)
            add(self.whole, "mosaicdb", whole / 1e6)
            add(self.postings, "tantivy", theirs["postings_bytes"] / 1e6)
            add(self.whole, "tantivy", theirs["bytes"] / 1e6)

    def compare_counts(self, kind, ours, theirs):
        """A warning, not an error, for each query whose match count differs (the analyzers are as
        close as tantivy's filters go, not the same code)."""
        queries = self.kind_files[kind].read_text().splitlines()
        differ = []
        for q, got, want in zip(queries, ours, theirs):
            if isinstance(got, dict):  # {"value", "relation"}: exact up to a threshold
                same = got["value"] == want if got.get("relation", "eq") == "eq" else want >= got["value"]
                got = f"{got['value']}{'+' if got.get('relation') == 'gte' else ''}"
            else:
                same = got == want
            if not same:
                differ.append(f"{self.body(kind, q)['query']!r}: mosaicdb {got}, tantivy {want}")
        if differ:
            log(f"full-text: WARNING: mosaicdb and tantivy count different matches for {len(differ)} of "
                f"{len(ours)} {kind} queries: " + "; ".join(differ))
        else:
            log(f"full-text: mosaicdb and tantivy count the same matches for {len(ours)} {kind} queries")

    def disk(self):
        """The disk of one table of the texts with its fulltext index, on a server of its own: the
        table files (/metrics) once a restart has flushed every memtable and the compactions are
        done. (postings and dictionary: the ftidx and ftstat families; whole: every family)."""
        d = Path(tempfile.mkdtemp(prefix="mosaic-peers-ftdisk-", dir=OUT))
        try:
            proc = start_mosaic(self.DISK, d)
            try:
                self.create(self.DISK, "ft")
                import_ndjson(self.DISK, "ft", self.ndjson, self.n)
            finally:
                stop(proc)
            proc = start_mosaic(self.DISK, d)
            try:
                families = settled_families(self.DISK)
            finally:
                stop(proc)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        log(f"full-text: mosaicdb's table files by family after a restart: {families}")
        return families.get("ftidx", 0) + families.get("ftstat", 0), sum(families.values())


def search_time(addr):
    """The seconds and count of the 200 answers of the search route so far, from the request
    histogram of /metrics."""
    _, text = get_raw(addr, "/metrics")
    got = {}
    for line in text.decode().splitlines():
        for part in ("sum", "count"):
            name = f"mosaicdb_http_request_duration_seconds_{part}{{"
            if (line.startswith(name) and 'route="/v1/tables/{table}/search"' in line and 'status="200"' in line
                    and 'method="POST"' in line):
                got[part] = got.get(part, 0.0) + float(line.split()[-1])
    if "count" not in got:
        return 0.0, 0.0
    return got["sum"], got["count"]


def families(addr):
    """Each key family's table files (bytes), whether the store is flushing or compacting, and the
    bytes in its memtables."""
    _, text = get_raw(addr, "/metrics")
    out, busy, buffered = {}, False, 0.0
    for line in text.decode().splitlines():
        if line.startswith("mosaicdb_storage_disk_bytes{family="):
            out[line.split('"')[1]] = float(line.split()[-1])
        elif line.startswith(("mosaicdb_storage_compactions_running ", "mosaicdb_storage_flushes_queued ")):
            busy |= float(line.split()[-1]) > 0
        elif line.startswith("mosaicdb_storage_write_buffer_bytes "):
            buffered = float(line.split()[-1])
    return out, busy, buffered


def settled_families(addr, timeout=120):
    """`families` once the store has been idle, with the same figures, for 3 s (a warning if its
    memtables still hold more than 1 MB: the table files would miss it)."""
    last, since, deadline = None, time.time(), time.time() + timeout
    while time.time() < deadline:
        now, busy, buffered = families(addr)
        if busy or now != last:
            last, since = now, time.time()
        elif time.time() - since >= 3:
            break
        time.sleep(0.5)
    if buffered > 1e6:
        log(f"full-text: WARNING: {buffered / 1e6:.1f} MB still in memtables after the restart: the disk rows "
            "miss it")
    return last


class Vectors:
    QUERIES, RECALL = 1000, 200
    # the graph's parameters, the same for mosaicdb and hnswlib; the search `ef`s swept for the
    # smallest that reaches recall@10 0.95
    M, EF_CONSTRUCTION, EFS = 16, 200, (16, 24, 32, 48, 64, 96, 128, 192, 256)

    def __init__(self, addr, secs):
        self.addr, self.secs = addr, secs
        self.n, self.dim = int_setting("PEERS_VECTORS"), int_setting("PEERS_DIM")
        if not 1 <= self.dim <= 100:
            raise SystemExit("PEERS_DIM: 1-100 (the cube extension's limit)")
        size = f"{self.n // 1000}k x {self.dim}-d"
        self.load = f"kNN: import {size} + index"
        self.query = f"kNN top-10 of {size}, c32"
        self.recall = f"kNN recall@10 ({self.RECALL} queries)"
        self.at95 = f"kNN top-10 at recall@10 >= 0.95, 1 client, {size}"
        self.disk = f"kNN: index disk, {size} (MB)"
        self.open = f"kNN: restart to first search, {size} (s)"
        self.rss = f"kNN: memory after open, {size} (MB)"
        self.server = f"kNN top-10 at recall@10 >= 0.95, time per query server-side, {size} (us)"
        self.q_load = f"kNN int8: import {size} + index"
        self.q_at95 = f"kNN int8 top-10 at recall@10 >= 0.95, 1 client, {size}"
        self.q_mem = f"kNN: graph memory, int8 beside float, {size} (MB)"

    def workloads(self):
        return [Workload(self.load, "vectors/s", [("postgres", None), ("hnswlib", None)]),
                Workload(self.query, "queries/s", [("postgres", None)]),
                Workload(self.recall, "vs exact", [("postgres", None)], "{:.3f}", False),
                Workload(self.at95, "queries/s", [("hnswlib", None)]),
                Workload(self.server, "lower is better", [("hnswlib", None)], "{:,.0f}", True, True),
                Workload(self.disk, "lower is better", [("hnswlib", None)], "{:,.1f}", True, True),
                Workload(self.open, "lower is better", [("hnswlib", None)], "{:,.3f}", True, True),
                Workload(self.rss, "lower is better", [("hnswlib", None)], "{:,.0f}", True, True),
                Workload(self.q_load, "vectors/s", [("hnswlib", None)]),
                Workload(self.q_at95, "queries/s", [("hnswlib", None)]),
                Workload(self.q_mem, "lower is better", [("float", None)], "{:,.1f}", True, True)]

    def prepare(self):
        self.base = OUT / f"vec{self.n}x{self.dim}"
        paths = [Path(f"{self.base}{s}") for s in (".ndjson", ".tsv", ".queries", ".exact.json")]
        self.ndjson, self.tsv, self.queries, exact = paths
        if not all(p.exists() for p in paths):
            py = venv_python("numpy")
            subprocess.run([str(py), str(HERE / "vectors_data.py"), str(self.n), str(self.dim), str(self.QUERIES),
                            str(self.RECALL), str(self.base)], check=True)
        self.exact = json.loads(exact.read_text())

    def setup(self, pg):
        self.pg = pg
        pg.sql("create extension cube; create table knn_q (qid serial primary key, v text not null, c cube)")
        pg.copy_in("knn_q (v)", [self.queries])
        pg.sql("update knn_q set c = ('(' || trim(both '[]' from v) || ')')::cube")

    def run(self, k, add):
        a, pg, table = self.addr, self.pg, f"vec{k}"
        t0 = time.perf_counter()
        call(a, "POST", "/v1/tables", {"name": table})
        import_ndjson(a, table, self.ndjson, self.n)
        call(a, "POST", f"/v1/tables/{table}/indexes", {"name": "emb", "kind": "vector", "fields": ["emb"],
                                                        "options": {"dimension": self.dim, "metric": "l2"}})
        wait_ready(a, table, "emb")
        add(self.load, "mosaicdb", self.n / (time.perf_counter() - t0))

        t0 = time.perf_counter()
        pg.sql(f"create table {table} (id text primary key, c cube not null)")
        pg.copy_in(table, [self.tsv])
        pg.sql(f"create index {table}_c on {table} using gist (c)")
        add(self.load, "postgres", self.n / (time.perf_counter() - t0))
        pg.sql(f"vacuum analyze {table}")

        queries = self.queries.read_text().splitlines()
        c = http.client.HTTPConnection(*a, timeout=60)
        found = 0
        for q, want in zip(queries, self.exact):
            hits = call(a, "POST", f"/v1/tables/{table}/vector-search",
                        {"field": "emb", "vector": json.loads(q), "k": 10, "fields": ["_id"]}, conn=c)["hits"]
            found += len({h["_id"] for h in hits} & set(want))
        c.close()
        add(self.recall, "mosaicdb", found / (10 * len(self.exact)))
        rows = pg.sql(f"select qid, array(select id from {table} t order by t.c <-> q.c limit 10) from knn_q q "
                      f"where qid <= {len(self.exact)} order by qid").splitlines()
        found = sum(len(set(r.split("|")[1].strip("{}").split(",")) & set(want)) for r, want in zip(rows, self.exact))
        add(self.recall, "postgres", found / (10 * len(self.exact)))
        plan = pg.sql(f"explain select id from {table} order by c <-> (select c from knn_q where qid = 1) limit 10")
        if k == 1 and "Index Scan" not in plan:
            log(f"kNN: PostgreSQL does not use the GiST index:\n{plan}")

        theirs = self.against_hnswlib(table, queries, add, k)

        env = {"PEERS_TABLE": table, "PEERS_QUERIES": str(self.queries)}
        add(self.query, "mosaicdb", wrk(a, "/", "knn.lua", 32, 2, self.secs, env))
        add(self.query, "postgres", pg.bench(
            f"\\set n random(1, {len(queries)})\n"
            f"select id from {table} order by c <-> (select c from knn_q where qid = :n) limit 10;\n", 32, self.secs))
        self.quantized(k, queries, add, theirs)

    ROUTE = "/v1/tables/{table}/vector-search"

    def sweep(self, table, queries, extra=None):
        """Recall@10, queries per second (one connection) and the server's mean time per query
        (microseconds, from /metrics) at each swept ef, up to the first that reaches recall 0.95:
        {ef: (recall, qps, server_us)}."""
        a = self.addr
        c = http.client.HTTPConnection(*a, timeout=60)
        ours = {}
        for ef in self.EFS:
            body = lambda q: {"field": "emb", "vector": json.loads(q), "k": 10, "ef": ef, "fields": ["_id"], **(extra or {})}
            found = 0
            for q, want in zip(queries, self.exact):
                hits = call(a, "POST", f"/v1/tables/{table}/vector-search", body(q), conn=c)["hits"]
                found += len({h["_id"] for h in hits} & set(want))
            n0, s0 = request_seconds(a, self.ROUTE)
            t0 = time.perf_counter()
            for q in queries:
                call(a, "POST", f"/v1/tables/{table}/vector-search", body(q), conn=c)
            took = time.perf_counter() - t0
            n1, s1 = request_seconds(a, self.ROUTE)
            ours[ef] = (found / (10 * len(self.exact)), len(queries) / took, (s1 - s0) / max(n1 - n0, 1) * 1e6)
            if ours[ef][0] >= 0.95:
                break
        c.close()
        return ours

    def quantized(self, k, queries, add, theirs):
        """The same vectors under an int8-quantized index (a table of its own): the build rate and
        the queries per second at recall 0.95 (rescored, default oversampling) beside hnswlib's
        float index, and the graph's memory beside the float index's (from /metrics)."""
        a, table = self.addr, f"vec{k}q"
        t0 = time.perf_counter()
        call(a, "POST", "/v1/tables", {"name": table})
        import_ndjson(a, table, self.ndjson, self.n)
        call(a, "POST", f"/v1/tables/{table}/indexes", {"name": "emb", "kind": "vector", "fields": ["emb"], "options": {
            "dimension": self.dim, "metric": "l2", "quantization": "int8"}})
        wait_ready(a, table, "emb")
        add(self.q_load, "mosaicdb", self.n / (time.perf_counter() - t0))
        add(self.q_load, "hnswlib", theirs["build"])
        ours = self.sweep(table, queries)
        our_ef, our_qps, _ = at95(ours)
        their_ef, their_qps, _ = at95({int(ef): (r["recall"], r["qps"], 0) for ef, r in theirs["ef"].items()})
        log(f"kNN int8: recall by ef — mosaicdb {ours}; recall 0.95 at ef {our_ef} (hnswlib, floats: {their_ef})")
        if our_qps is not None:
            add(self.q_at95, "mosaicdb", our_qps)
        if their_qps is not None:
            add(self.q_at95, "hnswlib", their_qps)
        memory = graph_memory(a)
        add(self.q_mem, "mosaicdb", memory[(table, "emb")] / 1e6)
        add(self.q_mem, "float", memory[(f"vec{k}", "emb")] / 1e6)


    def against_hnswlib(self, table, queries, add, k):
        """Beside hnswlib (PyPI, in-process, same M and ef_construction, build on every core): the
        build rate, the queries per second at the smallest swept ef reaching recall@10 0.95 (mosaicdb
        over HTTP on one connection, hnswlib in-process on one thread), and the index's disk."""
        a = self.addr
        ours = self.sweep(table, queries)
        py = venv_python("numpy", "hnswlib")
        out = subprocess.run([str(py), str(HERE / "hnsw_peer.py"), str(self.base), str(self.M),
                              str(self.EF_CONSTRUCTION), str(os.cpu_count() or 1), ",".join(map(str, self.EFS))],
                             check=True, capture_output=True, text=True).stdout
        theirs = json.loads(out)
        add(self.load, "hnswlib", theirs["build"])
        our_ef, our_qps, our_us = at95(ours)
        their_ef, their_qps, _ = at95({int(ef): (r["recall"], r["qps"], 0) for ef, r in theirs["ef"].items()})
        if our_us is not None and their_qps is not None:
            add(self.server, "mosaicdb", our_us)
            add(self.server, "hnswlib", 1e6 / their_qps)
        log(f"kNN: recall by ef — mosaicdb {ours}; hnswlib {theirs['ef']}; recall 0.95 at ef {our_ef} (mosaicdb), "
            f"{their_ef} (hnswlib); hnswlib loads its index in {theirs['load_s']:.3f} s, peak RSS "
            f"{theirs['rss'] / 1e6:.0f} MB")
        if our_qps is not None:
            add(self.at95, "mosaicdb", our_qps)
        if their_qps is not None:
            add(self.at95, "hnswlib", their_qps)
        # run k's server holds k indexes of this size (one per run): the family's share of one
        add(self.disk, "mosaicdb", disk_bytes(a, "vec") / k / 1e6)
        add(self.disk, "hnswlib", theirs["bytes"] / 1e6)
        if k > 1:
            return theirs
        # the first run only: a later run's restart would open the earlier runs' indexes too
        took, rss = self.reopen(table, json.loads(queries[0]))
        add(self.open, "mosaicdb", took)
        add(self.open, "hnswlib", theirs["load_s"])
        add(self.rss, "mosaicdb", rss)
        add(self.rss, "hnswlib", theirs["rss"] / 1e6)
        return theirs

    REOPEN = ("127.0.0.1", 18083)

    def reopen(self, table, q):
        """A restart: the server's data, backed up and restored into a fresh directory, opened by a
        second server. The seconds from its start to the first vector search's answer, and its
        resident memory (MB) then — every table of the run is in it, so this is an upper bound."""
        d = Path(tempfile.mkdtemp(prefix="mosaic-peers-reopen-", dir=OUT))
        try:
            archive = d / "backup"
            with open(archive, "wb") as f:
                subprocess.run([str(mosaic_binary()), "backup", "--url", f"http://{self.addr[0]}:{self.addr[1]}"],
                               stdout=f, check=True)
            subprocess.run([str(mosaic_binary()), "restore", str(archive), str(d / "data")], check=True,
                           stdout=subprocess.DEVNULL)
            archive.unlink()
            t0 = time.perf_counter()
            proc = subprocess.Popen([str(mosaic_binary()), "--data-dir", str(d / "data"), "--addr",
                                     f"{self.REOPEN[0]}:{self.REOPEN[1]}", "--log", "warn"])
            try:
                wait_port(self.REOPEN, proc, "mosaicdb", poll=0.01)
                call(self.REOPEN, "POST", f"/v1/tables/{table}/vector-search",
                     {"field": "emb", "vector": q, "k": 10, "fields": ["_id"]})
                took = time.perf_counter() - t0
                rss = next(int(l.split()[1]) for l in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
                           if l.startswith("VmRSS:")) * 1024 / 1e6
            finally:
                stop(proc)
            return took, rss
        finally:
            shutil.rmtree(d, ignore_errors=True)


def at95(by_ef):
    """The smallest ef of {ef: (recall, qps, server_us)} reaching recall 0.95, with its qps and
    server-side microseconds per query (None, None, None if none)."""
    reached = [(ef, qps, us) for ef, (recall, qps, us) in sorted(by_ef.items()) if recall >= 0.95]
    return reached[0] if reached else (None, None, None)


def request_seconds(addr, route):
    """(count, total seconds) of mosaicdb's answered requests to a route template, from /metrics."""
    _, text = get_raw(addr, "/metrics")
    count = total = 0.0
    for line in text.decode().splitlines():
        if f'route="{route}"' not in line:
            continue
        if line.startswith("mosaicdb_http_request_duration_seconds_count"):
            count += float(line.split()[-1])
        elif line.startswith("mosaicdb_http_request_duration_seconds_sum"):
            total += float(line.split()[-1])
    return count, total


def graph_memory(addr):
    """{(table, index): bytes} of every vector index's graph in memory, from /metrics."""
    _, text = get_raw(addr, "/metrics")
    out = {}
    for line in text.decode().splitlines():
        if line.startswith("mosaicdb_vector_index_memory_bytes{"):
            labels = dict(kv.split("=", 1) for kv in line[line.index("{") + 1:line.index("}")].split(","))
            out[(labels["table"].strip('"'), labels["index"].strip('"'))] = float(line.split()[-1])
    return out


class Graph:
    OUT_DEGREE, DEPTH, STARTS, PAIRS, K, K_PAIRS = 5, 3, 5, 20, 5, 5
    # per direction: the PostgreSQL walk's next vertex from r.node over an edge e, and its join
    WALKS = {"out": ("e.dst", "e.src = r.node"),
             "any": ("case when e.src = r.node then e.dst else e.src end", "e.src = r.node or e.dst = r.node")}

    def __init__(self, addr, secs, n=None):
        self.addr, self.secs = addr, secs
        self.n = n or int_setting("PEERS_NODES")
        size = f"{self.n // 1000}k nodes, {self.n * self.OUT_DEGREE // 1000}k edges"
        self.load = f"graph: import {size}"
        # out keeps the rows' earlier names (docs/performance.md quotes them)
        self.walks = {d: [f"traversal to depth {self.DEPTH}{name}, {size}, {c}" for c in ("1 client", "c32")]
                      for d, name in (("out", ""), ("any", ", any direction"))}
        self.path = f"weighted shortest path, {size}, p50 of {self.PAIRS} pairs"
        self.paths = f"{self.K} shortest paths, weighted, {size}, p50 of {self.K_PAIRS} pairs"

    def workloads(self):
        return ratio_rows([(self.load, "edges/s")] + [(w, "walks/s") for ws in self.walks.values() for w in ws]) + [
            Workload(w, "ms, lower is better", [("postgres", None)], "{:,.1f}", True, True)
            for w in (self.path, self.paths)]

    def prepare(self):
        self.base = OUT / f"graph{self.n}"
        self.nodes_nd, self.nodes_tsv, self.edges_tsv = (Path(f"{self.base}{s}") for s in
                                                         (".nodes.ndjson", ".nodes.tsv", ".wedges.tsv"))
        if not self.edges_tsv.exists():
            # the weights draw from their own sequence: the same edges as before weights came
            rng, weights = random.Random(5), random.Random(6)
            with open(self.nodes_nd, "w") as nd, open(self.nodes_tsv, "w") as nt, open(self.edges_tsv, "w") as et:
                for i in range(self.n):
                    nd.write(f'{{"_id":"n{i}"}}\n')
                    nt.write(f"{i}\n")
                    for e in range(i * self.OUT_DEGREE, (i + 1) * self.OUT_DEGREE):
                        j = rng.randrange(self.n - 1)
                        et.write(f"{e}\t{i}\t{j + (j >= i)}\t{weights.randint(1, 100)}\n")

    def edges_ndjson(self, nodes):
        """The edges as mosaicdb documents: their vertices name the vertex table `nodes`."""
        path = Path(f"{self.base}.wedges.{nodes}.ndjson")
        if not path.exists():
            with open(self.edges_tsv) as src, open(path, "w") as out:
                for line in src:
                    e, s, d, w = line.split()
                    out.write(f'{{"_id":"e{e}","_from":"{nodes}/n{s}","_to":"{nodes}/n{d}","w":{w}}}\n')
        return path

    def setup(self, pg):
        self.pg = pg
        pg.sql("create extension pgrouting cascade")  # with PostGIS, which it requires

    def run(self, k, add):
        nodes, edges = f"nodes{k}", f"links{k}"
        add(self.load, "mosaicdb", self.load_mosaic(self.addr, nodes, edges))
        add(self.load, "postgres", self.load_pg(nodes, edges))
        for direction in self.WALKS:
            self.traverse(k, direction, nodes, edges, add)
        self.shortest(k, nodes, edges, add)

    def load_mosaic(self, addr, nodes, edges):
        """The vertices and the edges into new tables `nodes` and `edges` of the server at `addr`:
        edges/s."""
        m = self.n * self.OUT_DEGREE
        edges_nd = self.edges_ndjson(nodes)
        t0 = time.perf_counter()
        call(addr, "POST", "/v1/tables", {"name": nodes})
        call(addr, "POST", "/v1/tables", {"name": edges, "kind": "edge", "weight_field": "w"})
        import_ndjson(addr, nodes, self.nodes_nd, self.n)
        import_ndjson(addr, edges, edges_nd, m)
        return m / (time.perf_counter() - t0)

    def load_pg(self, nodes, edges):
        """The vertices and the edges into new PostgreSQL tables, then the indexes on src and dst:
        edges/s (analyzed after)."""
        pg, m = self.pg, self.n * self.OUT_DEGREE
        t0 = time.perf_counter()
        pg.sql(f"create table {nodes} (id int primary key); "
               f"create table {edges} (id int not null, src int not null, dst int not null, cost int not null)")
        pg.copy_in(nodes, [self.nodes_tsv])
        pg.copy_in(edges, [self.edges_tsv])
        pg.sql(f"create index {edges}_src on {edges} (src); create index {edges}_dst on {edges} (dst)")
        rate = m / (time.perf_counter() - t0)
        pg.sql(f"vacuum analyze {nodes}, {edges}")
        return rate

    def walk_sql(self, direction, edges):
        """PostgreSQL's walk from the vertex `:s`: a recursive CTE, each vertex reached once."""
        step, on = self.WALKS[direction]
        return (f"with recursive r(node, depth) as (select :s::int, 0 union "
                f"select {step}, r.depth + 1 from r join {edges} e on {on} where r.depth < {self.DEPTH}) "
                "select distinct node from r;\n")

    def walk_env(self, direction, nodes, edges):
        """traverse.lua's settings."""
        return {"PEERS_NODES": str(self.n), "PEERS_VERTICES": nodes, "PEERS_EDGES": edges,
                "PEERS_DEPTH": str(self.DEPTH), "PEERS_DIRECTION": direction}

    def walk_script(self, direction, edges):
        """PostgreSQL's walk from a random start (pgbench)."""
        return f"\\set s random(0, {self.n - 1})\n" + self.walk_sql(direction, edges)

    def check_walks(self, k, direction, nodes, edges, addr=None, system="mosaicdb"):
        """The server at `addr` (mosaicdb's) and PostgreSQL reach the same vertices from a few starts."""
        walk = self.walk_sql(direction, edges)
        rng = random.Random(k)
        for s in (rng.randrange(self.n) for _ in range(self.STARTS)):
            got = call(addr or self.addr, "POST", "/v1/graph/traverse",
                       {"start": f"{nodes}/n{s}", "edges": [edges], "direction": direction, "min_depth": 0,
                        "max_depth": self.DEPTH, "limit": 10000})["vertices"]
            got = {int(v["_id"].split("/n", 1)[1]) for v in got}
            want = {int(x) for x in self.pg.sql(walk.replace(":s", str(s))).split()}
            if got != want:
                raise SystemExit(f"traversal ({direction}) from {s}: {system} reaches {len(got)} vertices, "
                                 f"PostgreSQL {len(want)}")
        if k == 1:
            log(f"traversal ({direction}): {system} and PostgreSQL reach the same {len(want)} vertices (and so on "
                f"for {self.STARTS} starts)")

    def traverse(self, k, direction, nodes, edges, add):
        """Both reach the same vertices from a few starts; then the walks per second, 1 client and c32."""
        a, pg = self.addr, self.pg
        self.check_walks(k, direction, nodes, edges)
        env = self.walk_env(direction, nodes, edges)
        script = self.walk_script(direction, edges)
        one, c32 = self.walks[direction]
        add(one, "mosaicdb", wrk(a, "/", "traverse.lua", 1, 1, self.secs, env))
        add(one, "postgres", pg.bench(script, 1, self.secs))
        add(c32, "mosaicdb", wrk(a, "/", "traverse.lua", 32, 2, self.secs, env))
        add(c32, "postgres", pg.bench(script, 32, self.secs))

    def shortest(self, k, nodes, edges, add):
        """The least-`w` path, then the K least, between seeded pairs of vertices that have a path (the
        same pairs every run), one request at a time: every pair's costs the same from both systems,
        and the median milliseconds of each. pgRouting reads the edges through the query it is given,
        at every call, as it is meant to be used."""
        graph = f"'select id, src as source, dst as target, cost from {edges}'"
        rng = random.Random(17)
        pairs = [tuple(rng.sample(range(self.n), 2)) for _ in range(self.PAIRS + 5)]  # spares: no path
        one = [f"select agg_cost from pgr_dijkstra({graph}, {s}, {t}, directed => true) where edge = -1"
               for s, t in pairs]
        # the first query once more, first: the session loads pgRouting and reads the table
        want = self.pg.timed(one[:1] + one)[1:]
        c = http.client.HTTPConnection(*self.addr, timeout=120)
        self.mosaic_costs(c, nodes, edges, *pairs[0], 1)
        found, mine, theirs, none = [], [], [], 0
        for (s, t), (rows, ms) in zip(pairs, want):
            got, my_ms = self.mosaic_costs(c, nodes, edges, s, t, 1)
            if got != sorted(float(x) for x in rows):
                raise SystemExit(f"shortest path n{s} -> n{t}: mosaicdb cost {got}, pgRouting {rows} (none: no path)")
            if not got:
                none += 1
                continue
            found.append((s, t))
            mine.append(my_ms)
            theirs.append(ms)
            if len(found) == self.PAIRS:
                break
        else:
            raise SystemExit(f"shortest path: {len(found)} of {len(pairs)} pairs have a path, not {self.PAIRS}")
        if k == 1:
            log(f"shortest path: mosaicdb and pgRouting find the same cost for {len(found)} pairs (and no path "
                f"for the {none} others asked)")
        add(self.path, "mosaicdb", statistics.median(mine))
        add(self.path, "postgres", statistics.median(theirs))

        kpairs = found[:self.K_PAIRS]
        ksp = [f"select agg_cost from pgr_KSP({graph}, {s}, {t}, {self.K}, directed => true) where edge = -1"
               for s, t in kpairs]
        want = self.pg.timed(one[:1] + ksp)[1:]
        mine = []
        for (s, t), (rows, ms) in zip(kpairs, want):
            got, my_ms = self.mosaic_costs(c, nodes, edges, s, t, self.K)
            want_costs = sorted(float(x) for x in rows)
            if got != want_costs:
                raise SystemExit(f"{self.K} shortest paths n{s} -> n{t}: mosaicdb costs {got}, pgRouting {want_costs}")
            mine.append(my_ms)
        c.close()
        if k == 1:
            log(f"{self.K} shortest paths: mosaicdb and pgRouting find the same costs for {len(kpairs)} pairs "
                f"(the last: {', '.join(f'{c:g}' for c in got)})")
        add(self.paths, "mosaicdb", statistics.median(mine))
        add(self.paths, "postgres", statistics.median(ms for _, ms in want))

    def mosaic_costs(self, conn, nodes, edges, s, t, k):
        """mosaicdb's `k` least-`w` paths from n`s` to n`t`: their costs, sorted (none for 404 `no_path`),
        and the milliseconds the request took."""
        # max_visited at its largest: pgRouting's searches have no such bound, and the default (100k
        # adjacency entries) stops the K shortest paths on the 100k-vertex graph
        body = {"from": f"{nodes}/n{s}", "to": f"{nodes}/n{t}", "edges": [edges], "weight": "w",
                "max_visited": 10_000_000}
        if k > 1:
            body["k"] = k
        t0 = time.perf_counter()
        conn.request("POST", "/v1/graph/shortest-path", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        ms = (time.perf_counter() - t0) * 1000
        if r.status == 404 and b"no_path" in data:
            return [], ms
        if r.status != 200:
            raise SystemExit(f"shortest path n{s} -> n{t} (k {k}): {r.status} {data[:300]!r}")
        return sorted(float(p["cost"]) for p in json.loads(data)["paths"]), ms


def get_raw(addr, path, conn=None):
    """A GET whose answer need not be JSON: (status, body bytes)."""
    c = conn or http.client.HTTPConnection(*addr, timeout=600)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    if conn is None:
        c.close()
    return r.status, body


def p50_ms(addr, path, repeats):
    """The median milliseconds of `repeats` GETs of `path`, one at a time on one connection, and the
    last answer."""
    c = http.client.HTTPConnection(*addr, timeout=600)
    times, body = [], b""
    for _ in range(repeats):
        t0 = time.perf_counter()
        status, body = get_raw(addr, path, c)
        times.append((time.perf_counter() - t0) * 1000)
        if status != 200:
            raise SystemExit(f"GET {path}: {status} {body[:300]!r}")
    c.close()
    return statistics.median(times), json.loads(body)


class TimeSeries:
    BATCH, STEP_S, T0 = 5000, 10, 1_750_000_000
    REPEATS = 15
    ENTITY = "dc=d0,host=h00000,region=r0"

    def __init__(self, addr, secs):
        self.addr = addr
        self.series, self.steps = int_setting("PEERS_SERIES"), int_setting("PEERS_STEPS")
        self.senders = int_setting("PEERS_TS_SENDERS")
        self.points = self.series * self.steps
        self.load = (f"time series: ingest {self.points / 1e6:g}M points, {self.BATCH} per request, "
                     f"{self.senders} senders")
        self.one = f"time series: 1-minute avg of one series ({self.steps:,} points), p50 of {self.REPEATS}"
        self.all = f"time series: 1-minute avg of all {self.series:,} series together, p50 of {self.REPEATS}"
        self.each = f"time series: 5-minute avg of each of {self.series:,} series (group_by=entity), p50 of {self.REPEATS}"
        self.disk = "time series: disk per point after the ingest and merging (bytes)"
        self.vm = None

    def workloads(self):
        lower = [Workload(w, "ms, lower is better", [("victoriametrics", None)], "{:,.1f}", True, True)
                 for w in (self.one, self.all, self.each)]
        return ([Workload(self.load, "points/s", [("postgres", None), ("victoriametrics", None)])] + lower
                + [Workload(self.disk, "lower is better", [("victoriametrics", None)], "{:,.2f}", True, True)])

    def prepare(self):
        """Lines without their measurement (each run names its own metric) and COPY text, split
        in `senders` files of consecutive timestamps."""
        self.base = OUT / f"ts{self.series}x{self.steps}"
        self.lines = Path(f"{self.base}.lines")
        self.tsvs = [Path(f"{self.base}.{i + 1}of{self.senders}.tsv") for i in range(self.senders)]
        if self.lines.exists() and all(p.exists() for p in self.tsvs):
            return
        rng = random.Random(3)
        entities = [(f"dc=d{s % 3},host=h{s:05d},region=r{s % 8}") for s in range(self.series)]
        per_file = -(-self.steps // self.senders)
        tsvs = [open(p, "w") for p in self.tsvs]
        with open(self.lines, "w") as lines:
            for t in range(self.steps):
                ts = self.T0 + t * self.STEP_S
                stamp = time.strftime("%Y-%m-%d %H:%M:%S+00", time.gmtime(ts))
                out = tsvs[t // per_file]
                for e in entities:
                    v = round(rng.uniform(0, 100), 3)
                    lines.write(f",{e} value={v} {ts}\n")
                    out.write(f"{e}\t{stamp}\t{v}\n")
        for f in tsvs:
            f.close()

    def setup(self, pg):
        self.pg = pg
        # VictoriaMetrics from Debian, its Influx /write endpoint and /api/v1/query_range; no cache of
        # query results (each timed query computes its answer, as mosaicdb's does)
        self.vm_dir = Path(tempfile.mkdtemp(prefix="mosaic-peers-vm-", dir=OUT))
        self.vm = subprocess.Popen(["victoria-metrics", f"-storageDataPath={self.vm_dir}",
                                    f"-httpListenAddr={VM[0]}:{VM[1]}", "-retentionPeriod=100y",
                                    "-search.disableCache", "-loggerLevel=ERROR"])
        wait_port(VM, self.vm, "victoria-metrics")

    def close(self):
        stop(self.vm)
        if self.vm is not None:
            shutil.rmtree(self.vm_dir, ignore_errors=True)

    def send(self, bodies, metric, addr=None, path="/v1/timeseries/write?precision=s"):
        lock, nxt, failures = threading.Lock(), [0], []

        def sender():
            c = http.client.HTTPConnection(*(addr or self.addr), timeout=600)
            while True:
                with lock:
                    i = nxt[0]
                    nxt[0] += 1
                if i >= len(bodies) or failures:
                    break
                c.request("POST", path, body=bodies[i], headers={"Content-Type": "text/plain"})
                r = c.getresponse()
                answer = r.read()
                if r.status not in (200, 204):
                    failures.append(f"{r.status} {answer[:300]!r}")
            c.close()

        threads = [threading.Thread(target=sender) for _ in range(self.senders)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.perf_counter() - t0
        if failures:
            raise SystemExit(f"line protocol write of {metric}: {failures[0]}")
        return took

    def run(self, k, add):
        pg, metric = self.pg, f"cpu{k}"
        lines = self.lines.read_text().splitlines(keepends=True)
        bodies = ["".join(metric + line for line in lines[i:i + self.BATCH]).encode()
                  for i in range(0, len(lines), self.BATCH)]
        mosaic_disk = disk_bytes(self.addr, "ts")
        add(self.load, "mosaicdb", self.points / self.send(bodies, metric))
        info = next((m for m in call(self.addr, "GET", "/v1/timeseries")["metrics"] if m["name"] == metric), {})
        if info.get("points") != self.points or info.get("series") != self.series:
            raise SystemExit(f"time series {metric}: {info} after writing {self.points} points of {self.series} series")

        table = f"points{k}"
        pg.sql(f"create table {table} (series text not null, ts timestamptz not null, value double precision not null);"
               f"create index {table}_series_ts on {table} (series, ts)")
        add(self.load, "postgres", self.points / pg.copy_in(table, self.tsvs))
        got = int(pg.sql(f"select count(*) from {table}"))
        if got != self.points:
            raise SystemExit(f"postgres {table}: {got} rows of {self.points}")
        self.against_vm(k, metric, bodies, add, mosaic_disk)

    def against_vm(self, k, metric, bodies, add, mosaic_disk):
        """Ingest, the 1-minute averages (checked equal bucket by bucket) and disk per point, beside
        VictoriaMetrics."""
        vm_disk = dir_bytes(self.vm_dir)
        add(self.load, "victoriametrics", self.points / self.send(bodies, metric, VM, "/write?precision=s"))
        # VictoriaMetrics answers writes before they are searchable: until it counts every point
        # (its window (t - w, t] asked at t = T0 + w - 1 s holds T0 and every later point)
        window = self.steps * self.STEP_S + 60
        count_q = urllib.parse.quote(f"sum(count_over_time({metric}_value[{window}s]))")
        deadline = time.time() + 120
        while True:
            get_raw(VM, "/internal/force_flush")
            _, body = get_raw(VM, f"/api/v1/query?query={count_q}&time={self.T0 + window - 1}")
            result = json.loads(body)["data"]["result"]
            if result and int(float(result[0]["value"][1])) == self.points:
                break
            if time.time() > deadline:
                raise SystemExit(f"VictoriaMetrics holds {result} points of {self.points} after 2 minutes")
            time.sleep(1)
        t0, t1 = self.T0 * 1000, (self.T0 + self.steps * self.STEP_S) * 1000
        ours_path = f"/v1/timeseries/{metric}/aggregate?step=1m&fn=avg&from={t0}&to={t1}"
        # VictoriaMetrics' value at t covers (t - 1m, t]: asked at each bucket's start + 59.999 s it
        # covers [start, start + 1m), mosaicdb's bucket
        # (mosaicdb's buckets start at multiples of the step since the epoch)
        first, last = t0 // 60_000 * 60_000, (t1 - 1) // 60_000 * 60_000
        span = f"&start={(first + 59_999) / 1000}&end={(last + 59_999) / 1000}&step=60"
        one = f'avg_over_time({metric}_value{{host="h00000"}}[1m])'
        every = f"sum(sum_over_time({metric}_value[1m])) / sum(count_over_time({metric}_value[1m]))"
        def differ(ours, theirs):
            return [(b, ours.get(b), theirs.get(b)) for b in sorted(ours.keys() | theirs.keys())
                    if b not in ours or b not in theirs or abs(ours[b] - theirs[b]) > 1e-9 * max(1, abs(theirs[b]))]

        def vm_buckets(values, step_ms=60_000):
            return {round(float(t) * 1000) - (step_ms - 1): float(v) for t, v in values}

        for name, ours_q, vm_q in ((self.one, f"&entity={urllib.parse.quote(self.ENTITY)}", one), (self.all, "", every)):
            ms, answer = p50_ms(self.addr, ours_path + ours_q, self.REPEATS)
            ours = {b["ts"]: b["value"] for b in answer["buckets"]}
            vm_ms, vm_answer = p50_ms(VM, f"/api/v1/query_range?query={urllib.parse.quote(vm_q)}{span}", self.REPEATS)
            result = vm_answer["data"]["result"]
            diff = differ(ours, vm_buckets(result[0]["values"] if result else []))
            if diff:
                raise SystemExit(f"{name}: {len(diff)} buckets differ (start, mosaicdb, VictoriaMetrics): {diff[:6]}")
            add(name, "mosaicdb", ms)
            add(name, "victoriametrics", vm_ms)
        # one list of buckets per series (5-minute buckets: 1-minute ones would pass mosaicdb's
        # 100 000 buckets per answer): VictoriaMetrics answers a series per label set
        step5 = 300_000
        first5, last5 = t0 // step5 * step5, (t1 - 1) // step5 * step5
        span5 = f"&start={(first5 + step5 - 1) / 1000}&end={(last5 + step5 - 1) / 1000}&step=300"
        ours_each = f"/v1/timeseries/{metric}/aggregate?step=5m&fn=avg&from={t0}&to={t1}&group_by=entity"
        ms, answer = p50_ms(self.addr, ours_each, self.REPEATS)
        each = f"avg_over_time({metric}_value[5m])"
        vm_ms, vm_answer = p50_ms(VM, f"/api/v1/query_range?query={urllib.parse.quote(each)}{span5}", self.REPEATS)
        theirs = {",".join(f"{k}={r['metric'][k]}" for k in sorted(r["metric"]) if k != "__name__"):
                  vm_buckets(r["values"], step5) for r in vm_answer["data"]["result"]}
        ours = {s["entity"]: {b["ts"]: b["value"] for b in s["buckets"]} for s in answer["series"]}
        if ours.keys() != theirs.keys():
            raise SystemExit(f"{self.each}: series differ: {sorted(ours.keys() ^ theirs.keys())[:6]}")
        for entity, buckets in ours.items():
            diff = differ(buckets, theirs[entity])
            if diff:
                raise SystemExit(f"{self.each}: {entity}: {len(diff)} buckets differ: {diff[:6]}")
        add(self.each, "mosaicdb", ms)
        add(self.each, "victoriametrics", vm_ms)
        log(f"time series: mosaicdb and VictoriaMetrics agree on every bucket of the three aggregations")
        # disk: VictoriaMetrics merged; mosaicdb once its merge task has nothing left to merge
        get_raw(VM, "/internal/force_flush")
        get_raw(VM, "/internal/force_merge?partition_prefix=")
        add(self.disk, "victoriametrics", (settled_bytes(self.vm_dir) - vm_disk) / self.points)
        wait_merged(self.addr)
        add(self.disk, "mosaicdb", (disk_bytes(self.addr, "ts") - mosaic_disk) / self.points)


def dir_bytes(path):
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def settled_bytes(path, timeout=120):
    """The size of a directory once it stopped changing for 5 s (VictoriaMetrics flushes and merges
    in the background)."""
    last, since, deadline = -1, time.time(), time.time() + timeout
    while time.time() < deadline:
        now = dir_bytes(path)
        if now != last:
            last, since = now, time.time()
        elif time.time() - since >= 5:
            break
        time.sleep(0.5)
    return last


def disk_bytes(addr, family):
    """The table files of one of mosaicdb's key families (`ts`, `vec`, …), from /metrics."""
    _, text = get_raw(addr, "/metrics")
    for line in text.decode().splitlines():
        if line.startswith(f'mosaicdb_storage_disk_bytes{{family="{family}"}}'):
            return float(line.split()[-1])
    raise SystemExit(f"/metrics has no mosaicdb_storage_disk_bytes for {family}")


def wait_merged(addr, timeout=120):
    """Until a run of mosaicdb's merge task that started after this call merged nothing."""
    def merge_task():
        return next(t for t in call(addr, "GET", "/v1/admin/tasks")["tasks"] if t["name"] == "timeseries_merge")
    runs = merge_task()["runs"]
    deadline = time.time() + timeout
    while time.time() < deadline:
        t = merge_task()
        if t["runs"] >= runs + 2 and t["last_removed"] == 0:
            return
        time.sleep(1)


GROUPS = {"search": Search, "vectors": Vectors, "graph": Graph, "timeseries": TimeSeries}
NOTES = {
    "search": ["full-text: mosaicdb ranks by BM25, PostgreSQL by ts_rank; both require every term and count "
               "the same matches (checked on 20 queries). Import: mosaicdb's index exists before its one "
               "import (its faster order); PostgreSQL loads, then builds its GIN index.",
               "full-text beside tantivy (in-process, no HTTP; BM25 too): its build is one writer thread from the "
               "texts file to the commit (texts stored). Queries of each kind on one client: mosaicdb over HTTP "
               "(wrk, one connection), tantivy on one thread; the time per query is mosaicdb's server-side mean "
               "(its request histogram) against tantivy's in-process mean. tantivy counts every match "
               "(`(TopDocs, Count)`, like mosaicdb's exact `total`); tantivy top-10 only lets it skip "
               "blocks. c32: tantivy on 2 threads in-process. Disk (run 1): postings + dictionary is mosaicdb's "
               "ftidx and ftstat families (document lengths and token lists too) against tantivy's "
               ".idx/.pos/.term/.fieldnorm files; with the texts, every family against the whole index "
               "directory."],
    "vectors": ["kNN: both systems load, then build the index. mosaicdb's HNSW searches with its default "
                "ef (64); PostgreSQL has no pgvector in Debian, so cube's exact GiST kNN: its recall is its "
                "agreement with numpy's exact answers. hnswlib: built from a numpy array in-process on every "
                "core (mosaicdb's rate includes its import); queries at recall 0.95 compare mosaicdb over HTTP "
                "with hnswlib in-process, so the HTTP round trip is in mosaicdb's figure only."],
    "graph": ["graph import: mosaicdb checks that both vertices of every edge exist and writes two adjacency "
              "entries per edge, each with the edge's weight (its declared weight field); PostgreSQL loads nodes "
              "and edges with their weight (no foreign keys), then indexes src and dst.",
              "traversal: every vertex within 3 edges of a random start, along out-edges (about 150 ids) or "
              "both ways (any direction, about 900), the same set from both (checked on 5 starts each); "
              "PostgreSQL: a recursive CTE, joined on src or dst both ways.",
              "shortest paths: the least sum of the edges' weight `w` (random 1-100), one request at a time "
              "between seeded vertex pairs with a path; the same costs from both (every pair; for 5 paths the "
              "sorted costs). PostgreSQL: pgRouting's pgr_dijkstra and pgr_KSP (directed), which read the "
              "edges through their SQL argument at every call. The rows are median latencies: their ratio is "
              "PostgreSQL's milliseconds over mosaicdb's (above 1: mosaicdb faster)."],
    "timeseries": ["time series: mosaicdb's line-protocol route vs PostgreSQL \\copy into a table indexed on "
                   "(series, ts) and VictoriaMetrics' Influx /write (which acknowledges before it writes to disk), "
                   "the same number of concurrent streams; counts checked after.",
                   "time-series aggregations: 1-minute average buckets of one series, of every series together "
                   "and (5-minute buckets) of each series (group_by=entity), one request at a time (VictoriaMetrics: query_range with "
                   "-search.disableCache, avg_over_time and sum/count_over_time, asked at each bucket's start + "
                   "59.999 s); every bucket of every series checked equal. "
                   "Disk: the growth of VictoriaMetrics' data directory after force_merge, and of mosaicdb's `ts` "
                   "table files once its merge task has nothing left (it compacts them once the garbage exceeds "
                   "the live data)."],
}
