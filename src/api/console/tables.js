// Tables: the list (with a filter box and a form to create one) and a table's page: its
// definition, indexes, views, TTL and history policy, and its documents a cursor page at a time
// (no count, no scan on open), with a page-size choice, a column chooser (the chosen columns are
// asked for as `fields`), values cut short, a click on a value to query by it, and "as of" a time
// for a table that keeps history.
import { h, replace, columnsOf, docTable, when, select, download, toCsv } from './dom.js';
import * as api from './api.js';
import { link, go, say, fail } from './app.js';

export async function render(ctx) {
  if (ctx.parts.length === 0) return list(ctx);
  return table(ctx, ctx.parts[0]);
}

async function list(ctx) {
  const { root, signal } = ctx;
  const filter = h('input', { type: 'search', placeholder: 'filter tables', 'aria-label': 'filter tables' });
  const body = h('div', {}, h('p', { class: 'muted', text: 'Loading tables…' }));
  const name = h('input', { placeholder: 'name', 'aria-label': 'new table name', id: 'new-table-name' });
  const kind = select(['document', 'edge'], 'document', { 'aria-label': 'kind' });
  const history = h('input', { type: 'checkbox', 'aria-label': 'keep history' });
  const feed = select([['keys', 'changefeed: keys'], ['full', 'changefeed: full'], ['off', 'changefeed: off']], 'keys', { 'aria-label': 'changefeed' });
  const create = h('button', { class: 'primary', type: 'submit', text: 'Create table' });
  const form = h('form', { class: 'row', id: 'create-table' }, name, kind, feed, h('label', {}, history, ' keep history (30 d, 100 versions)'), create);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const def = { name: name.value.trim(), kind: kind.value, changefeed: feed.value };
    if (history.checked) def.history = { max_age: '30d', max_versions: 100 };
    try {
      await api.post(`${api.v1()}/tables`, def, { signal, label: 'create table' });
      say(`table ${def.name} created`, 'ok');
      go(link('tables', def.name));
    } catch (e) { fail(e); }
  });
  replace(root, h('h1', { text: 'Tables' }), form, h('div', { class: 'row' }, filter), body);
  let tables = [];
  const draw = () => {
    const f = filter.value.trim().toLowerCase();
    const shown = tables.filter((t) => t.name.toLowerCase().includes(f));
    if (!tables.length) { replace(body, h('p', { class: 'muted', text: 'No tables yet: create one above.' })); return; }
    const rows = shown.slice(0, 1000).map((t) => h('tr', { class: 'link', on: { click: () => go(link('tables', t.name)) } },
      h('td', {}, h('a', { href: link('tables', t.name), text: t.name })),
      h('td', { text: t.kind || 'document' }),
      h('td', { class: 'num', text: t.documents }),
      h('td', { text: t.history ? 'kept' : '' }),
      h('td', { text: t.changefeed || 'keys' }),
      h('td', { text: when(t.created_at) })));
    replace(body, h('table', { class: 'grid', id: 'tables' },
      h('thead', {}, h('tr', {}, ['table', 'kind', 'documents', 'history', 'changefeed', 'created'].map((c) => h('th', { text: c })))),
      h('tbody', {}, rows)),
    shown.length > 1000 ? h('p', { class: 'muted', text: `${shown.length - 1000} more: narrow the filter` }) : null);
  };
  filter.addEventListener('input', draw);
  try {
    tables = (await api.get(`${api.v1()}/tables`, { signal, label: 'tables' })).tables;
    draw();
  } catch (e) { fail(e); replace(body, h('p', { class: 'notice error', text: e.message })); }
}

// the column choice per table, for this page's life
const chosenColumns = new Map();

