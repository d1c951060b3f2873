#!/usr/bin/env node
// Emits the known trace of tests/e2e/emit_trace.py with the real OpenTelemetry
// JS SDK (@opentelemetry/sdk-trace-base), over OTLP/HTTP protobuf
// (exporter-trace-otlp-proto) or JSON (exporter-trace-otlp-http).
//
// Usage: node emit_otel.js --endpoint http://127.0.0.1:PORT/v1/traces --encoding proto|json
//
// The same shape as emit_trace.py: two services (two providers, two
// resources), six spans of the five kinds, attributes of every type, events
// with attributes, links (same trace and another trace), an ERROR status with
// a message and an OK status, a W3C tracestate, explicit start and end times
// (HrTime, to the nanosecond), scope name and version. What JavaScript cannot
// express differs, and the description says what was really sent: numbers are
// doubles, so an integral number goes out as an OTLP int (3.0 is int 3) and
// integers stop at 2**53 - 1; "float.huge" is a non-integral double instead.
// A recording wrapper keeps every span the exporter was given; stdout gets
// the JSON description (roundtrip_check.py's format) and the exit code is 1 if
// any export failed.
'use strict';

const { report, run } = require('./report');
const api = require('@opentelemetry/api');
const { ExportResultCode, TraceState } = require('@opentelemetry/core');
const { defaultResource, resourceFromAttributes } = require('@opentelemetry/resources');
const {
  BasicTracerProvider, SimpleSpanProcessor, SamplingDecision,
} = require('@opentelemetry/sdk-trace-base');

function parseArgs(argv) {
  const args = { endpoint: '', encoding: 'proto' };
  for (let i = 2; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in args) || i + 1 >= argv.length) throw new Error(`bad argument ${argv[i]}`);
    args[key] = argv[i + 1];
  }
  if (!args.endpoint) throw new Error('--endpoint is required');
  if (!['proto', 'json'].includes(args.encoding)) throw new Error('--encoding proto|json');
  return args;
}

const ROOT_TRACE_STATE = new TraceState('spanhouse=e2e,rojo=00f067aa0ba902b7');

// Samples everything; a root span gets ROOT_TRACE_STATE, a child its parent's.
const traceStateSampler = {
  shouldSample(context) {
    const parent = api.trace.getSpanContext(context);
    const traceState = parent && api.isSpanContextValid(parent) ? parent.traceState
      : ROOT_TRACE_STATE;
    return { decision: SamplingDecision.RECORD_AND_SAMPLED, traceState };
  },
  toString() { return 'TraceStateSampler'; },
};

class RecordingExporter {
  constructor(inner) {
    this.inner = inner;
    this.spans = [];
    this.failures = [];
  }

  export(spans, resultCallback) {
    this.spans.push(...spans);
    this.inner.export(spans, (result) => {
      if (result.code !== ExportResultCode.SUCCESS) {
        this.failures.push(`export of ${JSON.stringify(spans.map((s) => s.name))} -> ` +
          `${result.error ? result.error.message || result.error : result.code}`);
      }
      resultCallback(result);
    });
  }

  shutdown() { return this.inner.shutdown(); }

  forceFlush() { return this.inner.forceFlush ? this.inner.forceFlush() : Promise.resolve(); }
}

const hrNs = (hr) => BigInt(hr[0]) * 1000000000n + BigInt(hr[1]);
const toHr = (ns) => [Number(ns / 1000000000n), Number(ns % 1000000000n)];
const KIND_NAMES = { [api.SpanKind.INTERNAL]: 'internal', [api.SpanKind.SERVER]: 'server',
  [api.SpanKind.CLIENT]: 'client', [api.SpanKind.PRODUCER]: 'producer',
  [api.SpanKind.CONSUMER]: 'consumer' };
const STATUS_NAMES = { [api.SpanStatusCode.UNSET]: 'UNSET', [api.SpanStatusCode.OK]: 'OK',
  [api.SpanStatusCode.ERROR]: 'ERROR' };

