// Receipts (rag:ingest): what each collection sync and document deletion changed, newest
// first (GET /api/rag/receipts), and one receipt read whole (GET …/receipts/{id}): the
// documents added, updated and deleted with their content hashes, and that nothing of the
// deleted ones is left. Its signature is verified by whoever holds the webhook secret.

import { api } from '../api.js';
import { add, field, h, number, plural, select, table, userText, when } from '../dom.js';
import { heading, pager } from '../ui.js';

const PAGE = 50;
const KINDS = [['', 'Any kind'], ['sync', 'Collection sync'], ['delete', 'Document deletion']];
const KIND_LABELS = { sync: 'collection sync', delete: 'document deletion', tenant_delete: 'tenant deletion' };

export async function render({ id, query, navigate, signal }) {
  if (id) return renderReceipt({ id, signal });
  const offset = Number(query.get('offset') ?? 0);
  const kind = query.get('kind') ?? '';
  const page = await api('GET', 'api/rag/receipts', { query: { kind, limit: PAGE, offset }, signal });
  const choice = select({}, KINDS, kind);
  const filter = h('form', { class: 'inline-fields filters', method: 'post', 'aria-label': 'Filter receipts' },
    field('Kind', choice), h('button', { type: 'submit', class: 'secondary' }, 'Apply'));
  filter.addEventListener('submit', (event) => {
    event.preventDefault();
    navigate('receipts', { kind: choice.value });
  });
  const rows = page.items.map((r) => [
    h('a', { href: `#/receipts/${r.receipt_id}` }, when(r.created_at)),
    KIND_LABELS[r.kind] ?? r.kind,
    r.collection ? userText(r.collection) : '—',
    number(r.added), number(r.updated), number(r.deleted),
    r.signed ? 'signed' : 'unsigned',
  ]);
  return add(h('div', { class: 'page' }), [
    heading('Receipts'),
    h('p', { class: 'hint' }, 'Every collection sync and document deletion leaves a receipt.'),
    filter,
    page.items.length === 0
      ? h('p', { class: 'empty' }, 'No receipts yet: deleting a document in ',
        h('a', { href: '#/documents' }, 'Documents'), ' or running ', h('code', {}, 'rag sync FOLDER'),
        ' writes one.')
      : table('Receipts, newest first', ['When', 'Kind', 'Collection', 'Added', 'Updated', 'Deleted', 'Signature'], rows),
    pager({ offset, limit: PAGE, total: page.total, shown: page.items.length, noun: 'Receipts',
      go: (next) => navigate('receipts', { kind, offset: next }) }),
  ]);
}

function documents(caption, items) {
  if (!items || items.length === 0) return h('p', {}, `${caption}: none.`);
  const rows = items.map((d) => [userText(d.external_id ?? '—', 'code'), userText(d.version ?? '—'),
    h('code', { title: d.content_hash }, (d.content_hash ?? '').slice(0, 12))]);
  return table(`${caption} (${number(items.length)})`, ['External id', 'Version', 'Content hash'], rows);
}

async function renderReceipt({ id, signal }) {
  const receipt = await api('GET', `api/rag/receipts/${encodeURIComponent(id)}`, { signal });
  const erased = receipt.erased ?? {};
  const facts = [
    ['Kind', KIND_LABELS[receipt.kind] ?? receipt.kind],
    ['Collection', receipt.collection ?? '—'],
    ['Written', when(receipt.created_at)],
    ['Unchanged', receipt.unchanged === undefined ? '—' : number(receipt.unchanged)],
    ['Missing', receipt.missing?.length ? receipt.missing.map((m, i) => [i ? ', ' : '', userText(m, 'code')]) : '—'],
    ['Erased', `${plural(erased.documents ?? 0, 'document')}, ${plural(erased.chunks ?? 0, 'chunk')}, ` +
      `${plural(erased.keyword_postings ?? 0, 'keyword posting')}`],
    ['Left of them', erased.gone ? 'nothing (checked after the deletion)' : 'see the receipt'],
  ];
  return add(h('div', { class: 'page' }), [
    heading('Receipt'),
    h('p', {}, h('a', { href: '#/receipts' }, 'All receipts')),
    h('dl', { class: 'details' }, facts.map(([name, value]) =>
      h('div', {}, h('dt', {}, name), h('dd', {}, value)))),
    documents('Added', receipt.added),
    documents('Updated', receipt.updated),
    documents('Deleted', receipt.deleted),
    h('p', { class: 'hint' }, 'Receipt ', h('code', {}, receipt.receipt_id),
      ': GET /api/rag/receipts/{id} returns it as signed, with the Standard Webhooks headers.'),
  ]);
}
