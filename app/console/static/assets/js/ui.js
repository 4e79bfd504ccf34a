// Shared pieces of the pages: status messages, errors, the confirmation dialog, paging.

import { describe } from './api.js';
import { add, fill, h } from './dom.js';

let fresh = false; // said since the last page was drawn: it survives the next one

/** Say something in the polite live region at the top (announced by screen readers). */
export function announce(message) {
  fill(document.getElementById('status'), message ? h('p', {}, message) : null);
  fresh = Boolean(message);
}

/** Replace the message shown (one said for this page, an upload's), if any, by `message`. */
export function update(message) {
  if (document.getElementById('status').hasChildNodes()) announce(message);
}

/** Called when a page is drawn: an older message is cleared, a fresh one kept once. */
export function pageChanged() {
  if (!fresh) announce('');
  fresh = false;
}

/** An element that shows an error (as an alert) or nothing. */
export function errorBox() {
  const box = h('div', { class: 'error', role: 'alert', hidden: true });
  box.show = (error) => {
    if (!error) {
      box.hidden = true;
      box.replaceChildren();
      return;
    }
    fill(box, describe(error));
    box.hidden = false;
  };
  return box;
}

/** Run `work` while `button` is busy; errors go to `box`. */
export async function busy(button, box, work) {
  const label = button.textContent;
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  box?.show(null);
  try {
    return await work();
  } catch (error) {
    if (error?.name === 'AbortError') return undefined;
    if (box) box.show(error);
    else announce(describe(error));
    return undefined;
  } finally {
    button.disabled = false;
    button.removeAttribute('aria-busy');
    button.textContent = label;
  }
}

/**
 * Ask before something that cannot be undone. `typed`: the text the person must type to
 * confirm (an id), passed on as it was typed; `details`: nodes shown under the text (what will
 * be deleted). Resolves to false, true, or the typed text.
 */
export function confirmAction({ title, text, action, typed = null, details = null }) {
  const dialog = document.getElementById('confirm');
  const ok = document.getElementById('confirm-ok');
  const cancel = document.getElementById('confirm-cancel');
  fill(document.getElementById('confirm-title'), title);
  fill(document.getElementById('confirm-text'), text);
  const extra = document.getElementById('confirm-extra');
  let input = null;
  if (typed !== null) {
    input = h('input', { id: 'confirm-input', type: 'text', autocomplete: 'off', spellcheck: 'false' });
    fill(extra, h('div', { class: 'field' },
      add(h('label', { for: 'confirm-input' }), ['Type ', h('code', {}, typed), ' to confirm']), input));
  } else fill(extra, details);
  ok.textContent = action;
  return new Promise((resolve) => {
    const finish = (answer) => {
      ok.removeEventListener('click', onOk);
      cancel.removeEventListener('click', onCancel);
      dialog.removeEventListener('cancel', onCancel);
      input?.removeEventListener('keydown', onKey);
      dialog.close();
      resolve(answer);
    };
    const onOk = () => finish(input ? input.value : true);
    const onCancel = (event) => {
      event?.preventDefault?.();
      finish(false);
    };
    const onKey = (event) => {
      if (event.key === 'Enter') onOk();
    };
    ok.addEventListener('click', onOk);
    cancel.addEventListener('click', onCancel);
    dialog.addEventListener('cancel', onCancel);
    input?.addEventListener('keydown', onKey);
    dialog.showModal();
    (input ?? cancel).focus();
  });
}

/** "Previous" / "Next" buttons and a range label for a page of `total` items. */
export function pager({ offset, limit, total, shown, noun, go }) {
  const first = total === 0 ? 0 : offset + 1;
  const last = offset + shown;
  return h('nav', { class: 'pager', 'aria-label': `Pages of ${noun}` },
    h('button', { type: 'button', class: 'secondary', disabled: offset === 0,
      onclick: () => go(Math.max(0, offset - limit)) }, 'Previous'),
    h('span', {}, `${noun} ${first}–${last} of ${total}`),
    h('button', { type: 'button', class: 'secondary', disabled: last >= total,
      onclick: () => go(offset + limit) }, 'Next'));
}

/** A small badge for a status word. */
export function badge(word) {
  return h('span', { class: `badge badge-${String(word).replace(/[^a-z_]/g, '')}` }, word);
}

/** A page's heading, focusable so that a new page can move the focus to it. */
export function heading(text) {
  return h('h1', { tabindex: '-1' }, text);
}
