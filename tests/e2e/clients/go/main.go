// Command emit_otel emits the known trace of tests/e2e/emit_trace.py with the
// real OpenTelemetry Go SDK over OTLP/gRPC (otlptracegrpc).
//
// Usage: emit_otel --endpoint http://127.0.0.1:PORT
//
// The same trace: two services (two TracerProviders with their own
// resources), six spans of the five kinds, attributes of every type the SDK
// has (int64 to its limits, doubles, slices, an empty slice), events with
// attributes, an error recorded as an exception event, links to a span of
// this trace and of another, an ERROR status with a message and an OK status,
// a W3C tracestate set by the sampler, explicit start and end times to the
// nanosecond, scope name and version. One service's exporter compresses with
// gzip. A recording wrapper keeps every span the exporter was given; stdout
// gets the JSON description (roundtrip_check.py's format: a double is always
// written with a fraction or an exponent) and the exit code is 1 if any export
// failed.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// jsonDouble marshals a float64 so that it reads back as a double: 3.0, not 3.
type jsonDouble float64

func (d jsonDouble) MarshalJSON() ([]byte, error) {
	s := strconv.FormatFloat(float64(d), 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEnN") {
		s += ".0"
	}
	return []byte(s), nil
}

func plain(v attribute.Value) any {
	switch v.Type() {
	case attribute.FLOAT64:
		return jsonDouble(v.AsFloat64())
	case attribute.FLOAT64SLICE:
		out := []jsonDouble{}
		for _, f := range v.AsFloat64Slice() {
			out = append(out, jsonDouble(f))
		}
		return out
	case attribute.BOOLSLICE:
		return append([]bool{}, v.AsBoolSlice()...)
	case attribute.INT64SLICE:
		return append([]int64{}, v.AsInt64Slice()...)
	case attribute.STRINGSLICE:
		return append([]string{}, v.AsStringSlice()...)
	default:
		return v.AsInterface()
	}
}

func attrs(kvs []attribute.KeyValue) map[string]any {
	out := map[string]any{}
	for _, kv := range kvs {
		out[string(kv.Key)] = plain(kv.Value)
	}
	return out
}

type scope struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

type event struct {
	Name        string         `json:"name"`
	TimestampNs int64          `json:"timestamp_ns"`
	Attributes  map[string]any `json:"attributes"`
}

type link struct {
	TraceID    string         `json:"trace_id"`
	SpanID     string         `json:"span_id"`
	Attributes map[string]any `json:"attributes"`
}

type status struct {
	Code        string `json:"code"`
	Description string `json:"description"`
}

type spanDesc struct {
	TraceID      string         `json:"trace_id"`
	SpanID       string         `json:"span_id"`
	ParentSpanID string         `json:"parent_span_id"`
	Name         string         `json:"name"`
	Kind         string         `json:"kind"`
	Service      string         `json:"service"`
	Resource     map[string]any `json:"resource"`
	Scope        scope          `json:"scope"`
	Attributes   map[string]any `json:"attributes"`
	Events       []event        `json:"events"`
	Links        []link         `json:"links"`
	Status       status         `json:"status"`
	TraceState   string         `json:"trace_state"`
	StartNs      int64          `json:"start_ns"`
	EndNs        int64          `json:"end_ns"`
}

func describe(s sdktrace.ReadOnlySpan) spanDesc {
	ctx := s.SpanContext()
	parent := ""
	if s.Parent().IsValid() {
		parent = s.Parent().SpanID().String()
	}
	res := attrs(s.Resource().Attributes())
	d := spanDesc{
		TraceID: ctx.TraceID().String(), SpanID: ctx.SpanID().String(), ParentSpanID: parent,
		Name: s.Name(), Kind: s.SpanKind().String(), Service: fmt.Sprint(res["service.name"]),
		Resource:   res,
		Scope:      scope{s.InstrumentationScope().Name, s.InstrumentationScope().Version},
		Attributes: attrs(s.Attributes()), Events: []event{}, Links: []link{},
		Status:     status{strings.ToUpper(s.Status().Code.String()), s.Status().Description},
		TraceState: ctx.TraceState().String(),
		StartNs:    s.StartTime().UnixNano(), EndNs: s.EndTime().UnixNano(),
	}
	for _, e := range s.Events() {
		d.Events = append(d.Events, event{e.Name, e.Time.UnixNano(), attrs(e.Attributes)})
	}
	for _, l := range s.Links() {
		d.Links = append(d.Links, link{l.SpanContext.TraceID().String(),
			l.SpanContext.SpanID().String(), attrs(l.Attributes)})
	}
	return d
}

// recordingExporter keeps every span it was given and every failed export.
type recordingExporter struct {
	inner    sdktrace.SpanExporter
	mu       sync.Mutex
	spans    []sdktrace.ReadOnlySpan
	failures []string
}

func (r *recordingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := r.inner.ExportSpans(ctx, spans)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, spans...)
	if err != nil {
		names := []string{}
		for _, s := range spans {
			names = append(names, s.Name())
		}
		r.failures = append(r.failures, fmt.Sprintf("export of %q -> %v", names, err))
	}
	return err
}

