// Every call of the console goes through the public API with the signed-in token, so
// whatever the console does, any client can do. Problem replies (RFC 9457) become ApiError
// with a readable message; a refused token signs the person out with the API's own words.

import { forget, token } from './session.js';

// The API lives beside the console: /console/ -> /api/… (also behind a path prefix).
const ROOT = new URL('..', document.baseURI);
const listeners = new Set();

/** Called with the API's message when the token is refused (expired, revoked, suspended). */
export function onSignedOut(listener) {
  listeners.add(listener);
}

function signOut(message) {
  forget();
  for (const listener of listeners) listener(message);
}

export class ApiError extends Error {
  constructor(status, problem, retryAfter) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
    this.retryAfter = retryAfter;
  }

  /** The message a person reads: the problem's title and detail, field errors, retry time. */
  get readable() {
    const { title, detail } = this.problem;
    const parts = [title && detail && title !== detail ? `${title}: ${detail}` : detail || title];
    for (const error of this.problem.errors ?? []) {
      if (error && error.field && error.message) parts.push(`${error.field}: ${error.message}`);
    }
    if (this.retryAfter !== null) {
      const at = new Date(Date.now() + this.retryAfter * 1000).toLocaleTimeString('en-GB');
      parts.push(`Try again in ${this.retryAfter} s (at ${at}).`);
    }
    return parts.filter(Boolean).join(' — ');
  }
}

/** A readable message for any error a call may throw. */
export function describe(error) {
  if (error instanceof ApiError) return error.readable;
  if (error instanceof TypeError) return 'The service did not answer (is it running?).';
  return error?.message || String(error);
}

function url(path, query) {
  const target = new URL(path.replace(/^\//, ''), ROOT);
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value === undefined || value === null || value === '') continue;
    target.searchParams.set(key, String(value));
  }
  return target;
}

function retryAfterOf(headers, status) {
  const value = headers.get('Retry-After');
  if (value === null) return status === 429 ? 1 : null;
  const seconds = Number.parseInt(value, 10);
  if (!Number.isNaN(seconds)) return seconds;
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, Math.ceil((date - Date.now()) / 1000));
}

async function problemOf(response) {
  const text = await response.text();
  try {
    const body = JSON.parse(text);
    if (body && typeof body === 'object') return body;
  } catch {
    // not JSON: a proxy's page, say
  }
  return { title: response.statusText || `HTTP ${response.status}`, detail: '' };
}

/** Whether the token itself is refused now (and if so, sign out with the API's reason). */
async function checkToken() {
  const response = await fetch(url('api/rag/me'), { headers: authorization(), cache: 'no-store' });
  if (response.status === 401 || response.status === 403) {
    signOut(new ApiError(response.status, await problemOf(response), null).readable);
    return false;
  }
  return true;
}

function authorization() {
  const bearer = token();
  return bearer ? { Authorization: `Bearer ${bearer}` } : {};
}

async function failure(status, headers, problem) {
  const error = new ApiError(status, problem, retryAfterOf(headers, status));
  if (status === 401) signOut(error.readable);
  else if (status === 403) await checkToken(); // a suspended tenant: back to sign-in
  return error;
}

/**
 * Call the API: JSON in and out; `form` sends FormData. Throws ApiError on a problem.
 * With `withStatus`, resolves to {status, body} (201 created and 200 unchanged differ).
 */
export async function api(method, path, { query, json, form, signal, headers, withStatus } = {}) {
  const init = { method, signal, cache: 'no-store', headers: { ...authorization(), ...headers } };
  if (json !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(json);
  } else if (form !== undefined) {
    init.body = form;
  }
  const response = await fetch(url(path, query), init);
  if (!response.ok) throw await failure(response.status, response.headers, await problemOf(response));
  const body = response.status === 204 ? null : await response.json();
  return withStatus ? { status: response.status, body } : body;
}

/** POST a FormData with upload progress (fetch cannot report it): resolves with the JSON. */
export function upload(path, form, onProgress, { signal } = {}) {
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open('POST', url(path));
    const bearer = token();
    if (bearer) request.setRequestHeader('Authorization', `Bearer ${bearer}`);
    request.upload.addEventListener('progress', (event) => {
      if (event.lengthComputable) onProgress(event.loaded, event.total);
    });
    request.addEventListener('load', async () => {
      let body = {};
      try {
        body = JSON.parse(request.responseText);
      } catch {
        body = { title: request.statusText || `HTTP ${request.status}`, detail: '' };
      }
      if (request.status >= 200 && request.status < 300) resolve(body);
      else {
        const headers = new Headers();
        const retry = request.getResponseHeader('Retry-After');
        if (retry !== null) headers.set('Retry-After', retry);
        reject(await failure(request.status, headers, body));
      }
    });
    request.addEventListener('error', () => reject(new TypeError('network error')));
    request.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError')));
    signal?.addEventListener('abort', () => request.abort());
    request.send(form);
  });
}
