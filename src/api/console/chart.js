// Canvas charts: a time-series line chart (several series, time axis in UTC, value axis, a hover
// read-out of the nearest point) and a sparkline. Colours are the theme's CSS variables read at
// each draw, so both themes are right and a theme switch redraws (`themechange`).

const PALETTE = ['--s1', '--s2', '--s3', '--s4', '--s5', '--s6', '--s7', '--s8'];
const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();
/** The colour of series `i`. */
export const seriesColor = (i) => css(PALETTE[i % PALETTE.length]) || '#888';

function fit(canvas) {
  const w = canvas.clientWidth, h = canvas.clientHeight, dpr = window.devicePixelRatio || 1;
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr);
  }
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return { ctx, w, h };
}

/** Round steps for an axis over [lo, hi] with about `n` ticks. */
function ticks(lo, hi, n) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / n, mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

const TIME_STEPS = [1e3, 5e3, 15e3, 3e4, 6e4, 3e5, 9e5, 18e5, 36e5, 108e5, 216e5, 432e5, 864e5, 6048e5, 2592e6, 31536e6];
function timeTicks(lo, hi, n) {
  const step = TIME_STEPS.find((s) => (hi - lo) / s <= n) || TIME_STEPS[TIME_STEPS.length - 1];
  const out = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi; t += step) out.push(t);
  return { out, step };
}
function timeLabel(t, step) {
  const iso = new Date(t).toISOString();
  if (step >= 864e5) return iso.slice(0, 10);
  if (step >= 6e4) return iso.slice(11, 16);
  return iso.slice(11, 19);
}
/** The least and greatest of column `k` of `rows` (a loop: spreading 10⁵ values overflows). */
function extent(rows, k) {
  let lo = Infinity, hi = -Infinity;
  for (const r of rows) { if (r[k] < lo) lo = r[k]; if (r[k] > hi) hi = r[k]; }
  return [lo, hi];
}
const num = (v) => (Math.abs(v) >= 1e6 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(2) : String(Number(v.toPrecision(6))));

/** A line chart in `canvas` of `series` = [{name, points: [[ms, value], …]}]. Answers an object
 *  whose `draw()` redraws and `destroy()` unbinds. */
export function lineChart(canvas, series, { xRange } = {}) {
  let hover = null;
  const all = series.flatMap((s) => s.points);
  function draw() {
    const { ctx, w, h } = fit(canvas);
    const fg = css('--fg'), muted = css('--muted'), grid = css('--grid');
    ctx.clearRect(0, 0, w, h);
    ctx.font = '11px system-ui, sans-serif';
    if (!all.length) { ctx.fillStyle = muted; ctx.fillText('no points in this range', 16, 24); return; }
    let [x0, x1] = xRange || extent(all, 0);
    if (x1 === x0) { x0 -= 1000; x1 += 1000; }
    let [y0, y1] = extent(all, 1);
    if (y1 === y0) { y0 -= 1; y1 += 1; }
    const pad = { l: 56, r: 12, t: 10, b: 24 };
    const X = (t) => pad.l + ((t - x0) / (x1 - x0)) * (w - pad.l - pad.r);
    const Y = (v) => h - pad.b - ((v - y0) / (y1 - y0)) * (h - pad.t - pad.b);
    ctx.strokeStyle = grid; ctx.fillStyle = muted; ctx.lineWidth = 1;
    ctx.textAlign = 'right'; ctx.textBaseline = 'middle';
    for (const v of ticks(y0, y1, 5)) {
      ctx.beginPath(); ctx.moveTo(pad.l, Y(v)); ctx.lineTo(w - pad.r, Y(v)); ctx.stroke();
      ctx.fillText(num(v), pad.l - 6, Y(v));
    }
    ctx.textAlign = 'center'; ctx.textBaseline = 'top';
    const { out, step } = timeTicks(x0, x1, Math.max(2, Math.floor((w - pad.l) / 90)));
    for (const t of out) {
      ctx.beginPath(); ctx.moveTo(X(t), pad.t); ctx.lineTo(X(t), h - pad.b); ctx.stroke();
      ctx.fillText(timeLabel(t, step), X(t), h - pad.b + 5);
    }
    series.forEach((s, i) => {
      ctx.strokeStyle = seriesColor(i); ctx.lineWidth = 1.5;
      ctx.beginPath();
      s.points.forEach(([t, v], j) => (j ? ctx.lineTo(X(t), Y(v)) : ctx.moveTo(X(t), Y(v))));
      ctx.stroke();
      if (s.points.length < 60) {
        ctx.fillStyle = seriesColor(i);
        for (const [t, v] of s.points) { ctx.beginPath(); ctx.arc(X(t), Y(v), 2, 0, Math.PI * 2); ctx.fill(); }
      }
    });
    if (hover) {
      let best = null, bestD = Infinity;
      series.forEach((s, i) => s.points.forEach(([t, v]) => {
        const d = (X(t) - hover[0]) ** 2 + (Y(v) - hover[1]) ** 2;
        if (d < bestD) { bestD = d; best = { s, i, t, v }; }
      }));
      if (best && bestD < 2500) {
        const x = X(best.t), y = Y(best.v);
        ctx.fillStyle = seriesColor(best.i); ctx.beginPath(); ctx.arc(x, y, 4, 0, Math.PI * 2); ctx.fill();
        const label = `${best.s.name}  ${new Date(best.t).toISOString().replace('T', ' ').slice(0, 19)}  ${num(best.v)}`;
        ctx.textAlign = 'left'; ctx.textBaseline = 'bottom';
        const tw = ctx.measureText(label).width;
        const lx = Math.min(x + 8, w - tw - 8);
        ctx.fillStyle = css('--panel'); ctx.fillRect(lx - 4, y - 22, tw + 8, 18);
        ctx.fillStyle = fg; ctx.fillText(label, lx, y - 6);
      }
    }
  }
  const move = (ev) => { const r = canvas.getBoundingClientRect(); hover = [ev.clientX - r.left, ev.clientY - r.top]; draw(); };
  const leave = () => { hover = null; draw(); };
  canvas.addEventListener('pointermove', move);
  canvas.addEventListener('pointerleave', leave);
  window.addEventListener('themechange', draw);
  window.addEventListener('resize', draw);
  draw();
  return {
    draw,
    destroy() {
      canvas.removeEventListener('pointermove', move);
      canvas.removeEventListener('pointerleave', leave);
      window.removeEventListener('themechange', draw);
      window.removeEventListener('resize', draw);
    },
  };
}

/** A sparkline of `values` in `canvas`, in series colour `i`. */
export function sparkline(canvas, values, i = 0) {
  const { ctx, w, h } = fit(canvas);
  ctx.clearRect(0, 0, w, h);
  if (values.length < 2) return;
  const [lo, hi] = extent(values.map((v) => [v]), 0), span = hi - lo || 1;
  ctx.strokeStyle = seriesColor(i); ctx.lineWidth = 1.5;
  ctx.beginPath();
  values.forEach((v, j) => {
    const x = (j / (values.length - 1)) * (w - 2) + 1, y = h - 3 - ((v - lo) / span) * (h - 6);
    j ? ctx.lineTo(x, y) : ctx.moveTo(x, y);
  });
  ctx.stroke();
}
