#!/usr/bin/env python3
"""A/B of mosaicdb binaries on the search group's texts: server-side time per query, per kind.

    python3 benches/peers/search_ab.py OLD_BINARY NEW_BINARY
    SAB_KINDS=term,or SAB_ROUNDS=6 python3 benches/peers/search_ab.py old new

Both servers run at once, each on a data directory of its own holding the same 50k texts
(`PEERS_FT_DOCS`) with the `fulltext` index, imported once. Then, round after round, each query
kind's file (`target/peers/ft<N>.<kind>.q`, made as the search group makes them) is run on one wrk
connection against each binary in turn (the order alternating by round), and the search route's
server-side mean time per query is read from `/metrics` around the run. Prints, per kind, each
binary's median and every round's figure, and the ratio of the medians. Both servers stay up
through the run, so memory and caches weigh on both alike; compare the ratio, not the figures
with another run's. Never part of CI. Environment: SAB_KINDS (term,and,or,phrase,prefix),
SAB_ROUNDS (4), SAB_SECS (3, per wrk run).
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import models  # noqa: E402
from common import OUT, import_ndjson, stop, wrk  # noqa: E402

KINDS = os.environ.get("SAB_KINDS", "term,and,or,phrase,prefix").split(",")
ROUNDS = int(os.environ.get("SAB_ROUNDS", "4"))
SECS = int(os.environ.get("SAB_SECS", "3"))


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    binaries = {"A": sys.argv[1], "B": sys.argv[2]}
    addrs = {"A": ("127.0.0.1", 18093), "B": ("127.0.0.1", 18094)}
    OUT.mkdir(parents=True, exist_ok=True)
    search = models.Search(addrs["A"], SECS)
    search.prepare()
    procs, dirs = {}, []
    try:
        for k, binary in binaries.items():
            d = tempfile.mkdtemp(prefix="mosaic-search-ab-", dir=OUT)
            dirs.append(d)
            procs[k] = subprocess.Popen([binary, "--data-dir", d, "--addr", f"127.0.0.1:{addrs[k][1]}",
                                         "--log", "warn"])
            common.wait_port(addrs[k], procs[k], k)
            search.create(addrs[k], "ft")
            import_ndjson(addrs[k], "ft", search.ndjson, search.n)
        times = {(k, kind): [] for k in binaries for kind in KINDS}
        for r in range(ROUNDS):
            for kind in KINDS:
                for k in ("A", "B") if r % 2 == 0 else ("B", "A"):
                    env = {"PEERS_TABLE": "ft", "PEERS_QUERIES": str(search.kind_files[kind]), "PEERS_KIND": kind}
                    before = models.search_time(addrs[k])
                    wrk(addrs[k], "/", "search.lua", 1, 1, SECS, env)
                    took, count = (x - y for x, y in zip(models.search_time(addrs[k]), before))
                    times[(k, kind)].append(took / count * 1e6)
        for kind in KINDS:
            a, b = (statistics.median(times[(k, kind)]) for k in ("A", "B"))
            print(f"{kind:7} A {a:8.1f} µs  B {b:8.1f} µs  B/A {b / a:5.2f}  "
                  f"(A {[round(x) for x in times[('A', kind)]]}, B {[round(x) for x in times[('B', kind)]]})",
                  flush=True)
    finally:
        for p in procs.values():
            stop(p)
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
