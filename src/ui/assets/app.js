// The UI's entry point: the router (paths as ui_server.cc serves them), the
// trace-id box and the token panel.
import { getToken, setToken } from './api.js';
import { clear, notice } from './dom.js';
import { navigate } from './nav.js';
import * as overview from './overview.js';
import * as service from './service.js';
import * as search from './search.js';
import * as tracePage from './trace.js';
import * as deps from './deps.js';

const ROUTES = [
  [/^\/$/, 'overview', overview],
  [/^\/search$/, 'search', search],
  [/^\/dependencies$/, 'dependencies', deps],
  [/^\/service\/([^/]+)$/, 'overview', service],
  [/^\/trace\/([^/]+)$/, 'trace', tracePage],
];

let renderSeq = 0;

async function route() {
  const main = document.getElementById('app');
  const seq = ++renderSeq;
  const ctx = { alive: () => seq === renderSeq };
  let hit = null;
  for (const [re, nav, mod] of ROUTES) {
    const m = re.exec(location.pathname);
    if (m) {
      hit = { nav, mod, arg: m[1] !== undefined ? decodeURIComponent(m[1]) : undefined };
      break;
    }
  }
  for (const a of document.querySelectorAll('[data-nav]')) {
    a.classList.toggle('active', Boolean(hit) && a.dataset.nav === hit.nav);
  }
  clear(main);
  main.dataset.page = hit ? hit.mod.name : 'none';
  main.dataset.state = 'loading';
  if (!hit) {
    main.append(notice('error', 'No such page.', 'Try the services overview.'));
    main.dataset.state = 'done';
    return;
  }
  document.title = `${hit.mod.title(hit.arg)} · spanhouse`;
  try {
    await hit.mod.render(main, hit.arg, ctx);
  } catch (e) {
    if (ctx.alive()) main.append(notice('error', 'This page failed to draw.', String(e && e.stack ? e.stack : e)));
  }
  // Tests and people wait on this: the page has drawn what it will draw.
  if (ctx.alive()) main.dataset.state = 'done';
}

function setupLinks() {
  document.addEventListener('click', (ev) => {
    if (ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
    const a = ev.target.closest('a[data-link]');
    if (!a || a.origin !== location.origin) return;
    ev.preventDefault();
    if (a.pathname + a.search !== location.pathname + location.search) navigate(a.pathname + a.search);
  });
  window.addEventListener('popstate', route);
  window.addEventListener('spanhouse:route', route);
}

function setupGoto() {
  const form = document.getElementById('goto-trace');
  const input = document.getElementById('goto-trace-id');
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const id = input.value.trim().toLowerCase();
    if (!id) return;
    input.value = '';
    navigate(`/trace/${encodeURIComponent(id)}`);
  });
}

function setupToken() {
  const panel = document.getElementById('token-panel');
  const button = document.getElementById('token-button');
  const input = document.getElementById('token-input');
  const state = document.getElementById('token-state');
  const show = () => {
    state.textContent = getToken() ? 'A token is stored.' : 'No token stored.';
    button.classList.toggle('has-token', Boolean(getToken()));
  };
  button.addEventListener('click', () => {
    panel.hidden = !panel.hidden;
    if (!panel.hidden) input.focus();
  });
  document.getElementById('token-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    setToken(input.value.trim());
    input.value = '';
    panel.hidden = true;
    show();
    route();
  });
  document.getElementById('token-clear').addEventListener('click', () => {
    setToken('');
    show();
  });
  window.addEventListener('spanhouse:unauthorized', () => {
    panel.hidden = false;
    state.textContent = getToken() ? 'The stored token was refused.' : 'This spanhouse wants a query token.';
  });
  show();
}

setupLinks();
setupGoto();
setupToken();
route();
