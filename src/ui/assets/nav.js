// Client-side navigation and the controls every page shares.
import { h, qs } from './dom.js';
import { LOOKBACKS } from './model.js';

// Moves to `url` without reloading: app.js's router draws the page.
export function navigate(url, { replace = false } = {}) {
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  window.dispatchEvent(new CustomEvent('spanhouse:route'));
}

// Replaces the query string of the current page (same path) and redraws it.
export function setQuery(params, opts) {
  navigate(location.pathname + qs(params), opts);
}

// A <select> of time windows ("Last 1h"); calls onChange(name).
export function lookbackSelect(current, onChange) {
  const sel = h('select', { class: 'lookback', 'aria-label': 'Time window', onchange: () => onChange(sel.value) },
    LOOKBACKS.map(([name]) => h('option', { value: name, selected: name === current }, `Last ${name}`)));
  return sel;
}

export function pageHeader(title, ...tools) {
  return h('div', { class: 'page-head' }, h('h1', null, title), h('div', { class: 'tools' }, ...tools));
}
