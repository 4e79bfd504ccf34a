// The signed-in tenant at a glance, from the endpoints every member may call: its content
// (GET /api/rag/collections: documents and chunks per collection it can see), its recent
// jobs (GET /api/rag/jobs) and its traffic (GET /api/rag/usage), each with a next step.

import { api } from '../api.js';
import { barChart } from '../chart.js';
import { add, h, number, plural, table, userText, when } from '../dom.js';
import { badge, heading } from '../ui.js';

function hourLabel(iso) {
  return new Date(iso).toLocaleTimeString('en-GB', { hour: '2-digit', minute: '2-digit' });
}

function figures(pairs) {
  return h('dl', { class: 'details' }, pairs.map(([name, value]) =>
    h('div', {}, h('dt', {}, name), h('dd', {}, value))));
}

function content(collections) {
  const documents = collections.reduce((sum, c) => sum + c.documents, 0);
  const chunks = collections.reduce((sum, c) => sum + c.chunks, 0);
  const summary = figures([['Documents', number(documents)], ['Chunks', number(chunks)],
    ['Collections', number(collections.length)]]);
  if (collections.length === 0) {
    return [summary, h('p', { class: 'empty' }, 'No documents yet: upload files in ',
      h('a', { href: '#/documents' }, 'Documents'), ', or run ', h('code', {}, 'rag ingest FOLDER'), '.')];
  }
  const rows = collections.map((c) => [
    h('a', { href: `#/documents?collection=${encodeURIComponent(c.name)}` }, userText(c.name)),
    number(c.documents), number(c.chunks)]);
  return [summary, table('Collections', ['Collection', 'Documents', 'Chunks'], rows)];
}

function recentJobs(page) {
  if (page.items.length === 0) {
    return h('p', { class: 'empty' }, 'No jobs yet: an upload in ',
      h('a', { href: '#/documents' }, 'Documents'), ' becomes a job you can follow.');
  }
  const rows = page.items.map((job) => [
    h('a', { href: `#/jobs/${job.job_id}` }, when(job.timings.created_at)),
    job.files.length ? [userText(job.files[0], 'code'),
      job.progress.documents_total > 1 ? ` and ${number(job.progress.documents_total - 1)} more` : '']
      : plural(job.progress.documents_total, 'document'),
    job.collections.length ? userText(job.collections.join(', ')) : '—',
    badge(job.status)]);
  return [table('Recent jobs', ['Submitted', 'Files', 'Collection', 'Status'], rows),
    h('p', {}, h('a', { href: '#/jobs' }, `All ${plural(page.total, 'job')}`))];
}

function traffic(usage) {
  const { last_hour: hour, last_day: day } = usage;
  const series = usage.hourly.map((x) => ({ label: hourLabel(x.start), value: x.searches }));
  return [
    figures([
      ['Searches', `${number(hour.searches)} in the last hour, ${number(day.searches)} in the last day`],
      ['Documents ingested', `${number(hour.ingests)} in the last hour, ${number(day.ingests)} in the last day`],
      ['Rate limited', `${number(hour.rate_limited)} in the last hour, ${number(day.rate_limited)} in the last day`],
    ]),
    day.searches === 0 ? h('p', { class: 'empty' }, 'No searches in the last day: try one in ',
      h('a', { href: '#/search' }, 'Search'), '.') : h('figure', {},
      barChart('Searches per hour', series, 'searches'),
      h('figcaption', {}, 'Searches per hour, last 24 hours')),
  ];
}

export async function render({ identity, signal }) {
  const [collections, jobs, usage] = await Promise.all([
    api('GET', 'api/rag/collections', { signal }),
    api('GET', 'api/rag/jobs', { query: { limit: 5 }, signal }),
    api('GET', 'api/rag/usage', { signal }),
  ]);
  return add(h('div', { class: 'page' }), [
    heading('Overview'),
    add(h('p', {}), ['Tenant ', userText(identity.tenant_id, 'strong'), ` (${identity.tenant_tier} tier): `,
      'what this token can see of it.']),
    h('h2', {}, 'Content'), ...[content(collections.items)].flat(),
    h('h2', {}, 'Recent jobs'), ...[recentJobs(jobs)].flat(),
    h('h2', {}, 'Traffic'), ...traffic(usage),
  ]);
}
