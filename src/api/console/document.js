// One document: shown and edited as JSON (validated as typed, Format, Ctrl/Cmd+Enter saves),
// saved with `If-Match` (the ETag it was read with) so a write made meanwhile is a clear conflict,
// not a lost update; created with `If-None-Match: *`; deleted behind a confirm. Its history (for
// tables that keep it): the versions as a timeline, a diff between any two, a restore.
import { h, replace, jsonEditor, when } from './dom.js';
import * as api from './api.js';
import { link, go, say, fail } from './app.js';

export async function render(ctx) {
  const { root, signal, parts } = ctx;
  const [table, id] = parts;
  const creating = ctx.view === 'new';
  const path = (docId) => `${api.v1()}/tables/${api.seg(table)}/documents/${api.seg(docId)}`;
  const idInput = h('input', { placeholder: 'id (empty: one is made)', 'aria-label': 'document id', id: 'new-id' });
  const notice = h('div', { id: 'doc-notice' });
  const save = h('button', { class: 'primary', type: 'button', id: 'save', text: creating ? 'Create' : 'Save' });
  const editor = jsonEditor(creating ? '{\n  \n}' : '', { rows: 20, onSubmit: () => save.click(), label: 'document' });
  const historyBox = h('div', { class: 'panel' }, h('p', { class: 'muted', text: creating ? '' : 'Loading history…' }));
  const similarBox = h('div', { id: 'similar', class: 'stack' });
  let etag = null;

  replace(root,
    h('h1', {}, h('a', { href: link('tables'), text: 'Tables' }), ' / ', h('a', { href: link('tables', table), text: table }), ' / ', creating ? 'new document' : id),
    h('div', { class: 'side' },
      h('div', { class: 'stack' },
        creating ? h('div', { class: 'row' }, idInput) : null,
        editor.el,
        h('div', { class: 'row' },
          save,
          h('button', { type: 'button', text: 'Format', on: { click: () => editor.format() } }),
          creating ? null : h('button', { type: 'button', text: 'Reload', on: { click: () => load() } }),
          creating ? null : h('button', { type: 'button', class: 'danger', text: 'Delete…', on: { click: remove } }),
          creating ? null : h('a', { href: link('graph', new URLSearchParams({ start: `${table}/${id}` })), text: 'Graph from here' }),
          h('span', { class: 'muted', id: 'etag' })),
        notice),
      creating ? null : h('div', { class: 'stack' }, historyBox, similarBox)));

  function conflict(mine) {
    replace(notice, h('div', { class: 'notice error', id: 'conflict' },
      h('strong', { text: 'Conflict: ' }),
      'the document changed since you opened it (someone else saved it). Your text is still in the editor. ',
      h('button', { type: 'button', text: 'Load their version', on: { click: () => load() } }), ' ',
      h('button', { type: 'button', text: 'Overwrite with mine', on: { click: () => write(mine, null) } })));
  }

  async function write(doc, ifMatch) {
    const headers = {};
    if (ifMatch) headers['If-Match'] = ifMatch;
    try {
      const { response } = await api.request('PUT', path(id), { body: doc, headers, signal, label: 'save' });
      etag = response.headers.get('etag');
      document.getElementById('etag').textContent = etag ? `ETag ${etag}` : '';
      replace(notice, h('p', { class: 'ok', text: 'Saved.' }));
      say('saved', 'ok');
      loadHistory();
    } catch (e) {
      if (e.status === 412) conflict(doc); else { fail(e); replace(notice, h('p', { class: 'notice error', text: e.message })); }
    }
  }

  save.addEventListener('click', async () => {
    if (!editor.check()) { say('the JSON does not parse', 'error'); return; }
    const doc = editor.value();
    if (!creating) return write(doc, etag);
    try {
      const newId = idInput.value.trim();
      if (newId) {
        await api.request('PUT', path(newId), { body: doc, headers: { 'If-None-Match': '*' }, signal, label: 'create' });
        go(link('tables', table, newId));
      } else {
        const made = await api.post(`${api.v1()}/tables/${api.seg(table)}/documents`, doc, { signal, label: 'create' });
        go(link('tables', table, made._id || (made.ids && made.ids[0]) || ''));
      }
      say('created', 'ok');
    } catch (e) { fail(e); replace(notice, h('p', { class: 'notice error', text: e.message })); }
  });

  async function remove() {
    if (!confirm(`Delete ${table}/${id}?`)) return;
    try {
      await api.request('DELETE', path(id), { headers: etag ? { 'If-Match': etag } : {}, signal, label: 'delete' });
      say(`${id} deleted`, 'ok');
      go(link('tables', table));
    } catch (e) { if (e.status === 412) conflict(editor.value()); else fail(e); }
  }

  async function load() {
    try {
      const { data, response } = await api.request('GET', path(id), { signal, label: 'document' });
      etag = response.headers.get('etag');
      editor.set(data);
      document.getElementById('etag').textContent = etag ? `ETag ${etag}` : '';
      replace(notice);
    } catch (e) {
      fail(e);
      replace(notice, h('p', { class: 'notice error', text: e.status === 404 ? `No document ${id} in ${table}.` : e.message }));
    }
  }

  // the table's definition: whether it keeps history (asking one that does not is an error)
  let definition = null;
  async function loadHistory() {
    try {
      definition = definition || await api.get(`${api.v1()}/tables/${api.seg(table)}`, { signal, label: 'table' });
      if (!definition.history) {
        replace(historyBox, h('h3', { text: 'History' }), h('p', { class: 'muted', id: 'no-history', text: 'This table keeps no history (a table\'s history policy is set with PATCH /v1/tables/{table}).' }));
        return;
      }
      const page = await api.get(`${path(id)}/history?limit=100`, { signal, label: 'history' });
      drawHistory(page.versions || [], page.cursor);
    } catch (e) {
      replace(historyBox, h('h3', { text: 'History' }),
        h('p', { class: 'muted', id: 'no-history', text: e.message }));
    }
  }

  function drawHistory(versions, cursor) {
    if (!versions.length) { replace(historyBox, h('h3', { text: 'History' }), h('p', { class: 'muted', text: 'No versions kept.' })); return; }
    let a = versions.length > 1 ? 1 : 0, b = 0; // indexes into versions (newest first, as listed)
    const diffBox = h('div', { class: 'diff' });
    const list = h('ol', { class: 'timeline' });
    const drawList = () => replace(list, versions.map((v, i) => {
      const pickA = h('input', { type: 'radio', name: 'va', checked: i === a, title: 'from', on: { change: () => { a = i; drawDiff(); } } });
      const pickB = h('input', { type: 'radio', name: 'vb', checked: i === b, title: 'to', on: { change: () => { b = i; drawDiff(); } } });
      const restore = v.current || v.op === 'delete' ? null : h('button', { type: 'button', text: 'Restore', on: { click: () => restoreTo(v) } });
      return h('li', { class: v.current ? 'current' : '' }, pickA, pickB, ` ${v.at_us ? when(v.at_us / 1000) : 'time unknown'} · ${v.op}${v.current ? ' (current)' : ''} `, restore);
    }));
    const drawDiff = () => {
      const from = versions[a].document ? JSON.stringify(versions[a].document, null, 2) : '(deleted)';
      const to = versions[b].document ? JSON.stringify(versions[b].document, null, 2) : '(deleted)';
      replace(diffBox, lineDiff(from, to));
    };
    drawList();
    drawDiff();
    replace(historyBox, h('h3', { text: `History (${versions.length}${cursor ? '+' : ''} versions)` }),
      h('p', { class: 'muted', text: 'pick two: from (left) and to (right)' }), list, h('h3', { text: 'Diff' }), diffBox);
  }

  async function restoreTo(v) {
    if (!confirm('Write this version back as a new version?')) return;
    try {
      await api.post(`${path(id)}/restore`, { as_of: String(Math.ceil(v.at_us / 1000)) }, { signal, label: 'restore', headers: etag ? { 'If-Match': etag } : {} });
      say('restored', 'ok');
      await load();
      loadHistory();
    } catch (e) { if (e.status === 412) conflict(editor.value()); else fail(e); }
  }

  // -- vectors: find similar documents through each vector index, and check its recall
  async function loadSimilar() {
    try {
      const { indexes } = await api.get(`${api.v1()}/tables/${api.seg(table)}/indexes`, { signal, label: 'indexes' });
      const vectors = indexes.filter((i) => i.kind === 'vector');
      replace(similarBox, vectors.map((i) => similarPanel(i.fields[0], i.name)));
    } catch (e) { if (!api.aborted(e)) replace(similarBox); }
  }
  function similarPanel(field, name) {
    const k = h('select', { 'aria-label': 'k' }, ['5', '10', '20', '50'].map((v) => h('option', { value: v, text: v })));
    const ef = h('input', { type: 'number', min: 1, max: 10000, placeholder: 'ef', 'aria-label': 'ef', size: 6 });
    const out = h('div', {});
    const search = async (exact) => {
      const doc = editor.check() ? editor.value() : {};
      const vector = field.split('.').reduce((v, part) => (v ? v[part] : undefined), doc);
      if (!Array.isArray(vector)) { replace(out, h('p', { class: 'muted', text: `this document has no vector in ${field}` })); return null; }
      const body = { field, vector, k: Number(k.value), exact, fields: ['_id'] };
      if (ef.value) body.ef = Number(ef.value);
      return api.post(`${api.v1()}/tables/${api.seg(table)}/vector-search`, body, { signal, label: 'vector search' });
    };
    const find = async () => {
      try {
        const answer = await search(false);
        if (!answer) return;
        replace(out, h('p', { class: 'muted', text: `strategy: ${answer.strategy}` }),
          h('ol', {}, answer.hits.map((hit) => h('li', {}, h('a', { href: link('tables', table, hit._id), text: hit._id }), h('span', { class: 'muted', text: ` ${hit.distance.toFixed(4)}` })))));
      } catch (e) { fail(e); }
    };
    const recall = async () => {
      try {
        const [approx, exact] = await Promise.all([search(false), search(true)]);
        if (!approx || !exact) return;
        const want = new Set(exact.hits.map((x) => x._id));
        const got = approx.hits.filter((x) => want.has(x._id)).length;
        replace(out, h('p', { text: `recall@${k.value}: ${want.size ? (got / want.size).toFixed(3) : '–'} (${got} of the ${want.size} exact neighbours found by ${approx.strategy})` }));
      } catch (e) { fail(e); }
    };
    return h('div', { class: 'panel' }, h('h3', { text: `Similar by ${name} (${field})` }),
      h('div', { class: 'row' }, h('label', {}, 'k ', k), ef,
        h('button', { type: 'button', text: 'Find similar', on: { click: find } }),
        h('button', { type: 'button', text: 'Recall check', title: 'the index against an exact search', on: { click: recall } })), out);
  }

  if (!creating) {
    await load();
    loadHistory();
    loadSimilar();
  }
}

/** A line diff of two texts (longest common subsequence; above 4000 lines each, whole texts). */
export function lineDiff(a, b) {
  const x = a.split('\n'), y = b.split('\n');
  const out = h('div', { class: 'mono' });
  if (x.length * y.length > 16e6) {
    out.append(h('div', { class: 'del', text: a }), h('div', { class: 'add', text: b }));
    return out;
  }
  const n = x.length, m = y.length;
  const dp = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) dp[i][j] = x[i] === y[j] ? dp[i + 1][j + 1] + 1 : Math.max(dp[i + 1][j], dp[i][j + 1]);
  let i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && x[i] === y[j]) { out.append(h('div', { text: '  ' + x[i] })); i++; j++; }
    else if (i < n && (j === m || dp[i + 1][j] >= dp[i][j + 1])) { out.append(h('div', { class: 'del', text: '- ' + x[i] })); i++; }
    else { out.append(h('div', { class: 'add', text: '+ ' + y[j] })); j++; }
  }
  return out;
}
