"""The kNN data set of benches/peers, run by models.py with target/peers/venv's python (numpy).

    python vectors_data.py N DIM QUERIES RECALL_QUERIES OUT_PREFIX

Writes, from fixed seeds:
- OUT_PREFIX.ndjson: N documents {"_id": "v{i}", "emb": [...]} (mosaicdb's import);
- OUT_PREFIX.tsv: the same as `v{i} TAB (x1, ..., xDIM)` (PostgreSQL's cube text form);
- OUT_PREFIX.queries: QUERIES query vectors, one JSON array per line (wrk's script and pgbench's
  helper table read them);
- OUT_PREFIX.exact.json: the ids of the 10 nearest documents (Euclidean distance, exact, computed
  here in float64) of each of the first RECALL_QUERIES queries.

The vectors are a mixture of 64 gaussian clusters (centres N(0, 1), spread 0.35 per coordinate),
rounded to 4 decimals (as written); the queries are drawn from the same mixture, so they are not in the data.
"""

import json
import sys

import numpy as np


def mixture(rng, centres, n, spread):
    which = rng.integers(0, len(centres), n)
    return np.round(centres[which] + rng.normal(0.0, spread, (n, centres.shape[1])), 4)


def main():
    n, dim, nq, nrecall = (int(a) for a in sys.argv[1:5])
    prefix = sys.argv[5]
    rng = np.random.default_rng(20240614)
    centres = rng.normal(0.0, 1.0, (64, dim))
    data = mixture(rng, centres, n, 0.35)
    queries = mixture(rng, centres, nq, 0.35)
    with open(prefix + ".ndjson", "w") as nd, open(prefix + ".tsv", "w") as ts:
        for i, v in enumerate(data):
            text = [f"{x:.4f}" for x in v]
            nd.write(f'{{"_id":"v{i}","emb":[{",".join(text)}]}}\n')
            ts.write(f"v{i}\t({', '.join(text)})\n")
    with open(prefix + ".queries", "w") as f:
        for q in queries:
            f.write("[" + ",".join(f"{x:.4f}" for x in q) + "]\n")
    # np.round gave the doubles nearest the 4-decimal text both systems read: the same numbers.
    queries = queries[:nrecall]
    sq = (data * data).sum(axis=1)
    exact = []
    for lo in range(0, len(queries), 50):
        q = queries[lo:lo + 50]
        d = sq[None, :] - 2.0 * q @ data.T + (q * q).sum(axis=1)[:, None]
        top = np.argpartition(d, 10, axis=1)[:, :10]
        for row, ids in zip(d, top):
            exact.append([f"v{i}" for i in sorted(ids, key=lambda i: row[i])])
    with open(prefix + ".exact.json", "w") as f:
        json.dump(exact, f)


if __name__ == "__main__":
    main()
