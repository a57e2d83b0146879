// A force-directed graph drawn on a canvas: repulsion between every pair (n ≤ a few hundred,
// so O(n²) per tick is cheap), springs along edges, a pull to the centre, velocity damping and a
// cooling `alpha` that stops the animation once the layout settles. Drag a node to move it (it
// stays pinned), drag the background to pan, the wheel zooms; a click reports the node under the
// pointer. Colours come from the theme's CSS variables at each frame.

const PALETTE = ['--s1', '--s2', '--s3', '--s4', '--s5', '--s6', '--s7', '--s8'];

export class ForceGraph {
  constructor(canvas, { onClick, onDoubleClick } = {}) {
    this.canvas = canvas;
    this.nodes = new Map(); // id → {id, label, group, x, y, vx, vy, pinned}
    this.edges = new Map(); // id → {id, from, to, label}
    this.groups = new Map(); // group → palette index
    this.highlight = new Set(); // node and edge ids drawn emphasised
    this.selected = null;
    this.view = { x: 0, y: 0, k: 1 };
    this.autoFit = true; // follows the layout until the user moves or zooms it
    this.alpha = 0;
    this.frame = null;
    this.onClick = onClick;
    this.onDoubleClick = onDoubleClick;
    this.bind();
    this.resize = () => this.draw();
    window.addEventListener('resize', this.resize);
    window.addEventListener('themechange', this.resize);
  }

  destroy() {
    cancelAnimationFrame(this.frame);
    window.removeEventListener('resize', this.resize);
    window.removeEventListener('themechange', this.resize);
  }

  colorOf(group) {
    if (!this.groups.has(group)) this.groups.set(group, this.groups.size % PALETTE.length);
    return getComputedStyle(document.documentElement).getPropertyValue(PALETTE[this.groups.get(group)]).trim() || '#888';
  }

  /** Adds a node near `near` (a node id) when given; answers whether it was new. */
  addNode(id, { label = id, group = '', near = null } = {}) {
    if (this.nodes.has(id)) return false;
    const anchor = near && this.nodes.get(near);
    const angle = Math.random() * Math.PI * 2;
    const r = anchor ? 40 : 120 * Math.random();
    this.nodes.set(id, { id, label, group, x: (anchor ? anchor.x : 0) + r * Math.cos(angle), y: (anchor ? anchor.y : 0) + r * Math.sin(angle), vx: 0, vy: 0, pinned: false });
    return true;
  }

  addEdge(id, from, to, label = '') {
    if (!this.edges.has(id) && this.nodes.has(from) && this.nodes.has(to)) this.edges.set(id, { id, from, to, label });
  }

  clear() { this.nodes.clear(); this.edges.clear(); this.highlight.clear(); this.selected = null; this.draw(); }

  /** Runs the simulation until it cools. */
  kick() {
    this.alpha = 1;
    if (!this.frame) this.frame = requestAnimationFrame(() => this.tick());
  }

  tick() {
    this.frame = null;
    const nodes = [...this.nodes.values()];
    const a = this.alpha;
    for (let i = 0; i < nodes.length; i++) {
      const p = nodes[i];
      for (let j = i + 1; j < nodes.length; j++) {
        const q = nodes[j];
        let dx = q.x - p.x, dy = q.y - p.y;
        let d2 = dx * dx + dy * dy;
        if (d2 < 0.01) { dx = Math.random() - 0.5; dy = Math.random() - 0.5; d2 = 0.5; }
        const f = (900 * a) / d2;
        p.vx -= dx * f; p.vy -= dy * f; q.vx += dx * f; q.vy += dy * f;
      }
      p.vx -= p.x * 0.002 * a; p.vy -= p.y * 0.002 * a;
    }
    for (const e of this.edges.values()) {
      const p = this.nodes.get(e.from), q = this.nodes.get(e.to);
      if (!p || !q || p === q) continue;
      const dx = q.x - p.x, dy = q.y - p.y;
      const d = Math.sqrt(dx * dx + dy * dy) || 1;
      const f = ((d - 70) / d) * 0.06 * a;
      p.vx += dx * f; p.vy += dy * f; q.vx -= dx * f; q.vy -= dy * f;
    }
    for (const p of nodes) {
      if (p.pinned) { p.vx = p.vy = 0; continue; }
      p.vx *= 0.6; p.vy *= 0.6;
      p.x += Math.max(-20, Math.min(20, p.vx)); p.y += Math.max(-20, Math.min(20, p.vy));
    }
    this.alpha *= 0.97;
    if (this.autoFit) this.fit(false);
    this.draw();
    if (this.alpha > 0.01) this.frame = requestAnimationFrame(() => this.tick());
  }

