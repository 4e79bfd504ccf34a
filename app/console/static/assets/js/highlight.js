// The query's words highlighted in a chunk's text, as text nodes and <mark> elements.

import { h, textNodes } from './dom.js';

const STOP_WORDS = new Set(('a an and are as at be by can do does for from how i in is it of ' +
  'on or the to was were what when where which who why will with').split(' '));

/** The words of a query worth highlighting (lower case, no stop words, no repeats). */
export function termsOf(query) {
  const words = String(query).toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  return [...new Set(words)].filter((word) => word.length > 1 && !STOP_WORDS.has(word));
}

const escape = (word) => word.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** `text` with each word starting with one of `terms` in a <mark> ("backup" marks "backups"). */
export function highlighted(text, terms) {
  const value = String(text ?? '');
  if (terms.length === 0) return textNodes(value);
  const pattern = new RegExp(
    `(?<![\\p{L}\\p{N}])(?:${terms.map(escape).join('|')})[\\p{L}\\p{N}]*`, 'giu');
  const nodes = [];
  let last = 0;
  for (const match of value.matchAll(pattern)) {
    nodes.push(...textNodes(value.slice(last, match.index)));
    nodes.push(h('mark', {}, textNodes(match[0])));
    last = match.index + match[0].length;
  }
  nodes.push(...textNodes(value.slice(last)));
  return nodes;
}
