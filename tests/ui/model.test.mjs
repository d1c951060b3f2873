// The UI's pure logic (src/ui/assets/model.js, charts.js's ticks) under node's
// own test runner: node --test tests/ui/model.test.mjs (scripts/test.sh runs it).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { niceTicks } from '../../src/ui/assets/charts.js';
import {
  buildTraceTree, criticalPath, formatDurationUs, formatPercent, layoutGraph, metricSeries,
  parseDurationUs, parseTags, stepMsFor, timestampMs,
} from '../../src/ui/assets/model.js';

// A Jaeger trace from [id, parent, start, end, error?] rows (µs).
function trace(rows) {
  return {
    traceID: 't1',
    processes: { p1: { serviceName: 'svc', tags: [] } },
    spans: rows.map(([id, parent, start, end, error]) => ({
      traceID: 't1', spanID: id, operationName: `op-${id}`, startTime: start, duration: end - start,
      references: parent ? [{ refType: 'CHILD_OF', traceID: 't1', spanID: parent }] : [],
      tags: error ? [{ key: 'error', type: 'bool', value: true }] : [], logs: [], processID: 'p1',
    })),
  };
}

test('durations parse and print', () => {
  assert.equal(parseDurationUs('250ms'), 250000);
  assert.equal(parseDurationUs('1.5s'), 1500000);
  assert.equal(parseDurationUs(' 80us '), 80);
  assert.equal(parseDurationUs('80µs'), 80);
  assert.equal(parseDurationUs('2m'), 120e6);
  for (const bad of ['', '10', 'ms', '1.2.3s', '-5ms', '5 parsecs', "1ms'; DROP"]) assert.ok(Number.isNaN(parseDurationUs(bad)), bad);
  assert.equal(formatDurationUs(850), '850µs');
  assert.equal(formatDurationUs(107037), '107.04ms');
  assert.equal(formatDurationUs(1234567), '1.23s');
  assert.equal(formatDurationUs(125e6), '2m 5s');
  assert.equal(formatPercent(0.0123), '1.23%');
  assert.equal(formatPercent(0), '0%');
  assert.equal(formatPercent(0.31), '31.0%');
});

test('tags parse as key=value, quotes allowed, errors named', () => {
  assert.deepEqual(parseTags('a=1 b.c=x'), { tags: [['a', '1'], ['b.c', 'x']], error: '' });
  assert.deepEqual(parseTags('msg="a b" k='), { tags: [['msg', 'a b'], ['k', '']], error: '' });
  assert.deepEqual(parseTags(''), { tags: [], error: '' });
  assert.equal(parseTags('a=1 oops').error, "'oops' is not key=value");
});

test('the tree nests by CHILD_OF, children by start time, depth first', () => {
  const t = buildTraceTree(trace([
    ['c', 'a', 30, 40], ['a', '', 0, 100], ['b', 'a', 10, 20], ['d', 'b', 12, 18, true], ['o', 'missing', 50, 60],
  ]));
  assert.deepEqual(t.nodes.map((n) => [n.id, n.depth]), [['a', 0], ['b', 1], ['d', 2], ['c', 1], ['o', 0]]);
  assert.equal(t.start, 0);
  assert.equal(t.duration, 100);
  assert.equal(t.errors, 1);
  assert.equal(t.nodes.find((n) => n.id === 'o').orphan, true);
  assert.equal(t.maxDepth, 2);
});

test('a parent cycle or a repeated span id cannot hang or duplicate the tree', () => {
  const t = buildTraceTree(trace([['x', 'y', 0, 10], ['y', 'x', 1, 9], ['z', '', 0, 5], ['z', '', 0, 6]]));
  assert.deepEqual(t.nodes.map((n) => n.id).sort(), ['x', 'y', 'z']);
});