  /** The size in CSS pixels, and the canvas's backing store sized to the device's pixels. */
  size() {
    const { canvas } = this;
    const w = canvas.clientWidth, h = canvas.clientHeight, dpr = window.devicePixelRatio || 1;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr);
    }
    return { w, h, dpr };
  }

  toScreen(p, w, h) { return [w / 2 + (p.x + this.view.x) * this.view.k, h / 2 + (p.y + this.view.y) * this.view.k]; }

  draw() {
    const { w, h, dpr } = this.size();
    const ctx = this.canvas.getContext('2d');
    const css = getComputedStyle(document.documentElement);
    const fg = css.getPropertyValue('--fg').trim(), muted = css.getPropertyValue('--muted').trim(), accent = css.getPropertyValue('--danger').trim();
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    ctx.lineWidth = 1;
    for (const e of this.edges.values()) {
      const p = this.nodes.get(e.from), q = this.nodes.get(e.to);
      if (!p || !q) continue;
      const [x1, y1] = this.toScreen(p, w, h), [x2, y2] = this.toScreen(q, w, h);
      const on = this.highlight.has(e.id);
      ctx.strokeStyle = on ? accent : muted;
      ctx.lineWidth = on ? 3 : 1;
      ctx.beginPath(); ctx.moveTo(x1, y1); ctx.lineTo(x2, y2); ctx.stroke();
      // the arrow head, at the target's rim
      const ang = Math.atan2(y2 - y1, x2 - x1), tx = x2 - Math.cos(ang) * 9, ty = y2 - Math.sin(ang) * 9;
      ctx.fillStyle = on ? accent : muted;
      ctx.beginPath(); ctx.moveTo(tx, ty);
      ctx.lineTo(tx - 7 * Math.cos(ang - 0.4), ty - 7 * Math.sin(ang - 0.4));
      ctx.lineTo(tx - 7 * Math.cos(ang + 0.4), ty - 7 * Math.sin(ang + 0.4));
      ctx.closePath(); ctx.fill();
    }
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    for (const p of this.nodes.values()) {
      const [x, y] = this.toScreen(p, w, h);
      const on = this.highlight.has(p.id) || this.selected === p.id;
      ctx.fillStyle = this.colorOf(p.group);
      ctx.beginPath(); ctx.arc(x, y, on ? 9 : 7, 0, Math.PI * 2); ctx.fill();
      if (on) { ctx.strokeStyle = accent; ctx.lineWidth = 2; ctx.stroke(); }
      ctx.fillStyle = fg;
      ctx.fillText(p.label.length > 28 ? p.label.slice(0, 27) + '…' : p.label, x + 11, y);
    }
  }

  nodeAt(sx, sy) {
    const { w, h } = { w: this.canvas.clientWidth, h: this.canvas.clientHeight };
    let best = null, bestD = 14 * 14;
    for (const p of this.nodes.values()) {
      const [x, y] = this.toScreen(p, w, h);
      const d = (x - sx) ** 2 + (y - sy) ** 2;
      if (d < bestD) { best = p; bestD = d; }
    }
    return best;
  }

  bind() {
    const c = this.canvas;
    let drag = null, moved = false;
    const pos = (ev) => { const r = c.getBoundingClientRect(); return [ev.clientX - r.left, ev.clientY - r.top]; };
    c.addEventListener('pointerdown', (ev) => {
      const [x, y] = pos(ev);
      const node = this.nodeAt(x, y);
      drag = { node, x, y, vx: this.view.x, vy: this.view.y };
      moved = false;
      c.setPointerCapture(ev.pointerId);
    });
    c.addEventListener('pointermove', (ev) => {
      if (!drag) return;
      const [x, y] = pos(ev);
      if (Math.abs(x - drag.x) + Math.abs(y - drag.y) > 3) moved = true;
      if (!moved) return;
      this.autoFit = false;
      if (drag.node) {
        drag.node.x = (x - c.clientWidth / 2) / this.view.k - this.view.x;
        drag.node.y = (y - c.clientHeight / 2) / this.view.k - this.view.y;
        drag.node.pinned = true;
      } else {
        this.view.x = drag.vx + (x - drag.x) / this.view.k;
        this.view.y = drag.vy + (y - drag.y) / this.view.k;
      }
      this.draw();
    });
    c.addEventListener('pointerup', () => {
      if (drag && !moved && this.onClick) this.onClick(drag.node ? drag.node.id : null);
      if (drag && drag.node && moved) this.kick();
      drag = null;
    });
    c.addEventListener('dblclick', (ev) => {
      const node = this.nodeAt(...pos(ev));
      if (node && this.onDoubleClick) this.onDoubleClick(node.id);
    });
    c.addEventListener('wheel', (ev) => {
      ev.preventDefault();
      this.autoFit = false;
      this.view.k = Math.max(0.1, Math.min(5, this.view.k * (ev.deltaY < 0 ? 1.1 : 0.9)));
      this.draw();
    }, { passive: false });
  }

  /** Zooms so that every node shows. */
  fit(draw = true) {
    if (!this.nodes.size) return;
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const p of this.nodes.values()) { x0 = Math.min(x0, p.x); y0 = Math.min(y0, p.y); x1 = Math.max(x1, p.x); y1 = Math.max(y1, p.y); }
    const w = this.canvas.clientWidth || 600, h = this.canvas.clientHeight || 400;
    this.view.k = Math.min(2, Math.min(w / (x1 - x0 + 160), h / (y1 - y0 + 80)));
    this.view.x = -(x0 + x1) / 2; this.view.y = -(y0 + y1) / 2;
    if (draw) this.draw();
  }
}
