// Documents: the list (GET /api/rag/documents, filtered and paged), upload of files and
// folders as an ingestion job (POST /api/rag/jobs, with upload progress), one document with
// its chunks and citations (GET …/documents/{id}/chunks), and delete after confirmation.

import { api, upload } from '../api.js';
import { add, citationText, field, h, number, plural, select, sourceLink, table, userText, when } from '../dom.js';
import { formats, typeOptions, uploadHint } from '../formats.js';
import { announce, busy, confirmAction, errorBox, heading, pager } from '../ui.js';

const PAGE = 20;
const STYLES = [['numbered', 'Numbered'], ['inline', 'Inline'], ['compact', 'Compact']];
const HEADERS = ['Title', 'External id', 'Collection', 'Type', 'Chunks', 'Updated', 'Actions'];

async function deleteDocument(doc, errors, done) {
  const yes = await confirmAction({
    title: 'Delete this document?',
    text: `“${doc.title || doc.external_id}” and its ${doc.chunks} chunks will be deleted. ` +
      'This cannot be undone.',
    action: 'Delete',
  });
  if (!yes) return;
  try {
    await api('DELETE', `api/rag/documents/${doc.document_id}`);
    announce(`Deleted “${doc.title || doc.external_id}”.`);
    done();
  } catch (error) {
    errors.show(error);
  }
}

function uploadForm(navigate, collections, known) {
  const files = h('input', { type: 'file', multiple: true, name: 'files' });
  const folder = h('input', { type: 'file', multiple: true, webkitdirectory: true, name: 'folder' });
  const collection = h('input', { type: 'text', value: 'default', list: 'known-collections',
    autocomplete: 'off' });
  const progress = h('progress', { max: '100', value: '0', hidden: true, 'aria-label': 'Upload' });
  const progressText = h('span', { class: 'hint', 'aria-live': 'polite' });
  const errors = errorBox();
  const send = h('button', { type: 'submit' }, 'Upload');
  const form = h('form', { class: 'upload', method: 'post', 'aria-labelledby': 'upload-title' },
    h('h2', { id: 'upload-title' }, 'Upload files or a folder'),
    h('datalist', { id: 'known-collections' }, collections.map((c) => h('option', { value: c.name }))),
    h('div', { class: 'inline-fields' },
      field('Files', files, uploadHint(known)),
      field('Folder', folder, 'Every file in it, with its path as the external id'),
      field('Collection', collection)),
    h('div', { class: 'row' }, send, progress, progressText),
    errors);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const chosen = [...files.files, ...folder.files];
    if (chosen.length === 0) {
      errors.show(new Error('Choose files or a folder first.'));
      return;
    }
    busy(send, errors, async () => {
      const body = new FormData();
      for (const file of chosen) body.append('files', file, file.webkitRelativePath || file.name);
      body.append('collection', collection.value.trim() || 'default');
      progress.hidden = false;
      const accepted = await upload('api/rag/jobs', body, (sent, total) => {
        progress.value = Math.round((sent / total) * 100);
        progressText.textContent = `${Math.round((sent / total) * 100)}% sent`;
      });
      announce(`Uploaded ${plural(accepted.documents, 'file')} as one ingestion job: its progress is below.`);
      navigate(`jobs/${accepted.job_id}`);
    });
  });
  return form;
}

function filters(query, navigate, collections, known) {
  const collection = select({ name: 'collection' },
    [['', 'Every collection'], ...collections.map((c) => [c.name, c.name])],
    query.get('collection') ?? '');
  const type = select({ name: 'source_type' }, [['', 'Any type'], ...typeOptions(known)],
    query.get('source_type') ?? '');
  const form = h('form', { class: 'inline-fields filters', method: 'post', 'aria-label': 'Filter documents' },
    field('Collection', collection), field('Type', type),
    h('button', { type: 'submit', class: 'secondary' }, 'Apply'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    navigate('documents', { collection: collection.value, source_type: type.value });
  });
  return form;
}

/** What an empty list says, and what to do next. */
function emptyList(params) {
  if (params.collection || params.source_type) {
    return h('p', { class: 'empty' }, 'No document matches these filters: choose ',
      '“Every collection” and “Any type”, then Apply, to see them all.');
  }
  return h('p', { class: 'empty' }, 'No documents yet. Upload files or a folder above (or send ',
    'them with the CLI, the Python client or POST /api/rag/documents); each upload becomes a ',
    'job you can follow in ', h('a', { href: '#/jobs' }, 'Jobs'), '.');
}