function describe(span) {
  const ctx = span.spanContext();
  const parent = span.parentSpanContext;
  return {
    trace_id: ctx.traceId,
    span_id: ctx.spanId,
    parent_span_id: parent ? parent.spanId : '',
    name: span.name,
    kind: KIND_NAMES[span.kind],
    service: span.resource.attributes['service.name'],
    resource: { ...span.resource.attributes },
    scope: { name: span.instrumentationScope.name,
      version: span.instrumentationScope.version || '' },
    attributes: { ...span.attributes },
    events: span.events.map((e) => ({ name: e.name, timestamp_ns: hrNs(e.time),
      attributes: { ...(e.attributes || {}) } })),
    links: span.links.map((l) => ({ trace_id: l.context.traceId, span_id: l.context.spanId,
      attributes: { ...(l.attributes || {}) } })),
    status: { code: STATUS_NAMES[span.status.code], description: span.status.message || '' },
    trace_state: ctx.traceState ? ctx.traceState.serialize() : '',
    start_ns: hrNs(span.startTime),
    end_ns: hrNs(span.endTime),
  };
}

async function main() {
  const args = parseArgs(process.argv);
  const { OTLPTraceExporter } = require(args.encoding === 'proto'
    ? '@opentelemetry/exporter-trace-otlp-proto' : '@opentelemetry/exporter-trace-otlp-http');

  const frontendResource = defaultResource().merge(resourceFromAttributes({
    'service.name': 'frontend',
    'service.version': '2.3.1',
    'deployment.environment.name': 'e2e',
    'host.cpu.count': 8,
    'process.offset': -9000000000,
    'sample.ratio': 0.75,
    'feature.checkout_v2': true,
    'service.tags': ['web', 'edge'],
  }));
  const paymentResource = defaultResource().merge(resourceFromAttributes({
    'service.name': 'payment',
    'service.namespace': 'shop',
    'k8s.pod.restarts': 0,
    'region.latency_ms': 12.5,
    canary: false,
    zones: ['eu-1a', 'eu-1b', 'eu-1c'],
    ports: [8080, 9090],
  }));
  const frontendExp = new RecordingExporter(new OTLPTraceExporter({
    url: args.endpoint, compression: 'gzip', timeoutMillis: 30000 }));
  const paymentExp = new RecordingExporter(new OTLPTraceExporter({
    url: args.endpoint, timeoutMillis: 30000 }));
  const frontend = new BasicTracerProvider({ resource: frontendResource,
    sampler: traceStateSampler, spanProcessors: [new SimpleSpanProcessor(frontendExp)] });
  const payment = new BasicTracerProvider({ resource: paymentResource,
    sampler: traceStateSampler, spanProcessors: [new SimpleSpanProcessor(paymentExp)] });

  const web = frontend.getTracer('shop.frontend.instrumentation', '1.4.0');
  const consumerTracer = frontend.getTracer('shop.consumer'); // no version
  const pay = payment.getTracer('payment.lib', '0.9.0');

  // Whole microseconds plus a sub-microsecond part: +100 ns on starts, +900 ns
  // on ends, so µs truncation is visible and unambiguous.
  const base = BigInt(Date.now()) * 1000000n - 60000000000n;
  const at = (ms, fracNs) => toHr(base + BigInt(Math.round(ms * 1000)) * 1000n + BigInt(fracNs));
  const start = (ms) => at(ms, 100);
  const end = (ms) => at(ms, 900);
  const under = (span) => api.trace.setSpan(api.ROOT_CONTEXT, span);

  const root = web.startSpan('GET /checkout', {
    kind: api.SpanKind.SERVER,
    startTime: start(0),
    attributes: {
      'http.request.method': 'GET',
      'url.path': '/checkout',
      'empty.string': '',
      'unicode.string': 'héllo wörld ✓ "quoted" \\ back\nslash',
      'bool.true': true,
      'bool.false': false,
      'int.small': 42,
      'int.zero': 0,
      'int.negative': -17,
      'int.large': Number.MAX_SAFE_INTEGER, // 2**53 - 1: JS's largest exact integer
      'int.max': 2 ** 52,
      'int.min': Number.MIN_SAFE_INTEGER,
      'float.pi': Math.PI,
      'float.negative': -0.5,
      'float.tiny': 1e-300,
      'float.huge': -2500000000000000.5, // a larger double would be integral: an OTLP int
      'float.inexact': 0.1 + 0.2,
      'float.whole': 3.0, // sent as int 3 (Number.isInteger)
      'seq.str': ['a', 'b', 'c, d', '"q"'],
      'seq.bool': [true, false, true],
      'seq.int': [1, -2, 2 ** 40, Number.MIN_SAFE_INTEGER],
      'seq.float': [1.5, -2.25, 3.5, 0.1],
      'seq.empty': [],
    },
  }, api.ROOT_CONTEXT);

  const validate = web.startSpan('validate cart', { kind: api.SpanKind.INTERNAL,
    startTime: start(1), attributes: { 'cart.items': 3 } }, under(root));
  validate.addEvent('cart.validated', { 'cart.id': 'c-77', items: 3, total: 99.95,
    coupon: false, skus: ['sku-1', 'sku-2'] }, at(2, 500));
  validate.addEvent('no.attributes', at(2.5, 0));
  validate.end(end(3));

  const client = web.startSpan('POST /payment', { kind: api.SpanKind.CLIENT,
    startTime: start(5), attributes: { 'http.request.method': 'POST', 'server.port': 8080,
      'peer.service': 'payment' } }, under(root));

  const payServer = pay.startSpan('POST /payment', { kind: api.SpanKind.SERVER,
    startTime: start(6), attributes: { 'http.response.status_code': 402,
      'payment.amount': 99.95, 'payment.retried': true } }, under(client));
  const producer = pay.startSpan('publish payment.failed', { kind: api.SpanKind.PRODUCER,
    startTime: start(20), attributes: { 'messaging.system': 'kafka',
      'messaging.destination.name': 'payment.failed',
      'messaging.batch.message_count': 1 } }, under(payServer));
  producer.end(end(21));
  const declined = new Error('card declined by issuer');
  declined.name = 'ValueError';
  payServer.recordException(declined, at(28, 250));
  payServer.setStatus({ code: api.SpanStatusCode.ERROR, message: 'card declined' });
  payServer.end(end(29));
  client.end(end(30));

  const otherTrace = { traceId: '0af7651916cd43dd8448eb211c80319c',
    spanId: 'b7ad6b7169203331', traceFlags: api.TraceFlags.SAMPLED, isRemote: true };
  const consume = consumerTracer.startSpan('consume payment.failed', {
    kind: api.SpanKind.CONSUMER,
    startTime: start(35),
    attributes: { 'messaging.operation.type': 'process', 'retry.count': 0 },
    links: [{ context: validate.spanContext(), attributes: { 'link.reason': 'same-trace' } },
      { context: otherTrace, attributes: { 'link.reason': 'other-trace', 'link.weight': 2 } }],
  }, under(producer));
  consume.end(end(45));

  root.setStatus({ code: api.SpanStatusCode.OK });
  root.end(end(50));

  const failures = [];
  for (const step of [() => frontend.forceFlush(), () => payment.forceFlush(),
    () => frontend.shutdown(), () => payment.shutdown()]) {
    try {
      await step(); // eslint-disable-line no-await-in-loop
    } catch (err) {
      failures.push(`flush or shutdown: ${err.message || err}`);
    }
  }
  failures.push(...frontendExp.failures, ...paymentExp.failures);
  const out = { trace_id: root.spanContext().traceId,
    spans: frontendExp.spans.concat(paymentExp.spans).map(describe), failures };
  return report(out);
}

run(main);
