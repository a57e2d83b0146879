"""psycopg 3 (PyPI, with its own libpq) against the PostgreSQL wire listener (`--pg-addr`):
server-side parameters, prepared statements, text and binary results, JSON documents as
dicts, a failing statement as its SQLSTATE's exception class, a transaction, and a cancel.

    psycopg_wire.py <http base> <pg host> <pg port> <api key>
"""

import json
import sys
import threading
import time
import urllib.request

import psycopg
from psycopg import errors


def http(base, key, method, path, body):
    req = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json", "authorization": f"Bearer {key}"})
    with urllib.request.urlopen(req) as r:
        return r.status


def main():
    base, host, port, key = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    http(base, key, "POST", "/v1/tables", {"name": "wire_users"})
    http(base, key, "POST", "/v1/tables/wire_users/documents", [
        {"_id": "u1", "name": "Ada", "city": "Oslo", "age": 36},
        {"_id": "u2", "name": "Bo", "city": "Bergen", "age": 25},
        {"_id": "u3", "name": "Cy", "city": "Oslo", "age": 52},
    ])
    conninfo = dict(host=host, port=port, dbname="default", user="ci", password=key, connect_timeout=10)
    with psycopg.connect(**conninfo) as conn:
        # server-side parameters (psycopg 3 binds them with Parse/Bind), in a transaction
        rows = conn.execute("SELECT _id, doc->>'city' FROM wire_users WHERE (doc->>'age')::int >= %s "
                            "AND doc->>'city' = %s ORDER BY _id", [30, "Oslo"]).fetchall()
        assert rows == [("u1", "Oslo"), ("u3", "Oslo")], rows
        # prepared on the server, run twice
        for age, want in ((30, 2), (20, 3)):
            n = conn.execute("SELECT count(*) FROM wire_users WHERE (doc->>'age')::int >= %s", [age],
                             prepare=True).fetchone()[0]
            assert n == want, (age, n)
        # binary results, and the document as a dict
        with conn.cursor(binary=True) as cur:
            cur.execute("SELECT _id, doc, (doc->>'age')::bigint, 1.5::double AS f FROM wire_users WHERE _id = %s",
                        ["u2"])
            row = cur.fetchone()
            assert row == ("u2", {"_id": "u2", "name": "Bo", "city": "Bergen", "age": 25}, 25, 1.5), row
        conn.commit()
        # a failing statement is its SQLSTATE's class, and the connection goes on after a rollback
        try:
            conn.execute("SELECT * FROM missing_table")
            raise AssertionError("a missing table did not fail")
        except errors.UndefinedTable:
            conn.rollback()
        try:
            conn.execute("DELETE FROM wire_users")
            raise AssertionError("a write did not fail")
        except errors.ReadOnlySqlTransaction:
            conn.rollback()
        # a cancel stops a statement under way
        conn.autocommit = True
        threading.Timer(0.5, conn.cancel).start()
        started = time.monotonic()
        try:
            conn.execute("SELECT count(*) FROM generate_series(1, 100000) a, generate_series(1, 100000) b "
                         "WHERE a.value + b.value = 3")
            raise AssertionError("the cancelled statement finished")
        except errors.QueryCanceled:
            assert time.monotonic() - started < 20
        assert conn.execute("SELECT 2").fetchone() == (2,)
    # a wrong key is refused
    try:
        psycopg.connect(**{**conninfo, "password": "not-a-key"})
        raise AssertionError("a wrong key was taken")
    except psycopg.OperationalError as e:
        assert "password authentication failed" in str(e), e
    print("psycopg: parameters, prepared statements, binary results, errors, a transaction and a cancel pass")


if __name__ == "__main__":
    main()
