// The graph explorer: start from a vertex (`table/id`), expand its neighbours (a click selects a
// vertex and shows its document; a double click, or Expand, loads its neighbours; Depth walks
// further with a traversal), colours by table, the shortest path to another vertex drawn
// emphasised. At most 300 vertices are drawn: what a walk finds beyond that is listed in a table.
import { h, replace, jsonBlock, select } from './dom.js';
import * as api from './api.js';
import { link, go, say, fail } from './app.js';
import { ForceGraph } from './force.js';

const CAP = 300;

export async function render(ctx) {
  const { root, signal, params } = ctx;
  const start = h('input', { id: 'graph-start', placeholder: 'table/id', 'aria-label': 'start vertex', size: 28, value: params.get('start') || '' });
  const direction = select(['any', 'out', 'in'], params.get('direction') || 'any', { 'aria-label': 'direction' });
  const edges = h('input', { placeholder: 'edge tables (all)', 'aria-label': 'edge tables', size: 16, value: params.get('edges') || '' });
  const depth = select(['1', '2', '3', '4'], '1', { 'aria-label': 'depth' });
  const target = h('input', { id: 'graph-target', placeholder: 'table/id', 'aria-label': 'path to', size: 20 });
  const canvas = h('canvas', { class: 'graph', id: 'graph-canvas', 'aria-label': 'graph' });
  const side = h('div', { class: 'panel', id: 'graph-side' }, h('p', { class: 'muted', text: 'Click a vertex to see it; double-click to expand it.' }));
  const legend = h('div', { class: 'legend' });
  const overflow = h('div', { id: 'graph-overflow' });
  const count = h('span', { class: 'muted', id: 'graph-count' });
  replace(root,
    h('h1', { text: 'Graph' }),
    h('form', { class: 'row', id: 'graph-form', on: { submit: (ev) => { ev.preventDefault(); begin(); } } },
      start, direction, edges, h('label', {}, 'depth ', depth), h('button', { class: 'primary', type: 'submit', text: 'Start' }),
      h('span', { class: 'muted', text: '·' }), target, h('button', { type: 'button', id: 'graph-path', text: 'Shortest path', on: { click: path } }),
      h('button', { type: 'button', text: 'Fit', on: { click: () => { graph.autoFit = true; graph.fit(); } } }), count),
    h('div', { class: 'side' }, h('div', {}, canvas, legend, overflow), side));

  const graph = new ForceGraph(canvas, { onClick: show, onDoubleClick: expand });
  const beyond = []; // vertices found past the cap
  const expanded = new Set();

  const tableOf = (v) => v.slice(0, v.indexOf('/'));
  function addVertex(v, near) {
    if (graph.nodes.has(v)) return true;
    if (graph.nodes.size >= CAP) { if (!beyond.includes(v)) beyond.push(v); return false; }
    graph.addNode(v, { label: v, group: tableOf(v), near });
    return true;
  }
  function refresh() {
    count.textContent = `${graph.nodes.size} vertices, ${graph.edges.size} edges`;
    replace(legend, [...new Set([...graph.nodes.values()].map((n) => n.group))].map((g) => {
      const sw = h('span', { class: 'swatch' });
      sw.style.background = graph.colorOf(g);
      return h('span', {}, sw, g);
    }));
    replace(overflow, beyond.length ? [h('p', { class: 'notice', text: `${beyond.length} more vertices past the ${CAP}-vertex cap, not drawn:` }),
      h('table', { class: 'grid' }, h('tbody', {}, beyond.slice(0, 500).map((v) => h('tr', {}, h('td', {}, h('a', { href: docLink(v), text: v }))))))] : []);
    graph.kick();
  }
  const docLink = (v) => { const i = v.indexOf('/'); return link('tables', v.slice(0, i), v.slice(i + 1)); };

  async function expand(v) {
    const edgeParam = edges.value.trim();
    try {
      if (Number(depth.value) > 1) {
        const body = { start: v, direction: direction.value, max_depth: Number(depth.value), return: 'paths', limit: CAP, max_visited: 5000 };
        if (edgeParam) body.edges = edgeParam.split(',').map((s) => s.trim());
        const answer = await api.post(`${api.v1()}/graph/traverse`, body, { signal, label: 'traverse' });
        for (const p of answer.paths || []) {
          const vs = p.vertices || [];
          for (let i = 0; i < vs.length; i++) {
            if (!addVertex(vs[i], vs[i - 1] || v)) break;
            if (i > 0 && p.edges && p.edges[i - 1]) graph.addEdge(p.edges[i - 1], vs[i - 1], vs[i], p.edges[i - 1]);
          }
        }
        for (const x of answer.vertices || []) addVertex(x._id, v);
      } else {
        const q = new URLSearchParams({ vertex: v, direction: direction.value, limit: '200' });
        if (edgeParam) q.set('edges', edgeParam);
        const page = await api.get(`${api.v1()}/graph/neighbors?${q}`, { signal, label: 'neighbours' });
        for (const n of page.neighbors) {
          if (!addVertex(n.vertex, v)) continue;
          const [from, to] = n.direction === 'out' ? [v, n.vertex] : [n.vertex, v];
          graph.addEdge(n.edge, from, to, n.edge);
        }
        if (page.cursor) say(`${v}: more than 200 neighbours, the first 200 drawn`);
      }
      expanded.add(v);
      refresh();
    } catch (e) { fail(e); }
  }

  async function show(v) {
    graph.selected = v;
    graph.draw();
    if (!v) return;
    const i = v.indexOf('/');
    replace(side, h('h3', {}, h('a', { href: docLink(v), text: v })),
      h('div', { class: 'row' },
        h('button', { type: 'button', text: expanded.has(v) ? 'Expand again' : 'Expand', on: { click: () => expand(v) } }),
        h('button', { type: 'button', text: 'Path from start', on: { click: () => { target.value = v; path(); } } })),
      h('p', { class: 'muted', text: 'Loading…' }));
    try {
      const doc = await api.get(`${api.v1()}/tables/${api.seg(v.slice(0, i))}/documents/${api.seg(v.slice(i + 1))}`, { signal, label: 'vertex', quiet: true });
      side.lastChild.replaceWith(jsonBlock(doc));
    } catch (e) { side.lastChild.replaceWith(h('p', { class: 'muted', text: e.status === 404 ? 'no document (a vertex named by edges only)' : e.message })); }
  }

  async function path() {
    const from = start.value.trim(), to = target.value.trim();
    if (!from || !to) { say('a start and a target vertex are needed', 'error'); return; }
    const body = { from, to, direction: direction.value };
    if (edges.value.trim()) body.edges = edges.value.split(',').map((s) => s.trim());
    try {
      const answer = await api.post(`${api.v1()}/graph/shortest-path`, body, { signal, label: 'shortest path' });
      const vs = answer.vertices || [];
      graph.highlight.clear();
      if (!vs.length) { say(`no path from ${from} to ${to}`, 'error'); graph.draw(); return; }
      for (let i = 0; i < vs.length; i++) {
        addVertex(vs[i], vs[i - 1] || from);
        graph.highlight.add(vs[i]);
        if (i > 0 && answer.edges[i - 1]) { graph.addEdge(answer.edges[i - 1], vs[i - 1], vs[i]); graph.highlight.add(answer.edges[i - 1]); }
      }
      say(`path of ${vs.length - 1} edge(s), cost ${answer.cost}`, 'ok');
      refresh();
    } catch (e) { fail(e); }
  }

  function begin() {
    const v = start.value.trim();
    if (!/^[^/]+\/.+$/.test(v)) { say('the start is table/id', 'error'); return; }
    const p = new URLSearchParams({ start: v });
    if (direction.value !== 'any') p.set('direction', direction.value);
    if (edges.value.trim()) p.set('edges', edges.value.trim());
    const want = link('graph', p);
    if (location.hash !== want) { go(want); return; }
    graph.clear(); beyond.length = 0; expanded.clear();
    addVertex(v, null);
    refresh();
    expand(v).then(() => { graph.fit(); show(v); });
  }
  if (start.value) begin();

  return () => graph.destroy();
}
