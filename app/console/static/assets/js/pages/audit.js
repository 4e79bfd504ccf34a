// The audit log (rag:admin): GET /api/admin/audit filtered by tenant, action and actor.

import { api } from '../api.js';
import { add, field, h, select, table, userText, when } from '../dom.js';
import { heading, pager } from '../ui.js';

const PAGE = 50;
const ACTIONS = [['', 'Any action'], ...['tenant.create', 'tenant.update', 'tenant.suspend',
  'tenant.activate', 'tenant.delete'].map((a) => [a, a])];

function change(entry) {
  const before = entry.before ?? {};
  const after = entry.after ?? {};
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])]
    .filter((key) => JSON.stringify(before[key]) !== JSON.stringify(after[key]));
  if (keys.length === 0) return '—';
  return h('ul', { class: 'changes' }, keys.map((key) => h('li', {}, `${key}: `,
    userText(before[key] === undefined ? '—' : JSON.stringify(before[key])), ' → ',
    userText(after[key] === undefined ? '—' : JSON.stringify(after[key])))));
}

export async function render({ query, navigate, signal }) {
  const offset = Number(query.get('offset') ?? 0);
  const params = { tenant_id: query.get('tenant_id'), action: query.get('action'), actor: query.get('actor') };
  const page = await api('GET', 'api/admin/audit', { query: { ...params, limit: PAGE, offset }, signal });
  const tenant = h('input', { type: 'text', value: params.tenant_id ?? '', autocomplete: 'off' });
  const action = select({}, ACTIONS, params.action ?? '');
  const actor = h('input', { type: 'text', value: params.actor ?? '', autocomplete: 'off' });
  const filter = h('form', { class: 'inline-fields filters', method: 'post', 'aria-label': 'Filter the audit log' },
    field('Tenant', tenant), field('Action', action), field('Actor', actor),
    h('button', { type: 'submit', class: 'secondary' }, 'Apply'));
  filter.addEventListener('submit', (event) => {
    event.preventDefault();
    navigate('audit', { tenant_id: tenant.value.trim(), action: action.value, actor: actor.value.trim() });
  });
  const rows = page.items.map((entry) => [
    when(entry.at), actorOf(entry), h('code', {}, entry.action),
    entry.tenant_id ? h('a', { href: `#/tenants/${encodeURIComponent(entry.tenant_id)}` },
      userText(entry.tenant_id, 'code')) : '—',
    change(entry),
  ]);
  const headers = ['When', 'Actor', 'Action', 'Tenant', 'Change'];
  return add(h('div', { class: 'page' }), [
    heading('Audit log'),
    filter,
    page.items.length === 0 ? h('p', {}, 'No entries.')
      : table('Audit log entries, newest first', headers, rows),
    pager({ offset, limit: PAGE, total: page.total, shown: page.items.length, noun: 'Entries',
      go: (next) => navigate('audit', { ...params, offset: next }) }),
  ]);
}

// Who acted: a token (its subject, with its tenant and key id) or an operator on the command
// line; the kind comes from the server, never from the subject's text.
function actorOf(entry) {
  const kind = entry.actor_kind === 'operator' ? 'operator (command line)'
    : `token of ${entry.actor_tenant_id ?? '?'}${entry.actor_key_id ? `, key ${entry.actor_key_id}` : ''}`;
  return h('span', {}, userText(entry.actor), ' ', h('span', { class: 'hint' }, kind));
}
