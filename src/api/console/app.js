// The console's shell: the hash router (`#/view/...`, and `#/db/{db}/view/...` for another
// database), the key dialog, the theme, the health badge, the database switcher, the status bar
// and the keyboard shortcuts. Each view is a module whose `render(ctx)` fills the main element;
// leaving a view aborts its requests (ctx.signal) and calls what it returned.
import { h, replace } from './dom.js';
import * as api from './api.js';

const views = {
  tables: () => import('./tables.js'),
  document: () => import('./document.js'),
  new: () => import('./document.js'),
  query: () => import('./query.js'),
  search: () => import('./search.js'),
  graph: () => import('./graph.js'),
  timeseries: () => import('./timeseries.js'),
  changes: () => import('./changes.js'),
  server: () => import('./server.js'),
};

const $ = (id) => document.getElementById(id);
const main = $('view');

/** The route of a hash: `{db, view, parts, params}`. */
export function parse(hash) {
  let path = hash.replace(/^#/, '') || '/tables';
  let query = '';
  const q = path.indexOf('?');
  if (q >= 0) { query = path.slice(q + 1); path = path.slice(0, q); }
  const decode = (p) => { try { return decodeURIComponent(p); } catch { return p; } };
  let parts = path.split('/').filter(Boolean).map(decode);
  let db = 'default';
  if (parts[0] === 'db' && parts.length >= 2) { db = parts[1]; parts = parts.slice(2); }
  let view = parts[0] || 'tables';
  if (view === 'tables' && parts.length >= 3) view = 'document';
  return { db, view, parts: parts.slice(1), params: new URLSearchParams(query) };
}

/** The hash of a route within the current database: `link('tables', t)`. */
export function link(...parts) {
  let params = '';
  if (parts.length && parts[parts.length - 1] instanceof URLSearchParams) params = '?' + parts.pop().toString();
  const prefix = api.session.db !== 'default' ? `#/db/${encodeURIComponent(api.session.db)}` : '#';
  return `${prefix}/${parts.map((p) => encodeURIComponent(p)).join('/')}${params}`;
}

/** Goes to a route (a hash made by `link`). */
export function go(hash) { location.hash = hash; }

/** A message in the status bar (`kind`: `error`, `ok` or nothing). */
export function say(text, kind = '') {
  const m = $('message');
  m.textContent = text;
  m.className = kind;
}

/** The message of an error, shown; aborts are not errors. */
export function fail(e) {
  if (api.aborted(e)) return;
  say(e.code ? `${e.code}: ${e.message}` : e.message, 'error');
}

let current = null; // {controller, cleanup}
let renderSeq = 0;

async function route() {
  const r = parse(location.hash);
  if (current) {
    current.controller.abort();
    if (typeof current.cleanup === 'function') current.cleanup();
    current = null;
  }
  const seq = ++renderSeq;
  if (r.db !== api.session.db) { api.session.db = r.db; $('db').value = r.db; }
  for (const a of document.querySelectorAll('#nav a')) {
    const view = r.view === 'document' || r.view === 'new' ? 'tables' : r.view;
    a.classList.toggle('active', a.dataset.view === view);
    a.href = link(a.dataset.view);
  }
  const load = views[r.view];
  if (!load) { replace(main, h('p', { class: 'error', text: `No view ${r.view}.` }), h('a', { href: link('tables'), text: 'Tables' })); return; }
  const controller = new AbortController();
  current = { controller, cleanup: null };
  say('');
  replace(main, h('p', { class: 'muted', text: 'Loading…' }));
  try {
    const mod = await load();
    if (seq !== renderSeq) return;
    const root = h('div', { class: 'view-' + r.view });
    replace(main, root);
    document.title = `${r.view} · mosaicdb console`;
    const cleanup = await mod.render({ ...r, root, signal: controller.signal });
    if (seq === renderSeq) current.cleanup = cleanup;
    else if (typeof cleanup === 'function') cleanup();
  } catch (e) {
    if (seq !== renderSeq) return;
    fail(e);
    if (!api.aborted(e)) main.append(h('p', { class: 'notice error', text: e.message }));
  }
}

// -- theme: `system` follows the browser; charts redraw on `themechange`
const THEME_STORE = 'mosaic.theme';
function applyTheme(choice) {
  if (choice === 'light' || choice === 'dark') document.documentElement.dataset.theme = choice;
  else delete document.documentElement.dataset.theme;
  window.dispatchEvent(new Event('themechange'));
}
const themeSelect = $('theme');
themeSelect.value = localStorage.getItem(THEME_STORE) || 'system';
applyTheme(themeSelect.value);
themeSelect.addEventListener('change', () => { localStorage.setItem(THEME_STORE, themeSelect.value); applyTheme(themeSelect.value); });
matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => window.dispatchEvent(new Event('themechange')));

