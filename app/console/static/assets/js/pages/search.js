// Search playground: POST /api/rag/search and /api/rag/context, "more like this" through
// GET /api/rag/chunks/{id}/similar. Results are cards with the query's words highlighted.

import { api } from '../api.js';
import { add, citationText, field, fill, fixed, h, number, select, sourceLink, uid, userText } from '../dom.js';
import { formats, typeOptions } from '../formats.js';
import { highlighted, termsOf } from '../highlight.js';
import { busy, errorBox, heading } from '../ui.js';

const MODES = [['vector', 'Vector'], ['keyword', 'Keyword'], ['hybrid', 'Hybrid']];
const STYLES = [['numbered', 'Numbered'], ['inline', 'Inline'], ['compact', 'Compact']];

function checkboxes(legend, name, options) {
  const boxes = options.map(([value, label]) => {
    const id = uid(name);
    return h('span', { class: 'check' },
      h('input', { type: 'checkbox', id, name, value }), h('label', { for: id }, label));
  });
  return h('fieldset', { class: 'checks' }, h('legend', {}, legend),
    boxes.length ? boxes : h('span', { class: 'hint' }, 'None yet.'));
}

function checked(form, name) {
  return [...form.querySelectorAll(`input[name="${name}"]:checked`)].map((box) => box.value);
}

const optionalNumber = (input) => (input.value === '' ? undefined : Number(input.value));

/** The search body the form describes (throws a readable error on a bad metadata filter). */
function bodyOf(form, controls) {
  const body = {
    query: controls.query.value,
    mode: controls.mode.value,
    max_results: Number(controls.results.value || 5),
    threshold: optionalNumber(controls.threshold),
    diversity: optionalNumber(controls.diversity),
  };
  const collections = checked(form, 'collection');
  if (collections.length) body.collections = collections;
  const filters = {};
  const types = checked(form, 'source-type');
  if (types.length) filters.source_types = types;
  const metadata = controls.metadata.value.trim();
  if (metadata) {
    try {
      filters.metadata = JSON.parse(metadata);
    } catch (error) {
      throw new Error(`The metadata filter is not valid JSON: ${error.message}`);
    }
  }
  if (Object.keys(filters).length) body.filters = filters;
  return body;
}

function facts(pairs) {
  return h('dl', { class: 'facts' }, pairs.filter(([, value]) => value !== null && value !== '')
    .map(([name, value]) => h('div', {}, h('dt', {}, name), h('dd', {}, value))));
}

function place(chunk) {
  return [
    ['Page', chunk.page_number ?? null],
    ['Section', chunk.section?.length ? userText(chunk.section.join(' → ')) : null],
    ['Collection', userText(chunk.collection)],
  ];
}

function similarPanel(chunk, panel) {
  // 0: the nearest chunks whatever their similarity (each shows it); raise it to narrow them
  const minimum = h('input', { type: 'number', min: '0', max: '1', step: '0.05', value: '0' });
  const scope = select({}, [['all', 'All collections'], ['current', 'Its collection'],
    ['shared', 'Its collection and "shared"']], 'all');
  const list = h('div', { 'aria-live': 'polite' });
  const errors = errorBox();
  const refresh = h('button', { type: 'button', class: 'secondary' }, 'Find similar');
  const load = () => busy(refresh, errors, async () => {
    const found = await api('GET', `api/rag/chunks/${chunk.chunk_id}/similar`,
      { query: { top_k: 5, min_similarity: minimum.value || 0, search_scope: scope.value } });
    fill(list, found.similar.length === 0
      ? h('p', { class: 'empty' }, Number(minimum.value) > 0
        ? 'Nothing at or above that similarity: lower the minimum, or choose “All collections”.'
        : 'No other document has chunks in this scope: choose “All collections”, or upload more.')
      : h('ol', { class: 'similar-list' }, found.similar.map((item) => h('li', {},
        h('strong', {}, fixed(item.similarity)), ' ', userText(item.title, 'span', { class: 'title' }),
        item.section?.length ? [' · ', userText(item.section.join(' → '))] : null,
        h('p', { class: 'snippet' }, userText(item.content.slice(0, 240))),
        h('a', { href: `#/documents/${item.document_id}` }, 'Open document')))));
  });
  refresh.addEventListener('click', load);
  fill(panel, h('h4', {}, 'More like this'),
    h('div', { class: 'inline-fields' },
      field('Minimum similarity', minimum, '0–1; 0: the nearest, whatever their similarity'),
      field('Scope', scope), refresh),
    errors, list);
  return load();
}

