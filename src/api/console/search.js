// Search preview: results as you type (debounced; each keystroke aborts the request before it),
// any/all, an optional filter, the fulltext index to use, hybrid ranks when the answer has them.
// Highlights are asked for with the private-use sentinels U+E000/U+E001 and turned into <mark>
// elements around text nodes: document text is never parsed as HTML.
import { h, replace, debounce, highlighted, short, jsonEditor, select, MARK_PRE, MARK_POST } from './dom.js';
import * as api from './api.js';
import { link, go, fail } from './app.js';

export async function render(ctx) {
  const { root, signal } = ctx;
  const table = ctx.parts[0] || '';
  const tables = h('select', { 'aria-label': 'table', id: 'search-table' }, h('option', { value: '', text: '(table)' }));
  api.get(`${api.v1()}/tables`, { signal, label: 'tables' }).then(({ tables: list }) => {
    for (const t of list) tables.append(h('option', { value: t.name, text: t.name, selected: t.name === table }));
  }, fail);
  tables.addEventListener('change', () => go(link('search', tables.value)));
  const box = h('input', { type: 'search', id: 'search-box', placeholder: 'search…', 'aria-label': 'search text', size: 40, value: ctx.params.get('q') || '' });
  const mode = select(['any', 'all'], 'any', { 'aria-label': 'mode' });
  const index = h('select', { 'aria-label': 'index' }, h('option', { value: '', text: '(the table\'s fulltext index)' }));
  const limit = select(['10', '20', '50', '100'], '20', { 'aria-label': 'limit' });
  const filter = jsonEditor('', { rows: 3, label: 'filter' });
  filter.area.placeholder = 'optional filter, as in a query: {"year": {"$gte": 2020}}';
  const results = h('div', { id: 'search-results' });
  const stats = h('p', { class: 'muted', id: 'search-stats' });
  replace(root,
    h('h1', { text: 'Search' }),
    h('div', { class: 'row' }, tables, box, mode, index, h('label', {}, 'limit ', limit)),
    h('details', {}, h('summary', { text: 'Filter' }), filter.el),
    table ? null : h('p', { class: 'muted', text: 'Choose a table with a fulltext index.' }),
    stats, results);
  if (table) {
    api.get(`${api.v1()}/tables/${api.seg(table)}/indexes`, { signal, label: 'indexes' }).then(({ indexes }) => {
      const ft = indexes.filter((i) => i.kind === 'fulltext');
      for (const i of ft) index.append(h('option', { value: i.name, text: `${i.name} (${i.fields.join(', ')})` }));
      if (!ft.length) stats.textContent = 'This table has no fulltext index: create one (kind "fulltext") to search it.';
    }, fail);
  }

  let inflight = null;
  const run = async () => {
    if (inflight) inflight.abort();
    const text = box.value.trim();
    if (!table || !text) { results.replaceChildren(); stats.textContent = ''; return; }
    if (filter.area.value.trim() && !filter.check()) { stats.textContent = 'the filter does not parse'; return; }
    inflight = new AbortController();
    const mine = inflight;
    signal.addEventListener('abort', () => mine.abort(), { once: true });
    const body = { query: text, mode: mode.value, limit: Number(limit.value), highlight: { pre: MARK_PRE, post: MARK_POST, fragment_chars: 200 } };
    if (index.value) body.index = index.value;
    if (filter.area.value.trim()) body.filter = filter.value();
    const started = performance.now();
    try {
      const answer = await api.post(`${api.v1()}/tables/${api.seg(table)}/search`, body, { signal: mine.signal, label: 'search' });
      const ms = performance.now() - started;
      stats.textContent = `${answer.total ? (answer.total.relation === 'gte' ? '≥ ' : '') + answer.total.value : answer.hits.length} match(es) · ${ms.toFixed(0)} ms`;
      replace(results, answer.hits.map((hit) => hitView(table, hit)));
    } catch (e) {
      if (api.aborted(e)) return;
      stats.textContent = `${e.code || 'error'}: ${e.message}`;
      results.replaceChildren();
    }
  };
  const soon = debounce(run, 200);
  box.addEventListener('input', soon);
  for (const el of [mode, index, limit]) el.addEventListener('change', run);
  filter.area.addEventListener('input', soon);
  if (box.value) run();
  box.focus();
}

function hitView(table, hit) {
  const fragments = Object.entries(hit.highlights || {});
  const ranks = hit.ranks ? ` · ranks: text ${hit.ranks.text ?? '–'}, vector ${hit.ranks.vector ?? '–'}` : '';
  const title = hit.document && (hit.document.title ?? hit.document.name);
  return h('div', { class: 'hit' },
    h('div', {},
      h('a', { href: link('tables', table, hit._id), text: hit._id }),
      title !== undefined ? h('span', { text: ` ${short(title, 120)}` }) : null,
      h('span', { class: 'muted', text: ` · score ${Number(hit.score).toFixed(3)}${ranks}` })),
    fragments.map(([field, fragment]) => h('div', { class: 'fragment' },
      h('span', { class: 'muted', text: `${field}: ` }),
      h('span', { class: 'snippet' }, highlighted(Array.isArray(fragment) ? fragment.join(' … ') : fragment)))));
}
