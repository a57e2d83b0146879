"""hnswlib (PyPI) on benches/peers' kNN data set, in-process, for the vectors group of models.py
(run with target/peers/venv's python, numpy and hnswlib installed):

    python hnsw_peer.py PREFIX M EF_CONSTRUCTION THREADS EFS

PREFIX is vectors_data.py's output prefix (the .ndjson documents, .queries, .exact.json); EFS a
comma-separated list of search `ef`s. Builds an L2 index of M links and EF_CONSTRUCTION on THREADS
threads, saves it, loads it back (the open), then for each ef measures recall@10 against the exact
answers and queries per second on one thread (every query, one at a time). Prints one JSON object:
build vectors/s, index file bytes, load seconds, peak RSS bytes, and per ef its recall and QPS.
"""

import json
import os
import resource
import sys
import tempfile
import time

import hnswlib
import numpy as np


def main():
    prefix, m, efc, threads, efs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    ids, vectors = [], []
    with open(f"{prefix}.ndjson") as f:
        for line in f:
            doc = json.loads(line)
            ids.append(doc["_id"])
            vectors.append(doc["emb"])
    data = np.asarray(vectors, dtype=np.float32)
    queries = np.asarray([json.loads(q) for q in open(f"{prefix}.queries")], dtype=np.float32)
    exact = json.load(open(f"{prefix}.exact.json"))

    index = hnswlib.Index(space="l2", dim=data.shape[1])
    index.init_index(max_elements=len(data), M=m, ef_construction=efc, random_seed=1)
    index.set_num_threads(threads)
    t0 = time.perf_counter()
    index.add_items(data, np.arange(len(data)))
    build = time.perf_counter() - t0

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "index.bin")
        index.save_index(path)
        size = os.path.getsize(path)
        del index
        t0 = time.perf_counter()
        index = hnswlib.Index(space="l2", dim=data.shape[1])
        index.load_index(path, max_elements=len(data))
        load = time.perf_counter() - t0
    index.set_num_threads(1)

    by_ef = {}
    for ef in (int(e) for e in efs.split(",")):
        index.set_ef(ef)
        found = 0
        for q, want in zip(queries, exact):
            labels, _ = index.knn_query(q, k=10)
            found += len({ids[i] for i in labels[0]} & set(want))
        t0 = time.perf_counter()
        for q in queries:
            index.knn_query(q, k=10)
        qps = len(queries) / (time.perf_counter() - t0)
        by_ef[ef] = {"recall": found / (10 * len(exact)), "qps": qps}
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"build": len(data) / build, "bytes": size, "load_s": load, "rss": rss, "ef": by_ef}))


if __name__ == "__main__":
    main()
