// The query workbench: a table, then `{filter, sort, fields, limit}` in a JSON editor (Format,
// the error's line and column, Ctrl/Cmd+Enter runs); results as a table or JSON, a page at a time,
// with time and row count; Explain shows the plan (strategy, index scans, rows estimated,
// examined, matched, returned, covered) and warns when it scans the table. Queries are saved
// (and the last 20 run kept) in this browser's local storage, with JSON import and export.
import { h, replace, jsonEditor, jsonBlock, docTable, columnsOf, download, toCsv, select } from './dom.js';
import * as api from './api.js';
import { link, go, say, fail } from './app.js';

const SAVED = 'mosaic.saved-queries';
const HISTORY = 'mosaic.query-history';
const load = (k) => { try { return JSON.parse(localStorage.getItem(k) || '[]'); } catch { return []; } };
const store = (k, v) => localStorage.setItem(k, JSON.stringify(v));
// the editor's text per table, kept while the page lives (a view change does not lose it)
const drafts = new Map();

export async function render(ctx) {
  const { root, signal, params } = ctx;
  const table = ctx.parts[0] || '';
  const tables = h('select', { 'aria-label': 'table', id: 'query-table' }, h('option', { value: '', text: '(table)' }));
  api.get(`${api.v1()}/tables`, { signal, label: 'tables' }).then(({ tables: list }) => {
    for (const t of list) tables.append(h('option', { value: t.name, text: t.name, selected: t.name === table }));
  }, fail);
  tables.addEventListener('change', () => go(link('query', tables.value)));

  const initial = params.get('filter')
    ? { filter: safeParse(params.get('filter')), limit: 25 }
    : drafts.get(table) || { filter: {}, sort: [], limit: 25 };
  const editor = jsonEditor(initial, { rows: 10, onSubmit: () => run(null), label: 'query' });
  editor.area.addEventListener('input', () => drafts.set(table, editor.area.value));
  const runButton = h('button', { class: 'primary', type: 'button', id: 'run', text: 'Run (Ctrl+Enter)', on: { click: () => run(null) } });
  const explainButton = h('button', { type: 'button', id: 'explain', text: 'Explain', on: { click: explain } });
  const shape = select(['table', 'json'], 'table', { 'aria-label': 'result shape' });
  const results = h('div', { id: 'results' });
  const planBox = h('div', { id: 'plan' });
  const savedBox = h('div', {});
  replace(root,
    h('h1', { text: 'Query' }),
    h('div', { class: 'row' }, tables, table ? h('a', { href: link('tables', table), text: 'browse' }) : null),
    table ? null : h('p', { class: 'muted', text: 'Choose a table.' }),
    h('div', { class: 'side' },
      h('div', { class: 'stack' },
        editor.el,
        h('div', { class: 'row' }, runButton, explainButton,
          h('button', { type: 'button', text: 'Format', on: { click: () => editor.format() } }),
          h('label', {}, 'show as ', shape),
          h('button', { type: 'button', text: 'Export JSON', on: { click: () => exportAs('json') } }),
          h('button', { type: 'button', text: 'NDJSON', on: { click: () => exportAs('ndjson') } }),
          h('button', { type: 'button', text: 'CSV', on: { click: () => exportAs('csv') } }),
          h('button', { type: 'button', text: 'Export every match (NDJSON stream)', on: { click: exportAll } })),
        planBox, results),
      savedBox));

  let docs = [];
  let cursor = null;
  let body = null;

  async function run(from) {
    if (!table) { say('choose a table first', 'error'); return; }
    if (!editor.check()) { say('the query does not parse', 'error'); return; }
    body = { ...editor.value() };
    if (from) body.cursor = from;
    remember(body);
    const started = performance.now();
    replace(results, h('p', { class: 'muted', text: 'Running…' }));
    try {
      const answer = await api.post(`${api.v1()}/tables/${api.seg(table)}/query`, body, { signal, label: 'query' });
      const ms = performance.now() - started;
      docs = from ? docs.concat(answer.documents) : answer.documents;
      cursor = answer.cursor || null;
      draw(ms);
    } catch (e) {
      fail(e);
      replace(results, h('p', { class: 'notice error', text: `${e.code || ''} ${e.message}` }));
    }
  }

  function draw(ms) {
    const more = cursor ? h('button', { type: 'button', id: 'more', text: 'Next page', on: { click: () => run(cursor) } }) : null;
    const view = shape.value === 'json' ? jsonBlock(docs.slice(0, 1000))
      : docTable(docs, body && body.fields ? ['_id', ...body.fields] : columnsOf(docs).slice(0, 12), {
        onRow: (d) => go(link('tables', table, d._id)),
        onValue: (c, v) => { const q = editor.value(); q.filter = { ...(q.filter || {}), [c]: v }; editor.set(q); run(null); },
      });
    replace(results, h('p', { class: 'muted', id: 'result-count', text: `${docs.length} row(s)${ms !== undefined ? ` in ${ms.toFixed(0)} ms` : ''}${cursor ? ', more available' : ''}` }), view, more);
  }
  shape.addEventListener('change', () => draw());

  async function explain() {
    if (!table || !editor.check()) return;
    const q = { ...editor.value(), explain: true };
    delete q.cursor;
    try {
      const { plan } = await api.post(`${api.v1()}/tables/${api.seg(table)}/query`, q, { signal, label: 'explain' });
      replace(planBox, planView(plan));
    } catch (e) { fail(e); replace(planBox, h('p', { class: 'notice error', text: e.message })); }
  }

  // every match, streamed by the server as NDJSON (no page limit), saved as a file
  async function exportAll() {
    if (!table || !editor.check()) return;
    const q = { ...editor.value() };
    for (const k of ['limit', 'cursor', 'explain']) delete q[k];
    try {
      const { response } = await api.request('POST', `${api.v1()}/tables/${api.seg(table)}/query`, {
        body: q, headers: { Accept: 'application/x-ndjson' }, raw: true, signal, label: 'export' });
      download(`${table}-matches.ndjson`, await response.blob());
      say('exported', 'ok');
    } catch (e) { fail(e); }
  }

  function exportAs(kind) {
    const name = `${table || 'query'}-results`;
    if (kind === 'json') download(`${name}.json`, JSON.stringify(docs, null, 2));
    else if (kind === 'ndjson') download(`${name}.ndjson`, docs.map((d) => JSON.stringify(d)).join('\n') + '\n', 'application/x-ndjson');
    else download(`${name}.csv`, toCsv(columnsOf(docs), docs), 'text/csv');
  }

  // -- saved queries and history
  function remember(q) {
    const entry = { table, query: { ...q, cursor: undefined } };
    const list = load(HISTORY).filter((e) => JSON.stringify(e) !== JSON.stringify(entry));
    store(HISTORY, [entry, ...list].slice(0, 20));
    drawSaved();
  }
  function drawSaved() {
    const saved = load(SAVED);
    const hist = load(HISTORY);
    const nameInput = h('input', { placeholder: 'name', 'aria-label': 'query name', size: 12 });
    const fileInput = h('input', { type: 'file', accept: 'application/json', hidden: true });
    fileInput.addEventListener('change', async () => {
      try {
        const list = JSON.parse(await fileInput.files[0].text());
        if (!Array.isArray(list)) throw new Error('expected an array of saved queries');
        store(SAVED, [...load(SAVED), ...list.filter((e) => e && e.name && e.query)]);
        drawSaved();
      } catch (e) { say(`import: ${e.message}`, 'error'); }
    });
    const item = (e, del) => h('li', {},
      h('a', { href: '#', text: e.name || `${e.table}: ${JSON.stringify(e.query).slice(0, 40)}`, on: { click: (ev) => { ev.preventDefault(); if (e.table && e.table !== table) { drafts.set(e.table, JSON.stringify(e.query, null, 2)); go(link('query', e.table)); } else editor.set(e.query); } } }),
      del ? h('button', { type: 'button', text: '×', title: 'remove', on: { click: () => { store(SAVED, load(SAVED).filter((x) => x !== e && x.name !== e.name)); drawSaved(); } } }) : null);
    replace(savedBox, h('div', { class: 'panel' },
      h('h3', { text: 'Saved queries' }),
      h('div', { class: 'row' }, nameInput, h('button', { type: 'button', text: 'Save', on: { click: () => {
        if (!editor.check() || !nameInput.value.trim()) return;
        store(SAVED, [...load(SAVED).filter((x) => x.name !== nameInput.value.trim()), { name: nameInput.value.trim(), table, query: editor.value() }]);
        drawSaved();
      } } })),
      saved.length ? h('ul', {}, saved.map((e) => item(e, true))) : h('p', { class: 'muted', text: 'none yet' }),
      h('div', { class: 'row' },
        h('button', { type: 'button', text: 'Export', on: { click: () => download('mosaic-saved-queries.json', JSON.stringify(load(SAVED), null, 2)) } }),
        h('button', { type: 'button', text: 'Import…', on: { click: () => fileInput.click() } }), fileInput),
      h('h3', { text: 'Recent' }),
      hist.length ? h('ul', {}, hist.map((e) => item(e, false))) : h('p', { class: 'muted', text: 'nothing run yet' })));
  }
  drawSaved();
  if (params.get('filter') && table) run(null);
}

