// The server: health and readiness, `/v1/info`, the periodic tasks, the changefeed's figures,
// a few figures of `/metrics` polled every 2 s as sparklines (rates for counters), and an online
// backup for admins (streamed to a file).
import { h, replace, bytes, download } from './dom.js';
import * as api from './api.js';
import { say, fail } from './app.js';
import { sparkline } from './chart.js';

// name → how it is shown: `rate` (a counter, per second) or `value` (a gauge)
const FIGURES = [
  ['mosaicdb_http_requests_total', 'rate', 'HTTP requests / s'],
  ['mosaicdb_storage_writes_total', 'rate', 'storage writes / s'],
  ['mosaicdb_storage_fsyncs_total', 'rate', 'fsyncs / s'],
  ['mosaicdb_http_connections', 'value', 'open connections'],
  ['mosaicdb_http_requests_in_flight', 'value', 'requests in flight'],
  ['mosaicdb_storage_write_buffer_bytes', 'value', 'write buffer bytes'],
  ['mosaicdb_storage_compactions_running', 'value', 'compactions running'],
];

/** The sum over every series of each metric of a Prometheus text exposition. */
export function sums(text) {
  const out = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const v = Number(m[3]);
    if (Number.isFinite(v)) out.set(m[1], (out.get(m[1]) || 0) + v);
  }
  return out;
}

export async function render(ctx) {
  const { root, signal } = ctx;
  const status = h('div', { class: 'panel', id: 'server-status' }, h('p', { class: 'muted', text: 'Loading…' }));
  const tasks = h('div', { class: 'panel' });
  const figures = h('div', { class: 'panel', id: 'server-figures' }, h('h3', { text: 'Figures' }), h('p', { class: 'muted', text: 'polling /metrics every 2 s' }));
  const backup = h('button', { type: 'button', id: 'backup', text: 'Download a backup' });
  replace(root, h('h1', { text: 'Server' }), h('div', { class: 'cols' }, h('div', { class: 'stack' }, status, tasks), figures));

  backup.addEventListener('click', async () => {
    try {
      const { response } = await api.request('POST', `${api.v1()}/admin/backup`, { signal, raw: true, label: 'backup' });
      download(`mosaicdb-${new Date().toISOString().replace(/[:.]/g, '-')}.backup`, await response.blob());
      say('backup downloaded', 'ok');
    } catch (e) { fail(e); }
  });

  const probe = (path) => api.request('GET', path, { signal, quiet: true, label: path }).then((r) => ({ ok: true, data: r.data }), (e) => ({ ok: false, e }));
  const [healthR, readyR, infoR, statsR, tasksR] = await Promise.all([
    probe('/health'), probe('/ready'), probe(`${api.v1()}/info`), probe(`${api.v1()}/changes/stats`), probe(`${api.v1()}/admin/tasks`),
  ]);
  const row = (k, v) => [h('dt', { text: k }), h('dd', {}, v)];
  const badge = (r, yes) => h('span', { class: r.ok ? 'badge ok' : 'badge bad', text: r.ok ? yes : (r.e.code || r.e.message) });
  const info = infoR.ok ? infoR.data : null;
  replace(status,
    h('h3', { text: 'Status' }),
    h('dl', { class: 'plan' },
      row('health', badge(healthR, 'live')),
      row('readiness', badge(readyR, 'ready')),
      info ? [
        row('version', info.version),
        row('uptime', `${Math.floor(info.uptime_seconds / 3600)} h ${Math.floor((info.uptime_seconds % 3600) / 60)} min`),
        row('durability', info.durability),
        row('writable', info.writable ? 'yes' : 'no'),
        row('cluster role', info.cluster ? info.cluster.role : ''),
        row('data directory', info.data_dir || '(shown to admins)'),
        row('imports / backups running', `${info.imports_running} / ${info.backups_running}`),
        row('graph memory', info.graph_memory ? `${info.graph_memory.state}: ${info.graph_memory.vertices ?? '?'} vertices, ${info.graph_memory.edges ?? '?'} edges, ${bytes(info.graph_memory.bytes || 0)}` : ''),
      ] : row('info', infoR.e.message),
      statsR.ok ? row('changefeed', `seq ${statsR.data.first_seq ?? '–'} … ${statsR.data.last_seq}, ${statsR.data.events} events, ${bytes(statsR.data.bytes)}`) : null),
    info ? h('details', {}, h('summary', { text: 'Keys per family' }), h('table', { class: 'grid' }, h('tbody', {},
      info.keys.map((k) => h('tr', {}, h('td', { text: k.family }), h('td', { class: 'num', text: k.keys })))))) : null);
  replace(tasks, h('h3', { text: 'Tasks' }),
    tasksR.ok ? h('div', { class: 'tail' }, h('table', { class: 'grid', id: 'tasks' },
      h('thead', {}, h('tr', {}, ['task', 'every', 'runs', 'last run', 'last removed', 'error'].map((c) => h('th', { text: c })))),
      h('tbody', {}, tasksR.data.tasks.map((t) => h('tr', { title: t.description },
        h('td', { text: t.name + (t.running ? ' (running)' : '') }), h('td', { text: `${t.interval_ms / 1000} s` }), h('td', { class: 'num', text: t.runs }),
        h('td', { text: (t.last_started_at || '').replace('T', ' ').replace(/\.\d+/, '') }), h('td', { class: 'num', text: t.last_removed }), h('td', { class: 'error', text: t.last_error || '' }))))))
      : h('p', { class: 'muted', text: `tasks and backups need an admin key (${tasksR.e.message})` }),
    tasksR.ok ? h('div', { class: 'row' }, backup) : null);

  // -- figures from /metrics
  const history = new Map(); // name → values shown
  let previous = null;
  const boxes = new Map();
  async function poll() {
    try {
      const r = await api.request('GET', '/metrics', { signal, quiet: true, track: false });
      const now = sums(r.data), at = performance.now();
      for (const [name, kind, label] of FIGURES) {
        if (!now.has(name)) continue;
        let v = now.get(name);
        if (kind === 'rate') {
          if (!previous || !previous.values.has(name)) continue;
          v = (v - previous.values.get(name)) / ((at - previous.at) / 1000);
        }
        const list = history.get(name) || [];
        list.push(v);
        if (list.length > 60) list.shift();
        history.set(name, list);
        if (!boxes.has(name)) {
          const canvas = h('canvas', { class: 'spark' });
          const value = h('span', { class: 'num' });
          boxes.set(name, { canvas, value, i: boxes.size });
          figures.append(h('div', {}, h('div', { class: 'row' }, h('strong', { text: label }), value), canvas));
        }
        const box = boxes.get(name);
        box.value.textContent = Number(v.toPrecision(4)).toString();
        sparkline(box.canvas, list, box.i);
      }
      previous = { values: now, at };
    } catch (e) {
      if (api.aborted(e)) return;
      if (!figures.querySelector('.error')) figures.append(h('p', { class: 'error', text: `/metrics: ${e.message}` }));
    }
  }
  poll();
  const timer = setInterval(poll, 2000);
  const redraw = () => { for (const [name, box] of boxes) sparkline(box.canvas, history.get(name) || [], box.i); };
  window.addEventListener('themechange', redraw);
  return () => { clearInterval(timer); window.removeEventListener('themechange', redraw); };
}
