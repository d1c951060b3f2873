#!/usr/bin/env node
// Emits the known trace's Zipkin counterpart with zipkin-js (the `zipkin`
// tracer, BatchRecorder, and zipkin-transport-http's HttpLogger encoding
// Zipkin v2 JSON), POSTed to a Zipkin v2 endpoint (/api/v2/spans).
//
// Usage: node emit_zipkin.js --endpoint http://127.0.0.1:PORT/api/v2/spans
//
// Zipkin's model is smaller than OTLP's (string tags, no links, no resource
// attributes, no scope), so the trace has the same shape in Zipkin's terms:
// three services (localEndpoint.serviceName, with an address and port), one
// root span with the debug flag (inherited by every span), spans of every
// Zipkin kind and one without a kind, tags (empty, Unicode), annotations, an
// `error` tag with a message, remote endpoints (a service, an address, a
// port), explicit microsecond timestamps. zipkin-js lowercases span names.
//
// stdout gets {"zipkin_spans": [the v2 JSON spans exactly as encoded for the
// POST], "failures": [...]}; roundtrip_check.zipkin_description turns that into
// what spanhouse should store. The exit code is 1 if the POST failed.
'use strict';

const { report, run } = require('./report');
const {
  Annotation, BatchRecorder, ExplicitContext, InetAddress, Tracer, option, jsonEncoder,
} = require('zipkin');
const { HttpLogger } = require('zipkin-transport-http');

function parseArgs(argv) {
  if (argv.length !== 4 || argv[2] !== '--endpoint') {
    throw new Error('usage: emit_zipkin.js --endpoint URL');
  }
  return { endpoint: argv[3] };
}

async function main() {
  const { endpoint } = parseArgs(process.argv);
  const sent = [];
  // The logger's encoder: records each span exactly as it goes into the POST body.
  const recordingV2 = {
    encode(span) {
      const text = jsonEncoder.JSON_V2.encode(span);
      sent.push(JSON.parse(text));
      return text;
    },
  };
  // Flushed by hand below, in one POST; the interval only guards a hang.
  const logger = new HttpLogger({ endpoint, jsonEncoder: recordingV2, httpInterval: 60000,
    timeout: 30000 });
  const failures = [];
  const posted = new Promise((resolve) => {
    logger.on('success', () => resolve());
    logger.on('error', (err) => { failures.push(String(err.message || err)); resolve(); });
  });
  const recorder = new BatchRecorder({ logger });
  const ctxImpl = new ExplicitContext();
  const tracer = (service) => new Tracer({ ctxImpl, recorder, localServiceName: service,
    traceId128Bit: true, supportsJoin: false });
  const frontend = tracer('frontend');
  const payment = tracer('payment');
  const worker = tracer('worker');

  // Microseconds, a minute ago.
  const base = Date.now() * 1000 - 60000000;
  const at = (ms) => base + Math.round(ms * 1000);

  // Records one span: `id` in scope, its service and local address first.
  const span = (t, id, service, ip, port, fn) => t.letId(id, () => {
    t.recordAnnotation(new Annotation.ServiceName(service));
    t.recordAnnotation(new Annotation.LocalAddr({ host: new InetAddress(ip), port }));
    fn();
  });

  const rootId = frontend.createRootId(new option.Some(true), true); // sampled, debug
  const validateId = frontend.createChildId(rootId);
  const clientId = frontend.createChildId(rootId);
  const serverId = payment.createChildId(clientId);
  const producerId = payment.createChildId(serverId);
  const consumerId = worker.createChildId(producerId);

  span(frontend, validateId, 'frontend', '127.0.0.11', 8081, () => {
    frontend.recordAnnotation(new Annotation.LocalOperationStart('validate cart'), at(1));
    frontend.recordBinary('cart.items', 3);
    frontend.recordAnnotation(new Annotation.Message('cart.validated'), at(2.5));
    frontend.recordAnnotation(new Annotation.Message('no attributes either'), at(2.75));
    frontend.recordAnnotation(new Annotation.LocalOperationStop(), at(3));
  });
  span(payment, producerId, 'payment', '127.0.0.12', 8080, () => {
    payment.recordAnnotation(new Annotation.ProducerStart(), at(20));
    payment.recordRpc('publish payment.failed');
    payment.recordAnnotation(new Annotation.MessageAddr({ serviceName: 'kafka',
      host: new InetAddress('127.0.0.13'), port: 9092 }), at(20));
    payment.recordBinary('messaging.system', 'kafka');
    payment.recordBinary('messaging.destination.name', 'payment.failed');
    payment.recordAnnotation(new Annotation.ProducerStop(), at(21));
  });
  span(payment, serverId, 'payment', '127.0.0.12', 8080, () => {
    payment.recordAnnotation(new Annotation.ServerRecv(), at(6));
    payment.recordRpc('POST /payment');
    payment.recordBinary('http.status_code', 402);
    payment.recordBinary('payment.amount', 99.95);
    payment.recordAnnotation(new Annotation.Message('card declined by issuer'), at(28.25));
    payment.recordBinary('error', 'card declined');
    payment.recordAnnotation(new Annotation.ServerSend(), at(29));
  });
  span(frontend, clientId, 'frontend', '127.0.0.11', 8081, () => {
    frontend.recordAnnotation(new Annotation.ClientSend(), at(5));
    frontend.recordRpc('POST /payment');
    frontend.recordAnnotation(new Annotation.ServerAddr({ serviceName: 'payment',
      host: new InetAddress('127.0.0.12'), port: 8080 }), at(5));
    frontend.recordBinary('http.method', 'POST');
    frontend.recordAnnotation(new Annotation.ClientRecv(), at(30));
  });
  span(worker, consumerId, 'worker', '127.0.0.14', 0, () => {
    worker.recordAnnotation(new Annotation.ConsumerStart(), at(35));
    worker.recordRpc('consume payment.failed');
    worker.recordBinary('messaging.operation.type', 'process');
    worker.recordBinary('retry.count', 0);
    worker.recordAnnotation(new Annotation.ConsumerStop(), at(45));
  });
  span(frontend, rootId, 'frontend', '127.0.0.11', 8081, () => {
    frontend.recordAnnotation(new Annotation.ServerRecv(), at(0));
    frontend.recordRpc('GET /checkout');
    frontend.recordBinary('http.method', 'GET');
    frontend.recordBinary('http.path', '/checkout');
    frontend.recordBinary('empty.string', '');
    frontend.recordBinary('unicode.string', 'héllo wörld ✓ "quoted" \\ back\nslash');
    frontend.recordBinary('bool.true', true);
    frontend.recordBinary('float.pi', Math.PI);
    frontend.recordAnnotation(new Annotation.ServerSend(), at(50));
  });

  recorder.flush();
  logger.processQueue(logger.fetchImplementation);
  const timeout = new Promise((resolve) => {
    setTimeout(() => { failures.push('no answer to the POST within 30 s'); resolve(); }, 30000)
      .unref();
  });
  await Promise.race([posted, timeout]);

  return report({ zipkin_spans: sent, failures });
}

run(main);
