// The console's shell: sign-in, the sections a token may use, and a hash router
// (#/search, #/documents/<id>?…): the URL never holds the token, only where you are.

import { api, describe, onSignedOut } from './api.js';
import { fill, h, userText } from './dom.js';
import { forget, remember, token } from './session.js';
import { announce, pageChanged } from './ui.js';
import * as admin from './pages/admin.js';
import * as audit from './pages/audit.js';
import * as documents from './pages/documents.js';
import * as duplicates from './pages/duplicates.js';
import * as jobs from './pages/jobs.js';
import * as overview from './pages/overview.js';
import * as receipts from './pages/receipts.js';
import * as search from './pages/search.js';
import * as tenant from './pages/tenant.js';

const SECTIONS = [
  { path: 'overview', label: 'Overview', scope: 'rag:search', page: overview },
  { path: 'search', label: 'Search', scope: 'rag:search', page: search },
  { path: 'documents', label: 'Documents', scope: 'rag:search', page: documents },
  { path: 'jobs', label: 'Jobs', scope: 'rag:search', page: jobs },
  { path: 'duplicates', label: 'Duplicates', scope: 'rag:search', page: duplicates },
  { path: 'receipts', label: 'Receipts', scope: 'rag:ingest', page: receipts },
  { path: 'tenants', label: 'Tenants', scope: 'rag:admin', page: admin, detail: tenant },
  { path: 'audit', label: 'Audit log', scope: 'rag:admin', page: audit },
];

const main = document.getElementById('main');
let identity = null;
let running = null; // the current page's AbortController: leaving a page stops its polling

function where() {
  const [path, search] = location.hash.replace(/^#\/?/, '').split('?');
  const [section, ...rest] = path.split('/').map(decodeURIComponent);
  return { section, id: rest.join('/') || null, query: new URLSearchParams(search ?? '') };
}

/** Go to `#/<path>?<query>` (a new history entry; the router renders it). */
export function navigate(path, query = {}) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== '') params.set(key, String(value));
  }
  const text = params.toString();
  location.hash = `#/${path}${text ? `?${text}` : ''}`;
}

function allowed(section) {
  return identity.scopes.includes(section.scope);
}

function renderNav(current) {
  const nav = document.getElementById('nav');
  fill(nav, h('ul', {}, SECTIONS.filter(allowed).map((section) => h('li', {},
    h('a', { href: `#/${section.path}`, 'aria-current': section === current ? 'page' : null },
      section.label)))));
  nav.hidden = false;
  // the tenant, then what the token is (a token's `sub` names its holder, often a program such
  // as "cli", not necessarily a person) and what it may do
  const may = identity.scopes.filter((s) => s.startsWith('rag:')).map((s) => s.slice(4));
  fill(document.getElementById('who-text'),
    'Tenant ', userText(identity.tenant_id, 'strong'), ` (${identity.tenant_tier}) · `,
    'token for ', userText(identity.subject, 'code', { title: 'the token’s subject (sub claim)' }),
    may.length ? `: ${may.join(', ')}` : '',
    identity.expires_at ? `, until ${new Date(identity.expires_at).toLocaleTimeString('en-GB',
      { hour: '2-digit', minute: '2-digit' })}` : '');
  document.getElementById('who').hidden = false;
}

async function render({ focus = true } = {}) {
  if (!identity) return;
  running?.abort();
  const controller = new AbortController();
  running = controller;
  const { section: name, id, query } = where();
  // where a sign-in lands: Search, else the first section the token may use
  const fallback = SECTIONS.find((s) => s.path === 'search' && allowed(s)) ?? SECTIONS.find(allowed) ?? SECTIONS[0];
  const section = SECTIONS.find((s) => s.path === name) ?? fallback;
  renderNav(section);
  pageChanged();
  const page = id && section.detail ? section.detail : section.page;
  document.title = `${section.label} · RAG console`;
  fill(main, h('p', { class: 'loading' }, 'Loading…'));
  const reload = () => render({ focus: false });
  const context = { id, query, identity, signal: controller.signal, navigate, reload };
  try {
    const content = await page.render(context);
    if (controller.signal.aborted) return; // left meanwhile, or signed out
    fill(main, content);
  } catch (error) {
    if (error?.name === 'AbortError' || controller.signal.aborted) return;
    fill(main, h('h1', {}, section.label), h('div', { class: 'error', role: 'alert' }, describe(error)));
  }
  if (focus) (main.querySelector('h1') ?? main).focus?.();
}

function renderSignIn(message = '') {
  running?.abort();
  identity = null;
  document.getElementById('nav').hidden = true;
  document.getElementById('who').hidden = true;
  document.title = 'Sign in · RAG console';
  const input = h('input', { id: 'token', name: 'token', type: 'password', autocomplete: 'off',
    spellcheck: 'false', required: true, 'aria-describedby': 'token-hint' });
  const alert = h('div', { class: 'error', role: 'alert', hidden: !message }, message);
  const form = h('form', { class: 'sign-in', method: 'post', 'aria-labelledby': 'sign-in-title' },
    h('div', { class: 'field' },
      h('label', { for: 'token' }, 'Token'),
      input,
      h('span', { class: 'hint', id: 'token-hint' },
        'A JWT from your administrator, or from ', h('code', {}, 'rag token --tenant ID'),
        '. It is kept in this tab only and forgotten when you sign out or close the tab.')),
    h('button', { type: 'submit' }, 'Sign in'),
    alert);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const value = input.value.trim().replace(/^Bearer\s+/i, '');
    if (!value) return;
    remember(value);
    input.value = '';
    await signIn();
  });
  fill(main, h('h1', { id: 'sign-in-title', tabindex: '-1' }, 'Sign in'), form);
  input.focus();
}

async function signIn() {
  try {
    identity = await api('GET', 'api/rag/me');
  } catch (error) {
    forget();
    renderSignIn(describe(error));
    return;
  }
  announce('');
  await render();
}

onSignedOut((message) => renderSignIn(message));
window.addEventListener('hashchange', () => render());
// The skip link moves the focus without touching the hash (the hash is the router's).
document.querySelector('.skip-link').addEventListener('click', (event) => {
  event.preventDefault();
  main.focus();
});
document.getElementById('sign-out').addEventListener('click', () => {
  forget();
  renderSignIn();
  announce('Signed out: the token is forgotten.');
});

if (token()) signIn();
else renderSignIn();
