// One tenant (rag:admin): GET /api/admin/tenants/{id} and …/stats: counts, storage, jobs,
// traffic with hourly charts of the last day; rename, change tier, suspend/activate, delete.

import { api } from '../api.js';
import { barChart } from '../chart.js';
import { add, bytes, field, h, number, select, userText, when } from '../dom.js';
import { announce, badge, busy, errorBox } from '../ui.js';
import { deleteTenant, setStatus } from './admin.js';

function hourLabel(iso) {
  return new Date(iso).toLocaleTimeString('en-GB', { hour: '2-digit', minute: '2-digit' });
}

function details(pairs) {
  return h('dl', { class: 'details' }, pairs.map(([name, value]) =>
    h('div', {}, h('dt', {}, name), h('dd', {}, value))));
}

function changeForm(tenant, tiers, errors, reload) {
  const name = h('input', { type: 'text', value: tenant.name, autocomplete: 'off' });
  const tier = select({}, tiers.map((t) => [t.name, `${t.name} (${t.requests} requests / ${t.window_seconds} s)`]),
    tenant.tier);
  const save = h('button', { type: 'submit' }, 'Save changes');
  const form = h('form', { class: 'inline-fields', method: 'post', 'aria-labelledby': 'change-title' },
    h('h2', { id: 'change-title', class: 'full' }, 'Name and tier'),
    field('Name', name), field('Tier', tier), save);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    busy(save, errors, async () => {
      const body = {};
      if (name.value.trim() && name.value.trim() !== tenant.name) body.name = name.value.trim();
      if (tier.value !== tenant.tier) body.tier = tier.value;
      if (Object.keys(body).length === 0) {
        announce('Nothing to change.');
        return;
      }
      await api('PATCH', `api/admin/tenants/${encodeURIComponent(tenant.id)}`, { json: body });
      announce(`Tenant ${tenant.id} changed.`);
      reload();
    });
  });
  return form;
}

function trafficView(stats) {
  const hours = stats.traffic.hourly;
  const series = (kind) => hours.map((hour) => ({ label: hourLabel(hour.start), value: hour[kind] }));
  const { last_hour: hour, last_day: day } = stats.traffic;
  return [
    h('h2', {}, 'Traffic'),
    details([
      ['Searches', `${number(hour.searches)} in the last hour, ${number(day.searches)} in the last day`],
      ['Ingests', `${number(hour.ingests)} in the last hour, ${number(day.ingests)} in the last day`],
      ['Rate limited', `${number(hour.rate_limited)} in the last hour, ${number(day.rate_limited)} in the last day`],
    ]),
    h('div', { class: 'charts' },
      h('figure', {}, barChart('Searches per hour', series('searches'), 'searches'),
        h('figcaption', {}, 'Searches per hour, last 24 hours')),
      h('figure', {}, barChart('Ingests per hour', series('ingests'), 'documents'),
        h('figcaption', {}, 'Documents ingested per hour, last 24 hours'))),
  ];
}

export async function render({ id, navigate, reload, signal }) {
  const path = `api/admin/tenants/${encodeURIComponent(id)}`;
  const [tenant, stats, tiers] = await Promise.all([
    api('GET', path, { signal }),
    api('GET', `${path}/stats`, { signal }),
    api('GET', 'api/admin/tiers', { signal }),
  ]);
  const errors = errorBox();
  const suspended = tenant.status === 'suspended';
  const toggle = h('button', { type: 'button', class: suspended ? 'secondary' : 'warning' },
    suspended ? 'Activate' : 'Suspend');
  toggle.addEventListener('click', () => setStatus(tenant, suspended ? 'active' : 'suspended', errors, reload));
  const remove = h('button', { type: 'button', class: 'danger', disabled: !suspended,
    title: suspended ? null : 'Suspend it first' }, 'Delete tenant');
  remove.addEventListener('click', () => deleteTenant(tenant, errors, () => navigate('tenants')));
  const storage = stats.storage;
  return add(h('div', { class: 'page' }), [
    h('p', {}, h('a', { href: '#/tenants' }, '← Tenants')),
    add(h('h1', { tabindex: '-1' }), ['Tenant ', userText(tenant.id, 'code')]),
    details([
      ['Name', userText(tenant.name)], ['Status', badge(tenant.status)], ['Tier', userText(tenant.tier)],
      ['Created', when(tenant.created_at)], ['Updated', when(tenant.updated_at)],
    ]),
    h('div', { class: 'row' }, toggle, remove,
      h('a', { href: `#/audit?tenant_id=${encodeURIComponent(tenant.id)}` }, 'Its audit log')),
    errors,
    h('h2', {}, 'Content and storage'),
    details([
      ['Documents', number(stats.documents)], ['Chunks', number(stats.chunks)],
      ['Collections', number(stats.collections)],
      ['Chunks by model', Object.entries(stats.chunks_by_model)
        .map(([model, count]) => `${model}: ${number(count)}`).join('; ') || '—'],
      ['Storage', `${bytes(storage.total_bytes)} (tables ${bytes(storage.table_bytes)}, indexes ` +
        `${bytes(storage.index_bytes)}, own index ${bytes(storage.dedicated_index_bytes)})`],
      ['Jobs', `${number(stats.jobs.queued)} queued, ${number(stats.jobs.running)} running, ` +
        `${bytes(stats.jobs.queued_bytes)} to ingest`],
    ]),
    ...trafficView(stats),
    changeForm(tenant, tiers.items, errors, reload),
  ]);
}
