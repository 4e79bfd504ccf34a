// Near-duplicate documents: POST /api/rag/dedupe as a preview (dry run): groups with the copy
// each strategy keeps and what differs between the copies; then, once the person has chosen
// what each group keeps, the same request with dry_run false after a confirmation that names
// every document to be deleted.

import { api } from '../api.js';
import { add, field, fill, fixed, h, number, plural, select, table, userText, when } from '../dom.js';
import { announce, busy, confirmAction, errorBox, heading } from '../ui.js';

// What each strategy compares; the preview's `strategies` says the same in full.
const STRATEGIES = [
  ['keep_latest_version', 'Latest source version (else last ingested)'],
  ['keep_newest', 'Last ingested'],
  ['keep_oldest', 'First ingested'],
  ['keep_most_accessed', 'Most returned by searches'],
];
const SHORT = { keep_latest_version: 'Latest version', keep_newest: 'Last ingested',
  keep_oldest: 'First ingested', keep_most_accessed: 'Most returned' };
const LABEL = Object.fromEntries(STRATEGIES);

const named = (doc) => `${doc.title || 'Untitled'} (${doc.collection}/${doc.external_id})`;

/** The text of one side of a passage, its changed words marked when they are contiguous. */
function sideText(text, changed, tag) {
  if (!text) return h('em', {}, 'nothing here');
  const at = changed ? text.indexOf(changed) : -1;
  if (at < 0) return userText(text);
  return add(h('span', { class: 'user-text', dir: 'auto' }), [text.slice(0, at),
    h(tag, {}, changed), text.slice(at + changed.length)]);
}

function differencesView(group) {
  const docs = Object.fromEntries(group.documents.map((d) => [d.id, d]));
  if (group.differences.length === 0) return null;
  return h('section', { class: 'differences', 'aria-label': 'What differs' },
    h('h4', {}, 'What differs'),
    h('ul', {}, group.differences.map((diff) => {
      const one = docs[diff.compared_with];
      const other = docs[diff.document_id];
      if (diff.identical) {
        return h('li', {}, userText(other.external_id, 'code'), ' and ',
          userText(one.external_id, 'code'), ': the same text.');
      }
      const count = diff.passages.length + diff.passages_omitted;
      return h('li', {}, userText(other.external_id, 'code'), ' against ',
        userText(one.external_id, 'code'), `: ${plural(count, 'passage')} ${count === 1 ? 'differs' : 'differ'}`,
        diff.truncated ? ' (the first 100,000 characters compared)' : '',
        h('dl', { class: 'passages' }, diff.passages.map((p) => [
          h('dt', {}, userText(one.external_id)), h('dd', {}, sideText(p.primary, p.primary_changed, 'mark')),
          h('dt', {}, userText(other.external_id)), h('dd', {}, sideText(p.duplicate, p.duplicate_changed, 'mark')),
        ])),
        diff.passages_omitted ? h('p', { class: 'summary' }, `… and ${plural(diff.passages_omitted, 'more passage')}`) : null);
    })));
}

function groupView(group, index, strategy) {
  const headers = ['Document', 'Collection', 'External id', 'Version', 'Created', 'Updated',
    'Times returned', ...STRATEGIES.map(([s]) => `${SHORT[s]} keeps`), 'On merge'];
  const rows = group.documents.map((doc) => {
    const keeps = STRATEGIES.map(([s]) => (group.kept_by_strategy[s] === doc.id
      ? h('span', { class: 'kept' }, h('span', { 'aria-hidden': 'true' }, '✓ '), 'kept') : ''));
    const kept = strategy && group.kept_by_strategy[strategy] === doc.id;
    let fate = h('span', { class: 'summary' }, 'choose a strategy');
    if (strategy) fate = kept ? h('strong', {}, 'kept') : 'deleted';
    return h('tr', { class: kept ? 'kept-row' : '' }, [
      h('a', { href: `#/documents/${doc.id}` }, userText(doc.title || 'Untitled')),
      userText(doc.collection), userText(doc.external_id, 'code'),
      doc.version ? userText(doc.version, 'code') : '—', when(doc.created_at),
      when(doc.updated_at), number(doc.access_count), ...keeps, fate,
    ].map((cell) => h('td', {}, cell)));
  });
  return h('li', { class: 'card' }, h('article', { 'aria-label': `Group ${index + 1}` },
    h('h3', {}, `Group ${index + 1}: ${group.documents.length} documents, similarity ${fixed(group.avg_similarity)}`),
    table(`Group ${index + 1}`, headers, rows),
    group.notes.length ? h('ul', { class: 'notes' }, group.notes.map((n) => h('li', { class: 'note' }, n))) : null,
    differencesView(group)));
}