export async function render({ id, query, navigate, reload, signal }) {
  if (id) return renderDocument({ id, query, navigate, signal });
  const offset = Number(query.get('offset') ?? 0);
  const params = { collection: query.get('collection'), source_type: query.get('source_type') };
  const [page, collections, known] = await Promise.all([
    api('GET', 'api/rag/documents', { query: { ...params, limit: PAGE, offset }, signal }),
    api('GET', 'api/rag/collections', { signal }),
    formats(),
  ]);
  const label = Object.fromEntries(typeOptions(known));
  const errors = errorBox();
  const rows = page.items.map((doc) => [
    h('a', { href: `#/documents/${doc.document_id}` }, userText(doc.title || 'Untitled')),
    userText(doc.external_id, 'code'),
    userText(doc.collection),
    label[doc.source_type] ?? doc.source_type,
    number(doc.chunks),
    when(doc.updated_at),
    h('button', { type: 'button', class: 'danger small', 'aria-label': `Delete ${doc.title || doc.external_id}`,
      onclick: () => deleteDocument(doc, errors, reload) },
      'Delete'),
  ]);
  const go = (next) => navigate('documents', { ...params, offset: next });
  return add(h('div', { class: 'page' }), [
    heading('Documents'),
    uploadForm(navigate, collections.items, known),
    h('h2', {}, 'Stored documents'),
    filters(query, navigate, collections.items, known),
    errors,
    page.items.length === 0
      ? emptyList(params)
      : h('div', {}, table('Documents', HEADERS, rows), pager({ offset, limit: PAGE, total: page.total,
        shown: page.items.length, noun: 'Documents', go })),
  ]);
}

async function renderDocument({ id, query, navigate, signal }) {
  const style = query.get('style') ?? 'numbered';
  const offset = Number(query.get('offset') ?? 0);
  const found = await api('GET', `api/rag/documents/${encodeURIComponent(id)}/chunks`,
    { query: { style, limit: PAGE, offset }, signal });
  const doc = found.document;
  const errors = errorBox();
  const styleSelect = select({}, STYLES, style);
  styleSelect.addEventListener('change', () => navigate(`documents/${id}`, { style: styleSelect.value }));
  const remove = h('button', { type: 'button', class: 'danger' }, 'Delete document');
  remove.addEventListener('click', () => deleteDocument(doc, errors, () => navigate('documents')));
  const details = [
    ['External id', userText(doc.external_id, 'code')], ['Collection', userText(doc.collection)],
    ['Type', doc.source_type], ['Source', sourceLink(doc.source_url) ?? '—'],
    ['Chunks', number(doc.chunks)], ['Read access', doc.access.length ? userText(doc.access.join(', ')) : 'the whole tenant'],
    ['Times returned', number(doc.access_count)], ['Created', when(doc.created_at)], ['Updated', when(doc.updated_at)],
  ];
  const go = (next) => navigate(`documents/${id}`, { style, offset: next });
  return add(h('div', { class: 'page' }), [
    h('p', {}, h('a', { href: '#/documents' }, '← Documents')),
    add(h('h1', { tabindex: '-1' }), [userText(doc.title || 'Untitled')]),
    h('dl', { class: 'details' }, details.map(([name, value]) => h('div', {}, h('dt', {}, name), h('dd', {}, value)))),
    Object.keys(doc.metadata).length
      ? h('div', {}, h('h2', {}, 'Metadata'), h('pre', { class: 'json' }, userText(JSON.stringify(doc.metadata, null, 2))))
      : null,
    h('div', { class: 'row' }, remove), errors,
    h('h2', {}, 'Chunks and citations'),
    h('div', { class: 'inline-fields' }, field('Citation style', styleSelect)),
    found.citation ? h('p', { class: 'citation' }, 'Cited as ', citationText(found.citation)) : null,
    h('ol', { class: 'chunks', start: String(offset + 1) }, found.chunks.map((chunk) => h('li', {},
      h('p', { class: 'chunk-meta' }, `Chunk ${chunk.chunk_index + 1} of ${found.total}`,
        chunk.page_number ? ` · page ${chunk.page_number}` : '',
        chunk.section.length ? [' · ', userText(chunk.section.join(' → '))] : '',
        ` · ${chunk.token_count} tokens`),
      h('p', { class: 'citation' }, citationText(chunk.citation)),
      h('p', { class: 'chunk-text', dir: 'auto' }, userText(chunk.content))))),
    pager({ offset, limit: PAGE, total: found.total, shown: found.chunks.length, noun: 'Chunks', go }),
  ]);
}

