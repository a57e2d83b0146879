// The console's requests: the API key (in memory; in sessionStorage only when the user asks),
// the database prefix, problem+json errors, and every request shown in the status bar with a
// Cancel button (AbortController). A 401 asks for a key again.

const KEY_STORE = 'mosaic.key';

export const session = {
  key: sessionStorage.getItem(KEY_STORE) || null,
  remembered: sessionStorage.getItem(KEY_STORE) !== null,
  db: 'default',
};

/** Sets (or with null, forgets) the key; `remember` keeps it in this tab's session storage. */
export function setKey(key, remember) {
  session.key = key || null;
  session.remembered = Boolean(remember && key);
  if (session.remembered) sessionStorage.setItem(KEY_STORE, key);
  else sessionStorage.removeItem(KEY_STORE);
}

/** The `/v1` prefix of the current database. */
export function v1(db = session.db) {
  return db && db !== 'default' ? `/v1/db/${encodeURIComponent(db)}` : '/v1';
}

/** The prefix of the Prometheus API of the current database. */
export function prom(db = session.db) {
  return db && db !== 'default' ? `/v1/db/${encodeURIComponent(db)}/api/v1` : '/api/v1';
}

/** A path segment, encoded. */
export const seg = encodeURIComponent;

/** An error answer: its status and problem (`code`, `detail`), or a network failure (status 0). */
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem && (problem.detail || problem.title) ? `${problem.detail || problem.title}` : `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
    this.code = this.problem.code || null;
  }
}

const pending = new Map(); // id → {label, controller}
let nextId = 1;
const listeners = new Set();

/** Calls `fn(list)` whenever the requests under way change. */
export function onActivity(fn) { listeners.add(fn); }
function changed() { for (const fn of listeners) fn([...pending.values()]); }

/** Aborts every request under way. */
export function cancelAll() { for (const p of pending.values()) p.controller.abort(); }

let askKey = () => {};
/** What to do on a 401: the app opens its key dialog. */
export function onUnauthorized(fn) { askKey = fn; }

/** Sends a request. `body` (not a string) is sent as JSON; `signal` (a view's) aborts it too;
 *  `raw` gives the Response itself (for streams and downloads); `label` names it in the status
 *  bar; `quiet` keeps a 401 from opening the key dialog. Answers `{data, response}`. */
export async function request(method, path, { body, headers = {}, signal, raw = false, label, quiet = false, track = true } = {}) {
  const controller = new AbortController();
  const abort = () => controller.abort();
  if (signal) {
    if (signal.aborted) controller.abort();
    else signal.addEventListener('abort', abort, { once: true });
  }
  const h = { ...headers };
  if (session.key) h.Authorization = `Bearer ${session.key}`;
  let payload;
  if (body !== undefined) {
    if (typeof body === 'string' || body instanceof Blob) payload = body;
    else { payload = JSON.stringify(body); h['Content-Type'] = 'application/json'; }
  }
  const id = nextId++;
  if (track) { pending.set(id, { label: label || `${method} ${path}`, controller }); changed(); }
  try {
    const response = await fetch(path, { method, headers: h, body: payload, signal: controller.signal, cache: 'no-store' });
    if (raw && response.ok) return { data: null, response };
    const type = response.headers.get('content-type') || '';
    const data = response.status === 204 || response.status === 304 ? null
      : type.includes('json') ? await response.json() : await response.text();
    if (!response.ok) {
      if (response.status === 401 && !quiet) askKey(data && data.detail);
      throw new ApiError(response.status, typeof data === 'object' ? data : { detail: String(data).slice(0, 300) });
    }
    return { data, response };
  } catch (e) {
    if (e instanceof ApiError) throw e;
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, { detail: `network: ${e.message}` });
  } finally {
    // a raw answer's body is still to be read: the caller's signal must still abort it
    if (signal && !raw) signal.removeEventListener('abort', abort);
    if (track) { pending.delete(id); changed(); }
  }
}

export const get = (path, opts) => request('GET', path, opts).then((r) => r.data);
export const post = (path, body, opts) => request('POST', path, { ...opts, body }).then((r) => r.data);

/** Whether `e` is an abort (a cancelled request, or a view left): such errors are not shown. */
export const aborted = (e) => e && e.name === 'AbortError';

/** What the current key may do: `open` (no keys configured), `admin`, `read or write`, or
 *  `none` (no key, or a wrong one). */
export async function probeRole() {
  try {
    await request('GET', '/v1/admin/tasks', { quiet: true, track: false });
    return session.key ? 'admin' : 'open';
  } catch (e) {
    if (e.status === 403) return 'read or write';
    if (e.status === 401) return 'none';
    return 'unknown';
  }
}
