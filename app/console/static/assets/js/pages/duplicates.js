// Near-duplicate documents: POST /api/rag/dedupe as a preview (dry run), groups with the
// document each strategy keeps, then the same request with dry_run false after confirmation.

import { api } from '../api.js';
import { add, field, fill, fixed, h, number, plural, select, table, userText, when } from '../dom.js';
import { announce, busy, confirmAction, errorBox, heading } from '../ui.js';

const STRATEGIES = [['keep_newest', 'Keep the newest'], ['keep_oldest', 'Keep the oldest'],
  ['keep_most_accessed', 'Keep the most returned']];
const SHORT = { keep_newest: 'Newest', keep_oldest: 'Oldest', keep_most_accessed: 'Most returned' };

function groupView(group, index, strategy) {
  const headers = ['Document', 'Collection', 'External id', 'Created', 'Updated', 'Times returned',
    ...STRATEGIES.map(([s]) => `${SHORT[s]} keeps`), 'On merge'];
  const rows = group.documents.map((doc) => {
    const keeps = STRATEGIES.map(([s]) => (group.kept_by_strategy[s] === doc.id
      ? h('span', { class: 'kept' }, h('span', { 'aria-hidden': 'true' }, '✓ '), 'kept') : ''));
    const kept = group.kept_by_strategy[strategy] === doc.id;
    return h('tr', { class: kept ? 'kept-row' : '' }, [
      h('a', { href: `#/documents/${doc.id}` }, userText(doc.title || 'Untitled')),
      userText(doc.collection), userText(doc.external_id, 'code'), when(doc.created_at),
      when(doc.updated_at), number(doc.access_count), ...keeps,
      kept ? h('strong', {}, 'kept') : 'deleted',
    ].map((cell) => h('td', {}, cell)));
  });
  return h('li', { class: 'card' }, h('article', { 'aria-label': `Group ${index + 1}` },
    h('h3', {}, `Group ${index + 1}: ${group.documents.length} documents, similarity ${fixed(group.avg_similarity)}`),
    table(`Group ${index + 1}`, headers, rows)));
}

export async function render({ signal }) {
  const collections = await api('GET', 'api/rag/collections', { signal });
  const threshold = h('input', { type: 'number', min: '0', max: '1', step: '0.01', value: '0.95' });
  const strategy = select({}, STRATEGIES, 'keep_newest');
  const collection = select({}, [['', 'Every collection'],
    ...collections.items.map((c) => [c.name, c.name])], '');
  const errors = errorBox();
  const preview = h('button', { type: 'submit' }, 'Preview');
  const region = h('section', { 'aria-live': 'polite', 'aria-label': 'Duplicate groups' });
  const body = () => ({
    similarity_threshold: Number(threshold.value || 0.95),
    merge_strategy: strategy.value,
    collections: collection.value ? [collection.value] : undefined,
  });
  const show = (reply, request) => {
    const merge = h('button', { type: 'button', class: 'danger' }, 'Merge…');
    merge.addEventListener('click', async () => {
      const yes = await confirmAction({
        title: 'Merge the duplicates?',
        text: `${plural(reply.total_duplicates, 'document')} in ${plural(reply.duplicate_groups.length, 'group')} ` +
          `will be deleted; each group keeps one (${SHORT[request.merge_strategy].toLowerCase()}). ` +
          'This cannot be undone.',
        action: 'Merge',
      });
      if (!yes) return;
      await busy(merge, errors, async () => {
        const merged = await api('POST', 'api/rag/dedupe', { json: { ...request, dry_run: false }, signal });
        announce(`Merged: ${plural(merged.removed_ids.length, 'duplicate document')} deleted.`);
        fill(region, h('h2', {}, 'Merged'),
          h('p', {}, `${plural(merged.removed_ids.length, 'document')} deleted, `,
            `${plural(merged.duplicate_groups.length, 'group')} merged.`));
      });
    });
    fill(region, h('h2', {}, 'Preview'),
      h('p', { class: 'summary' }, `${plural(reply.duplicate_groups.length, 'group')}, `,
        `${plural(reply.total_duplicates, 'duplicate')} among ${plural(reply.documents_examined, 'document')} examined.`),
      reply.duplicate_groups.length === 0 ? h('p', { class: 'empty' }, 'No near-duplicates at this ',
        'threshold: lower it (0.9 also finds copies with larger edits), or choose “Every collection”.') : [
        h('ol', { class: 'cards' }, reply.duplicate_groups.map((g, i) => groupView(g, i, request.merge_strategy))),
        merge,
      ]);
  };
  const form = h('form', { class: 'inline-fields', method: 'post', 'aria-label': 'Find duplicates' },
    field('Similarity threshold', threshold, '0–1; 0.95 finds copies with small edits'),
    field('Merge strategy', strategy), field('Collection', collection), preview);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    busy(preview, errors, async () => {
      const request = body();
      show(await api('POST', 'api/rag/dedupe', { json: { ...request, dry_run: true }, signal }), request);
    });
  });
  return add(h('div', { class: 'page' }), [
    heading('Duplicates'),
    h('p', {}, 'Near-duplicate documents, compared by their vectors. A preview changes nothing; ',
      'a merge deletes every document of a group but the one its strategy keeps.'),
    form, errors, region,
  ]);
}