async function table(ctx, name) {
  const { root, signal, params } = ctx;
  const info = h('div', { class: 'panel' }, h('p', { class: 'muted', text: 'Loading…' }));
  const docsBox = h('div', {});
  const size = select(['10', '25', '50', '100', '500'], params.get('limit') || '25', { 'aria-label': 'page size' });
  const asOf = h('input', { type: 'datetime-local', step: '1', 'aria-label': 'as of', title: 'the table as it was then (tables that keep history)' });
  const chooser = h('div', { class: 'chooser' });
  const exportButton = h('button', { type: 'button', text: 'Export page (NDJSON)' });
  const csvButton = h('button', { type: 'button', text: 'CSV' });
  replace(root,
    h('h1', {}, h('a', { href: link('tables'), text: 'Tables' }), ' / ', name),
    h('div', { class: 'row' },
      h('a', { href: link('new', name), id: 'new-document', text: '+ New document' }),
      h('a', { href: link('query', name), text: 'Query' }),
      h('a', { href: link('search', name), text: 'Search' }),
      h('a', { href: link('changes') + '?table=' + encodeURIComponent(name), text: 'Changes' }),
      h('button', { type: 'button', class: 'danger', text: 'Drop table…', on: { click: drop } })),
    h('div', { class: 'side' },
      h('div', {},
        h('div', { class: 'row' }, h('label', {}, 'page size ', size), h('label', {}, 'as of ', asOf), exportButton, csvButton),
        h('details', {}, h('summary', { text: 'Columns' }), chooser),
        docsBox),
      info));

  async function drop() {
    if (!confirm(`Drop table ${name} and all its documents? This cannot be undone.`)) return;
    try {
      await api.request('DELETE', `${api.v1()}/tables/${api.seg(name)}`, { signal, label: 'drop table' });
      say(`table ${name} dropped`, 'ok');
      go(link('tables'));
    } catch (e) { fail(e); }
  }

  // -- the table's definition, indexes and views
  (async () => {
    try {
      const [def, idx, vw] = await Promise.all([
        api.get(`${api.v1()}/tables/${api.seg(name)}`, { signal, label: 'table' }),
        api.get(`${api.v1()}/tables/${api.seg(name)}/indexes`, { signal, label: 'indexes' }),
        api.get(`${api.v1()}/tables/${api.seg(name)}/views`, { signal, label: 'views' }),
      ]);
      const indexes = idx.indexes || [];
      const ttl = indexes.filter((i) => i.kind === 'ttl');
      replace(info,
        h('h3', { text: 'Table' }),
        h('dl', { class: 'plan' },
          h('dt', { text: 'kind' }), h('dd', { text: def.kind || 'document' }),
          h('dt', { text: 'documents' }), h('dd', { text: def.documents }),
          h('dt', { text: 'changefeed' }), h('dd', { text: def.changefeed || 'keys' }),
          h('dt', { text: 'history' }), h('dd', { text: def.history ? JSON.stringify(def.history) : 'not kept' }),
          h('dt', { text: 'TTL' }), h('dd', { text: ttl.length ? ttl.map((i) => `${i.name} (${(i.fields || []).join(', ')})`).join('; ') : 'none (`_expires_at` still applies)' }),
          def.columns ? [h('dt', { text: 'columns' }), h('dd', { text: def.columns.map((c) => `${c.name}: ${c.type}`).join(', ') })] : null),
        h('h3', { text: `Indexes (${indexes.length})` }),
        indexes.length ? h('ul', {}, indexes.map((i) => h('li', {}, h('code', { text: i.name }), ` ${i.kind} on ${(i.fields || []).join(', ')}`, i.state && i.state !== 'ready' ? h('span', { class: 'warn', text: ` ${i.state}` }) : null))) : h('p', { class: 'muted', text: 'none' }),
        h('h3', { text: `Views (${(vw.views || []).length})` }),
        (vw.views || []).length ? h('ul', {}, vw.views.map((v) => h('li', {}, h('code', { text: v.name }), ` ${v.kind}`))) : h('p', { class: 'muted', text: 'none' }));
    } catch (e) { fail(e); replace(info, h('p', { class: 'notice error', text: e.message })); }
  })();

  // -- the documents, a page at a time
  let cursors = [null]; // the cursor of each page seen, for Previous
  let page = 0;
  let docs = [];
  let known = chosenColumns.get(name) ? [...chosenColumns.get(name)] : null;
  const chosen = () => chosenColumns.get(name) || null;

  function drawChooser() {
    const all = columnsOf([Object.fromEntries((known || []).map((c) => [c, 1])), ...docs]);
    const current = chosen() || all.slice(0, 8);
    replace(chooser, all.map((c) => {
      const box = h('input', { type: 'checkbox', checked: current.includes(c), disabled: c === '_id' });
      box.addEventListener('change', () => {
        const next = all.filter((x) => x === '_id' || (x === c ? box.checked : current.includes(x)));
        chosenColumns.set(name, next);
        known = all;
        load(cursors[page]);
      });
      return h('label', {}, box, ' ', c);
    }));
  }

  async function load(cursor) {
    replace(docsBox, h('p', { class: 'muted', text: 'Loading documents…' }));
    const limit = Number(size.value);
    try {
      let result;
      const fields = chosen();
      if (asOf.value || fields) {
        const q = { filter: {}, limit, cursor };
        if (fields) q.fields = fields.filter((f) => f !== '_id');
        if (asOf.value) q.as_of = new Date(asOf.value).toISOString();
        result = await api.post(`${api.v1()}/tables/${api.seg(name)}/query`, q, { signal, label: 'documents' });
      } else {
        const p = new URLSearchParams({ limit });
        if (cursor) p.set('cursor', cursor);
        result = await api.get(`${api.v1()}/tables/${api.seg(name)}/documents?${p}`, { signal, label: 'documents' });
      }
      docs = result.documents || [];
      cursors[page + 1] = result.cursor || null;
      drawChooser();
      const columns = chosen() || columnsOf(docs).slice(0, 8);
      const prev = h('button', { type: 'button', text: '← Previous', disabled: page === 0, on: { click: () => { page--; load(cursors[page]); } } });
      const next = h('button', { type: 'button', id: 'next-page', text: 'Next →', disabled: !result.cursor, on: { click: () => { page++; load(cursors[page]); } } });
      replace(docsBox,
        docs.length ? docTable(docs, columns, {
          onRow: (d) => go(link('tables', name, d._id)),
          onValue: (c, v) => go(link('query', name, new URLSearchParams({ filter: JSON.stringify({ [c]: v }) }))),
        }) : h('p', { class: 'muted', text: page === 0 ? 'No documents.' : 'No more documents.' }),
        h('div', { class: 'row' }, prev, h('span', { class: 'muted', text: `page ${page + 1} · ${docs.length} shown` }), next));
    } catch (e) { fail(e); replace(docsBox, h('p', { class: 'notice error', text: e.message })); }
  }
  size.addEventListener('change', () => { cursors = [null]; page = 0; load(null); });
  asOf.addEventListener('change', () => { cursors = [null]; page = 0; load(null); });
  exportButton.addEventListener('click', () => download(`${name}-page${page + 1}.ndjson`, docs.map((d) => JSON.stringify(d)).join('\n') + '\n', 'application/x-ndjson'));
  csvButton.addEventListener('click', () => download(`${name}-page${page + 1}.csv`, toCsv(chosen() || columnsOf(docs), docs), 'text/csv'));
  await load(null);
}
