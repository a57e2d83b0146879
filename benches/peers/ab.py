#!/usr/bin/env python3
"""A/B of mosaicdb binaries in one run: the core workloads only, binaries alternated per round.

    python3 benches/peers/ab.py OLD_BINARY NEW_BINARY [MORE ...]
    AB_ROUNDS=4 AB_WHAT=import python3 benches/peers/ab.py old new

Each round starts each binary in turn on a fresh data directory (default flags, sync durability),
creates the `docs` table with the range index on `age` and the hash index on `city`, imports the
same 100k documents (one NDJSON request), then runs wrk (2 threads, 32 connections) for point GETs
of random ids and for durable PUTs of new ids, and stops it. Alternating the binaries within each
round spreads a noisy machine's slow spells over both; compare the ranges it prints, not one
figure. Also prints, per PUT run, what the store's counters moved by (groups, writes, fsyncs and
their time). Never part of CI. Environment:
- AB_ROUNDS (3), AB_SECS (6, per wrk run);
- AB_WHAT: a comma list of import, get, put (all three); the import always runs (the GETs read
  what it wrote);
- AB_GETS (1): GET runs per round, of which the last counts (2 measures a warm document cache).
"""

import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import HERE, OUT, call, import_ndjson, log, stop, wait_port  # noqa: E402

ROUNDS = int(os.environ.get("AB_ROUNDS", "3"))
SECS = int(os.environ.get("AB_SECS", "6"))
WHAT = os.environ.get("AB_WHAT", "import,get,put").split(",")
GETS = max(1, int(os.environ.get("AB_GETS", "1")))
N = 100_000
ADDR = ("127.0.0.1", 18090)


def documents():
    """The 100k documents of run.py's shape, from a fixed seed, as NDJSON under target/peers/ab."""
    path = OUT / "ab" / "docs.ndjson"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        rnd = random.Random(7)
        with open(path, "w") as f:
            for i in range(N):
                doc = {"_id": f"d{i}", "name": f"user{i}", "age": rnd.randrange(100),
                       "city": rnd.choice(["Oslo", "Bergen", "Lyon", "Porto"]),
                       "tags": rnd.sample(["a", "b", "c", "d", "e"], 2), "pad": "x" * 100}
                f.write(json.dumps(doc) + "\n")
    return path


def wrk(script, env=None):
    out = subprocess.run(["wrk", "-t2", "-c32", f"-d{SECS}s", "-s", script, f"http://{ADDR[0]}:{ADDR[1]}"],
                         capture_output=True, text=True, cwd=HERE / "wrk", env=dict(os.environ, **(env or {}))).stdout
    if "Non-2xx" in out:
        raise SystemExit(f"wrk {script}: not every answer was a success:\n{out}")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def store_counters():
    text = urllib.request.urlopen(f"http://{ADDR[0]}:{ADDR[1]}/metrics").read().decode()
    return {line.split()[0]: float(line.split()[1]) for line in text.splitlines()
            if line.startswith(("mosaicdb_storage_write_groups", "mosaicdb_storage_writes", "mosaicdb_storage_fsync"))}


def main():
    binaries = [str(Path(b).resolve()) for b in sys.argv[1:]]
    if len(binaries) < 2:
        raise SystemExit(__doc__)
    ndjson = documents()
    results = {b: {} for b in binaries}
    for r in range(ROUNDS):
        for b in binaries:
            data = tempfile.mkdtemp(prefix="mosaic-ab-", dir=OUT)
            proc = subprocess.Popen([b, "--data-dir", data, "--addr", f"{ADDR[0]}:{ADDR[1]}", "--log", "warn"])
            try:
                wait_port(ADDR, proc, "mosaicdb")
                call(ADDR, "POST", "/v1/tables", {"name": "docs"})
                call(ADDR, "POST", "/v1/tables/docs/indexes", {"name": "by_age", "kind": "range", "fields": ["age"]})
                call(ADDR, "POST", "/v1/tables/docs/indexes", {"name": "by_city", "kind": "hash", "fields": ["city"]})
                call(ADDR, "POST", "/v1/tables", {"name": "puts"})
                out = results[b]
                out.setdefault("import docs/s", []).append(N / import_ndjson(ADDR, "docs", ndjson, N))
                env = {"PEERS_TABLE": "docs", "PEERS_DOCS": str(N), "PEERS_RUN": str(r)}
                if "get" in WHAT:
                    for _ in range(GETS):
                        got = wrk("get.lua", env)
                    out.setdefault("GET req/s", []).append(got)
                if "put" in WHAT:
                    before = store_counters()
                    out.setdefault("PUT req/s", []).append(wrk("put.lua", env))
                    moved = {k: round(v - before.get(k, 0), 3) for k, v in store_counters().items()}
                    log(f"{b}: the PUT run moved {moved}")
            finally:
                stop(proc)
                shutil.rmtree(data, ignore_errors=True)
            log(f"round {r + 1}, {b}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in results[b].items()))
    for b, out in results.items():
        print(b + ": " + "; ".join(f"{k} {min(v):,.0f}-{max(v):,.0f}" for k, v in out.items()))


if __name__ == "__main__":
    main()
