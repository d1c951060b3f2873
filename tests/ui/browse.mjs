#!/usr/bin/env node
// Drives Debian's Chromium (playwright-core, pinned in package-lock.json) through
// one scenario of spanhouse's web UI and prints what the page showed as one
// JSON line; tests/e2e/test_ui.py runs it and makes the assertions.
//
//   node tests/ui/browse.mjs --base http://127.0.0.1:PORT --out DIR --scenario NAME [--arg JSON]
//
// Scenarios: page, overview, search, trace, service, dependencies, token (below).
// Screenshots go to DIR/<scenario>-*.png. Exit 0 with {"ok": true, ...};
// on a failure to drive the page (a timeout, a missing element) exit 1 with
// {"ok": false, "error": ...} and a screenshot DIR/<scenario>-failure.png.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import path from 'node:path';

function args() {
  const out = { arg: '{}' };
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i += 2) out[a[i].replace(/^--/, '')] = a[i + 1];
  for (const k of ['base', 'out', 'scenario']) if (!out[k]) throw new Error(`--${k} is required`);
  out.arg = JSON.parse(out.arg);
  return out;
}

const opts = args();
mkdirSync(opts.out, { recursive: true });
const shot = (page, name, full = true) => page.screenshot({ path: path.join(opts.out, `${opts.scenario}-${name}.png`), fullPage: full });
const TIMEOUT = 20000;

// Waits until the router says the page has drawn all it will.
async function ready(page) {
  await page.waitForSelector('main#app[data-state="done"]', { timeout: TIMEOUT });
}

async function open(page, url) {
  const resp = await page.goto(opts.base + url, { waitUntil: 'load', timeout: TIMEOUT });
  await ready(page);
  return resp.status();
}

// What every page can say about endpoints this spanhouse lacks.
const notices = (page) => page.$$eval('.notice', (els) => els.map((e) => ({
  kind: [...e.classList].find((c) => c.startsWith('notice-')).slice(7),
  missing: e.dataset.missing || '',
  text: e.textContent.trim(),
})));

