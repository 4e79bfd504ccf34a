// Tenants (rag:admin): GET /api/admin/tenants with status, tier, counts and storage; create
// (POST), suspend and activate, delete with the API's confirmation (the id typed again).

import { api } from '../api.js';
import { add, bytes, field, h, number, select, table, userText } from '../dom.js';
import { announce, badge, busy, confirmAction, errorBox, heading, pager } from '../ui.js';

const PAGE = 25;

export async function setStatus(tenant, status, errors, done) {
  const verb = status === 'suspended' ? 'suspend' : 'activate';
  if (verb === 'suspend') {
    const yes = await confirmAction({
      title: `Suspend ${tenant.id}?`,
      text: 'Its tokens are refused (403) from the next request on; its data stays.',
      action: 'Suspend',
    });
    if (!yes) return;
  }
  try {
    await api('POST', `api/admin/tenants/${encodeURIComponent(tenant.id)}/${verb}`);
    announce(`Tenant ${tenant.id} is ${status === 'suspended' ? 'suspended' : 'active'}.`);
    done();
  } catch (error) {
    errors.show(error);
  }
}

export async function deleteTenant(tenant, errors, done) {
  const typed = await confirmAction({
    title: `Delete ${tenant.id}?`,
    text: 'The tenant, its collections, documents and chunks are deleted. This cannot be undone. ' +
      'Only a suspended tenant can be deleted.',
    action: 'Delete tenant',
    typed: tenant.id,
  });
  if (typed === false) return;
  try {
    await api('DELETE', `api/admin/tenants/${encodeURIComponent(tenant.id)}`, { query: { confirm: typed } });
    announce(`Tenant ${tenant.id} deleted.`);
    done();
  } catch (error) {
    errors.show(error);
  }
}

function createForm(tiers, reload) {
  const id = h('input', { type: 'text', required: true, autocomplete: 'off', spellcheck: 'false' });
  const name = h('input', { type: 'text', autocomplete: 'off' });
  const tier = select({}, tiers.map((t) => [t.name, t.name]), tiers[0]?.name ?? 'basic');
  const errors = errorBox();
  const create = h('button', { type: 'submit' }, 'Create tenant');
  const form = h('form', { class: 'inline-fields', method: 'post', 'aria-labelledby': 'create-title' },
    h('h2', { id: 'create-title', class: 'full' }, 'New tenant'),
    field('Id', id), field('Name', name, 'Optional'), field('Tier', tier), create, errors);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    busy(create, errors, async () => {
      const body = { id: id.value.trim(), tier: tier.value };
      if (name.value.trim()) body.name = name.value.trim();
      const made = await api('POST', 'api/admin/tenants', { json: body, withStatus: true });
      announce(`Tenant ${made.body.id} ${made.status === 201 ? 'created' : 'existed already: nothing changed'}.`);
      reload();
    });
  });
  return form;
}

export async function render({ query, navigate, reload, signal }) {
  const offset = Number(query.get('offset') ?? 0);
  const status = query.get('status') ?? '';
  const tierFilter = query.get('tier') ?? '';
  const [page, tiers] = await Promise.all([
    api('GET', 'api/admin/tenants', { query: { status, tier: tierFilter, limit: PAGE, offset }, signal }),
    api('GET', 'api/admin/tiers', { signal }),
  ]);
  const errors = errorBox();
  const statusChoice = select({}, [['', 'Any status'], ['active', 'Active'], ['suspended', 'Suspended']], status);
  const tierChoice = select({}, [['', 'Any tier'], ...tiers.items.map((t) => [t.name, t.name])], tierFilter);
  const filter = h('form', { class: 'inline-fields filters', method: 'post', 'aria-label': 'Filter tenants' },
    field('Status', statusChoice), field('Tier', tierChoice),
    h('button', { type: 'submit', class: 'secondary' }, 'Apply'));
  filter.addEventListener('submit', (event) => {
    event.preventDefault();
    navigate('tenants', { status: statusChoice.value, tier: tierChoice.value });
  });
  const rows = page.items.map((tenant) => {
    const suspended = tenant.status === 'suspended';
    const toggle = h('button', { type: 'button', class: suspended ? 'secondary small' : 'warning small',
      'aria-label': `${suspended ? 'Activate' : 'Suspend'} ${tenant.id}` }, suspended ? 'Activate' : 'Suspend');
    toggle.addEventListener('click', () => busy(toggle, errors,
      () => setStatus(tenant, suspended ? 'active' : 'suspended', errors, reload)));
    const remove = h('button', { type: 'button', class: 'danger small', disabled: !suspended,
      'aria-label': `Delete ${tenant.id}`, title: suspended ? null : 'Suspend it first' }, 'Delete');
    remove.addEventListener('click', () => deleteTenant(tenant, errors, reload));
    return [
      h('a', { href: `#/tenants/${encodeURIComponent(tenant.id)}` }, userText(tenant.id, 'code')),
      userText(tenant.name), badge(tenant.status), userText(tenant.tier), number(tenant.documents),
      number(tenant.chunks), bytes(tenant.storage_bytes), h('span', { class: 'row' }, toggle, remove),
    ];
  });
  const headers = ['Id', 'Name', 'Status', 'Tier', 'Documents', 'Chunks', 'Storage', 'Actions'];
  return add(h('div', { class: 'page' }), [
    heading('Tenants'),
    filter, errors,
    table('Tenants', headers, rows),
    pager({ offset, limit: PAGE, total: page.total, shown: page.items.length, noun: 'Tenants',
      go: (next) => navigate('tenants', { status, tier: tierFilter, offset: next }) }),
    createForm(tiers.items, reload),
  ]);
}