/** The score a hit has in its mode: vector, its similarity; keyword, its BM25 score;
 * hybrid, the fused score, with the similarity when the chunk is at all near the query (the
 * service floors it at 0, which would read as "unrelated"). */
function scores(chunk, mode) {
  const shown = [];
  if (mode === 'vector') shown.push(['Similarity', fixed(chunk.similarity)]);
  else if (mode === 'keyword') shown.push(['Keyword score (BM25)', fixed(chunk.score, 4)]);
  else {
    shown.push(['Hybrid score', fixed(chunk.score, 4)]);
    if (chunk.similarity > 0) shown.push(['Similarity', fixed(chunk.similarity)]);
  }
  if (chunk.rerank_score !== null && chunk.rerank_score !== undefined) {
    shown.push(['Rerank score', fixed(chunk.rerank_score, 4)]);
  }
  return shown;
}

function card(chunk, rank, terms, mode) {
  const titleId = uid('result');
  const panelId = uid('similar');
  const panel = h('section', { id: panelId, class: 'similar', hidden: true, 'aria-label': 'More like this' });
  const more = h('button', { type: 'button', class: 'secondary', 'aria-expanded': 'false',
    'aria-controls': panelId }, 'More like this');
  more.addEventListener('click', async () => {
    const open = more.getAttribute('aria-expanded') !== 'true';
    more.setAttribute('aria-expanded', String(open));
    panel.hidden = !open;
    if (open && !panel.hasChildNodes()) await similarPanel(chunk, panel);
  });
  return h('li', { class: 'card' }, h('article', { 'aria-labelledby': titleId },
    h('header', { class: 'card-head' },
      h('span', { class: 'rank' }, `#${rank}`),
      userText(chunk.title || 'Untitled', 'h3', { id: titleId })),
    facts([...scores(chunk, mode), ...place(chunk), ['Source', sourceLink(chunk.source_url)]]),
    h('p', { class: 'chunk-text', dir: 'auto' }, highlighted(chunk.content, terms)),
    h('div', { class: 'card-actions' }, more,
      h('a', { href: `#/documents/${chunk.document_id}` }, 'Open document')),
    panel));
}

function showResults(region, reply, query) {
  const terms = termsOf(query);
  const summary = `${reply.chunks.length} of ${reply.total_found} found in ` +
    `${fixed(reply.search_time_ms, 1)} ms · ${reply.mode}` +
    (reply.threshold !== null ? ` · threshold ${reply.threshold}` : '');
  fill(region, h('h2', { id: 'results-title' }, 'Results'),
    h('p', { class: 'summary' }, summary),
    reply.note ? h('p', { class: 'note' }, reply.note) : null,
    reply.chunks.length === 0
      ? h('p', { class: 'empty' }, 'Nothing found. Try other words, the hybrid mode, a lower ',
        'threshold or fewer filters; or upload documents in ', h('a', { href: '#/documents' },
          'Documents'), '.')
      : h('ol', { class: 'cards', 'aria-labelledby': 'results-title' },
        reply.chunks.map((chunk, i) => card(chunk, i + 1, terms, reply.mode))));
}

