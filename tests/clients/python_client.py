"""Calls a live mosaicdb through the Python client openapi-python-client generates from
openapi/openapi.json (run by .ci/python-client, which generates it, starts the server and passes
the client's folder, the server's URL and its admin key).

Each call goes through the generated models, both ways: the request bodies are built as models,
and every answer must parse into the model its operation declares (a Problem or None fails),
with the values checked.
"""

import sys
import time

sys.path.insert(0, sys.argv[1])
base, key = sys.argv[2], sys.argv[3]

from mosaicdb_client import AuthenticatedClient  # noqa: E402
from mosaicdb_client.api.databases import create_database, list_databases  # noqa: E402
from mosaicdb_client.api.documents import get_document, history, put_document  # noqa: E402
from mosaicdb_client.api.indexes import create_index, get_index, list_indexes  # noqa: E402
from mosaicdb_client.api.query import query, query_in_db  # noqa: E402
from mosaicdb_client.api.tables import create_table, create_table_in_db, get_table  # noqa: E402
from mosaicdb_client.api.timeseries import read_points, write_points  # noqa: E402
from mosaicdb_client.api.views import create_view, list_views  # noqa: E402
from mosaicdb_client.models import (  # noqa: E402
    CreateDatabase,
    CreateTable,
    CreateView,
    DocumentPage,
    HistoryPage,
    IndexDef,
    IndexList,
    PutDocumentBody,
    QueryBody,
    SingleFieldIndex,
    TableDef,
    TableInfo,
    ViewList,
)
from mosaicdb_client.models import Problem  # noqa: E402

client = AuthenticatedClient(base_url=base, token=key, raise_on_unexpected_status=True)


def ok(answer, model):
    assert not isinstance(answer, Problem), f"a problem: {answer.to_dict()}"
    assert isinstance(answer, model), f"expected {model.__name__}, got {type(answer).__name__}: {answer!r}"
    return answer


table = ok(create_table.sync(client=client, body=CreateTable.from_dict(
    {"name": "people", "history": {"max_versions": 10}})), TableDef)
assert table.name == "people"
for pid, age in [("ann", 31), ("bo", 45), ("cy", 27)]:
    put_document.sync("people", pid, client=client, body=PutDocumentBody.from_dict({"name": pid, "age": age}))
put_document.sync("people", "ann", client=client, body=PutDocumentBody.from_dict({"name": "ann", "age": 32}))
doc = get_document.sync("people", "ann", client=client)
assert doc.to_dict() == {"_id": "ann", "name": "ann", "age": 32}, doc.to_dict()

# an index: its definition carries its state flat (the model that used to be dropped)
made = ok(create_index.sync("people", client=client, body=SingleFieldIndex.from_dict(
    {"name": "by_age", "kind": "range", "fields": ["age"]})), IndexDef)
assert made.name == "by_age"
for _ in range(100):
    index = ok(get_index.sync("people", "by_age", client=client), IndexDef)
    if index.state.value == "ready":
        break
    time.sleep(0.05)
assert index.state.value == "ready", index.to_dict()
listed = ok(list_indexes.sync("people", client=client), IndexList)
assert [i.name for i in listed.indexes] == ["by_age"], listed.to_dict()

page = ok(query.sync("people", client=client, body=QueryBody.from_dict(
    {"filter": {"age": {"$gte": 30}}, "sort": ["-age"]})), DocumentPage)
assert [d.to_dict()["_id"] for d in page.documents] == ["bo", "ann"], page.to_dict()

versions = ok(history.sync("people", "ann", client=client), HistoryPage)
assert [v.op for v in versions.versions] == ["update", "create"], versions.to_dict()
assert versions.versions[1].document.to_dict()["age"] == 31

view = create_view.sync("people", client=client, body=CreateView.from_dict(
    {"name": "adults", "kind": "filter", "filter": {"age": {"$gte": 30}}}))
assert not isinstance(view, Problem), view
views = ok(list_views.sync("people", client=client), ViewList)
assert [v.name for v in views.views] == ["adults"], views.to_dict()

# a database of its own, and its routes
ok(create_database.sync(client=client, body=CreateDatabase.from_dict({"name": "shop"})), object)
names = [d.name for d in list_databases.sync(client=client).databases]
assert "shop" in names and "default" in names, names
ok(create_table_in_db.sync("shop", client=client, body=CreateTable.from_dict({"name": "orders"})), TableDef)
empty = ok(query_in_db.sync("shop", "orders", client=client, body=QueryBody.from_dict({})), DocumentPage)
assert empty.documents == []

# time series through the JSON routes
from mosaicdb_client.models import WritePoints  # noqa: E402

write_points.sync("temp", client=client, body=WritePoints.from_dict({"points": [
    {"entity": "s1", "ts": 1000, "value": 20.5}, {"entity": "s1", "ts": 2000, "value": 21.0}]}))
points = read_points.sync("temp", client=client, entity="s1")
assert not isinstance(points, Problem), points
assert [(p.ts, p.value) for p in points.points] == [(1000, 20.5), (2000, 21.0)], points.to_dict()

# the same points through the Prometheus query API and InfluxQL
from mosaicdb_client.api.prometheus import query_get as prom_query  # noqa: E402
from mosaicdb_client.api.timeseries import query_get as influxql  # noqa: E402
from mosaicdb_client.models import QueryAnswer  # noqa: E402

answer = ok(prom_query.sync(client=client, query="max_over_time(temp[5s])", time="2.5"), QueryAnswer)
assert answer.data.result_type.value == "vector", answer.to_dict()
assert [r["value"] for r in answer.data.result] == [[2.5, "21"]], answer.to_dict()
rows = influxql.sync(client=client, q="SELECT mean(value) FROM temp")
assert not isinstance(rows, Problem), rows
assert rows.to_dict()["results"][0]["series"][0]["values"][0][1] == 20.75, rows.to_dict()

info = ok(get_table.sync("people", client=client), TableInfo)
assert (info.documents, info.history.max_versions) == (3, 10), info.to_dict()
print("python client: every call answered as its model says")
