package spanhouse.e2e;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.TraceFlags;
import io.opentelemetry.api.trace.TraceState;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Context;
import io.opentelemetry.exporter.otlp.http.trace.OtlpHttpSpanExporter;
import io.opentelemetry.exporter.otlp.trace.OtlpGrpcSpanExporter;
import io.opentelemetry.sdk.common.CompletableResultCode;
import io.opentelemetry.sdk.resources.Resource;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.EventData;
import io.opentelemetry.sdk.trace.data.LinkData;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import io.opentelemetry.sdk.trace.export.SpanExporter;
import io.opentelemetry.sdk.trace.samplers.Sampler;
import io.opentelemetry.sdk.trace.samplers.SamplingDecision;
import io.opentelemetry.sdk.trace.samplers.SamplingResult;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Emits the known trace of tests/e2e/emit_trace.py with the real OpenTelemetry Java SDK, over
 * OTLP/HTTP protobuf or OTLP/gRPC (opentelemetry-exporter-otlp, its default OkHttp sender).
 *
 * <p>Usage: {@code java -jar emit-otel.jar --protocol http|grpc --endpoint URL} (http:
 * http://HOST:PORT/v1/traces, grpc: http://HOST:PORT).
 *
 * <p>The same trace: two services (two SdkTracerProviders with their own resources), six spans
 * of the five kinds, attributes of every type (longs to their limits, doubles, arrays, an empty
 * array), events with attributes, an exception (recordException: its event has the time it was
 * recorded, after the span's explicit end), links to a span of this trace and of another, an
 * ERROR status with a message and an OK status, a W3C tracestate from the sampler, explicit
 * start and end times to the nanosecond, scope name and version. One service's exporter
 * compresses with gzip. A recording wrapper keeps every span the exporter was given; stdout gets
 * the JSON description (roundtrip_check.py's format) and the exit code is 1 if any export failed.
 */
public final class EmitOtel {
  private EmitOtel() {}

  /** Keeps every span it was given and every failed export. */
  static final class RecordingExporter implements SpanExporter {
    final SpanExporter inner;
    final List<SpanData> spans = new ArrayList<>();
    final List<String> failures = new ArrayList<>();

    RecordingExporter(SpanExporter inner) {
      this.inner = inner;
    }

    @Override
    public synchronized CompletableResultCode export(Collection<SpanData> batch) {
      spans.addAll(batch);
      CompletableResultCode result = inner.export(batch);
      List<String> names = new ArrayList<>();
      for (SpanData s : batch) {
        names.add(s.getName());
      }
      result.whenComplete(
          () -> {
            if (!result.isSuccess()) {
              synchronized (this) {
                Throwable t = result.getFailureThrowable();
                failures.add("export of " + names + " -> " + (t == null ? "failed" : t));
              }
            }
          });
      return result;
    }

    @Override
    public CompletableResultCode flush() {
      return inner.flush();
    }

    @Override
    public CompletableResultCode shutdown() {
      return inner.shutdown();
    }
  }

  /** Samples everything; a root span gets ROOT_STATE, a child its parent's. */
  static final class TraceStateSampler implements Sampler {
    static final TraceState ROOT_STATE =
        TraceState.builder().put("spanhouse", "e2e").put("rojo", "00f067aa0ba902b7").build();

    @Override
    public SamplingResult shouldSample(
        Context parentContext,
        String traceId,
        String name,
        SpanKind spanKind,
        Attributes attributes,
        List<LinkData> parentLinks) {
      boolean root = !Span.fromContext(parentContext).getSpanContext().isValid();
      return new SamplingResult() {
        @Override
        public SamplingDecision getDecision() {
          return SamplingDecision.RECORD_AND_SAMPLE;
        }

        @Override
        public Attributes getAttributes() {
          return Attributes.empty();
        }

        @Override
        public TraceState getUpdatedTraceState(TraceState parentTraceState) {
          return root ? ROOT_STATE : parentTraceState;
        }
      };
    }

    @Override
    public String getDescription() {
      return "TraceStateSampler";
    }
  }

  // ---- JSON, by hand (no dependency): doubles always with a fraction or an exponent ----

  static void str(StringBuilder out, String s) {
    out.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"' || c == '\\') {
        out.append('\\').append(c);
      } else if (c < 0x20 || c >= 0x7f) {
        out.append(String.format("\\u%04x", (int) c));
      } else {
        out.append(c);
      }
    }
    out.append('"');
  }

  static void value(StringBuilder out, Object v) {
    if (v instanceof String) {
      str(out, (String) v);
    } else if (v instanceof List) {
      out.append('[');
      boolean first = true;
      for (Object e : (List<?>) v) {
        if (!first) {
          out.append(',');
        }
        first = false;
        value(out, e);
      }
      out.append(']');
    } else {
      out.append(v); // Boolean, Long, Double (Double.toString: "3.0", "1.0E-300")
    }
  }

  static void attrs(StringBuilder out, Attributes attributes) {
    out.append('{');
    boolean[] first = {true};
    attributes.forEach(
        (AttributeKey<?> k, Object v) -> {
          if (!first[0]) {
            out.append(',');
          }
          first[0] = false;
          str(out, k.getKey());
          out.append(':');
          value(out, v);
        });
    out.append('}');
  }

  static void describe(StringBuilder out, SpanData s) {
    SpanContext ctx = s.getSpanContext();
    out.append("{\"trace_id\":");
    str(out, s.getTraceId());
    out.append(",\"span_id\":");
    str(out, s.getSpanId());
    out.append(",\"parent_span_id\":");
    str(out, s.getParentSpanContext().isValid() ? s.getParentSpanId() : "");
    out.append(",\"name\":");
    str(out, s.getName());
    out.append(",\"kind\":");
    str(out, s.getKind().name().toLowerCase(java.util.Locale.ROOT));
    out.append(",\"service\":");
    str(out, s.getResource().getAttribute(AttributeKey.stringKey("service.name")));
    out.append(",\"resource\":");
    attrs(out, s.getResource().getAttributes());
    out.append(",\"scope\":{\"name\":");
    str(out, s.getInstrumentationScopeInfo().getName());
    out.append(",\"version\":");
    String version = s.getInstrumentationScopeInfo().getVersion();
    str(out, version == null ? "" : version);
    out.append("},\"attributes\":");
    attrs(out, s.getAttributes());
    out.append(",\"events\":[");
    boolean first = true;
    for (EventData e : s.getEvents()) {
      out.append(first ? "" : ",").append("{\"name\":");
      first = false;
      str(out, e.getName());
      out.append(",\"timestamp_ns\":").append(e.getEpochNanos()).append(",\"attributes\":");
      attrs(out, e.getAttributes());
      out.append('}');
    }
    out.append("],\"links\":[");
    first = true;
    for (LinkData l : s.getLinks()) {
      out.append(first ? "" : ",").append("{\"trace_id\":");
      first = false;
      str(out, l.getSpanContext().getTraceId());
      out.append(",\"span_id\":");
      str(out, l.getSpanContext().getSpanId());
      out.append(",\"attributes\":");
      attrs(out, l.getAttributes());
      out.append('}');
    }
    out.append("],\"status\":{\"code\":");
    str(out, s.getStatus().getStatusCode().name());
    out.append(",\"description\":");
    str(out, s.getStatus().getDescription());
    // The header form, in the order the exporter writes it.
    StringBuilder state = new StringBuilder();
    ctx.getTraceState()
        .forEach((k, v) -> state.append(state.length() == 0 ? "" : ",").append(k + "=" + v));
    out.append("},\"trace_state\":");
    str(out, state.toString());
    out.append(",\"start_ns\":").append(s.getStartEpochNanos());
    out.append(",\"end_ns\":").append(s.getEndEpochNanos()).append('}');
  }

  // ---- the trace ----

  static long base;

  static long at(double ms, long fracNs) {
    return base + Math.round(ms * 1000) * 1000 + fracNs;
  }

  static Span start(Tracer tracer, String name, SpanKind kind, double ms, Span parent,
      Attributes attributes) {
    return tracer
        .spanBuilder(name)
        .setSpanKind(kind)
        .setParent(parent == null ? Context.root() : Context.root().with(parent))
        .setStartTimestamp(at(ms, 100), TimeUnit.NANOSECONDS)
        .setAllAttributes(attributes)
        .startSpan();
  }

  static void end(Span span, double ms) {
    span.end(at(ms, 900), TimeUnit.NANOSECONDS);
  }

  static SpanExporter exporter(String protocol, String endpoint, boolean gzip) {
    String compression = gzip ? "gzip" : "none";
    if (protocol.equals("grpc")) {
      return OtlpGrpcSpanExporter.builder()
          .setEndpoint(endpoint)
          .setCompression(compression)
          .setTimeout(Duration.ofSeconds(30))
          .build();
    }
    return OtlpHttpSpanExporter.builder()
        .setEndpoint(endpoint)
        .setCompression(compression)
        .setTimeout(Duration.ofSeconds(30))
        .build();
  }

  public static void main(String[] args) {
    String protocol = "http";
    String endpoint = null;
    for (int i = 0; i + 1 < args.length; i += 2) {
      if (args[i].equals("--protocol")) {
        protocol = args[i + 1];
      } else if (args[i].equals("--endpoint")) {
        endpoint = args[i + 1];
      }
    }
    if (endpoint == null || !(protocol.equals("http") || protocol.equals("grpc"))) {
      System.err.println("usage: emit-otel --protocol http|grpc --endpoint URL");
      System.exit(2);
    }

    Resource frontendRes =
        Resource.getDefault()
            .merge(
                Resource.create(
                    Attributes.builder()
                        .put("service.name", "frontend")
                        .put("service.version", "2.3.1")
                        .put("deployment.environment.name", "e2e")
                        .put("host.cpu.count", 8L)
                        .put("process.offset", -9_000_000_000L)
                        .put("sample.ratio", 0.75)
                        .put("feature.checkout_v2", true)
                        .put("service.tags", "web", "edge")
                        .build()));
    Resource paymentRes =
        Resource.getDefault()
            .merge(
                Resource.create(
                    Attributes.builder()
                        .put("service.name", "payment")
                        .put("service.namespace", "shop")
                        .put("k8s.pod.restarts", 0L)
                        .put("region.latency_ms", 12.5)
                        .put("canary", false)
                        .put("zones", "eu-1a", "eu-1b", "eu-1c")
                        .put("ports", 8080L, 9090L)
                        .build()));
    RecordingExporter frontendExp = new RecordingExporter(exporter(protocol, endpoint, true));
    RecordingExporter paymentExp = new RecordingExporter(exporter(protocol, endpoint, false));
    Sampler sampler = new TraceStateSampler();
    SdkTracerProvider frontend =
        SdkTracerProvider.builder()
            .setResource(frontendRes)
            .setSampler(sampler)
            .addSpanProcessor(SimpleSpanProcessor.create(frontendExp))
            .build();
    SdkTracerProvider payment =
        SdkTracerProvider.builder()
            .setResource(paymentRes)
            .setSampler(sampler)
            .addSpanProcessor(SimpleSpanProcessor.create(paymentExp))
            .build();
    Tracer web =
        frontend.tracerBuilder("shop.frontend.instrumentation").setInstrumentationVersion("1.4.0")
            .build();
    Tracer consumerTracer = frontend.get("shop.consumer"); // no version
    Tracer pay = payment.tracerBuilder("payment.lib").setInstrumentationVersion("0.9.0").build();

    // Whole microseconds plus a sub-microsecond part: +100 ns on starts, +900 ns on ends.
    base = System.currentTimeMillis() * 1_000_000L - 60_000_000_000L;

    Span root =
        start(web, "GET /checkout", SpanKind.SERVER, 0, null,
            Attributes.builder()
                .put("http.request.method", "GET")
                .put("url.path", "/checkout")
                .put("empty.string", "")
                .put("unicode.string", "h\u00e9llo w\u00f6rld \u2713 \"quoted\" \\ back\nslash")
                .put("bool.true", true)
                .put("bool.false", false)
                .put("int.small", 42L)
                .put("int.zero", 0L)
                .put("int.negative", -17L)
                .put("int.large", 9_007_199_254_740_993L) // 2**53 + 1: not exact as a double
                .put("int.max", Long.MAX_VALUE)
                .put("int.min", Long.MIN_VALUE)
                .put("float.pi", Math.PI)
                .put("float.negative", -0.5)
                .put("float.tiny", 1e-300)
                .put("float.huge", -2.5e+20)
                .put("float.inexact", 0.1 + 0.2)
                .put("float.whole", 3.0)
                .put("seq.str", "a", "b", "c, d", "\"q\"")
                .put("seq.bool", true, false, true)
                .put("seq.int", 1L, -2L, 1L << 40, Long.MIN_VALUE)
                .put("seq.float", 1.5, -2.25, 3.0, 0.1)
                .put(AttributeKey.stringArrayKey("seq.empty"), List.of())
                .build());

    Span validate = start(web, "validate cart", SpanKind.INTERNAL, 1, root,
        Attributes.of(AttributeKey.longKey("cart.items"), 3L));
    validate.addEvent("cart.validated",
        Attributes.builder().put("cart.id", "c-77").put("items", 3L).put("total", 99.95)
            .put("coupon", false).put("skus", "sku-1", "sku-2").build(),
        at(2, 500), TimeUnit.NANOSECONDS);
    validate.addEvent("no.attributes", at(2.5, 0), TimeUnit.NANOSECONDS);
    end(validate, 3);

    Span client = start(web, "POST /payment", SpanKind.CLIENT, 5, root,
        Attributes.builder().put("http.request.method", "POST").put("server.port", 8080L)
            .put("peer.service", "payment").build());
    Span payServer = start(pay, "POST /payment", SpanKind.SERVER, 6, client,
        Attributes.builder().put("http.response.status_code", 402L).put("payment.amount", 99.95)
            .put("payment.retried", true).build());
    Span producer = start(pay, "publish payment.failed", SpanKind.PRODUCER, 20, payServer,
        Attributes.builder().put("messaging.system", "kafka")
            .put("messaging.destination.name", "payment.failed")
            .put("messaging.batch.message_count", 1L).build());
    end(producer, 21);
    payServer.recordException(new IllegalStateException("card declined by issuer"),
        Attributes.of(AttributeKey.longKey("payment.attempt"), 2L));
    payServer.setStatus(StatusCode.ERROR, "card declined");
    end(payServer, 29);
    end(client, 30);

    SpanContext otherTrace = SpanContext.createFromRemoteParent(
        "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", TraceFlags.getSampled(),
        TraceState.getDefault());
    Span consume = consumerTracer
        .spanBuilder("consume payment.failed")
        .setSpanKind(SpanKind.CONSUMER)
        .setParent(Context.root().with(producer))
        .setStartTimestamp(at(35, 100), TimeUnit.NANOSECONDS)
        .setAllAttributes(Attributes.builder().put("messaging.operation.type", "process")
            .put("retry.count", 0L).build())
        .addLink(validate.getSpanContext(),
            Attributes.of(AttributeKey.stringKey("link.reason"), "same-trace"))
        .addLink(otherTrace, Attributes.builder().put("link.reason", "other-trace")
            .put("link.weight", 2L).build())
        .startSpan();
    end(consume, 45);

    root.setStatus(StatusCode.OK);
    end(root, 50);

    frontend.forceFlush().join(60, TimeUnit.SECONDS);
    payment.forceFlush().join(60, TimeUnit.SECONDS);
    frontend.shutdown().join(60, TimeUnit.SECONDS);
    payment.shutdown().join(60, TimeUnit.SECONDS);

    List<SpanData> spans = new ArrayList<>(frontendExp.spans);
    spans.addAll(paymentExp.spans);
    List<String> failures = new ArrayList<>(frontendExp.failures);
    failures.addAll(paymentExp.failures);
    StringBuilder out = new StringBuilder("{\"trace_id\":");
    str(out, root.getSpanContext().getTraceId());
    out.append(",\"spans\":[");
    for (int i = 0; i < spans.size(); i++) {
      out.append(i == 0 ? "" : ",\n");
      describe(out, spans.get(i));
    }
    out.append("],\"failures\":");
    value(out, failures);
    out.append("}");
    PrintStream stdout = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    stdout.println(out);
    if (!failures.isEmpty()) {
      System.err.println("export failures: " + String.join("; ", failures));
      System.exit(1);
    }
    System.exit(0);
  }
}
