// Time series: the metrics (with a search box), a metric's series and labels, a time range, and
// a PromQL query charted over it through the Prometheus API (`query_range`) with the step chosen
// from the range and the chart's width (so a range never asks for more points than pixels);
// chart, table and CSV; auto refresh every 10 s.
import { h, replace, when, select, download, toCsv } from './dom.js';
import * as api from './api.js';
import { link, fail } from './app.js';
import { lineChart, seriesColor } from './chart.js';

const RANGES = [['5m', 3e5], ['15m', 9e5], ['1h', 36e5], ['6h', 216e5], ['24h', 864e5], ['7d', 6048e5], ['30d', 2592e6]];
const MAX_SERIES = 20;

export async function render(ctx) {
  const { root, signal } = ctx;
  const metric = ctx.parts[0] || '';
  const search = h('input', { type: 'search', placeholder: 'filter metrics', 'aria-label': 'filter metrics' });
  const listBox = h('div', {});
  const page = h('div', {});
  replace(root, h('h1', { text: 'Time series' }), h('div', { class: 'side' }, page, h('div', { class: 'panel' }, h('h3', { text: 'Metrics' }), search, listBox)));
  let metrics = [];
  const drawList = () => {
    const f = search.value.trim().toLowerCase();
    const shown = metrics.filter((m) => m.name.toLowerCase().includes(f)).slice(0, 500);
    replace(listBox, shown.length ? h('ul', {}, shown.map((m) => h('li', {},
      h('a', { href: link('timeseries', m.name), text: m.name }), h('span', { class: 'muted', text: ` ${m.series} series, ${m.points} points` })))) : h('p', { class: 'muted', text: 'No metrics.' }));
  };
  search.addEventListener('input', drawList);
  try {
    metrics = (await api.get(`${api.v1()}/timeseries`, { signal, label: 'metrics' })).metrics;
    drawList();
  } catch (e) { fail(e); }
  if (!metric) { replace(page, h('p', { class: 'muted', text: 'Choose a metric.' })); return; }
  return chartPage(ctx, page, metric, metrics.find((m) => m.name === metric));
}

