// The token lives in this tab's sessionStorage only: never a cookie, never in a URL, never
// written to the console or a log. Closing the tab or signing out forgets it.

const KEY = 'rag-console-token';

export function token() {
  return sessionStorage.getItem(KEY);
}

export function remember(value) {
  sessionStorage.setItem(KEY, value);
}

export function forget() {
  sessionStorage.removeItem(KEY);
}