const scenarios = {
  // The services overview: its rows, or its notices.
  async overview(page) {
    const status = await open(page, '/');
    await shot(page, 'page');
    const rows = await page.$$eval('.services-table tbody tr', (trs) => trs.map((tr) => ({
      service: tr.dataset.service,
      cells: Object.fromEntries([...tr.querySelectorAll('td[data-col]')].map((td) => [td.dataset.col, td.textContent.trim()])),
      sparklines: tr.querySelectorAll('svg.spark path.spark-line').length,
    })));
    return { status, rows, notices: await notices(page) };
  },

  // Any page: its notices and how many span rows it drew.
  async page(page) {
    const status = await open(page, opts.arg.path);
    await shot(page, opts.arg.path.replace(/[^a-z0-9]+/gi, '_').slice(0, 60));
    return { status, notices: await notices(page), rows: await page.$$eval('.span-row', (r) => r.length) };
  },

  // Search through the form, as a person would: pick the service, a minimum
  // duration, submit; then open the first result.
  async search(page) {
    await open(page, '/search');
    const field = await page.$('form.search-form [name=service]');
    const tag = await field.evaluate((e) => e.tagName.toLowerCase());
    if (tag === 'select') await field.selectOption(opts.arg.service);
    else await field.fill(opts.arg.service);
    if (opts.arg.minDuration) await page.fill('form.search-form [name=minDuration]', opts.arg.minDuration);
    await page.selectOption('form.search-form [name=lookback]', '1h');
    await page.click('form.search-form button[type=submit]');
    await page.waitForURL(/\/search\?/, { timeout: TIMEOUT });
    await ready(page);
    await shot(page, 'results');
    const url = page.url();
    const results = await page.$$eval('.trace-table tbody tr', (trs) => trs.map((tr) => ({
      traceId: tr.dataset.traceId,
      text: tr.textContent.replace(/\s+/g, ' ').trim(),
    })));
    const dots = await page.$$eval('svg.scatter circle.dot', (c) => c.length);
    let opened = null;
    if (opts.arg.open && results.some((r) => r.traceId === opts.arg.open)) {
      await page.click(`.trace-table tr[data-trace-id="${opts.arg.open}"] a.trace-link`);
      await page.waitForURL(new RegExp(`/trace/${opts.arg.open}$`), { timeout: TIMEOUT });
      await ready(page);
      opened = { url: page.url(), rows: await page.$$eval('.span-row', (r) => r.length) };
      await shot(page, 'opened');
    }
    return { url, fieldTag: tag, results, dots, opened, notices: await notices(page) };
  },

  // The trace view: reached through the trace-id box, then measured row by row.
  async trace(page) {
    await open(page, '/');
    await page.fill('#goto-trace-id', opts.arg.traceId.toUpperCase());
    await page.press('#goto-trace-id', 'Enter');
    await page.waitForURL(new RegExp(`/trace/${opts.arg.traceId}$`), { timeout: TIMEOUT });
    await ready(page);
    await shot(page, 'waterfall');
    const meta = await page.evaluate(() => ({
      title: document.title,
      spanCount: document.querySelector('#trace-span-count')?.textContent,
      duration: document.querySelector('#trace-duration')?.textContent,
      traceId: document.querySelector('#trace-id')?.textContent,
    }));
    const rows = await page.$$eval('.span-row', (els) => els.map((row) => {
      const r = (sel) => row.querySelector(sel).getBoundingClientRect();
      const track = r('.span-track');
      const bar = r('.span-bar');
      return {
        ...row.dataset,
        visible: !row.hidden && row.getBoundingClientRect().height > 0,
        isError: row.classList.contains('is-error'),
        service: row.querySelector('.svc').textContent,
        operation: row.querySelector('.op').textContent,
        durationText: row.querySelector('.span-dur').textContent,
        indentX: r('.svc-bar').left,
        track: { x: track.left, width: track.width },
        bar: { x: bar.left, width: bar.width },
        barColor: getComputedStyle(row.querySelector('.span-bar')).backgroundColor,
        criticalSegments: row.querySelectorAll('.cp-seg').length,
      };
    }));

    // Span details of the asked span: click its row.
    let detail = null;
    if (opts.arg.detailSpanId) {
      const row = `.span-row[data-span-id="${opts.arg.detailSpanId}"]`;
      await page.click(`${row} .op`);
      const box = await page.waitForSelector(`${row} + .span-detail:not([hidden])`, { timeout: TIMEOUT });
      await box.scrollIntoViewIfNeeded();
      await shot(page, 'span-detail', false);
      detail = await box.evaluate((el) => ({
        attributes: Object.fromEntries([...el.querySelectorAll('table.span-tags tr')].map((tr) => [tr.dataset.key, tr.querySelector('td').textContent])),
        resource: Object.fromEntries([...el.querySelectorAll('table.process-tags tr')].map((tr) => [tr.dataset.key, tr.querySelector('td').textContent])),
        events: [...el.querySelectorAll('ul.events > li')].map((li) => li.textContent),
        errorTexts: [...el.querySelectorAll('.err-text')].map((e) => e.textContent),
        scripts: el.querySelectorAll('script').length,
      }));
    }

    // Collapsing a span hides exactly its descendants.
    let collapse = null;
    if (opts.arg.collapseSpanId) {
      await page.click(`.span-row[data-span-id="${opts.arg.collapseSpanId}"] .toggle`);
      const hidden = await page.$$eval('.span-row', (els) => els.filter((e) => e.hidden).map((e) => e.dataset.spanId));
      await shot(page, 'collapsed');
      await page.click(`.span-row[data-span-id="${opts.arg.collapseSpanId}"] .toggle`);
      const after = await page.$$eval('.span-row', (els) => els.filter((e) => e.hidden).length);
      collapse = { hidden, hiddenAfterExpand: after };
    }
    return { url: page.url(), meta, rows, detail, collapse, notices: await notices(page) };
  },

  async service(page) {
    await open(page, `/service/${encodeURIComponent(opts.arg.service)}`);
    await shot(page, 'page');
    return {
      tiles: await page.$$eval('.tile', (t) => t.map((x) => x.textContent)),
      charts: await page.$$eval('figure.chart-box', (fs) => fs.map((f) => ({
        title: f.querySelector('figcaption')?.textContent,
        lines: f.querySelectorAll('path.line').length,
      }))),
      operations: await page.$$eval('.ops-table tbody tr', (trs) => trs.map((tr) => tr.dataset.operation)),
      slowTraces: await page.$$eval('.trace-table tbody tr', (trs) => trs.map((tr) => tr.dataset.traceId)),
      notices: await notices(page),
    };
  },

  async dependencies(page) {
    await open(page, '/dependencies');
    await shot(page, 'page');
    return {
      nodes: await page.$$eval('svg.dep-graph g.node', (gs) => gs.map((g) => g.dataset.service)),
      edges: await page.$$eval('svg.dep-graph g.edge', (gs) => gs.map((g) => [g.dataset.parent, g.dataset.child])),
      notices: await notices(page),
    };
  },

  // A spanhouse with a query token: the UI loads without one, asks for it on
  // the first refused call, and works once it is entered.
  async token(page) {
    const status = await open(page, `/trace/${opts.arg.traceId}`);
    const panelShown = await page.isVisible('#token-panel');
    const before = await notices(page);
    await shot(page, 'asked');
    await page.fill('#token-input', opts.arg.token);
    await page.click('#token-form button[type=submit]');
    await ready(page);
    await page.waitForSelector('.span-row', { timeout: TIMEOUT });
    await shot(page, 'after');
    const rows = await page.$$eval('.span-row', (r) => r.length);
    const stored = await page.evaluate(() => localStorage.getItem('spanhouse.queryToken'));
    return { status, panelShown, before, rows, stored: stored === opts.arg.token };
  },
};

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--disable-gpu', '--disable-dev-shm-usage'],
});
const context = await browser.newContext({ viewport: { width: 1440, height: 900 }, deviceScaleFactor: 1 });
const page = await context.newPage();
const consoleErrors = [];
const pageErrors = [];
const dialogs = [];
const requests = [];
page.on('console', (m) => {
  // A refused fetch (404, 401) is logged by the browser itself: the page's own notice covers it.
  if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) consoleErrors.push(m.text());
});
page.on('pageerror', (e) => pageErrors.push(String(e)));
page.on('dialog', (d) => {
  dialogs.push(d.message());
  d.dismiss();
});
page.on('request', (r) => requests.push(r.url()));
let result;
let code = 0;
try {
  const run = scenarios[opts.scenario];
  if (!run) throw new Error(`no scenario '${opts.scenario}'`);
  result = { ok: true, ...(await run(page)) };
} catch (e) {
  code = 1;
  result = { ok: false, error: String(e && e.stack ? e.stack : e) };
  await shot(page, 'failure').catch(() => {});
}
result.consoleErrors = consoleErrors;
result.pageErrors = pageErrors;
result.dialogs = dialogs;
result.foreignRequests = requests.filter((u) => !u.startsWith(opts.base) && !u.startsWith('blob:') && !u.startsWith('data:'));
await browser.close();
process.stdout.write(`${JSON.stringify(result)}\n`);
process.exit(code);
