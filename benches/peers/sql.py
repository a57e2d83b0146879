"""The sql group of run.py: `POST /v1/sql` beside PostgreSQL 15 on the same rows, and a cross-model
statement beside the same question assembled from the REST routes.

- typed tables: PEERS_SQL_ROWS orders (buyer, amount, price, city) and a tenth as many customers
  (name, city), as typed mosaicdb tables and plain PostgreSQL tables; a GROUP BY of the orders
  and a join of orders and customers grouped by the customers' city (1 client: statements per
  second; PostgreSQL by pgbench, prepared). Target: at least PostgreSQL's rate.
- JSON paths: the same orders as schemaless documents (a `jsonb` column in PostgreSQL), grouped by
  `doc->>'city'` with `sum((doc->>'amount')::int)`. Target: at least half PostgreSQL's rate.
- cross-model: PEERS_SQL_PAPERS papers (a 3-word title under a full-text index, a 16-d embedding
  under an HNSW index, a year), a twentieth as many people who `wrote` them and `knows` each
  other; the question of docs/sql.md (kNN ∩ full-text ∩ authors within two hops, newest since
  2020, with the authors' names) as one statement, and as a client would assemble it from the
  routes (vector-search, search, traverse, then the papers, their `wrote` edges and the people
  by `$in` queries, joined in the client). Both answers are checked to agree. Target: the
  statement at least 5× the assembly's rate.

Every answer is compared with PostgreSQL's (or the assembly's) once per run before it is timed.
"""

import http.client
import json
import random
import time

from common import OUT, Workload, call, import_ndjson, int_setting, log

CITIES = ["Oslo", "Bergen", "Rome", "Paris", "Lima", "Quito", "Kyiv", "Riga", "Baku", "Doha"]
WORDS = ["graph", "database", "vector", "query", "engine", "storage", "index", "stream", "search", "model"]
DIM = 16

GROUP_BY = "SELECT city, count(*), sum(amount), avg(price) FROM {o} GROUP BY city ORDER BY city"
JOIN = ("SELECT c.city, count(*), sum(o.amount) FROM {o} o JOIN {c} c ON c._id = o.buyer "
        "GROUP BY c.city ORDER BY c.city")
JSON_GROUP_BY = ("SELECT doc->>'city' AS city, count(*), sum((doc->>'amount')::int) FROM {d} "
                 "GROUP BY 1 ORDER BY 1")
QUESTION = """
WITH near AS (SELECT _id, distance FROM knn('papers', 'embedding', $1, 100)),
     matching AS (SELECT _id FROM search('papers', 'graph database', 1000)),
     circle AS (SELECT _id FROM traverse('people/m0', 'any', 1, 2, '{"edges": ["knows"]}'))
SELECT p._id, p.doc->>'title' AS title, a.doc->>'name' AS author, n.distance
FROM near n
JOIN matching m ON m._id = n._id
JOIN papers p ON p._id = n._id
JOIN wrote w ON w._to = 'papers/' || p._id
JOIN people a ON 'people/' || a._id = w._from
JOIN circle c ON c._id = a._id
WHERE (p.doc->>'year')::int >= 2020
ORDER BY n.distance, p._id
LIMIT 10"""


def sql(conn, addr, statement, params=None):
    return call(addr, "POST", "/v1/sql", {"sql": statement, "params": params or []}, conn=conn)["rows"]


def rate(fn, secs):
    """Calls of `fn` per second over `secs` (at least 3 calls)."""
    done, t0 = 0, time.perf_counter()
    while done < 3 or time.perf_counter() - t0 < secs:
        fn()
        done += 1
    return done / (time.perf_counter() - t0)


def same(ours, theirs, what):
    """mosaicdb's rows and psql's text rows agree (numbers to 6 significant digits)."""
    def norm(cell):
        try:
            return f"{float(cell):.6g}"
        except (TypeError, ValueError):
            return str(cell)
    a = [[norm(c) for c in row] for row in ours]
    b = [[norm(c) for c in line.split("|")] for line in theirs]
    if a != b:
        raise SystemExit(f"{what}: mosaicdb and PostgreSQL differ:\n{a[:5]}\n{b[:5]}")