function safeParse(text) {
  try { return JSON.parse(text); } catch { return {}; }
}

/** A plan as a list of what the planner chose and what running it cost. */
export function planView(plan) {
  const scans = plan.scans || [];
  const row = (k, v) => [h('dt', { text: k }), h('dd', { text: v })];
  const scanning = plan.strategy === 'full_scan' || plan.strategy === 'as_of_scan';
  return h('div', { class: 'panel', id: 'plan-view' },
    h('h3', { text: 'Plan' }),
    scanning ? h('p', { class: 'notice', id: 'scan-warning', text: plan.strategy === 'full_scan'
      ? 'This query reads the whole table: an index on the filtered (or sorted) fields would answer it from the index.'
      : 'This query walks the kept versions of every document (no index serves as_of).' }) : null,
    h('dl', { class: 'plan' },
      row('strategy', plan.strategy),
      row('index', scans.length ? scans.map((s) => `${s.index}${s.kind ? ' ' + s.kind : ''}${s.condition ? ': ' + s.condition : ''}`).join('; ') : 'none'),
      row('order', plan.order),
      row('rows estimated', plan.estimated_rows),
      row('rows examined', plan.examined_rows),
      row('rows matched', plan.matched_rows),
      row('rows returned', plan.returned_rows),
      row('documents read', plan.documents_read),
      row('covered', plan.covered ? 'yes (answered from the index alone)' : 'no'),
      row('stopped early', plan.stopped_early ? 'yes' : 'no')),
    scans.length ? h('details', {}, h('summary', { text: 'scans' }), jsonBlock(scans)) : null);
}
