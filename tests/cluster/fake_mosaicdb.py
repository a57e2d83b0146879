#!/usr/bin/env python3
"""A stand-in for a cluster-mode mosaicdb, to check mosaic.py itself (not mosaicdb) while the real
binary has no cluster mode: `MOSAIC_BINARY=tests/cluster/fake_mosaicdb.py tests/cluster/mosaic.py`.

It speaks just enough of the interface mosaic.py drives: `serve --backend postgres --postgres-url URL
--addr IP:PORT --data-dir DIR --advertise-url URL`; GET /health, GET /ready ({"role", "leader",
"epoch"}), POST /v1/tables, PUT and GET /v1/tables/T/documents/ID, POST /v1/admin/check; a write to a
follower answers 307 to the leader; every answer has X-Mosaic-Seq. The leader is whoever holds a
PostgreSQL advisory lock; taking it moves an epoch on, and each write commits only if the epoch is
still its own (one statement), so a deposed leader cannot write. Python stdlib only: a minimal
PostgreSQL wire protocol client (trust authentication, simple queries).
"""
import http.server
import json
import os
import socket
import struct
import sys
import threading
import time
import urllib.parse

HELP = """Usage: fake_mosaicdb serve [OPTIONS]
      --addr <ADDR>  --data-dir <DATA_DIR>  --backend <BACKEND>  --postgres-url <POSTGRES_URL>
      --advertise-url <ADVERTISE_URL>  --allow-unauthenticated"""
LOCK = 4242
LIE = int(os.environ.get("FAKE_MOSAIC_LIE", "0"))  # to see mosaic.py catch a lost write


class PGError(Exception):
    pass