// -- the key dialog
const dialog = $('key-dialog');
async function showRole() {
  const role = await api.probeRole();
  const text = { open: 'no API keys configured on this server: every request is allowed', admin: 'role: admin',
    'read or write': 'role: read or write (not admin)', none: 'no valid key: most routes will answer 401', unknown: '' }[role];
  $('key-role').textContent = text;
  $('key-button').textContent = role === 'open' ? 'open' : role === 'admin' ? 'key: admin' : role === 'none' ? 'key…' : 'key: r/w';
  $('key-button').title = text;
}
function openKeyDialog(reason) {
  $('key-reason').textContent = reason
    ? `The server wants a key: ${reason}`
    : 'This server may want an API key. It is kept in this page\'s memory only, never in a URL.';
  $('key-input').value = api.session.key || '';
  $('key-remember').checked = api.session.remembered;
  if (!dialog.open) dialog.showModal();
  $('key-input').focus();
}
api.onUnauthorized(openKeyDialog);
$('key-button').addEventListener('click', () => openKeyDialog());
$('key-form').addEventListener('submit', () => {
  api.setKey($('key-input').value.trim(), $('key-remember').checked);
  showRole().then(route);
});
$('key-forget').addEventListener('click', () => { api.setKey(null, false); $('key-input').value = ''; showRole(); });
$('key-close').addEventListener('click', () => dialog.close());

// -- health and readiness, every 10 s
async function health() {
  const badge = $('health');
  try {
    await api.request('GET', '/ready', { quiet: true, track: false });
    badge.textContent = 'ready'; badge.className = 'badge ok';
  } catch (e) {
    const live = await api.request('GET', '/health', { quiet: true, track: false }).then(() => true, () => false);
    badge.textContent = live ? `not ready${e.code ? ': ' + e.code : ''}` : 'down';
    badge.className = live ? 'badge warn' : 'badge bad';
  }
}

// -- the database switcher: a search box over the databases the key sees
const dbInput = $('db');
dbInput.value = api.session.db;
async function loadDatabases() {
  try {
    const { databases } = await api.get('/v1/databases', { quiet: true, track: false });
    replace($('db-list'), databases.map((d) => h('option', { value: d.name })));
  } catch { /* no key yet: the list stays empty */ }
}
dbInput.addEventListener('focus', loadDatabases);
dbInput.addEventListener('change', () => {
  const db = dbInput.value.trim() || 'default';
  const r = parse(location.hash);
  const rest = location.hash.replace(/^#/, '').replace(/^\/db\/[^/?]+/, '') || '/tables';
  if (db !== r.db) go(db === 'default' ? '#' + rest : `#/db/${encodeURIComponent(db)}${rest}`);
});

// -- the status bar: what is under way, and Cancel
api.onActivity((list) => {
  const a = $('activity');
  if (list.length) replace(a, h('span', { class: 'spinner' }), ` ${list.length === 1 ? list[0].label : list.length + ' requests'}…`);
  else a.replaceChildren();
  $('cancel').hidden = list.length === 0;
});
$('cancel').addEventListener('click', () => { api.cancelAll(); say('cancelled'); });

// -- keyboard shortcuts
const goKeys = { t: 'tables', q: 'query', s: 'search', g: 'graph', m: 'timeseries', c: 'changes', v: 'server' };
let prefix = false;
document.addEventListener('keydown', (ev) => {
  const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(ev.target.tagName);
  if (ev.key === 'Escape' && !dialog.open) { api.cancelAll(); return; }
  if (ev.altKey && (ev.key === 'd' || ev.key === 'D')) { ev.preventDefault(); dbInput.focus(); dbInput.select(); return; }
  if (typing || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  if (prefix) {
    prefix = false;
    if (goKeys[ev.key]) { ev.preventDefault(); go(link(goKeys[ev.key])); }
    return;
  }
  if (ev.key === 'g') prefix = true;
  else if (ev.key === '?') $('help-dialog').showModal();
  else if (ev.key === '/') {
    const first = main.querySelector('input, textarea');
    if (first) { ev.preventDefault(); first.focus(); }
  }
});
$('help-button').addEventListener('click', () => $('help-dialog').showModal());

window.addEventListener('hashchange', route);
health();
setInterval(health, 10000);
showRole();
route();
