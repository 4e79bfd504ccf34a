// Building the page from data without ever parsing HTML. Text from documents, tenants and
// users only ever becomes text nodes (Node.append with a string, or textContent); the page's
// policy (Trusted Types) makes any innerHTML assignment throw, so a slip cannot go unnoticed.

const PROPERTIES = new Set(['value', 'checked', 'disabled', 'hidden', 'selected', 'indeterminate']);

/** An element: `props` sets attributes (constant names), `on…` listeners, a few properties. */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (PROPERTIES.has(key)) el[key] = value;
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  add(el, children);
  return el;
}

/** Append children: nodes as they are, anything else as text. */
export function add(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

// Characters that reorder text around them: shown as visible marks so that a title cannot
// pretend to be something else (a right-to-left override turning "exe.txt" around).
const BIDI_CONTROLS = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/gu;

/** Text nodes (and marks for bidirectional controls) for a string that came from data. */
export function textNodes(text) {
  const value = String(text ?? '');
  const nodes = [];
  let last = 0;
  for (const match of value.matchAll(BIDI_CONTROLS)) {
    if (match.index > last) nodes.push(document.createTextNode(value.slice(last, match.index)));
    const code = match[0].codePointAt(0).toString(16).toUpperCase().padStart(4, '0');
    nodes.push(h('span', { class: 'control-char', title: 'a bidirectional control character' },
      `U+${code}`));
    last = match.index + match[0].length;
  }
  if (last < value.length) nodes.push(document.createTextNode(value.slice(last)));
  return nodes;
}

/** An element isolating text that came from data (its direction cannot leak out). */
export function userText(text, tag = 'span', props = {}) {
  const el = h(tag, { ...props, class: `user-text ${props.class ?? ''}`.trim(), dir: 'auto' });
  return add(el, textNodes(text));
}

const WEB = new Set(['http:', 'https:']);

/** A link for http(s) URLs only; anything else (javascript:, data:, …) is shown as text. */
export function sourceLink(url, label = null) {
  if (!url) return null;
  let parsed = null;
  try {
    parsed = new URL(url);
  } catch {
    parsed = null;
  }
  if (parsed === null || !WEB.has(parsed.protocol)) {
    return h('span', { class: 'inert-url' }, userText(url, 'code'));
  }
  const link = h('a', { rel: 'noopener noreferrer', target: '_blank', referrerpolicy: 'no-referrer' });
  link.href = parsed.href;
  const shown = label ?? `${parsed.host}${parsed.pathname === '/' ? '' : parsed.pathname}`;
  return add(link, [userText(shown.length > 60 ? `${shown.slice(0, 59)}…` : shown), ' ',
    h('span', { class: 'visually-hidden' }, '(opens a new tab)')]);
}

/** Replace an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  return add(el, children);
}

let ids = 0;
/** A unique id for label/field pairs. */
export function uid(prefix = 'f') {
  ids += 1;
  return `${prefix}-${ids}`;
}

/** A labelled field: the label, the control and an optional hint, tied together. */
export function field(label, control, hint = null) {
  const id = control.id || uid();
  control.id = id;
  const parts = [h('label', { for: id }, label), control];
  if (hint) {
    const hintId = `${id}-hint`;
    control.setAttribute('aria-describedby', hintId);
    parts.push(h('span', { class: 'hint', id: hintId }, hint));
  }
  return h('div', { class: 'field' }, parts);
}

/** A select with (value, label) options. */
export function select(props, options, chosen = '') {
  return h('select', props, options.map(([value, label]) =>
    h('option', { value, selected: value === chosen }, label)));
}

const NUMBER = new Intl.NumberFormat('en');
export const number = (n) => (n === null || n === undefined ? '—' : NUMBER.format(n));
export const fixed = (n, digits = 3) => (typeof n === 'number' ? n.toFixed(digits) : '—');

export function bytes(n) {
  if (n === null || n === undefined) return '—';
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let value = n;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${units[unit]}`;
}

export function when(iso) {
  if (!iso) return '—';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString('en-GB');
}

/** A table in a scrolling box: a caption for screen readers, column headers, and rows given
 * as arrays of cells (nodes or text) or as ready <tr> elements. */
export function table(caption, headers, rows) {
  return h('div', { class: 'table-wrap' }, h('table', {},
    h('caption', { class: 'visually-hidden' }, caption),
    h('thead', {}, h('tr', {}, headers.map((name) => h('th', { scope: 'col' }, name)))),
    h('tbody', {}, rows.map((row) => (row instanceof Node ? row
      : h('tr', {}, row.map((cell) => h('td', {}, cell))))))));
}

/** "1 group", "3 groups": a count with its noun agreeing. */
export function plural(n, one, many = `${one}s`) {
  return `${number(n)} ${n === 1 ? one : many}`;
}

// A citation's markdown (**Title**, _Section_, [Source](url)) as text with a link: the
// marks become emphasis, the link a real one (http(s) only, as sourceLink makes it).
const CITATION_MARKS = /\*\*(.+?)\*\*|\[([^\]]+)\]\(([^)\s]+)\)|(?<=^|\s)_(.+?)_(?=\s|$)/gu;

/** The nodes of a citation's text; whether it holds a link is `nodes.linked`. */
export function citationText(text) {
  const value = String(text ?? '');
  const nodes = [];
  let last = 0;
  let linked = false;
  for (const match of value.matchAll(CITATION_MARKS)) {
    if (match.index > last) nodes.push(...textNodes(value.slice(last, match.index)));
    const [, strong, label, target, em] = match;
    if (strong !== undefined) nodes.push(add(h('strong'), textNodes(strong)));
    else if (em !== undefined) nodes.push(add(h('em'), textNodes(em)));
    else {
      nodes.push(sourceLink(target, label));
      linked = true;
    }
    last = match.index + match[0].length;
  }
  if (last < value.length) nodes.push(...textNodes(value.slice(last)));
  const el = h('span', { class: 'user-text citation-text', dir: 'auto' });
  add(el, nodes);
  el.linked = linked;
  return el;
}