class PG:
    """One session on the first host of URL that takes writes (target_session_attrs=read-write)."""

    def __init__(self, url, timeout=5.0):
        u = urllib.parse.urlsplit(url)
        q = urllib.parse.parse_qs(u.query)
        ct = float(q.get("connect_timeout", ["2"])[0])
        user, db = u.username or "postgres", (u.path or "/postgres")[1:]
        last = None
        for hp in u.netloc.split("@")[-1].split(","):
            host, _, port = hp.partition(":")
            try:
                self.sock = socket.create_connection((host, int(port or 5432)), timeout=ct)
                self.sock.settimeout(timeout)
                body = struct.pack("!i", 196608) + f"user\0{user}\0database\0{db}\0\0".encode()
                self.sock.sendall(struct.pack("!i", len(body) + 4) + body)
                self._until_ready()
                if self.query("SHOW transaction_read_only")[0][0] == "off":
                    return
                self.sock.close()
            except (OSError, PGError) as e:
                last = e
        raise PGError(f"no read-write host: {last}")

    def _msg(self):
        head = self._read(5)
        kind, n = head[:1], struct.unpack("!i", head[1:])[0]
        return kind, self._read(n - 4)

    def _read(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise PGError("connection closed")
            buf += chunk
        return buf

    def _until_ready(self):
        rows, error = [], None
        while True:
            kind, body = self._msg()
            if kind == b"R" and struct.unpack("!i", body[:4])[0] != 0:
                raise PGError("authentication other than trust")
            if kind == b"E":
                fields = dict((f[:1], f[1:].decode()) for f in body.split(b"\0") if f)
                error = PGError(f"{fields.get(b'C')}: {fields.get(b'M')}")
            elif kind == b"D":
                ncol, pos, row = struct.unpack("!h", body[:2])[0], 2, []
                for _ in range(ncol):
                    n = struct.unpack("!i", body[pos:pos + 4])[0]
                    pos += 4
                    row.append(None if n < 0 else body[pos:pos + n].decode())
                    pos += max(n, 0)
                rows.append(row)
            elif kind == b"Z":
                if error:
                    raise error
                return rows

    def query(self, sql):
        data = sql.encode() + b"\0"
        self.sock.sendall(b"Q" + struct.pack("!i", len(data) + 4) + data)
        return self._until_ready()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def lit(s):
    return "'" + str(s).replace("'", "''") + "'"


class Node:
    def __init__(self, url, advertise):
        self.url, self.advertise = url, advertise
        self.role, self.leader, self.epoch, self.seq = "follower", "", 0, 0
        self.session = None  # the lock holder's (or candidate's) session
        self.mu = threading.Lock()
        self.ok = False
        self.writes = 0

    def loop(self):
        while True:
            with self.mu:
                try:
                    if self.session is None:
                        self.session = PG(self.url)
                        self.session.query(
                            "CREATE TABLE IF NOT EXISTS fake_lead (one int PRIMARY KEY, epoch bigint, leader text,"
                            " seq bigint); INSERT INTO fake_lead VALUES (1, 0, '', 0) ON CONFLICT DO NOTHING;"
                            "CREATE TABLE IF NOT EXISTS fake_docs (t text, id text, body text, seq bigint,"
                            " PRIMARY KEY (t, id))")
                    if self.role != "leader" and self.session.query(
                            f"SELECT pg_try_advisory_lock({LOCK})")[0][0] == "t":
                        row = self.session.query(
                            f"UPDATE fake_lead SET epoch = epoch + 1, leader = {lit(self.advertise)}"
                            " RETURNING epoch, seq")[0]
                        self.role, self.leader, self.epoch, self.seq = "leader", self.advertise, int(row[0]), int(row[1])
                    else:
                        epoch, leader, seq = self.session.query("SELECT epoch, leader, seq FROM fake_lead")[0]
                        if self.role == "leader" and int(epoch) != self.epoch:
                            self.step_down()
                        else:
                            self.epoch, self.leader, self.seq = int(epoch), leader, max(self.seq, int(seq))
                    self.ok = True
                except (OSError, PGError) as e:
                    print(f"session lost: {e}", file=sys.stderr, flush=True)
                    self.step_down()
            time.sleep(0.3)

    def step_down(self):
        if self.session:
            self.session.close()
        self.session, self.role, self.ok = None, "follower", False

    def write(self, table, doc_id, body):
        """(status, seq): 200 committed, 307 not the leader, 503 not known to have committed."""
        with self.mu:
            if self.role != "leader" or self.session is None:
                return (307 if self.leader and self.leader != self.advertise else 503), self.seq
            self.writes += 1
            if LIE and self.writes % LIE == 0:  # FAKE_MOSAIC_LIE=N: every Nth write acknowledged, not made
                return 200, self.seq
            try:
                rows = self.session.query(
                    f"WITH l AS (UPDATE fake_lead SET seq = seq + 1 WHERE epoch = {self.epoch} RETURNING seq)"
                    f" INSERT INTO fake_docs SELECT {lit(table)}, {lit(doc_id)}, {lit(json.dumps(body))}, seq FROM l"
                    " ON CONFLICT (t, id) DO UPDATE SET body = excluded.body, seq = excluded.seq RETURNING seq")
            except (OSError, PGError) as e:
                print(f"write failed: {e}", file=sys.stderr, flush=True)
                self.step_down()
                return 503, self.seq
            if not rows:  # deposed: another server took the lead
                self.step_down()
                return 503, self.seq
            self.seq = int(rows[0][0])
            return 200, self.seq

    def read(self, sql):
        s = PG(self.url)
        try:
            return s.query(sql)
        finally:
            s.close()


def handler(node):
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            pass

        def answer(self, status, body=None, headers=None):
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header("x-mosaic-seq", str(node.seq))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def body(self):
            n = int(self.headers.get("content-length") or 0)
            return json.loads(self.rfile.read(n) or b"null")

        def do_GET(self):
            parts = self.path.split("?")[0].strip("/").split("/")
            if self.path == "/health":
                return self.answer(200, {"status": "ok"})
            if self.path == "/ready":
                st = {"status": "ready", "role": node.role, "leader": node.leader, "epoch": node.epoch}
                return self.answer(200 if node.ok else 503, st)
            if len(parts) == 5 and parts[:2] == ["v1", "tables"] and parts[3] == "documents":
                try:
                    rows = node.read(f"SELECT body FROM fake_docs WHERE t = {lit(parts[2])} AND id = {lit(parts[4])}")
                except (OSError, PGError) as e:
                    return self.answer(503, {"code": "unavailable", "detail": str(e)})
                if not rows:
                    return self.answer(404, {"code": "not_found"})
                return self.answer(200, dict(json.loads(rows[0][0]), _id=parts[4]))
            self.answer(404, {"code": "not_found"})

        def do_PUT(self):
            parts = self.path.strip("/").split("/")
            body = self.body()
            if len(parts) != 5 or parts[3] != "documents":
                return self.answer(404, {"code": "not_found"})
            status, _ = node.write(parts[2], parts[4], body)
            if status == 307:
                return self.answer(307, None, {"location": node.leader + self.path})
            self.answer(status, {"_id": parts[4]} if status == 200 else {"code": "unavailable"})

        def do_POST(self):
            self.body()
            if self.path == "/v1/admin/check":
                n = node.read("SELECT count(*) FROM fake_docs")[0][0]
                return self.answer(200, {"ok": True, "checked": int(n), "problem_count": 0, "problems": []})
            if self.path == "/v1/tables":
                if node.role != "leader":
                    return self.answer(307, None, {"location": node.leader + self.path})
                return self.answer(201, {"ok": True})
            self.answer(404, {"code": "not_found"})
    return H


def main():
    args = sys.argv[1:]
    if args[:1] == ["serve"]:
        args = args[1:]
    if "--help" in args:
        print(HELP)
        return 0
    opts = {}
    for i, a in enumerate(args):
        if a.startswith("--") and i + 1 < len(args) and not args[i + 1].startswith("--"):
            opts[a[2:]] = args[i + 1]
    node = Node(opts["postgres-url"], opts["advertise-url"])
    threading.Thread(target=node.loop, daemon=True).start()
    host, _, port = opts["addr"].rpartition(":")
    server = http.server.ThreadingHTTPServer((host, int(port)), handler(node))
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
