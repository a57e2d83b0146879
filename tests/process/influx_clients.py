"""The official InfluxDB client libraries against a running mosaicdb: `influxdb-client` (for
InfluxDB 2.x) and `influxdb` (for 1.x), from PyPI. Each pings, writes and meets errors the way an
application would, and what it wrote is read back through mosaicdb's own API; the 1.x client also
reads it back through InfluxQL (`query`, `get_list_measurements`, `get_list_database`).

Run by tests/process/influx.rs, which installs the libraries into a venv and starts the server:
    python influx_clients.py   # with MOSAIC_URL, MOSAIC_ADMIN_KEY, MOSAIC_WRITE_KEY, MOSAIC_READ_KEY
The server has a database `shop` besides `default`. Exits non-zero on the first failed check.
"""

import json
import os
import urllib.parse
import urllib.request
import warnings

import influxdb
import influxdb_client
from influxdb.exceptions import InfluxDBClientError
from influxdb_client.client.write_api import SYNCHRONOUS
from influxdb_client.rest import ApiException

URL = os.environ["MOSAIC_URL"]
ADMIN, WRITE, READ = (os.environ[f"MOSAIC_{role}_KEY"] for role in ("ADMIN", "WRITE", "READ"))
VERSION = "1.8.10"


def expect(condition, what):
    if not condition:
        raise AssertionError(what)


def points(path):
    """The points of a metric, as (entity, ts ms, value), read with mosaicdb's own API."""
    request = urllib.request.Request(URL + path, headers={"Authorization": f"Bearer {ADMIN}"})
    with urllib.request.urlopen(request) as response:
        page = json.load(response)
    return [(p["entity"], p["ts"], p["value"]) for p in page["points"]]


def fails(call, status):
    """The exception `call` raises, which must carry `status`."""
    try:
        call()
    except (ApiException, InfluxDBClientError) as e:
        got = e.status if isinstance(e, ApiException) else e.code
        expect(got == status, f"expected {status}, got {got}: {e}")
        return e
    raise AssertionError(f"expected an error {status}, the call succeeded")


