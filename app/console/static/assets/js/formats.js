// The document formats ingest reads, as the service lists them (GET /api/rag/formats, from
// its parsers' registry): the upload hint and the type filters never keep a list of their own.

import { api } from './api.js';

let known = null;

/** [{source_type, label, suffixes, file_only}], asked once per page load. */
export function formats() {
  known ??= api('GET', 'api/rag/formats').then((reply) => reply.items).catch((error) => {
    known = null; // asked again next time
    throw error;
  });
  return known;
}

/** (value, label) options for a select or checkboxes. */
export const typeOptions = (list) => list.map((f) => [f.source_type, f.label]);

/** "Plain text (.txt), Markdown (.md), …": what an upload may hold. */
export const uploadHint = (list) => list.map((f) => `${f.label} (${f.suffixes[0]})`).join(', ');
