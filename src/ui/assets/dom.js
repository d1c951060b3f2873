// DOM helpers. Data from spans only ever becomes text (textContent,
// attribute values), never markup: span names and attributes come from
// whoever can send spans.

const SVG_NS = 'http://www.w3.org/2000/svg';

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.setAttribute('class', Array.isArray(v) ? v.filter(Boolean).join(' ') : v);
    else if (k === 'style') Object.assign(el.style, v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

// h('a', {href: '/x', class: 'y'}, 'text', child...)
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

export function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.setAttribute('class', v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

// A link the router handles without reloading the page.
export function link(href, attrs, ...children) {
  return h('a', { href, 'data-link': true, ...attrs }, ...children);
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// A message box. kind: 'info' | 'warn' | 'error' | 'missing' (an endpoint
// this spanhouse does not serve).
export function notice(kind, title, ...body) {
  return h('div', { class: ['notice', `notice-${kind}`], role: kind === 'error' ? 'alert' : 'status' },
    h('strong', null, title), body.length ? h('div', { class: 'notice-body' }, ...body) : null);
}

export function loading(what) {
  return h('div', { class: 'loading' }, `Loading ${what}…`);
}

// A stable colour per service name, from a palette without reds: red means
// an error.
const PALETTE = ['#4e79a7', '#59a14f', '#f28e2b', '#76b7b2', '#b07aa1', '#edc948', '#9c755f',
  '#17becf', '#bcbd22', '#2c5d8a', '#2e7d32', '#8f8a86', '#6b5b95', '#d4a017', '#5f9ea0', '#8e6c8a'];
export function serviceColor(name) {
  let x = 2166136261;
  for (let i = 0; i < name.length; i++) {
    x ^= name.charCodeAt(i);
    x = Math.imul(x, 16777619);
  }
  return PALETTE[(x >>> 0) % PALETTE.length];
}

export function formatTime(ms) {
  if (!Number.isFinite(ms)) return '–';
  const d = new Date(ms);
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

// A time, without the date when it is today's.
export function formatWhen(ms) {
  const full = formatTime(ms);
  return new Date(ms).toDateString() === new Date().toDateString() ? full.slice(11) : full;
}

export function formatClock(ms, withSeconds = false) {
  const d = new Date(ms);
  const pad = (n) => String(n).padStart(2, '0');
  return `${pad(d.getHours())}:${pad(d.getMinutes())}${withSeconds ? `:${pad(d.getSeconds())}` : ''}`;
}

// The query string of the current location as a plain object.
export function queryParams() {
  return Object.fromEntries(new URLSearchParams(location.search));
}

// "?a=1&t=x&t=y" from {a: 1, t: ['x', 'y']}; empty values are left out.
export function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '') continue;
    if (Array.isArray(v)) v.forEach((x) => u.append(k, x));
    else u.append(k, String(v));
  }
  const s = u.toString();
  return s ? `?${s}` : '';
}
