// Ingestion jobs: the list (GET /api/rag/jobs) and one job followed live (GET …/jobs/{id}
// every second while it runs): progress, each file's outcome, and cancel (DELETE).

import { api } from '../api.js';
import { add, field, fill, h, number, plural, select, table, userText, when } from '../dom.js';
import { announce, badge, busy, errorBox, heading, pager, update } from '../ui.js';

const PAGE = 20;
const ACTIVE = new Set(['queued', 'running']);
const STATUSES = [['', 'Any status'], ['queued', 'Queued'], ['running', 'Running'],
  ['succeeded', 'Succeeded'], ['partial', 'Partial'], ['failed', 'Failed'], ['cancelled', 'Cancelled']];
const POLL_MS = 1000;

/** What an empty list says, and what to do next. */
function emptyList(status) {
  if (status) {
    return h('p', { class: 'empty' }, 'No job has this status: choose “Any status”, then Apply.');
  }
  return h('p', { class: 'empty' }, 'No jobs yet: upload files or a folder in ',
    h('a', { href: '#/documents' }, 'Documents'), ' to start one.');
}

/** A job's first file names, and how many more it holds. */
function filesOf(job) {
  const shown = job.files.slice(0, 3);
  const more = job.progress.documents_total - shown.length;
  if (shown.length === 0) return plural(job.progress.documents_total, 'document');
  return [shown.map((name, i) => [i ? ', ' : '', userText(name, 'code')]),
    more > 0 ? ` and ${number(more)} more` : ''];
}

/** Said once a followed job has ended: the upload's message no longer holds. */
function ended(job) {
  const p = job.progress;
  return `The job ended: ${job.status}, ${plural(p.documents_done, 'document')} ingested, ` +
    `${number(p.documents_failed)} failed.`;
}

export async function render({ id, query, navigate, signal }) {
  if (id) return renderJob({ id, signal });
  const offset = Number(query.get('offset') ?? 0);
  const status = query.get('status') ?? '';
  const page = await api('GET', 'api/rag/jobs', { query: { status, limit: PAGE, offset }, signal });
  const choice = select({}, STATUSES, status);
  const filter = h('form', { class: 'inline-fields filters', method: 'post', 'aria-label': 'Filter jobs' },
    field('Status', choice), h('button', { type: 'submit', class: 'secondary' }, 'Apply'));
  filter.addEventListener('submit', (event) => {
    event.preventDefault();
    navigate('jobs', { status: choice.value });
  });
  const rows = page.items.map((job) => [
    h('a', { href: `#/jobs/${job.job_id}` }, when(job.timings.created_at)),
    filesOf(job),
    job.collections.length ? job.collections.map((c, i) => [i ? ', ' : '', userText(c)]) : '—',
    badge(job.status),
    `${number(job.progress.documents_done)} of ${number(job.progress.documents_total)}`,
    number(job.progress.documents_failed),
    number(job.progress.chunks_done),
  ]);
  return add(h('div', { class: 'page' }), [
    heading('Ingestion jobs'),
    h('p', {}, 'Upload files or a folder from ', h('a', { href: '#/documents' }, 'Documents'),
      '; each upload is a job you can follow here.'),
    filter,
    page.items.length === 0 ? emptyList(status) : h('div', {},
      table('Jobs', ['Submitted', 'Files', 'Collection', 'Status', 'Documents done', 'Failed', 'Chunks'], rows),
      pager({ offset, limit: PAGE, total: page.total, shown: page.items.length, noun: 'Jobs',
        go: (next) => navigate('jobs', { status, offset: next }) })),
  ]);
}

function outcome(result) {
  const name = userText(result.name ?? result.external_id ?? '—', 'code');
  if (result.status === 'succeeded') {
    return [name, badge('succeeded'),
      h('a', { href: `#/documents/${result.document_id}` }, userText(result.title || 'Untitled')),
      `${number(result.chunks)} chunks, ${number(result.embedded)} embedded`];
  }
  return [name, badge(result.status), '—', userText(result.error ?? '')];
}

function progressView(job) {
  const p = job.progress;
  const finished = p.documents_done + p.documents_failed;
  const chunkLine = p.chunks_in_progress_total
    ? `Embedding the current document: ${number(p.chunks_in_progress)} of ${number(p.chunks_in_progress_total)} chunks.`
    : '';
  return [
    h('p', { class: 'row' }, 'Status ', badge(job.status),
      job.cancel_requested && ACTIVE.has(job.status) ? ' (cancel requested)' : ''),
    h('div', { class: 'field' },
      h('label', { for: 'job-progress' }, `Documents: ${number(finished)} of ${number(p.documents_total)}`),
      h('progress', { id: 'job-progress', max: String(Math.max(1, p.documents_total)),
        value: String(finished) })),
    h('p', {}, `${number(p.documents_done)} ingested, ${number(p.documents_failed)} failed, `,
      `${number(p.chunks_done)} chunks stored. `, chunkLine),
    job.error ? h('p', { class: 'error', role: 'alert' }, userText(job.error)) : null,
    h('h2', {}, 'Files'),
    job.results.length === 0 ? h('p', {}, 'No file finished yet.')
      : table('Outcome per file', ['File', 'Outcome', 'Document', 'Detail'], job.results.map(outcome)),
  ];
}

async function renderJob({ id, signal }) {
  const path = `api/rag/jobs/${encodeURIComponent(id)}`;
  let job = await api('GET', path, { signal });
  const live = h('div', { class: 'job', 'aria-live': 'polite', 'aria-busy': 'false' });
  const errors = errorBox();
  const cancel = h('button', { type: 'button', class: 'danger' }, 'Cancel job');
  const show = () => {
    fill(live, progressView(job));
    cancel.hidden = !ACTIVE.has(job.status) || job.cancel_requested;
  };
  cancel.addEventListener('click', () => busy(cancel, errors, async () => {
    job = await api('DELETE', path, { signal });
    show();
  }));
  const follow = async () => {
    let wait = POLL_MS;
    while (ACTIVE.has(job.status) && !signal.aborted) {
      await new Promise((resolve) => setTimeout(resolve, wait));
      if (signal.aborted) return;
      try {
        job = await api('GET', path, { signal });
        errors.show(null);
        wait = POLL_MS;
      } catch (error) {
        if (error?.name === 'AbortError') return;
        errors.show(error); // a 429 says when to try again: wait that long, then go on
        wait = Math.max(POLL_MS, (error.retryAfter ?? 0) * 1000);
      }
      show();
      if (!ACTIVE.has(job.status)) announce(ended(job));
    }
  };
  show();
  if (!ACTIVE.has(job.status)) update(ended(job)); // it ended before the page was drawn
  follow();
  return add(h('div', { class: 'page' }), [
    h('p', {}, h('a', { href: '#/jobs' }, '← Jobs')),
    heading('Ingestion job'),
    h('p', { class: 'hint' }, 'Job ', h('code', {}, job.job_id), ', submitted ', when(job.timings.created_at)),
    h('div', { class: 'row' }, cancel), errors, live,
  ]);
}
