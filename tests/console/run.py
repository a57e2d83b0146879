#!/usr/bin/env python3
"""The web console in a real browser: starts the mosaicdb binary on a temporary data directory
(with an admin key, so the console must ask for it), fills it over HTTP, then drives Debian's
headless Chromium through chromedriver (Selenium) over every view: the key is typed into the
dialog; a table is created; a document created, edited, and saved into a conflict (another
client wrote it meanwhile) that the page reports; a query run and its plan shown; a search typed
with highlights; similar documents found through a vector index, with its recall; a graph
expanded and a shortest path drawn; a series charted; a change shown
in the tail while another client writes; the server page; the theme switched; and a document
holding `<script>` and `<img onerror>` shown as text. Any browser console error (beyond the
failed requests a step expects, such as the first 401 and the conflict's 412) fails the run.

    python3 tests/console/run.py --binary target/debug/mosaicdb [--screenshots docs/console]

Needs `chromium` and `chromium-driver` (Debian) and `selenium` (PyPI). Exit 0 on success, 1 on a
failure, 77 when the browser or Selenium is missing.
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

KEY = "console-test-admin-key-0123456789"
WAIT = 15


def find(*names):
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


class Api:
    """A second client: the admin key, JSON in and out."""

    def __init__(self, base):
        self.base = base

    def call(self, method, path, body=None, headers=None, raw=None, content_type="application/json"):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {KEY}")
        if data is not None:
            req.add_header("Content-Type", content_type)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                text = resp.read().decode()
                return resp.status, (json.loads(text) if text.strip().startswith(("{", "[")) else text), resp.headers
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), e.headers


def seed(api):
    ok = lambda r: r[0] < 300 or sys.exit(f"seeding failed: {r}")
    ok(api.call("POST", "/v1/tables", {"name": "people", "history": {"max_versions": 20}, "changefeed": "full"}))
    people = [
        {"_id": "alice", "name": "Alice", "age": 34, "city": "Oslo"},
        {"_id": "bob", "name": "Bob", "age": 27, "city": "Rome"},
        {"_id": "carol", "name": "Carol", "age": 41, "city": "Oslo"},
        {"_id": "dave", "name": "Dave", "age": 19, "city": "Lima"},
        {"_id": "erin", "name": "Erin", "age": 52, "city": "Rome"},
    ]
    ok(api.call("POST", "/v1/tables/people/documents", people))
    ok(api.call("POST", "/v1/tables", {"name": "knows", "kind": "edge"}))
    edges = [("alice", "bob"), ("bob", "carol"), ("carol", "dave"), ("alice", "erin"), ("erin", "dave")]
    ok(api.call("POST", "/v1/tables/knows/documents",
                [{"_id": f"{a}-{b}", "_from": f"people/{a}", "_to": f"people/{b}"} for a, b in edges]))
    ok(api.call("POST", "/v1/tables", {"name": "notes"}))
    notes = [
        {"_id": "n1", "title": "Databases", "body": "A database keeps data; a multi-model database keeps documents and graphs."},
        {"_id": "n2", "title": "Graphs", "body": "Graph walks find paths between vertices."},
        {"_id": "xss", "title": "<script>window.__xss = 1</script>",
         "body": "database <img src=x onerror=\"window.__xss = 2\"> and <b>bold</b>"},
    ]
    ok(api.call("POST", "/v1/tables/notes/documents", notes))
    ok(api.call("POST", "/v1/tables/notes/indexes", {"name": "ft", "kind": "fulltext", "fields": ["title", "body"]}))
    ok(api.call("POST", "/v1/tables", {"name": "items"}))
    ok(api.call("POST", "/v1/tables/items/indexes", {"name": "emb", "kind": "vector", "fields": ["embedding"],
                                                      "options": {"dimension": 3, "metric": "cosine"}}))
    ok(api.call("POST", "/v1/tables/items/documents",
                [{"_id": f"i{i}", "embedding": [1.0, i / 10, (i % 3) / 5]} for i in range(12)]))
    now = int(time.time() * 1000)
    lines = []
    for i in range(120):
        t = now - (120 - i) * 30_000
        for host, base in (("h1", 0.4), ("h2", 0.6)):
            lines.append(f"cpu,host={host} value={base + 0.2 * ((i * 7 + len(host)) % 10) / 10} {t}")
    ok(api.call("POST", "/v1/timeseries/write?precision=ms", raw="\n".join(lines).encode(), content_type="text/plain"))


class Console:
    def __init__(self, driver, base):
        self.d = driver
        self.base = base

    def go(self, hash_):
        self.d.execute_script("location.hash = arguments[0]", hash_)
        time.sleep(0.1)

    def el(self, css, timeout=WAIT):
        from selenium.webdriver.support.ui import WebDriverWait
        return WebDriverWait(self.d, timeout).until(lambda d: d.find_element("css selector", css))

    def until(self, what, fn, timeout=WAIT):
        end = time.time() + timeout
        last = None
        while time.time() < end:
            try:
                value = fn()
                if value:
                    return value
            except Exception as e:  # the element may be replaced while read
                last = e
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what} ({last})")

    def text(self, css):
        return self.el(css).text

    def set_text(self, css, text):
        el = self.el(css)
        self.d.execute_script("arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'))", el, text)
        return el

    def errors(self, allowed=()):
        """The console errors since the last call, but those matching an `allowed` pattern."""
        out = []
        for entry in self.d.get_log("browser"):
            if entry["level"] not in ("SEVERE", "ERROR"):
                continue
            if any(re.search(p, entry["message"]) for p in allowed):
                continue
            out.append(entry["message"])
        return out

    def clean(self, step, allowed=()):
        errs = self.errors(allowed)
        assert not errs, f"{step}: console errors: {errs}"
        print(f"ok   {step}")


def failed_status(*codes):
    return [rf"status of {c}\b" for c in codes]


def run(binary, screenshots, base=None):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        from selenium.webdriver.common.keys import Keys
    except ImportError:
        print("SKIP: selenium is not installed (pip install selenium)")
        return 77
    chromium = find("chromium", "chromium-browser", "google-chrome")
    driver_path = find("chromedriver")
    if not chromium or not driver_path:
        print("SKIP: chromium and chromedriver are needed (apt-get install chromium chromium-driver)")
        return 77
    data = tempfile.mkdtemp(prefix="mosaic-console-")
    server = log = None
    if base is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(os.environ, MOSAIC_API_KEYS=f"console:admin:{KEY}")
        log = open(os.path.join(data, "server.log"), "w")
        server = subprocess.Popen([binary, "--addr", f"127.0.0.1:{port}", "--data-dir", os.path.join(data, "db"),
                                   "--durability", "buffered", "--log", "warn"], env=env, stdout=log, stderr=log)
        base = f"http://127.0.0.1:{port}"
    driver = None
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(base + "/health", timeout=1)
                break
            except Exception:
                time.sleep(0.1)
        api = Api(base)
        seed(api)
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,860", "--disable-dev-shm-usage"):
            options.add_argument(arg)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(driver_path), options=options)
        c = Console(driver, base)
        steps(c, api, Keys)
        if screenshots:
            shoot(c, screenshots)
        print("console: every step passed")
        return 0
    finally:
        if driver:
            driver.quit()
        if server:
            server.terminate()
            server.wait(timeout=30)
            log.close()
        shutil.rmtree(data, ignore_errors=True)


def steps(c, api, Keys):
    d = c.d
    # -- the page loads without a key, and asks for one at the first 401
    d.get(c.base + "/console/")
    dialog = c.el("#key-dialog")
    c.until("the key dialog", lambda: dialog.get_attribute("open") is not None)
    c.el("#key-input").send_keys(KEY)
    c.el("#key-save").click()
    c.until("the role", lambda: "admin" in c.text("#key-button"))
    c.until("the tables list", lambda: "people" in c.text("#tables"))
    assert d.execute_script("return sessionStorage.getItem('mosaic.key')") is None, "the key was stored unasked"
    c.clean("key asked, tables listed", failed_status(401))

    # -- create a table from the form
    c.el("#new-table-name").send_keys("made")
    c.el("#create-table button[type=submit]").click()
    c.until("the new table's page", lambda: "made" in d.execute_script("return location.hash"))
    c.until("the empty table", lambda: "No documents" in c.text("#view"))
    assert api.call("GET", "/v1/tables/made")[0] == 200
    c.clean("table created")

    # -- a document: create, edit and save, then a conflict
    c.go("#/new/made")
    c.el("#new-id").send_keys("d1")
    c.set_text("textarea.json-editor", '{"title": "first", "n": 1}')
    c.el("#save").click()
    c.until("the document page", lambda: d.execute_script("return location.hash") == "#/tables/made/d1")
    c.until("the ETag", lambda: "ETag" in c.text("#etag"))
    c.set_text("textarea.json-editor", '{"title": "second", "n": 2}')
    c.el("#save").click()
    c.until("saved", lambda: "Saved" in c.text("#doc-notice"))
    assert api.call("GET", "/v1/tables/made/documents/d1")[1]["title"] == "second"
    # the JSON check as one types
    c.set_text("textarea.json-editor", '{"title": "third",, "n": 3}')
    c.until("the parse error", lambda: "line 1" in c.text(".json-state"))
    # another client writes; the page still holds the old ETag
    api.call("PUT", "/v1/tables/made/documents/d1", {"title": "theirs", "n": 9})
    c.set_text("textarea.json-editor", '{"title": "mine", "n": 3}')
    c.el("#save").click()
    c.until("the conflict message", lambda: "Conflict" in c.text("#conflict"))
    assert api.call("GET", "/v1/tables/made/documents/d1")[1]["title"] == "theirs", "the conflicting save was written"
    assert "mine" in d.execute_script("return document.querySelector('textarea.json-editor').value")
    [b for b in d.find_elements("css selector", "#conflict button") if "Overwrite" in b.text][0].click()
    c.until("overwritten", lambda: "Saved" in c.text("#doc-notice"))
    assert api.call("GET", "/v1/tables/made/documents/d1")[1]["title"] == "mine"
    c.clean("document created, edited, conflict reported and resolved", failed_status(412))

    # -- history of a table that keeps it
    api.call("PATCH", "/v1/tables/people/documents/alice", {"age": 35})
    c.go("#/tables/people/alice")
    c.until("the history", lambda: "History (2" in c.text("#view"))
    c.until("the diff", lambda: "35" in c.text(".diff"))
    c.clean("history and diff")

    # -- vectors: find similar through the table's vector index, and its recall
    c.go("#/tables/items/i3")
    c.until("the vector panel", lambda: "Similar by emb" in c.text("#similar"))
    [b for b in d.find_elements("css selector", "#similar button") if b.text == "Find similar"][0].click()
    c.until("the neighbours", lambda: "i3" in c.text("#similar ol"))
    [b for b in d.find_elements("css selector", "#similar button") if b.text == "Recall check"][0].click()
    c.until("the recall", lambda: re.search(r"recall@5: \d\.\d{3}", c.text("#similar")))
    c.clean("similar documents and recall")

    # -- documents holding markup render as text
    c.go("#/tables/notes")
    c.until("the notes", lambda: "<script>" in c.text("table.docs"))
    c.go("#/tables/notes/xss")
    c.until("the xss document", lambda: "onerror" in d.execute_script("return document.querySelector('textarea.json-editor').value"))
    assert d.execute_script("return window.__xss") is None, "markup in a document ran"
    assert not d.find_elements("css selector", "#view img, #view script, #view b"), "markup in a document became elements"
    c.clean("markup shown as text")

    # -- query and plan
    c.go("#/query/people")
    c.el("#query-table")
    c.set_text("textarea.json-editor", '{"filter": {"city": "Oslo"}, "sort": ["-age"], "limit": 10}')
    c.el("#run").click()
    c.until("the rows", lambda: c.text("#result-count").startswith("2 row"))
    assert "carol" in c.text("#results") and "bob" not in c.text("#results")
    c.el("#explain").click()
    c.until("the plan", lambda: "full_scan" in c.text("#plan-view"))
    assert c.el("#scan-warning").is_displayed()
    area = c.el("textarea.json-editor")
    c.set_text("textarea.json-editor", '{"filter": {"age": {"$gte": 40}}}')
    area.send_keys(Keys.CONTROL, Keys.ENTER)
    c.until("Ctrl+Enter ran it", lambda: c.text("#result-count").startswith("2 row"))
    c.clean("query run, plan shown")

    # -- search as you type, highlights as <mark>
    c.go("#/search/notes")
    box = c.el("#search-box")
    for ch in "database":
        box.send_keys(ch)
    c.until("highlighted hits", lambda: d.find_elements("css selector", "#search-results mark"))
    marks = [m.text.lower() for m in d.find_elements("css selector", "#search-results mark")]
    assert any(m.startswith("database") for m in marks), marks
    assert d.execute_script("return window.__xss") is None
    assert not d.find_elements("css selector", "#search-results img, #search-results b")
    c.clean("search with highlights")

    # -- graph: start, expand, shortest path
    c.go("#/graph?start=people%2Falice")
    c.until("the neighbours", lambda: re.match(r"([3-9]|\d\d+) vertices", c.text("#graph-count")))
    c.el("#graph-target").send_keys("people/dave")
    c.el("#graph-path").click()
    c.until("the path", lambda: "path of 2 edge" in c.text("#message"))
    painted = d.execute_script("""const c = document.getElementById('graph-canvas');
        const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 3; i < px.length; i += 4) if (px[i]) n++; return n;""")
    assert painted > 500, f"the graph canvas is blank ({painted})"
    c.clean("graph expanded, shortest path drawn")

    # -- time series
    c.go("#/timeseries/cpu")
    c.until("the chart", lambda: re.match(r"2 series · \d+ points", c.text("#ts-stats")))
    assert "host=\"h1\"" in c.text("#ts-legend")
    c.clean("series charted")

    # -- the changefeed tail while another client writes
    c.go("#/changes")
    c.until("the stream", lambda: c.text("#tail-state") == "live")
    api.call("PUT", "/v1/tables/people/documents/frank", {"name": "Frank", "age": 60})
    c.until("the change", lambda: "frank" in c.text("#tail-rows"))
    c.el("#tail-pause").click()
    api.call("PUT", "/v1/tables/people/documents/gina", {"name": "Gina"})
    time.sleep(0.5)
    assert "gina" not in c.text("#tail-rows"), (c.text("#tail-state"), c.text("#tail-pause"), c.text("#tail-rows"))
    c.el("#tail-pause").click()
    c.until("the change made while paused", lambda: "gina" in c.text("#tail-rows"))
    c.clean("changes tailed, paused and resumed")

    # -- server
    c.go("#/server")
    c.until("the status", lambda: "ready" in c.text("#server-status"))
    c.until("the tasks", lambda: c.text("#tasks"))
    c.clean("server page")

    # -- theme
    Select = __import__("selenium.webdriver.support.select", fromlist=["Select"]).Select
    Select(c.el("#theme")).select_by_value("dark")
    assert d.execute_script("return document.documentElement.dataset.theme") == "dark"
    bg = d.execute_script("return getComputedStyle(document.body).backgroundColor")
    assert bg == "rgb(13, 17, 23)", bg
    Select(c.el("#theme")).select_by_value("light")
    assert d.execute_script("return getComputedStyle(document.body).backgroundColor") == "rgb(255, 255, 255)"
    c.clean("theme switched")


VIEWS = [
    ("tables", "#/tables"),
    ("table", "#/tables/people"),
    ("document", "#/tables/people/alice"),
    ("query", "#/query/people?filter=%7B%22city%22%3A%22Oslo%22%7D"),
    ("search", "#/search/notes?q=database"),
    ("graph", "#/graph?start=people%2Falice"),
    ("timeseries", "#/timeseries/cpu"),
    ("changes", "#/changes"),
    ("server", "#/server"),
]


def shoot(c, folder):
    from selenium.webdriver.support.select import Select
    os.makedirs(folder, exist_ok=True)
    for theme in ("light", "dark"):
        Select(c.el("#theme")).select_by_value(theme)
        for name, hash_ in VIEWS:
            c.go(hash_)
            time.sleep(1.5)
            if name == "server":
                time.sleep(3)  # two polls of /metrics: the rates
            if name == "changes":
                c.until("the stream", lambda: c.text("#tail-state") == "live")
                Api(c.base).call("PUT", "/v1/tables/people/documents/hana", {"name": "Hana", "n": time.time()})
                time.sleep(0.5)
            c.d.save_screenshot(os.path.join(folder, f"{name}-{theme}.png"))
        c.clean(f"screenshots, {theme}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--binary", default="target/debug/mosaicdb")
    p.add_argument("--screenshots", help="save a screenshot of each view, light and dark, in this folder")
    p.add_argument("--base", help="use this server (started on an empty data directory with "
                   f"MOSAIC_API_KEYS=console:admin:{KEY}) instead of starting the binary")
    args = p.parse_args()
    try:
        return run(args.binary, args.screenshots, args.base)
    except AssertionError as e:
        import traceback
        line = traceback.extract_tb(e.__traceback__)[-1]
        print(f"FAIL (line {line.lineno}: {line.line}): {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
