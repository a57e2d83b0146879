// The changefeed tail: `/v1/changes/stream` read with fetch (EventSource cannot send the API
// key) and parsed as Server-Sent Events here; it starts at the feed's last event (no replay of
// the whole feed unless asked), filters by table (on the server) and operation, pauses, resumes
// from the last event id (`Last-Event-ID`), clears, reconnects after a drop, and keeps at most
// 500 events on the page.
import { h, replace, when, short, select } from './dom.js';
import * as api from './api.js';
import { link, fail } from './app.js';

const KEEP = 500;

/** Feeds `text` (a chunk of an event stream) to the parser state `s`; calls `onEvent({id, data})`
 *  for each complete event. Comments (keep-alives) and unknown fields are skipped. */
export function parseSse(s, text, onEvent) {
  s.buffer += text;
  let nl;
  while ((nl = s.buffer.search(/\r\n|\r|\n/)) >= 0) {
    const line = s.buffer.slice(0, nl);
    s.buffer = s.buffer.slice(nl + (s.buffer.startsWith('\r\n', nl) ? 2 : 1));
    if (line === '') {
      if (s.data.length) onEvent({ id: s.id, data: s.data.join('\n') });
      s.data = [];
      continue;
    }
    if (line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') s.data.push(value);
    else if (field === 'id') s.id = value;
  }
}

export async function render(ctx) {
  const { root, signal, params } = ctx;
  const tables = h('input', { placeholder: 'tables (all)', 'aria-label': 'tables', size: 20, value: params.get('table') || '' });
  const ops = select([['', 'every operation'], ['put', 'put'], ['delete', 'delete']], '', { 'aria-label': 'operation' });
  const from = select([['now', 'from now'], ['oldest', 'from the oldest kept']], 'now', { 'aria-label': 'start' });
  const pause = h('button', { type: 'button', id: 'tail-pause', text: 'Pause' });
  const clear = h('button', { type: 'button', text: 'Clear' });
  const state = h('span', { class: 'badge', id: 'tail-state', text: 'connecting' });
  const body = h('tbody', { id: 'tail-rows' });
  const count = h('span', { class: 'muted' });
  replace(root,
    h('h1', { text: 'Changes' }),
    h('div', { class: 'row' }, tables, ops, from, pause, clear, state, count),
    h('div', { class: 'tail' }, h('table', { class: 'grid' },
      h('thead', {}, h('tr', {}, ['seq', 'time', 'op', 'table', 'id', 'document'].map((c) => h('th', { text: c })))), body)));

  let lastId = null; // the last event id seen: where a resume starts
  let running = null; // the AbortController of the stream
  let paused = false;
  let shown = 0;
  let retry = null;

  function add(ev) {
    if (ops.value && ev.op !== ops.value) return;
    const doc = ev.document ? short(ev.document, 120) : '';
    const tr = h('tr', {},
      h('td', { class: 'num', text: ev.seq }), h('td', { text: when(ev.ts) }), h('td', { text: ev.op }),
      h('td', {}, h('a', { href: link('tables', ev.table), text: ev.table })),
      h('td', {}, ev.op === 'delete' ? ev.id : h('a', { href: link('tables', ev.table, ev.id), text: ev.id })),
      h('td', { class: 'cell mono', text: doc }));
    body.prepend(tr);
    while (body.children.length > KEEP) body.lastChild.remove();
    shown++;
    count.textContent = `${shown} event(s) seen, ${body.children.length} kept`;
  }

  async function connect() {
    clearTimeout(retry);
    running = new AbortController();
    const mine = running;
    signal.addEventListener('abort', () => mine.abort(), { once: true });
    const q = new URLSearchParams();
    if (tables.value.trim()) q.set('table', tables.value.trim());
    const headers = { Accept: 'text/event-stream' };
    if (lastId !== null) headers['Last-Event-ID'] = lastId;
    else if (from.value === 'now') {
      try {
        const stats = await api.get(`${api.v1()}/changes/stats`, { signal: mine.signal, label: 'changes stats' });
        q.set('since', String(stats.last_seq));
        lastId = String(stats.last_seq); // a resume before any event starts here too
      } catch (e) { if (api.aborted(e)) return; fail(e); }
    } else { q.set('since', '0'); lastId = '0'; }
    try {
      const { response } = await api.request('GET', `${api.v1()}/changes/stream?${q}`, { headers, signal: mine.signal, raw: true, track: false });
      state.textContent = 'live'; state.className = 'badge ok';
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      const parser = { buffer: '', data: [], id: null };
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        parseSse(parser, value, ({ id, data }) => {
          if (id) lastId = id;
          try { add(JSON.parse(data)); } catch { /* not an event of ours */ }
        });
      }
      throw new Error('the stream ended');
    } catch (e) {
      if (mine.signal.aborted) return;
      state.textContent = `reconnecting (${e.code || e.message})`; state.className = 'badge warn';
      if (e.status === 401 || e.status === 403) { state.textContent = e.message; state.className = 'badge bad'; return; }
      retry = setTimeout(connect, 2000);
    }
  }
  const stop = () => { clearTimeout(retry); if (running) running.abort(); running = null; };

  pause.addEventListener('click', () => {
    paused = !paused;
    pause.textContent = paused ? 'Resume' : 'Pause';
    if (paused) { stop(); state.textContent = 'paused'; state.className = 'badge'; } else connect();
  });
  clear.addEventListener('click', () => { body.replaceChildren(); shown = 0; count.textContent = ''; });
  const restart = () => { stop(); lastId = null; if (!paused) connect(); };
  tables.addEventListener('change', restart);
  from.addEventListener('change', restart);
  connect();
  return stop;
}
