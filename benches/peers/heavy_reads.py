#!/usr/bin/env python3
"""The audit's repros of issue 51 for heavy reads, against a mosaicdb binary (not CI):

1. `rate(big[7d])` over one series of 500 000 points (one a second), as a range query of 10 000
   steps: the server's CPU seconds and the wall time.
2. Four `sum_over_time(big[7d])` range queries whose clients leave after 0.3 s: the server's CPU seconds in the 3 s after.
3. Six concurrent `SELECT median(*) … GROUP BY time(1s)` over 20 fields × 100 000 points: the
   server's peak RSS (VmHWM) and the answers' statuses.

    python3 benches/peers/heavy_reads.py target/release/mosaicdb [extra server flags…]
"""

import concurrent.futures
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

T0 = 1_700_000_000
TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def request(base, path, body=None, timeout=600):
    req = urllib.request.Request(base + path, data=body, method="POST" if body is not None else "GET")
    if body is not None:
        req.add_header("content-type", "text/plain")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def write(base, path, lines):
    for i in range(0, len(lines), 50_000):
        code, body = request(base, path, "\n".join(lines[i : i + 50_000]).encode())
        assert code in (200, 204), body


def main():
    binary, extra = sys.argv[1], sys.argv[2:]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as data:
        server = subprocess.Popen(
            [binary, "--addr", f"127.0.0.1:{port}", "--data-dir", data, "--durability", "buffered", *extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            for _ in range(200):
                try:
                    if request(base, "/health")[0] == 200:
                        break
                except OSError:
                    time.sleep(0.1)
            points = 500_000
            write(base, "/v1/timeseries/write?precision=s", [f"big value={i} {T0 + i}" for i in range(points)])
            fields = 20
            write(
                base,
                "/write?precision=s",
                [
                    "m,host=a " + ",".join(f"f{f}={(i * 7 + f) % 1000}" for f in range(fields)) + f" {T0 + i}"
                    for i in range(100_000)
                ],
            )
            time.sleep(5)  # the merge task packs the points
            pid = server.pid
            q = urllib.parse.quote("rate(big[7d])")
            path = f"/api/v1/query_range?query={q}&start={T0}&end={T0 + points}&step=50"
            cpu, began = cpu_seconds(pid), time.time()
            code, body = request(base, path)
            print(json.dumps({"repro": "rate(big[7d]), 10001 steps over 500k points", "status": code,
                              "cpu_s": round(cpu_seconds(pid) - cpu, 3), "wall_s": round(time.time() - began, 3),
                              "detail": body[:160].decode(errors="replace") if code != 200 else None}))
            # four clients that leave after 0.3 s
            slow = urllib.parse.quote("sum_over_time(big[7d])")
            slow_path = f"/api/v1/query_range?query={slow}&start={T0}&end={T0 + points}&step=50"
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                list(pool.map(lambda _: safe(lambda: request(base, slow_path, timeout=0.3)), range(4)))
            cpu = cpu_seconds(pid)
            time.sleep(3)
            print(json.dumps({"repro": "4 sum_over_time(big[7d]) range queries abandoned after 0.3 s", "cpu_s_in_3s_after": round(cpu_seconds(pid) - cpu, 3)}))
            rss0, hwm0 = status(pid, "VmRSS"), status(pid, "VmHWM")
            window = f"WHERE time >= {T0}s AND time < {T0 + 100_000}s"
            median = urllib.parse.quote(f"SELECT median(*) FROM m {window} GROUP BY time(1s)")
            began = time.time()
            with concurrent.futures.ThreadPoolExecutor(6) as pool:
                codes = list(pool.map(lambda _: request(base, f"/query?q={median}")[0], range(6)))
            print(json.dumps({"repro": "6 concurrent median(*) GROUP BY time(1s), 20 fields x 100k points",
                              "statuses": codes, "wall_s": round(time.time() - began, 3),
                              "rss_before_mb": rss0 >> 20, "peak_rss_before_mb": hwm0 >> 20, "peak_rss_mb": status(pid, "VmHWM") >> 20}))
        finally:
            server.terminate()
            server.wait()


def safe(f):
    try:
        return f()
    except OSError:
        return None


if __name__ == "__main__":
    main()