test('critical path: the last-finishing child, then what ended before it started', () => {
  // tests/e2e/ui_traces.py's CHECKOUT in ms: every span but C2 is on the path.
  const ms = (x) => x * 1000;
  const rows = [
    ['F1', '', 0, 120], ['F2', 'F1', 5, 112], ['C1', 'F2', 8, 110], ['C2', 'C1', 10, 18], ['C3', 'C1', 12, 40],
    ['I1', 'C3', 14, 38], ['I2', 'I1', 16, 34], ['C4', 'C1', 44, 104], ['P1', 'C4', 46, 102],
    ['P2', 'P1', 48, 58], ['P3', 'P1', 60, 100], ['F3', 'F1', 113, 119],
  ].map(([id, p, s, e]) => [id, p, ms(s), ms(e)]);
  const cp = criticalPath(buildTraceTree(trace(rows)));
  assert.deepEqual([...cp.keys()].sort(), rows.map((r) => r[0]).filter((id) => id !== 'C2').sort());
  assert.deepEqual(cp.get('F1'), [[0, ms(5)], [ms(112), ms(113)], [ms(119), ms(120)]]);
  assert.deepEqual(cp.get('C1'), [[ms(8), ms(12)], [ms(40), ms(44)], [ms(104), ms(110)]]);
  assert.deepEqual(cp.get('P3'), [[ms(60), ms(100)]]);
  // The segments tile the root's whole duration.
  const total = [...cp.values()].flat().reduce((s, [a, b]) => s + (b - a), 0);
  assert.equal(total, ms(120));
});

test('critical path clips a child that outlives its parent', () => {
  const cp = criticalPath(buildTraceTree(trace([['r', '', 0, 100], ['k', 'r', 50, 150]])));
  assert.deepEqual(cp.get('r'), [[0, 50]]);
  assert.deepEqual(cp.get('k'), [[50, 100]]);
});

test('graph layers: callers left of callees; a cycle does not loop', () => {
  const { layers, pos } = layoutGraph(['fe', 'co', 'pay', 'inv', 'solo'], [
    { parent: 'fe', child: 'co' }, { parent: 'co', child: 'pay' }, { parent: 'co', child: 'inv' },
    { parent: 'pay', child: 'co' }, { parent: 'fe', child: 'pay' },
  ]);
  assert.equal(pos.get('fe').layer, 0);
  assert.equal(pos.get('co').layer, 1);
  assert.equal(pos.get('pay').layer, 2);
  assert.equal(pos.get('inv').layer, 2);
  assert.equal(pos.get('solo').layer, 0);
  assert.equal(layers.flat().length, 5);
});

test('metric series from Jaeger metricsquery JSON', () => {
  const s = metricSeries({ metrics: [{ labels: [{ name: 'service_name', value: 'fe' }], metricPoints: [
    { gaugeValue: { doubleValue: 2 }, timestamp: '2026-01-01T00:01:00Z' },
    { gaugeValue: { doubleValue: 'NaN' }, timestamp: '2026-01-01T00:02:00Z' },
    { gaugeValue: { doubleValue: 1 }, timestamp: '2026-01-01T00:00:00Z' },
  ] }] });
  assert.deepEqual(s[0].labels, { service_name: 'fe' });
  assert.deepEqual(s[0].points, [[Date.parse('2026-01-01T00:00:00Z'), 1], [Date.parse('2026-01-01T00:01:00Z'), 2]]);
  assert.equal(timestampMs(1767225600), 1767225600000);
  assert.equal(timestampMs(1767225600000), 1767225600000);
  assert.equal(timestampMs(1767225600000000), 1767225600000);
  assert.equal(stepMsFor(3600e3), 60e3);
  assert.equal(stepMsFor(7 * 86400e3), 10080e3 * 1);
});

test('chart ticks reach past the highest value', () => {
  for (const hi of [1, 7, 99, 120000, 0.031]) {
    const t = niceTicks(0, hi, 3);
    assert.ok(t[t.length - 1] >= hi, `${hi}: ${t}`);
    assert.equal(t[0], 0);
  }
});