def influxdb_2x_client():
    client = influxdb_client.InfluxDBClient(url=URL, token=WRITE, org="any")
    expect(client.ping() is True, "ping")
    expect(client.version() == VERSION, f"version {client.version()!r}")
    expect(client.build() == "OSS", f"build {client.build()!r}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        health = client.health()
    expect(health.status == "pass", f"health {health}")
    expect(health.name == "influxdb" and health.version == VERSION, f"health {health}")
    expect(health.message == "ready for queries and writes", f"health {health}")

    write = client.write_api(write_options=SYNCHRONOUS)
    write.write(bucket="default", record="cpu,host=py2 value=0.5 1763719200", write_precision="s")
    point = influxdb_client.Point("cpu").tag("host", "py2").field("value", 0.75).time(1763719260, write_precision="s")
    write.write(bucket="shop", record=point, write_precision="s")
    expect(points("/v1/timeseries/cpu/points?entity=host%3Dpy2") == [("host=py2", 1763719200000, 0.5)], "default")
    expect(points("/v1/db/shop/timeseries/cpu/points") == [("host=py2", 1763719260000, 0.75)], "shop")

    # errors surface with the message the server wrote
    e = fails(lambda: write.write(bucket="default", record="cpu,host=py2 value="), 400)
    expect("nothing written: line 1" in e.message, f"message {e.message!r}")
    body = json.loads(e.body)
    expect(body["code"] == "invalid" and body["mosaicdb_code"] == "invalid_line_protocol", f"body {body}")
    expect(body["lines"][0]["line"] == 1, f"body {body}")
    e = fails(lambda: write.write(bucket="nowhere", record="cpu value=1"), 404)
    expect(e.message == 'database "nowhere" does not exist', f"message {e.message!r}")
    reader = influxdb_client.InfluxDBClient(url=URL, token=READ, org="any")
    e = fails(lambda: reader.write_api(write_options=SYNCHRONOUS).write(bucket="default", record="cpu value=1"), 403)
    expect("the write role" in e.message and READ not in e.message, f"message {e.message!r}")
    stranger = influxdb_client.InfluxDBClient(url=URL, token="not-a-key-of-this-server", org="any")
    e = fails(lambda: stranger.write_api(write_options=SYNCHRONOUS).write(bucket="default", record="cpu value=1"), 401)
    expect(e.message and json.loads(e.body)["code"] == "unauthorized", f"message {e.message!r} {e.body!r}")
    expect(stranger.ping() is True, "ping needs no key")
    for c in (client, reader, stranger):
        c.close()
    print("influxdb-client", influxdb_client.__version__, "ok")


def influxdb_1x_client():
    parts = urllib.parse.urlsplit(URL)
    token = {"Authorization": f"Token {WRITE}"}
    client = influxdb.InfluxDBClient(host=parts.hostname, port=parts.port, database="default", headers=token)
    expect(client.ping() == VERSION, "ping")
    mem = {"measurement": "mem", "tags": {"host": "py1"}, "time": 1763719200, "fields": {"used": 42.5}}
    expect(client.write_points([mem], time_precision="s"), "write to default")
    expect(client.write_points([dict(mem, fields={"used": 43.5})], time_precision="s", database="shop"), "shop")
    expect(points("/v1/timeseries/mem.used/points") == [("host=py1", 1763719200000, 42.5)], "default")
    expect(points("/v1/db/shop/timeseries/mem.used/points") == [("host=py1", 1763719200000, 43.5)], "shop")

    # influxdb-python hands over the body: InfluxDB 1.x's {"error": "..."}
    e = fails(lambda: client.write_points(["mem,host=py1 used=1", "mem,host=py1"], protocol="line"), 400)
    body = json.loads(e.content)
    expect("nothing written: line 2" in body["error"] and body["code"] == "invalid_line_protocol", f"body {body}")
    e = fails(lambda: client.write_points([mem], database="nowhere"), 404)
    expect(json.loads(e.content)["error"] == 'database "nowhere" does not exist', f"body {e.content!r}")
    anonymous = influxdb.InfluxDBClient(host=parts.hostname, port=parts.port, database="default")
    e = fails(lambda: anonymous.write_points([mem]), 401)
    body = json.loads(e.content)
    expect(body["code"] == "unauthenticated" and body["error"], f"body {body}")
    expect(anonymous.ping() == VERSION, "ping needs no key")

    # and reads back what it wrote through InfluxQL on /query, with a read key
    reader = influxdb.InfluxDBClient(
        host=parts.hostname, port=parts.port, database="default", headers={"Authorization": f"Token {READ}"}
    )
    got = list(reader.query("SELECT used FROM mem").get_points())
    expect(got == [{"time": "2025-11-21T10:00:00Z", "used": 42.5}], f"raw {got}")
    got = list(reader.query('SELECT "used" FROM "mem" WHERE "host" = \'py1\'', database="shop", epoch="s").get_points())
    expect(got == [{"time": 1763719200, "used": 43.5}], f"shop {got}")
    result = reader.query("SELECT mean(used), count(used) FROM mem WHERE time >= '2025-11-21T10:00:00Z' GROUP BY host")
    got = list(result.get_points(measurement="mem", tags={"host": "py1"}))
    expect(got == [{"time": "2025-11-21T10:00:00Z", "mean": 42.5, "count": 1}], f"aggregate {got}")
    got = list(reader.query("SELECT mean(value) FROM cpu GROUP BY time(1m) fill(none)", epoch="ms").get_points())
    expect(got == [{"time": 1763719200000, "mean": 0.5}], f"2.x client's point {got}")
    got = reader.get_list_measurements()
    expect(got == [{"name": "cpu"}, {"name": "mem"}], f"measurements {got}")
    got = reader.get_list_database()
    expect(got == [{"name": "default"}, {"name": "shop"}], f"databases {got}")
    got = list(reader.query('SHOW TAG VALUES FROM "mem" WITH KEY = "host"').get_points())
    expect(got == [{"key": "host", "value": "py1"}], f"tag values {got}")
    # a query that does not parse: 400 with InfluxDB's {"error"}; a statement's error is raised too
    e = fails(lambda: reader.query("SELECT FROM mem"), 400)
    expect("error parsing query" in json.loads(e.content)["error"], f"body {e.content!r}")
    try:
        reader.query("SELECT used FROM mem WHERE used > 1")
        raise AssertionError("a statement's error was not raised")
    except InfluxDBClientError as e:
        expect("conditions on fields" in str(e.content), f"statement error {e.content!r}")
    print("influxdb", influxdb.__version__, "ok")


if __name__ == "__main__":
    influxdb_2x_client()
    influxdb_1x_client()