/** The documents a merge with `strategy` deletes: every copy but the one it keeps. */
function deletedBy(reply, strategy) {
  return reply.duplicate_groups.flatMap((g) => g.documents.filter((d) => d.id !== g.kept_by_strategy[strategy]));
}

export async function render({ signal }) {
  const collections = await api('GET', 'api/rag/collections', { signal });
  const threshold = h('input', { type: 'number', min: '0', max: '1', step: '0.01', value: '0.95' });
  const strategy = select({}, [['', 'Choose after the preview…'], ...STRATEGIES], '');
  const collection = select({}, [['', 'Every collection'],
    ...collections.items.map((c) => [c.name, c.name])], '');
  const errors = errorBox();
  const preview = h('button', { type: 'submit' }, 'Preview');
  const region = h('section', { 'aria-live': 'polite', 'aria-label': 'Duplicate groups' });
  let last = null; // the last preview and its request: a new strategy redraws it
  const body = () => ({
    similarity_threshold: Number(threshold.value || 0.95),
    merge_strategy: strategy.value || undefined,
    collections: collection.value ? [collection.value] : undefined,
  });
  const merge = async (button, reply, request) => {
    const chosen = strategy.value;
    if (!chosen) {
      errors.show(new Error('Choose what each group keeps (Merge strategy) before merging: read what differs first.'));
      strategy.focus();
      return;
    }
    const doomed = deletedBy(reply, chosen);
    const yes = await confirmAction({
      title: 'Merge the duplicates?',
      text: `${plural(doomed.length, 'document')} in ${plural(reply.duplicate_groups.length, 'group')} ` +
        `will be deleted; each group keeps its ${LABEL[chosen].toLowerCase()} copy. This cannot be undone.`,
      details: h('ul', { class: 'doomed', 'aria-label': 'Documents to be deleted' },
        doomed.map((d) => h('li', {}, userText(named(d))))),
      action: 'Merge',
    });
    if (!yes) return;
    await busy(button, errors, async () => {
      const json = { ...request, merge_strategy: chosen, dry_run: false };
      const merged = await api('POST', 'api/rag/dedupe', { json, signal });
      announce(`Merged: ${plural(merged.removed_ids.length, 'duplicate document')} deleted.`);
      last = null;
      fill(region, h('h2', {}, 'Merged'),
        h('p', {}, `${plural(merged.removed_ids.length, 'document')} deleted, `,
          `${plural(merged.duplicate_groups.length, 'group')} merged.`));
    });
  };
  const show = (reply, request) => {
    last = { reply, request };
    const chosen = strategy.value;
    const button = h('button', { type: 'button', class: 'danger' }, 'Merge…');
    button.addEventListener('click', () => merge(button, reply, request));
    fill(region, h('h2', {}, 'Preview'),
      h('p', { class: 'summary' }, `${plural(reply.duplicate_groups.length, 'group')}, `,
        `${plural(reply.total_duplicates, 'duplicate')} among ${plural(reply.documents_examined, 'document')} examined.`),
      reply.duplicate_groups.length === 0 ? h('p', { class: 'empty' }, 'No near-duplicates at this ',
        'threshold: lower it (0.9 also finds copies with larger edits), or choose “Every collection”.') : [
        chosen ? null : h('p', { class: 'note' }, 'Read what differs, then choose a merge strategy: ',
          'the “On merge” column shows what it keeps.'),
        h('ol', { class: 'cards' }, reply.duplicate_groups.map((g, i) => groupView(g, i, chosen))),
        button,
      ]);
  };
  strategy.addEventListener('change', () => {
    errors.show(null);
    if (last) show(last.reply, last.request);
  });
  const form = h('form', { class: 'inline-fields', method: 'post', 'aria-label': 'Find duplicates' },
    field('Similarity threshold', threshold, '0–1; 0.95 finds copies with small edits'),
    field('Merge strategy', strategy, 'which copy each group keeps'), field('Collection', collection), preview);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    busy(preview, errors, async () => {
      const request = body();
      show(await api('POST', 'api/rag/dedupe', { json: { ...request, dry_run: true }, signal }), request);
    });
  });
  return add(h('div', { class: 'page' }), [
    heading('Duplicates'),
    h('p', {}, 'Near-duplicate documents, compared by their vectors. A preview changes nothing and ',
      'shows what differs between the copies; a merge deletes every document of a group but the ',
      'one the chosen strategy keeps.'),
    form, errors, region,
  ]);
}