function showContext(region, reply) {
  const metrics = reply.metrics;
  const copy = h('button', { type: 'button', class: 'secondary' }, 'Copy context');
  copy.addEventListener('click', () => navigator.clipboard?.writeText(reply.context));
  fill(region, h('h2', { id: 'context-title' }, 'Context for a prompt'),
    facts([['Tokens', number(metrics.total_tokens)], ['Chunks', number(metrics.chunks_used)],
      ['Documents', number(metrics.unique_documents)], ['Quality', fixed(metrics.quality_score)],
      ['Left out for the budget', number(reply.dropped)]]),
    h('pre', { class: 'context', tabindex: '0', 'aria-label': 'The context block' },
      userText(reply.context)),
    copy,
    h('h3', {}, 'Citations'),
    h('ol', { class: 'citations' }, reply.citations.map((citation) => {
      const text = citationText(citation.text);
      return h('li', {}, text,
        citation.source_url && !text.linked ? [' · ', sourceLink(citation.source_url)] : null,
        ' · ', h('a', { href: `#/documents/${citation.document_id}` }, 'Open document'));
    })));
}

export async function render({ signal }) {
  const [found, known] = await Promise.all([api('GET', 'api/rag/collections', { signal }), formats()]);
  const controls = {
    query: h('input', { type: 'search', name: 'query', required: true, autocomplete: 'off' }),
    mode: select({ name: 'mode' }, MODES, 'vector'),
    results: h('input', { type: 'number', min: '1', max: '20', value: '5' }),
    threshold: h('input', { type: 'number', min: '0.1', max: '1', step: '0.05', placeholder: 'default' }),
    diversity: h('input', { type: 'number', min: '0', max: '1', step: '0.1', placeholder: 'off' }),
    metadata: h('textarea', { rows: '2', spellcheck: 'false', placeholder: '{"team": "sre"}' }),
    style: select({}, STYLES, 'numbered'),
    budget: h('input', { type: 'number', min: '1', max: '200000', value: '2000' }),
  };
  const errors = errorBox();
  const results = h('section', { class: 'results', 'aria-live': 'polite' });
  const context = h('section', { class: 'context-view' });
  const searchButton = h('button', { type: 'submit' }, 'Search');
  const contextButton = h('button', { type: 'button', class: 'secondary' }, 'Build context');
  const form = h('form', { class: 'search-form', method: 'post', 'aria-label': 'Search' },
    h('div', { class: 'query-row' }, field('Query', controls.query), searchButton),
    h('div', { class: 'inline-fields' },
      field('Mode', controls.mode), field('Results', controls.results),
      field('Threshold', controls.threshold, '0.1–1; empty: the model’s default'),
      field('Diversity', controls.diversity, '0–1; empty: off')),
    h('details', {}, h('summary', {}, 'Filters'),
      checkboxes('Collections', 'collection', found.items.map((c) => [c.name, c.name])),
      checkboxes('Source types', 'source-type', typeOptions(known)),
      field('Metadata filter', controls.metadata,
        'JSON: {"key": value}, a list of values, or {"gte": 2025} for a range')),
    h('div', { class: 'inline-fields' },
      field('Citation style', controls.style), field('Token budget', controls.budget),
      contextButton),
    errors);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    busy(searchButton, errors, async () => {
      const body = bodyOf(form, controls);
      const reply = await api('POST', 'api/rag/search', { json: body, signal });
      showResults(results, reply, body.query);
    });
  });
  contextButton.addEventListener('click', () => {
    if (!form.reportValidity()) return;
    busy(contextButton, errors, async () => {
      const body = { ...bodyOf(form, controls), style: controls.style.value,
        max_tokens: Number(controls.budget.value || 2000) };
      const reply = await api('POST', 'api/rag/context', { json: body, signal });
      showContext(context, reply);
      context.querySelector('h2')?.setAttribute('tabindex', '-1');
      context.querySelector('h2')?.focus();
    });
  });
  const empty = found.items.length === 0 ? h('p', { class: 'empty' }, 'No documents to search ',
    'yet: upload some in ', h('a', { href: '#/documents' }, 'Documents'), ' first.') : null;
  return add(h('div', { class: 'page' }), [heading('Search'), empty, form, context, results]);
}