func (r *recordingExporter) Shutdown(ctx context.Context) error { return r.inner.Shutdown(ctx) }

// traceStateSampler samples everything; a root span gets rootState, a child its parent's.
type traceStateSampler struct{ rootState trace.TraceState }

func (t traceStateSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	state := t.rootState
	if parent := trace.SpanContextFromContext(p.ParentContext); parent.IsValid() {
		state = parent.TraceState()
	}
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample, Tracestate: state}
}

func (t traceStateSampler) Description() string { return "TraceStateSampler" }

func run(endpoint string) (map[string]any, error) {
	ctx := context.Background()
	rootState, err := trace.ParseTraceState("spanhouse=e2e,rojo=00f067aa0ba902b7")
	if err != nil {
		return nil, err
	}
	sampler := traceStateSampler{rootState}
	newResource := func(kvs ...attribute.KeyValue) (*resource.Resource, error) {
		return resource.Merge(resource.Default(), resource.NewSchemaless(kvs...))
	}
	frontendRes, err := newResource(
		attribute.String("service.name", "frontend"),
		attribute.String("service.version", "2.3.1"),
		attribute.String("deployment.environment.name", "e2e"),
		attribute.Int64("host.cpu.count", 8),
		attribute.Int64("process.offset", -9_000_000_000),
		attribute.Float64("sample.ratio", 0.75),
		attribute.Bool("feature.checkout_v2", true),
		attribute.StringSlice("service.tags", []string{"web", "edge"}))
	if err != nil {
		return nil, err
	}
	paymentRes, err := newResource(
		attribute.String("service.name", "payment"),
		attribute.String("service.namespace", "shop"),
		attribute.Int64("k8s.pod.restarts", 0),
		attribute.Float64("region.latency_ms", 12.5),
		attribute.Bool("canary", false),
		attribute.StringSlice("zones", []string{"eu-1a", "eu-1b", "eu-1c"}),
		attribute.Int64Slice("ports", []int64{8080, 9090}))
	if err != nil {
		return nil, err
	}
	newExporter := func(opts ...otlptracegrpc.Option) (*recordingExporter, error) {
		// Retries as usual (UNAVAILABLE, RESOURCE_EXHAUSTED), but for seconds, not a
		// minute: six spans go out one by one, and a failure must show within
		// the test's time.
		opts = append(opts, otlptracegrpc.WithEndpointURL(endpoint),
			otlptracegrpc.WithTimeout(10*time.Second),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true,
				InitialInterval: 100 * time.Millisecond, MaxInterval: time.Second,
				MaxElapsedTime: 5 * time.Second}))
		exp, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			return nil, err
		}
		return &recordingExporter{inner: exp}, nil
	}
	frontendExp, err := newExporter(otlptracegrpc.WithCompressor("gzip"))
	if err != nil {
		return nil, err
	}
	paymentExp, err := newExporter()
	if err != nil {
		return nil, err
	}
	frontend := sdktrace.NewTracerProvider(sdktrace.WithResource(frontendRes),
		sdktrace.WithSampler(sampler),
		sdktrace.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(frontendExp)))
	payment := sdktrace.NewTracerProvider(sdktrace.WithResource(paymentRes),
		sdktrace.WithSampler(sampler),
		sdktrace.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(paymentExp)))

	web := frontend.Tracer("shop.frontend.instrumentation", trace.WithInstrumentationVersion("1.4.0"))
	consumerTracer := frontend.Tracer("shop.consumer") // no version
	pay := payment.Tracer("payment.lib", trace.WithInstrumentationVersion("0.9.0"))

	// Whole microseconds plus a sub-microsecond part: +100 ns on starts, +900 ns
	// on ends, so µs truncation is visible and unambiguous.
	base := time.Now().Truncate(time.Microsecond).Add(-time.Minute)
	at := func(ms float64, fracNs int64) time.Time {
		return base.Add(time.Duration(math.Round(ms*1000))*time.Microsecond + time.Duration(fracNs))
	}
	start := func(ms float64) trace.SpanStartEventOption { return trace.WithTimestamp(at(ms, 100)) }
	end := func(ms float64) trace.SpanEndOption { return trace.WithTimestamp(at(ms, 900)) }

	rootCtx, root := web.Start(ctx, "GET /checkout", trace.WithSpanKind(trace.SpanKindServer),
		start(0), trace.WithAttributes(
			attribute.String("http.request.method", "GET"),
			attribute.String("url.path", "/checkout"),
			attribute.String("empty.string", ""),
			attribute.String("unicode.string", "héllo wörld ✓ \"quoted\" \\ back\nslash"),
			attribute.Bool("bool.true", true),
			attribute.Bool("bool.false", false),
			attribute.Int64("int.small", 42),
			attribute.Int64("int.zero", 0),
			attribute.Int64("int.negative", -17),
			attribute.Int64("int.large", 9_007_199_254_740_993), // 2**53 + 1: not exact as a double
			attribute.Int64("int.max", math.MaxInt64),
			attribute.Int64("int.min", math.MinInt64),
			attribute.Float64("float.pi", math.Pi),
			attribute.Float64("float.negative", -0.5),
			attribute.Float64("float.tiny", 1e-300),
			attribute.Float64("float.huge", -2.5e+20),
			attribute.Float64("float.inexact", 0.1+0.2),
			attribute.Float64("float.whole", 3.0),
			attribute.StringSlice("seq.str", []string{"a", "b", "c, d", "\"q\""}),
			attribute.BoolSlice("seq.bool", []bool{true, false, true}),
			attribute.Int64Slice("seq.int", []int64{1, -2, 1 << 40, math.MinInt64}),
			attribute.Float64Slice("seq.float", []float64{1.5, -2.25, 3.0, 0.1}),
			attribute.StringSlice("seq.empty", []string{}),
		))

	_, validate := web.Start(rootCtx, "validate cart", trace.WithSpanKind(trace.SpanKindInternal),
		start(1), trace.WithAttributes(attribute.Int64("cart.items", 3)))
	validate.AddEvent("cart.validated", trace.WithTimestamp(at(2, 500)), trace.WithAttributes(
		attribute.String("cart.id", "c-77"), attribute.Int64("items", 3),
		attribute.Float64("total", 99.95), attribute.Bool("coupon", false),
		attribute.StringSlice("skus", []string{"sku-1", "sku-2"})))
	validate.AddEvent("no.attributes", trace.WithTimestamp(at(2.5, 0)))
	validate.End(end(3))

	clientCtx, client := web.Start(rootCtx, "POST /payment", trace.WithSpanKind(trace.SpanKindClient),
		start(5), trace.WithAttributes(attribute.String("http.request.method", "POST"),
			attribute.Int64("server.port", 8080), attribute.String("peer.service", "payment")))

	payCtx, payServer := pay.Start(clientCtx, "POST /payment",
		trace.WithSpanKind(trace.SpanKindServer), start(6), trace.WithAttributes(
			attribute.Int64("http.response.status_code", 402),
			attribute.Float64("payment.amount", 99.95), attribute.Bool("payment.retried", true)))
	producerCtx, producer := pay.Start(payCtx, "publish payment.failed",
		trace.WithSpanKind(trace.SpanKindProducer), start(20), trace.WithAttributes(
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.destination.name", "payment.failed"),
			attribute.Int64("messaging.batch.message_count", 1)))
	producer.End(end(21))
	payServer.RecordError(errors.New("card declined by issuer"), trace.WithTimestamp(at(28, 250)),
		trace.WithAttributes(attribute.Int64("payment.attempt", 2)))
	payServer.SetStatus(codes.Error, "card declined")
	payServer.End(end(29))
	client.End(end(30))

	otherTrace := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c},
		SpanID:     trace.SpanID{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31},
		TraceFlags: trace.FlagsSampled, Remote: true})
	_, consume := consumerTracer.Start(producerCtx, "consume payment.failed",
		trace.WithSpanKind(trace.SpanKindConsumer), start(35), trace.WithAttributes(
			attribute.String("messaging.operation.type", "process"), attribute.Int64("retry.count", 0)),
		trace.WithLinks(
			trace.Link{SpanContext: validate.SpanContext(),
				Attributes: []attribute.KeyValue{attribute.String("link.reason", "same-trace")}},
			trace.Link{SpanContext: otherTrace, Attributes: []attribute.KeyValue{
				attribute.String("link.reason", "other-trace"), attribute.Int64("link.weight", 2)}}))
	consume.End(end(45))

	root.SetStatus(codes.Ok, "")
	root.End(end(50))

	for _, tp := range []*sdktrace.TracerProvider{frontend, payment} {
		if err := tp.ForceFlush(ctx); err != nil {
			return nil, err
		}
		if err := tp.Shutdown(ctx); err != nil {
			return nil, err
		}
	}
	spans := []spanDesc{}
	for _, s := range append(frontendExp.spans, paymentExp.spans...) {
		spans = append(spans, describe(s))
	}
	return map[string]any{"trace_id": root.SpanContext().TraceID().String(), "spans": spans,
		"failures": append(append([]string{}, frontendExp.failures...), paymentExp.failures...)}, nil
}

func main() {
	endpoint := flag.String("endpoint", "", "the OTLP/gRPC endpoint, http://HOST:PORT")
	flag.Parse()
	if *endpoint == "" {
		fmt.Fprintln(os.Stderr, "emit_otel: --endpoint is required")
		os.Exit(2)
	}
	out, err := run(*endpoint)
	if err != nil {
		fmt.Fprintln(os.Stderr, "emit_otel:", err)
		os.Exit(2)
	}
	text, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		fmt.Fprintln(os.Stderr, "emit_otel:", err)
		os.Exit(2)
	}
	fmt.Println(string(text))
	if failures := out["failures"].([]string); len(failures) > 0 {
		fmt.Fprintln(os.Stderr, "export failures:", strings.Join(failures, "; "))
		os.Exit(1)
	}
}