class Sql:
    def __init__(self, addr, secs):
        self.addr, self.secs = addr, secs
        self.rows = int_setting("PEERS_SQL_ROWS")
        self.papers = int_setting("PEERS_SQL_PAPERS")
        size = f"{self.rows // 1000}k orders"
        self.group_by = f"SQL GROUP BY over a typed table, {size}, 1 client"
        self.join = f"SQL join of typed tables + GROUP BY, {size}, 1 client"
        self.json = f"SQL GROUP BY over JSON paths, {size}, 1 client"
        self.cross = f"SQL cross-model statement vs its REST assembly, {self.papers // 1000}k papers, 1 client"

    def workloads(self):
        return [Workload(self.group_by, "statements/s", [("postgres", 1.0)], "{:,.1f}"),
                Workload(self.join, "statements/s", [("postgres", 1.0)], "{:,.1f}"),
                Workload(self.json, "statements/s", [("postgres", 0.5)], "{:,.1f}"),
                Workload(self.cross, "answers/s", [("REST assembly", 5.0)], "{:,.1f}")]

    def prepare(self):
        rng = random.Random(53)
        n, m = self.rows, max(1, self.rows // 10)
        self.files = {k: OUT / f"sql{n}.{k}" for k in ("orders.nd", "orders.tsv", "customers.nd", "customers.tsv",
                                                      "docs.tsv")}
        if not self.files["docs.tsv"].exists():
            with open(self.files["customers.nd"], "w") as cn, open(self.files["customers.tsv"], "w") as ct:
                for i in range(m):
                    city = rng.choice(CITIES)
                    cn.write(json.dumps({"_id": f"c{i}", "name": f"name{i}", "city": city}) + "\n")
                    ct.write(f"c{i}\tname{i}\t{city}\n")
            with (open(self.files["orders.nd"], "w") as on, open(self.files["orders.tsv"], "w") as ot,
                  open(self.files["docs.tsv"], "w") as dt):
                for i in range(n):
                    o = {"buyer": f"c{rng.randrange(m)}", "amount": rng.randrange(1, 100),
                         "price": rng.randrange(100, 100000) / 100, "city": rng.choice(CITIES)}
                    on.write(json.dumps({"_id": f"o{i}", **o}) + "\n")
                    ot.write(f"o{i}\t{o['buyer']}\t{o['amount']}\t{o['price']}\t{o['city']}\n")
                    dt.write(f"o{i}\t{json.dumps(o)}\n")

    def setup(self, pg):
        self.pg = pg
        a, n, m = self.addr, self.rows, max(1, self.rows // 10)
        cols = lambda spec: [{"name": k, "type": t} for k, t in spec]  # noqa: E731
        call(a, "POST", "/v1/tables", {"name": "sql_orders", "columns": cols(
            [("buyer", "string"), ("amount", "int"), ("price", "float"), ("city", "string")])})
        call(a, "POST", "/v1/tables", {"name": "sql_customers", "columns": cols([("name", "string"),
                                                                                 ("city", "string")])})
        call(a, "POST", "/v1/tables", {"name": "sql_docs"})
        import_ndjson(a, "sql_orders", self.files["orders.nd"], n)
        import_ndjson(a, "sql_customers", self.files["customers.nd"], m)
        import_ndjson(a, "sql_docs", self.files["orders.nd"], n)
        pg.sql("create table sql_orders (_id text primary key, buyer text, amount bigint, price double precision, "
               "city text); create table sql_customers (_id text primary key, name text, city text); "
               "create table sql_docs (_id text primary key, doc jsonb not null)")
        pg.copy_in("sql_orders", [self.files["orders.tsv"]])
        pg.copy_in("sql_customers", [self.files["customers.tsv"]])
        pg.copy_in("sql_docs", [self.files["docs.tsv"]])
        pg.sql("vacuum analyze sql_orders, sql_customers, sql_docs")
        self.cross_model_data()

    def cross_model_data(self):
        a, rng, n = self.addr, random.Random(54), self.papers
        people = max(10, n // 20)
        for t, kind in (("papers", None), ("people", None), ("wrote", "edge"), ("knows", "edge")):
            call(a, "POST", "/v1/tables", {"name": t, **({"kind": kind} if kind else {})})
        papers = [{"_id": f"p{i}", "title": " ".join(rng.choice(WORDS) for _ in range(3)),
                   "year": rng.randrange(2010, 2026), "embedding": [rng.uniform(-1, 1) for _ in range(DIM)]}
                  for i in range(n)]
        batches = {"papers": papers,
                   "people": [{"_id": f"m{i}", "name": f"Name{i}"} for i in range(people)],
                   "wrote": [{"_from": f"people/m{rng.randrange(people)}", "_to": f"papers/p{i}"} for i in range(n)],
                   "knows": [{"_from": f"people/m{rng.randrange(people)}", "_to": f"people/m{rng.randrange(people)}"}
                             for _ in range(people * 3)]}
        for t, docs in batches.items():
            path = OUT / f"sql-{t}.ndjson"
            path.write_text("".join(json.dumps(d) + "\n" for d in docs))
            import_ndjson(a, t, path, len(docs))
        call(a, "POST", "/v1/tables/papers/indexes", {"name": "ft", "kind": "fulltext", "fields": ["title"]})
        call(a, "POST", "/v1/tables/papers/indexes", {"name": "emb", "kind": "vector", "fields": ["embedding"],
                                                       "options": {"dimension": DIM, "metric": "l2"}})
        for name in ("ft", "emb"):
            while call(a, "GET", f"/v1/tables/papers/indexes/{name}")["state"] != "ready":
                time.sleep(0.2)
        self.vector = [round(rng.uniform(-1, 1), 3) for _ in range(DIM)]

    def assemble(self, conn):
        """The question from the routes, joined here: [id, title, author, distance] rows."""
        a = self.addr
        near = call(a, "POST", "/v1/tables/papers/vector-search",
                    {"field": "embedding", "vector": self.vector, "k": 100, "fields": []}, conn=conn)["hits"]
        matching = call(a, "POST", "/v1/tables/papers/search", {"query": "graph database", "limit": 1000,
                                                                 "fields": ["_id"]}, conn=conn)["hits"]
        circle = call(a, "POST", "/v1/graph/traverse", {"start": "people/m0", "direction": "any", "min_depth": 1,
                                                        "max_depth": 2, "edges": ["knows"]}, conn=conn)["vertices"]
        hit = {h["_id"] for h in matching}
        ids = [h["_id"] for h in near if h["_id"] in hit]
        distance = {h["_id"]: h["distance"] for h in near}
        papers = call(a, "POST", "/v1/tables/papers/query", {"filter": {"_id": {"$in": ids}, "year": {"$gte": 2020}},
                                                             "fields": ["title"], "limit": 1000}, conn=conn)["documents"]
        title = {p["_id"]: p["title"] for p in papers}
        wrote = call(a, "POST", "/v1/tables/wrote/query",
                     {"filter": {"_to": {"$in": [f"papers/{i}" for i in title]}}, "limit": 1000}, conn=conn)["documents"]
        friends = {v["_id"] for v in circle}
        authors = [(w["_to"].split("/", 1)[1], w["_from"]) for w in wrote if w["_from"] in friends]
        names = call(a, "POST", "/v1/tables/people/query",
                     {"filter": {"_id": {"$in": [f.split("/", 1)[1] for _, f in authors]}}, "limit": 1000},
                     conn=conn)["documents"]
        name = {p["_id"]: p["name"] for p in names}
        rows = [[p, title[p], name[f.split("/", 1)[1]], distance[p]] for p, f in authors]
        rows.sort(key=lambda r: (r[3], r[0]))
        return rows[:10]

    def run(self, k, add):
        a, pg, conn = self.addr, self.pg, http.client.HTTPConnection(*self.addr, timeout=600)
        tables = {"o": "sql_orders", "c": "sql_customers", "d": "sql_docs"}
        for name, template in ((self.group_by, GROUP_BY), (self.join, JOIN), (self.json, JSON_GROUP_BY)):
            statement = template.format(**tables)
            same(sql(conn, a, statement), pg.sql(statement).splitlines(), name)
            add(name, "mosaicdb", rate(lambda: sql(conn, a, statement), self.secs))
            add(name, "postgres", pg.bench(statement + ";\n", 1, self.secs))
        params = [json.dumps(self.vector)]
        ours, theirs = sql(conn, a, QUESTION, params), self.assemble(conn)
        if [r[:3] for r in ours] != [r[:3] for r in theirs]:
            raise SystemExit(f"the cross-model statement and its REST assembly differ:\n{ours}\n{theirs}")
        if k == 1:
            log(f"cross-model: the statement and the assembly agree on {len(ours)} rows")
        add(self.cross, "mosaicdb", rate(lambda: sql(conn, a, QUESTION, params), self.secs))
        add(self.cross, "REST assembly", rate(lambda: self.assemble(conn), self.secs))
        conn.close()


NOTES = ["sql: 1 client each, mosaicdb through `POST /v1/sql` (JSON answer, keep-alive), PostgreSQL by pgbench "
         "(prepared); the cross-model row compares one statement with the six route calls (and the client-side "
         "joins) that answer the same question, on the same server."]
