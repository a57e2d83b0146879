// DOM helpers of the console. Every piece of data reaches the page as text (textContent, text
// nodes, attribute values): nothing here or in the views sets innerHTML, so a document holding
// `<script>` or `<img onerror>` shows as those characters.

/** An element: `attrs` sets properties (`class`, `text`, `on: {event: fn}`, anything else as
 *  an attribute), `children` are nodes, strings (as text) or arrays of them; null is skipped. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = String(v);
    else if (k === 'on') for (const [event, fn] of Object.entries(v)) el.addEventListener(event, fn);
    else if (k === 'value' || k === 'checked' || k === 'selected' || k === 'disabled' || k === 'hidden') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Empties `el` and puts `children` in it. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** `s` cut to `n` characters with an ellipsis. */
export function truncate(s, n = 80) {
  s = String(s);
  return s.length > n ? s.slice(0, n - 1) + '…' : s;
}

/** A value as a short string for a cell: strings as they are, the rest as JSON. */
export function short(v, n = 80) {
  if (v === undefined) return '';
  return truncate(typeof v === 'string' ? v : JSON.stringify(v), n);
}

/** A JSON value, pretty, as a `<pre>` of text. */
export function jsonBlock(value) {
  return h('pre', { class: 'json', text: JSON.stringify(value, null, 2) });
}

/** The private-use characters the console asks search highlights to be wrapped in: they cannot
 *  be HTML, and a document rarely holds them. */
export const MARK_PRE = '\uE000';
export const MARK_POST = '\uE001';

/** A highlighted fragment as nodes: the text between the sentinels in `<mark>`, all as text. */
export function highlighted(fragment) {
  const out = document.createDocumentFragment();
  let marked = false;
  for (const part of String(fragment).split(/([\uE000\uE001])/)) {
    if (part === MARK_PRE) marked = true;
    else if (part === MARK_POST) marked = false;
    else if (part) out.append(marked ? h('mark', { text: part }) : document.createTextNode(part));
  }
  return out;
}

/** Where a JSON text fails to parse: `{message, line, column}`, or null when it parses. */
export function jsonError(text) {
  try {
    JSON.parse(text);
    return null;
  } catch (e) {
    const m = /position (\d+)/.exec(e.message);
    let line = null, column = null;
    if (m) {
      const before = text.slice(0, Number(m[1]));
      line = before.split('\n').length;
      column = Number(m[1]) - before.lastIndexOf('\n');
    }
    return { message: e.message, line, column };
  }
}

/** A JSON editor: a textarea with a line under it that tells whether the text parses, Tab
 *  inserting two spaces, and Ctrl/Cmd+Enter calling `onSubmit`. */
export function jsonEditor(value, { rows = 12, onSubmit, label = 'JSON' } = {}) {
  const area = h('textarea', { rows, spellcheck: 'false', 'aria-label': label, class: 'json-editor' });
  area.value = typeof value === 'string' ? value : JSON.stringify(value, null, 2);
  const state = h('div', { class: 'muted json-state' });
  const check = () => {
    const e = area.value.trim() ? jsonError(area.value) : null;
    state.className = e ? 'error json-state' : 'muted json-state';
    state.textContent = e ? (e.line ? `line ${e.line}, column ${e.column}: ` : '') + e.message : 'valid JSON';
    return !e;
  };
  area.addEventListener('input', check);
  area.addEventListener('keydown', (ev) => {
    if (ev.key === 'Tab' && !ev.shiftKey) {
      ev.preventDefault();
      area.setRangeText('  ', area.selectionStart, area.selectionEnd, 'end');
    } else if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey) && onSubmit) {
      ev.preventDefault();
      onSubmit();
    }
  });
  check();
  return {
    area, state, check,
    el: h('div', { class: 'stack' }, area, state),
    value: () => JSON.parse(area.value),
    set: (v) => { area.value = typeof v === 'string' ? v : JSON.stringify(v, null, 2); check(); },
    format: () => { if (check()) area.value = JSON.stringify(JSON.parse(area.value), null, 2); },
  };
}

/** Runs `fn` once `ms` have passed without another call. */
export function debounce(fn, ms) {
  let timer;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}

/** Offers `text` as a file to save. */
export function download(name, text, type = 'application/json') {
  const url = URL.createObjectURL(text instanceof Blob ? text : new Blob([text], { type }));
  const a = h('a', { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

/** Rows as CSV (RFC 4180 quoting), with `columns` as the header. */
export function toCsv(columns, rows) {
  const cell = (v) => {
    const s = v === undefined || v === null ? '' : typeof v === 'string' ? v : JSON.stringify(v);
    return /[",\n\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  };
  return [columns.map(cell).join(','), ...rows.map((r) => columns.map((c) => cell(r[c])).join(','))].join('\r\n') + '\r\n';
}

/** The fields of a set of documents, `_id` first, in first-seen order (at most `max`). */
export function columnsOf(docs, max = 50) {
  const seen = new Set(['_id']);
  for (const d of docs) for (const k of Object.keys(d || {})) if (seen.size < max) seen.add(k);
  return [...seen];
}

/** A table of documents: the chosen columns, long values cut, a click on a value calling
 *  `onValue(column, value)` and one on the row `onRow(doc)`. At most `cap` rows are drawn. */
export function docTable(docs, columns, { onRow, onValue, cap = 1000 } = {}) {
  const body = h('tbody');
  for (const d of docs.slice(0, cap)) {
    const tr = h('tr', { class: onRow ? 'link' : null, on: onRow ? { click: () => onRow(d) } : {} });
    for (const c of columns) {
      const v = d ? d[c] : undefined;
      const span = h('span', { class: 'value', title: v === undefined ? '' : short(v, 2000), text: short(v) });
      if (onValue && v !== undefined && c !== '_id') {
        span.addEventListener('click', (ev) => { ev.stopPropagation(); onValue(c, v); });
      }
      tr.append(h('td', { class: 'cell' }, span));
    }
    body.append(tr);
  }
  const more = docs.length > cap ? h('p', { class: 'muted', text: `${docs.length - cap} more rows not drawn` }) : null;
  return h('div', {}, h('table', { class: 'grid docs' }, h('thead', {}, h('tr', {}, columns.map((c) => h('th', { text: c })))), body), more);
}

/** A date and time of milliseconds since the epoch, in UTC. */
export function when(ms) {
  if (ms === null || ms === undefined) return '';
  return new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

/** A count of bytes, readable. */
export function bytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

/** A `<select>` of `options` (strings, or [value, label] pairs) with `value` chosen. */
export function select(options, value, attrs = {}) {
  const el = h('select', attrs);
  for (const o of options) {
    const [v, label] = Array.isArray(o) ? o : [o, o];
    el.append(h('option', { value: v, text: label, selected: String(v) === String(value) }));
  }
  return el;
}