async function chartPage(ctx, page, metric, info) {
  const { signal, params } = ctx;
  const plain = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(metric);
  const query = h('input', { id: 'promql', 'aria-label': 'PromQL', size: 50, class: 'mono',
    value: params.get('q') || (plain ? metric : `{__name__="${metric.replace(/["\\]/g, '\\$&')}"}`) });
  const range = select(RANGES.map(([k]) => k), params.get('range') || '1h', { 'aria-label': 'range' });
  const anchor = select([['data', 'ending at the last point'], ['now', 'ending now']], params.get('end') || 'data', { 'aria-label': 'range end' });
  const auto = h('input', { type: 'checkbox', 'aria-label': 'auto refresh' });
  const canvas = h('canvas', { class: 'chart', id: 'ts-chart' });
  const legend = h('div', { class: 'legend', id: 'ts-legend' });
  const stats = h('p', { class: 'muted', id: 'ts-stats' });
  const table = h('div', {});
  const seriesBox = h('div', {});
  let chart = null, rows = [], timer = null;
  replace(page,
    h('h2', { text: metric }),
    info ? h('p', { class: 'muted', text: `${info.series} series · ${info.points} points · ${when(info.first)} – ${when(info.last)}` }) : null,
    h('form', { class: 'row', on: { submit: (ev) => { ev.preventDefault(); run(); } } },
      query, range, anchor, h('button', { class: 'primary', type: 'submit', id: 'ts-run', text: 'Run' }),
      h('label', {}, auto, ' auto refresh'),
      h('button', { type: 'button', text: 'CSV', on: { click: () => download(`${metric}.csv`, toCsv(['time', 'series', 'value'], rows), 'text/csv') } })),
    stats, canvas, legend, h('details', {}, h('summary', { text: 'Points' }), table),
    h('h3', { text: 'Series' }), seriesBox);

  async function run() {
    const span = RANGES.find(([k]) => k === range.value)[1];
    const last = info && info.last ? info.last : Date.now();
    const end = anchor.value === 'now' ? Date.now() : last + 1000;
    const start = end - span;
    // one point per two pixels at most
    const step = Math.max(1, Math.ceil(span / 1000 / Math.max(100, (canvas.clientWidth || 800) / 2)));
    const p = new URLSearchParams({ query: query.value, start: String(start / 1000), end: String(end / 1000), step: String(step) });
    const started = performance.now();
    try {
      const answer = await api.get(`${api.prom()}/query_range?${p}`, { signal, label: 'query_range' });
      const ms = performance.now() - started;
      const result = (answer.data && answer.data.result) || [];
      const series = result.slice(0, MAX_SERIES).map((r) => ({
        name: labelsOf(r.metric), points: (r.values || []).map(([t, v]) => [t * 1000, Number(v)]).filter(([, v]) => Number.isFinite(v)),
      }));
      rows = series.flatMap((s) => s.points.map(([t, v]) => ({ time: new Date(t).toISOString(), series: s.name, value: v })));
      if (chart) chart.destroy();
      chart = lineChart(canvas, series, { xRange: [start, end] });
      replace(legend, series.map((s, i) => { const sw = h('span', { class: 'swatch' }); sw.style.background = seriesColor(i); return h('span', {}, sw, s.name); }));
      stats.textContent = `${result.length} series${result.length > MAX_SERIES ? ` (first ${MAX_SERIES} drawn)` : ''} · ${rows.length} points · step ${step}s · ${ms.toFixed(0)} ms`;
      replace(table, h('table', { class: 'grid' }, h('thead', {}, h('tr', {}, ['time', 'series', 'value'].map((c) => h('th', { text: c })))),
        h('tbody', {}, rows.slice(-200).map((r) => h('tr', {}, h('td', { text: r.time }), h('td', { text: r.series }), h('td', { class: 'num', text: r.value }))))));
      history.replaceState(null, '', link('timeseries', metric, new URLSearchParams({ q: query.value, range: range.value, end: anchor.value })));
    } catch (e) { fail(e); stats.textContent = `${e.code || 'error'}: ${e.message}`; }
  }
  auto.addEventListener('change', () => { clearInterval(timer); timer = auto.checked ? setInterval(run, 10000) : null; });
  range.addEventListener('change', run);
  anchor.addEventListener('change', run);

  api.get(`${api.v1()}/timeseries/${api.seg(metric)}/series?limit=100`, { signal, label: 'series' }).then((pageOf) => {
    replace(seriesBox, h('table', { class: 'grid' },
      h('thead', {}, h('tr', {}, ['entity', 'labels', 'points', 'last'].map((c) => h('th', { text: c })))),
      h('tbody', {}, pageOf.series.map((s) => h('tr', { class: 'link', title: 'chart this series', on: { click: () => {
        const sel = Object.keys(s.labels || {}).length ? Object.entries(s.labels).map(([k, v]) => `${k}="${String(v).replace(/["\\]/g, '\\$&')}"`).join(',') : null;
        if (sel && plain) { query.value = `${metric}{${sel}}`; run(); }
      } } }, h('td', { text: s.entity }), h('td', { text: labelsOf(s.labels) }), h('td', { class: 'num', text: s.points }), h('td', { text: when(s.last) }))))),
    pageOf.cursor ? h('p', { class: 'muted', text: 'more series: the first 100 shown' }) : null);
  }, fail);
  await run();
  return () => { clearInterval(timer); if (chart) chart.destroy(); };
}

function labelsOf(labels) {
  const entries = Object.entries(labels || {}).filter(([k]) => k !== '__name__');
  const name = labels && labels.__name__ ? labels.__name__ : '';
  return entries.length ? `${name}{${entries.map(([k, v]) => `${k}="${v}"`).join(', ')}}` : name || '(series)';
}
