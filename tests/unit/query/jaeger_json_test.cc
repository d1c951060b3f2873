#include "query/jaeger_json.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "model/span_batch.h"

namespace spanhouse::query {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

constexpr std::string_view kTraceA = "0af7651916cd43dd8448eb211c80319c";
constexpr std::string_view kTraceB = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr std::string_view kLinkedTrace = "ffeeddccbbaa99887766554433221100";

TraceId Tid(std::string_view hex) {
  TraceId id{};
  EXPECT_TRUE(FromHex(hex, id.data(), id.size())) << hex;
  return id;
}

SpanId Sid(std::string_view hex) {
  SpanId id{};
  EXPECT_TRUE(FromHex(hex, id.data(), id.size())) << hex;
  return id;
}

void Attr(SpanBatch& b, AttrColumns& cols, std::string_view key, ValueType type,
          std::string_view value) {
  SpanBatch::AddAttr(cols, b.AddString(key), type, b.AddString(value));
}

// Adds a resource with the given attributes ({key, value}, all strings) and resolves its service
// name.
uint32_t Resource(SpanBatch& b, std::vector<std::pair<std::string, std::string>> attrs) {
  uint32_t r = b.AddResource();
  auto begin = static_cast<uint32_t>(b.resource_attrs.size());
  for (auto& [k, v] : attrs) Attr(b, b.resource_attrs, k, ValueType::kString, v);
  b.resources.attrs[r] = {begin, static_cast<uint32_t>(b.resource_attrs.size())};
  b.ResolveServiceName(r);
  return r;
}

uint32_t Span(SpanBatch& b, uint32_t resource, uint32_t scope, std::string_view trace,
              std::string_view span, std::string_view parent, std::string_view name,
              uint64_t start_ns, uint64_t end_ns) {
  uint32_t s = b.AddSpan(resource, scope);
  b.spans.trace_id[s] = Tid(trace);
  b.spans.span_id[s] = Sid(span);
  if (!parent.empty()) b.spans.parent_span_id[s] = Sid(parent);
  b.spans.name[s] = b.AddString(name);
  b.spans.start_ns[s] = start_ns;
  b.spans.end_ns[s] = end_ns;
  return s;
}

// Span attributes are appended in one go, right after the span was added.
void SpanAttrs(SpanBatch& b, uint32_t s,
               std::vector<std::tuple<std::string, ValueType, std::string>> attrs) {
  auto begin = static_cast<uint32_t>(b.span_attrs.size());
  for (auto& [k, t, v] : attrs) Attr(b, b.span_attrs, k, t, v);
  b.spans.attrs[s] = {begin, static_cast<uint32_t>(b.span_attrs.size())};
}

bool IsLowerHex(std::string_view s, size_t len) {
  if (s.size() != len) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string Str(element e) {
  std::string_view v;
  auto err = e.get_string().get(v);
  EXPECT_EQ(err, simdjson::SUCCESS) << simdjson::minify(e);
  return std::string(v);
}

int64_t Int(element e) {
  int64_t v = 0;
  auto err = e.get_int64().get(v);
  EXPECT_EQ(err, simdjson::SUCCESS) << simdjson::minify(e);
  return v;
}

// {key, type, value as minified JSON}
struct Tag {
  std::string key;
  std::string type;
  std::string value;
  bool operator==(const Tag&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Tag& t) {
  return os << "{" << t.key << ", " << t.type << ", " << t.value << "}";
}

std::vector<Tag> Tags(element tags_array) {
  std::vector<Tag> out;
  array a;
  EXPECT_EQ(tags_array.get_array().get(a), simdjson::SUCCESS);
  for (element t : a) {
    object o;
    EXPECT_EQ(t.get_object().get(o), simdjson::SUCCESS);
    EXPECT_EQ(o.size(), 3u) << simdjson::minify(t);
    out.push_back({Str(o["key"]), Str(o["type"]), simdjson::minify(o["value"])});
  }
  return out;
}

std::optional<Tag> FindTag(const std::vector<Tag>& tags, std::string_view key) {
  std::optional<Tag> found;
  for (const Tag& t : tags) {
    if (t.key == key) {
      EXPECT_FALSE(found.has_value()) << "duplicate tag " << key;
      found = t;
    }
  }
  return found;
}

// Parses `json`, failing the test if it is not valid JSON (simdjson also validates UTF-8).
class Parsed {
 public:
  explicit Parsed(const std::string& json) : text_(json) {
    auto err = parser_.parse(text_).get(root_);
    EXPECT_EQ(err, simdjson::SUCCESS) << simdjson::error_message(err) << "\n" << json;
    ok_ = err == simdjson::SUCCESS;
  }
  bool ok() const { return ok_; }
  element root() const { return root_; }

 private:
  simdjson::padded_string text_;
  simdjson::dom::parser parser_;
  element root_;
  bool ok_ = false;
};

void ExpectEnvelope(element root, size_t traces) {
  object o;
  ASSERT_EQ(root.get_object().get(o), simdjson::SUCCESS);
  ASSERT_EQ(o.size(), 5u);
  array data;
  ASSERT_EQ(o["data"].get_array().get(data), simdjson::SUCCESS);
  EXPECT_EQ(data.size(), traces);
  EXPECT_EQ(Int(o["total"]), 0);
  EXPECT_EQ(Int(o["limit"]), 0);
  EXPECT_EQ(Int(o["offset"]), 0);
  EXPECT_TRUE(o["errors"].is_null());
}

// Span ids of the fixture.
constexpr std::string_view kRoot = "0000000000000001";
constexpr std::string_view kChildB = "0000000000000002";  // backend, error, event, link
constexpr std::string_view kChildC = "0000000000000003";  // frontend (copy of r0), OK
constexpr std::string_view kChildD = "0000000000000004";  // backend, end < start

constexpr uint64_t kT0 = 1700000000123456789ull;

// One trace of four spans over two services (three resource rows, two of them
// equal), added out of order so rendering has to sort them.
SpanBatch FixtureTrace() {
  SpanBatch b;
  uint32_t r_front = Resource(b, {{"service.name", "frontend"}, {"host.name", "web-1"}});
  uint32_t r_back =
      Resource(b, {{"deployment.environment", "prod \xff bad"}, {"service.name", "backend"}});
  uint32_t r_front2 = Resource(b, {{"service.name", "frontend"}, {"host.name", "web-1"}});

  uint32_t scope_http = b.AddScope();
  b.scopes.name[scope_http] = b.AddString("io.opentelemetry.http");
  b.scopes.version[scope_http] = b.AddString("1.2.3");
  uint32_t scope_none = b.AddScope();

  // C first: same start as B, larger span id.
  uint32_t c = Span(b, r_front2, scope_http, kTraceA, kChildC, kRoot, "cache get", kT0 + 2'000'000,
                    kT0 + 2'500'000);
  b.spans.kind[c] = static_cast<uint8_t>(SpanKind::kInternal);
  b.spans.status_code[c] = static_cast<uint8_t>(StatusCodeOtlp::kOk);

  uint32_t bs = Span(b, r_back, scope_none, kTraceA, kChildB, kRoot,
                     "op \"quoted\"\nnext \xc3\x28 end", kT0 + 2'000'000, kT0 + 7'654'321);
  b.spans.kind[bs] = static_cast<uint8_t>(SpanKind::kClient);
  b.spans.status_code[bs] = static_cast<uint8_t>(StatusCodeOtlp::kError);
  b.spans.status_message[bs] = b.AddString("boom: \"bad\"\tthing");
  b.spans.dropped_attributes_count[bs] = 3;
  b.spans.dropped_events_count[bs] = 4;
  b.spans.dropped_links_count[bs] = 5;
  SpanAttrs(b, bs, {{"http.url", ValueType::kString, "http://x/\"a\"\n"}});
  {
    uint32_t e = b.AddEvent();
    b.events.time_ns[e] = kT0 + 3'000'999;
    b.events.name[e] = b.AddString("exception");
    auto begin = static_cast<uint32_t>(b.event_attrs.size());
    Attr(b, b.event_attrs, "exception.type", ValueType::kString, "IOError");
    Attr(b, b.event_attrs, "exception.escaped", ValueType::kBool, "false");
    Attr(b, b.event_attrs, "retry", ValueType::kInt, "2");
    b.events.attrs[e] = {begin, static_cast<uint32_t>(b.event_attrs.size())};
    b.events.dropped_attributes_count[e] = 7;
    uint32_t e2 = b.AddEvent();
    b.events.time_ns[e2] = kT0 + 4'000'000;
    b.events.name[e2] = b.AddString("done");
    b.spans.events[bs] = {e, e2 + 1};
  }
  {
    uint32_t l = b.AddLink();
    b.links.trace_id[l] = Tid(kLinkedTrace);
    b.links.span_id[l] = Sid("1122334455667788");
    uint32_t l2 = b.AddLink();
    b.links.trace_id[l2] = Tid(kTraceA);
    b.links.span_id[l2] = Sid("00000000000000aa");
    b.spans.links[bs] = {l, l2 + 1};
  }

  uint32_t d = Span(b, r_back, scope_none, kTraceA, kChildD, kRoot, "queue publish",
                    kT0 + 9'000'000, kT0 + 8'000'000);
  b.spans.kind[d] = static_cast<uint8_t>(SpanKind::kProducer);

  uint32_t root =
      Span(b, r_front, scope_http, kTraceA, kRoot, "", "GET /users", kT0, kT0 + 10'500'999);
  b.spans.kind[root] = static_cast<uint8_t>(SpanKind::kServer);
  b.spans.flags[root] = 0x101;
  b.spans.trace_state[root] = b.AddString("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
  SpanAttrs(b, root,
            {
                {"str", ValueType::kString, "hello"},
                {"yes", ValueType::kBool, "true"},
                {"no", ValueType::kBool, "false"},
                {"neg", ValueType::kInt, "-42"},
                {"big", ValueType::kInt, "9007199254740993"},
                {"min", ValueType::kInt, "-9223372036854775808"},
                {"dbl", ValueType::kDouble, "3.25"},
                {"exp", ValueType::kDouble, "1e+300"},
                {"nan", ValueType::kDouble, "NaN"},
                {"inf", ValueType::kDouble, "Infinity"},
                {"ninf", ValueType::kDouble, "-Infinity"},
                {"bytes", ValueType::kBytes, std::string("\x00\xff\x10", 3)},
                {"bytes2", ValueType::kBytes, "ab"},
                {"arr", ValueType::kArray, "[1,\"a\",true]"},
                {"kv", ValueType::kKvList, "{\"k\":null}"},
                {"empty", ValueType::kEmpty, ""},
            });
  return b;
}

struct RenderedTrace {
  object trace;
  std::vector<object> spans;  // in rendered order
  object processes;
};

RenderedTrace GetTrace(element root, size_t i) {
  RenderedTrace out;
  array data;
  EXPECT_EQ(root["data"].get_array().get(data), simdjson::SUCCESS);
  element t;
  EXPECT_EQ(data.at(i).get(t), simdjson::SUCCESS);
  EXPECT_EQ(t.get_object().get(out.trace), simdjson::SUCCESS);
  EXPECT_EQ(out.trace.size(), 4u);
  array spans;
  EXPECT_EQ(out.trace["spans"].get_array().get(spans), simdjson::SUCCESS);
  for (element s : spans) {
    object o;
    EXPECT_EQ(s.get_object().get(o), simdjson::SUCCESS);
    out.spans.push_back(o);
  }
  EXPECT_EQ(out.trace["processes"].get_object().get(out.processes), simdjson::SUCCESS);
  EXPECT_TRUE(out.trace["warnings"].is_null());
  return out;
}

TEST(JaegerJson, EnvelopeAndIds) {
  SpanBatch b = FixtureTrace();
  std::string json = RenderJaegerTraces(b);
  Parsed p(json);
  ASSERT_TRUE(p.ok());
  ExpectEnvelope(p.root(), 1);
  RenderedTrace t = GetTrace(p.root(), 0);
  EXPECT_EQ(Str(t.trace["traceID"]), kTraceA);
  ASSERT_EQ(t.spans.size(), 4u);
  for (object s : t.spans) {
    // Eleven fields; flags only where they are not 0.
    EXPECT_EQ(s.size(), s["flags"].error() ? 10u : 11u) << simdjson::minify(s);
    EXPECT_TRUE(IsLowerHex(Str(s["traceID"]), 32));
    EXPECT_EQ(Str(s["traceID"]), kTraceA);
    EXPECT_TRUE(IsLowerHex(Str(s["spanID"]), 16));
    EXPECT_TRUE(s["warnings"].is_null());
    EXPECT_TRUE(s["startTime"].is_int64());
    EXPECT_TRUE(s["duration"].is_int64());
  }
  // Sorted by start time, then span id.
  EXPECT_EQ(Str(t.spans[0]["spanID"]), kRoot);
  EXPECT_EQ(Str(t.spans[1]["spanID"]), kChildB);
  EXPECT_EQ(Str(t.spans[2]["spanID"]), kChildC);
  EXPECT_EQ(Str(t.spans[3]["spanID"]), kChildD);
  EXPECT_EQ(Int(t.spans[0]["flags"]), 0x01);  // stored 0x101: only the W3C trace flags
  // 0 is left out, as Jaeger does.
  element no_flags;
  EXPECT_EQ(t.spans[1]["flags"].get(no_flags), simdjson::NO_SUCH_FIELD);
  EXPECT_EQ(Str(t.spans[0]["operationName"]), "GET /users");
  EXPECT_EQ(Str(t.spans[2]["operationName"]), "cache get");
}

TEST(JaegerJson, TimesInMicroseconds) {
  SpanBatch b = FixtureTrace();
  Parsed p(RenderJaegerTraces(b));
  ASSERT_TRUE(p.ok());
  RenderedTrace t = GetTrace(p.root(), 0);
  ASSERT_EQ(t.spans.size(), 4u);
  EXPECT_EQ(Int(t.spans[0]["startTime"]), 1700000000123456);
  EXPECT_EQ(Int(t.spans[0]["duration"]), 10500);  // 10'500'999 ns
  EXPECT_EQ(Int(t.spans[1]["startTime"]), 1700000000125456);
  EXPECT_EQ(Int(t.spans[1]["duration"]), 5654);  // 5'654'321 ns
  EXPECT_EQ(Int(t.spans[2]["duration"]), 500);
  EXPECT_EQ(Int(t.spans[3]["startTime"]), 1700000000132456);
  EXPECT_EQ(Int(t.spans[3]["duration"]), 0);  // end before start
}

TEST(JaegerJson, References) {
  SpanBatch b = FixtureTrace();
  Parsed p(RenderJaegerTraces(b));
  ASSERT_TRUE(p.ok());
  RenderedTrace t = GetTrace(p.root(), 0);
  ASSERT_EQ(t.spans.size(), 4u);
  // Root: no parent, no links -> [].
  EXPECT_EQ(simdjson::minify(t.spans[0]["references"]), "[]");
  // B: parent first as CHILD_OF, then each link as FOLLOWS_FROM in order.
  array refs;
  ASSERT_EQ(t.spans[1]["references"].get_array().get(refs), simdjson::SUCCESS);
  ASSERT_EQ(refs.size(), 3u);
  std::vector<std::tuple<std::string, std::string, std::string>> got;
  for (element r : refs) {
    object o;
    ASSERT_EQ(r.get_object().get(o), simdjson::SUCCESS);
    EXPECT_EQ(o.size(), 3u);
    got.emplace_back(Str(o["refType"]), Str(o["traceID"]), Str(o["spanID"]));
  }
  using Ref = std::tuple<std::string, std::string, std::string>;
  EXPECT_EQ(got[0], Ref("CHILD_OF", std::string(kTraceA), std::string(kRoot)));
  EXPECT_EQ(got[1], Ref("FOLLOWS_FROM", std::string(kLinkedTrace), "1122334455667788"));
  EXPECT_EQ(got[2], Ref("FOLLOWS_FROM", std::string(kTraceA), "00000000000000aa"));
  // C: only the parent.
  EXPECT_EQ(simdjson::minify(t.spans[2]["references"]),
            "[{\"refType\":\"CHILD_OF\",\"traceID\":\"" + std::string(kTraceA) +
                "\",\"spanID\":\"" + std::string(kRoot) + "\"}]");
}

TEST(JaegerJson, EveryValueTypeAndSpecialTagsOfRoot) {
  SpanBatch b = FixtureTrace();
  Parsed p(RenderJaegerTraces(b));
  ASSERT_TRUE(p.ok());
  RenderedTrace t = GetTrace(p.root(), 0);
  ASSERT_EQ(t.spans.size(), 4u);
  std::vector<Tag> want = {
      {"str", "string", "\"hello\""},
      {"yes", "bool", "true"},
      {"no", "bool", "false"},
      {"neg", "int64", "-42"},
      {"big", "int64", "\"9007199254740993\""},
      {"min", "int64", "\"-9223372036854775808\""},
      {"dbl", "float64", "3.25"},
      {"exp", "float64", "1e300"},
      {"nan", "float64", "\"NaN\""},
      {"inf", "float64", "\"Infinity\""},
      {"ninf", "float64", "\"-Infinity\""},
      {"bytes", "binary", "\"AP8Q\""},
      {"bytes2", "binary", "\"YWI=\""},
      {"arr", "string", "\"[1,\\\"a\\\",true]\""},
      {"kv", "string", "\"{\\\"k\\\":null}\""},
      {"empty", "string", "\"\""},
      {"span.kind", "string", "\"server\""},
      {"otel.scope.name", "string", "\"io.opentelemetry.http\""},
      {"otel.scope.version", "string", "\"1.2.3\""},
      {"w3c.tracestate", "string", "\"rojo=00f067aa0ba902b7,congo=t61rcWkgMzE\""},
  };
  std::vector<Tag> got = Tags(t.spans[0]["tags"]);
  // simdjson may print 1e300 differently; compare that one numerically.
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i].key == "exp") {
      EXPECT_EQ(got[i].key, "exp");
      EXPECT_EQ(got[i].type, "float64");
      double v = 0;
      ASSERT_EQ(t.spans[0]["tags"].at(i)["value"].get_double().get(v), simdjson::SUCCESS);
      EXPECT_EQ(v, 1e300);
      continue;
    }
    EXPECT_EQ(got[i], want[i]) << "tag " << i;
  }
  // Ints are JSON numbers within +-(2^53 - 1), which every JSON client reads
  // exactly; beyond, strings with every digit (as Jaeger sends them).
  int64_t neg = 0;
  ASSERT_EQ(t.spans[0]["tags"].at(3)["value"].get_int64().get(neg), simdjson::SUCCESS);
  EXPECT_EQ(neg, -42);
  EXPECT_EQ(Str(t.spans[0]["tags"].at(4)["value"]), "9007199254740993");
  // The arrays and kvlists are the stored JSON text.
  EXPECT_EQ(Str(t.spans[0]["tags"].at(13)["value"]), "[1,\"a\",true]");
  EXPECT_EQ(Str(t.spans[0]["tags"].at(14)["value"]), "{\"k\":null}");
  // The root has neither status tags nor dropped counts.
  EXPECT_FALSE(FindTag(got, "error"));
  EXPECT_FALSE(FindTag(got, "otel.status_code"));
  EXPECT_FALSE(FindTag(got, "otel.dropped_attributes_count"));
  EXPECT_EQ(simdjson::minify(t.spans[0]["logs"]), "[]");
}

TEST(JaegerJson, ErrorStatusAndDroppedCounts) {
  SpanBatch b = FixtureTrace();
  Parsed p(RenderJaegerTraces(b));
  ASSERT_TRUE(p.ok());
  RenderedTrace t = GetTrace(p.root(), 0);
  ASSERT_EQ(t.spans.size(), 4u);
  std::vector<Tag> want = {
      {"http.url", "string", "\"http://x/\\\"a\\\"\\n\""},
      {"span.kind", "string", "\"client\""},
      {"error", "bool", "true"},
      {"otel.status_code", "string", "\"ERROR\""},
      {"otel.status_description", "string", "\"boom: \\\"bad\\\"\\tthing\""},
      {"otel.dropped_attributes_count", "int64", "3"},
      {"otel.dropped_events_count", "int64", "4"},
      {"otel.dropped_links_count", "int64", "5"},
  };
  EXPECT_EQ(Tags(t.spans[1]["tags"]), want);
  EXPECT_EQ(Str(t.spans[1]["tags"].at(4)["value"]), "boom: \"bad\"\tthing");

  // C: OK status, internal kind, scope tags.
  std::vector<Tag> want_c = {
      {"span.kind", "string", "\"internal\""},
      {"otel.status_code", "string", "\"OK\""},
      {"otel.scope.name", "string", "\"io.opentelemetry.http\""},
      {"otel.scope.version", "string", "\"1.2.3\""},
  };
  EXPECT_EQ(Tags(t.spans[2]["tags"]), want_c);
  // D: unset status, empty scope -> only the kind.
  std::vector<Tag> want_d = {{"span.kind", "string", "\"producer\""}};
  EXPECT_EQ(Tags(t.spans[3]["tags"]), want_d);
}

TEST(JaegerJson, Logs) {
  SpanBatch b = FixtureTrace();
  Parsed p(RenderJaegerTraces(b));
  ASSERT_TRUE(p.ok());
  RenderedTrace t = GetTrace(p.root(), 0);
  ASSERT_EQ(t.spans.size(), 4u);
  array logs;
  ASSERT_EQ(t.spans[1]["logs"].get_array().get(logs), simdjson::SUCCESS);
  ASSERT_EQ(logs.size(), 2u);
  object l0;
  ASSERT_EQ(logs.at(0).get_object().get(l0), simdjson::SUCCESS);
  EXPECT_EQ(l0.size(), 2u);
  EXPECT_EQ(Int(l0["timestamp"]), 1700000000126457);  // kT0 + 3'000'999 ns
  std::vector<Tag> want = {
      {"event", "string", "\"exception\""},
      {"exception.type", "string", "\"IOError\""},
      {"exception.escaped", "bool", "false"},
      {"retry", "int64", "2"},
      {"otel.dropped_attributes_count", "int64", "7"},
  };
  EXPECT_EQ(Tags(l0["fields"]), want);
  object l1;
  ASSERT_EQ(logs.at(1).get_object().get(l1), simdjson::SUCCESS);
  EXPECT_EQ(Int(l1["timestamp"]), 1700000000127456);
  std::vector<Tag> want1 = {{"event", "string", "\"done\""}};
  EXPECT_EQ(Tags(l1["fields"]), want1);
}

TEST(JaegerJson, ProcessesDeduplicatedInOrderOfFirstUse) {
  SpanBatch b = FixtureTrace();
  Parsed p(RenderJaegerTraces(b));
  ASSERT_TRUE(p.ok());
  RenderedTrace t = GetTrace(p.root(), 0);
  ASSERT_EQ(t.spans.size(), 4u);
  // Rendered order: root (frontend), B (backend), C (frontend, equal resource row), D (backend).
  EXPECT_EQ(Str(t.spans[0]["processID"]), "p1");
  EXPECT_EQ(Str(t.spans[1]["processID"]), "p2");
  EXPECT_EQ(Str(t.spans[2]["processID"]), "p1");
  EXPECT_EQ(Str(t.spans[3]["processID"]), "p2");
  ASSERT_EQ(t.processes.size(), 2u);
  std::vector<std::string> keys;
  for (auto field : t.processes) keys.emplace_back(field.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"p1", "p2"}));

  object p1;
  ASSERT_EQ(t.processes["p1"].get_object().get(p1), simdjson::SUCCESS);
  EXPECT_EQ(p1.size(), 2u);
  EXPECT_EQ(Str(p1["serviceName"]), "frontend");
  std::vector<Tag> want1 = {{"host.name", "string", "\"web-1\""}};
  EXPECT_EQ(Tags(p1["tags"]), want1);

  object p2;
  ASSERT_EQ(t.processes["p2"].get_object().get(p2), simdjson::SUCCESS);
  EXPECT_EQ(Str(p2["serviceName"]), "backend");
  std::vector<Tag> got2 = Tags(p2["tags"]);
  ASSERT_EQ(got2.size(), 1u);  // service.name left out
  EXPECT_EQ(got2[0].key, "deployment.environment");
  // The invalid byte became U+FFFD.
  EXPECT_EQ(Str(p2["tags"].at(0)["value"]), "prod \xEF\xBF\xBD bad");
}

TEST(JaegerJson, ProcessTagsTypedAndMissingService) {
  SpanBatch b;
  uint32_t r = b.AddResource();
  Attr(b, b.resource_attrs, "pid", ValueType::kInt, "4242");
  Attr(b, b.resource_attrs, "container", ValueType::kBool, "true");
  Attr(b, b.resource_attrs, "ratio", ValueType::kDouble, "0.5");
  b.resources.attrs[r] = {0, 3};
  b.ResolveServiceName(r);
  // Same service, different attributes -> a process of its own.
  uint32_t r2 = b.AddResource();
  Attr(b, b.resource_attrs, "pid", ValueType::kInt, "4243");
  b.resources.attrs[r2] = {3, 4};
  uint32_t s = b.AddScope();
  Span(b, r, s, kTraceA, "00000000000000a1", "", "a", 1000, 2000);
  Span(b, r2, s, kTraceA, "00000000000000a2", "00000000000000a1", "b", 1000, 2000);
  Parsed p(RenderJaegerTraces(b));
  ASSERT_TRUE(p.ok());
  RenderedTrace t = GetTrace(p.root(), 0);
  ASSERT_EQ(t.spans.size(), 2u);
  EXPECT_EQ(Str(t.spans[0]["processID"]), "p1");
  EXPECT_EQ(Str(t.spans[1]["processID"]), "p2");
  ASSERT_EQ(t.processes.size(), 2u);
  EXPECT_EQ(Str(t.processes["p1"]["serviceName"]), "missing-service-name");
  std::vector<Tag> want = {
      {"pid", "int64", "4242"},
      {"container", "bool", "true"},
      {"ratio", "float64", "0.5"},
  };
  EXPECT_EQ(Tags(t.processes["p1"]["tags"]), want);
  EXPECT_EQ(Str(t.processes["p2"]["serviceName"]), "missing-service-name");
  std::vector<Tag> want2 = {{"pid", "int64", "4243"}};
  EXPECT_EQ(Tags(t.processes["p2"]["tags"]), want2);
}

TEST(JaegerJson, EscapingOfOperationName) {
  SpanBatch b = FixtureTrace();
  std::string json = RenderJaegerTraces(b);
  // Quotes and newlines are escaped in the raw text; the bad byte is replaced.
  EXPECT_NE(json.find(R"("operationName":"op \"quoted\"\nnext )"), std::string::npos);
  EXPECT_EQ(json.find('\n'), std::string::npos);
  EXPECT_EQ(json.find('\t'), std::string::npos);
  Parsed p(json);
  ASSERT_TRUE(p.ok());
  RenderedTrace t = GetTrace(p.root(), 0);
  ASSERT_EQ(t.spans.size(), 4u);
  EXPECT_EQ(Str(t.spans[1]["operationName"]), "op \"quoted\"\nnext \xEF\xBF\xBD( end");
}

TEST(JaegerJson, TwoTracesInOrderOfFirstAppearance) {
  SpanBatch b;
  uint32_t r_a = Resource(b, {{"service.name", "svc-a"}});
  uint32_t r_b = Resource(b, {{"service.name", "svc-b"}});
  uint32_t s = b.AddScope();
  Span(b, r_b, s, kTraceB, "00000000000000b2", "00000000000000b1", "b-child", 5000, 6000);
  Span(b, r_a, s, kTraceA, "00000000000000a1", "", "a-root", 1000, 9000);
  Span(b, r_a, s, kTraceB, "00000000000000b1", "", "b-root", 4000, 9000);
  Span(b, r_b, s, kTraceA, "00000000000000a2", "00000000000000a1", "a-child", 2000, 3000);
  Parsed p(RenderJaegerTraces(b));
  ASSERT_TRUE(p.ok());
  ExpectEnvelope(p.root(), 2);

  RenderedTrace tb = GetTrace(p.root(), 0);
  EXPECT_EQ(Str(tb.trace["traceID"]), kTraceB);
  ASSERT_EQ(tb.spans.size(), 2u);
  EXPECT_EQ(Str(tb.spans[0]["operationName"]), "b-root");
  EXPECT_EQ(Str(tb.spans[1]["operationName"]), "b-child");
  EXPECT_EQ(Str(tb.spans[0]["processID"]), "p1");
  EXPECT_EQ(Str(tb.spans[1]["processID"]), "p2");
  EXPECT_EQ(Str(tb.processes["p1"]["serviceName"]), "svc-a");
  EXPECT_EQ(Str(tb.processes["p2"]["serviceName"]), "svc-b");
  for (object sp : tb.spans) EXPECT_EQ(Str(sp["traceID"]), kTraceB);

  // Process ids start again at p1 in each trace.
  RenderedTrace ta = GetTrace(p.root(), 1);
  EXPECT_EQ(Str(ta.trace["traceID"]), kTraceA);
  ASSERT_EQ(ta.spans.size(), 2u);
  EXPECT_EQ(Str(ta.spans[0]["operationName"]), "a-root");
  EXPECT_EQ(Str(ta.spans[1]["operationName"]), "a-child");
  EXPECT_EQ(Str(ta.spans[0]["processID"]), "p1");
  EXPECT_EQ(Str(ta.spans[1]["processID"]), "p2");
  EXPECT_EQ(Str(ta.processes["p1"]["serviceName"]), "svc-a");
  EXPECT_EQ(Str(ta.processes["p2"]["serviceName"]), "svc-b");
  for (object sp : ta.spans) EXPECT_EQ(Str(sp["traceID"]), kTraceA);
}

TEST(JaegerJson, SpanKindNames) {
  SpanBatch b;
  uint32_t r = Resource(b, {{"service.name", "svc"}});
  uint32_t s = b.AddScope();
  const char* names[] = {nullptr, "internal", "server", "client", "producer", "consumer"};
  for (uint8_t k = 0; k <= 5; ++k) {
    std::string id = "000000000000000" + std::to_string(k + 1);
    uint32_t i = Span(b, r, s, kTraceA, id, "", "op", 1000 + k, 2000);
    b.spans.kind[i] = k;
  }
  Parsed p(RenderJaegerTraces(b));
  ASSERT_TRUE(p.ok());
  RenderedTrace t = GetTrace(p.root(), 0);
  ASSERT_EQ(t.spans.size(), 6u);
  for (size_t k = 0; k <= 5; ++k) {
    std::vector<Tag> tags = Tags(t.spans[k]["tags"]);
    if (names[k] == nullptr) {
      EXPECT_TRUE(tags.empty());
    } else {
      ASSERT_EQ(tags.size(), 1u);
      EXPECT_EQ(tags[0], (Tag{"span.kind", "string", "\"" + std::string(names[k]) + "\""}));
    }
  }
}

TEST(JaegerJson, EmptyBatch) {
  SpanBatch b;
  std::string json = RenderJaegerTraces(b);
  EXPECT_EQ(json, R"({"data":[],"total":0,"limit":0,"offset":0,"errors":null})");
  Parsed p(json);
  ASSERT_TRUE(p.ok());
  ExpectEnvelope(p.root(), 0);
}

TEST(JaegerJson, MalformedStoredNumbersStayValidJson) {
  SpanBatch b;
  uint32_t r = Resource(b, {{"service.name", "svc"}});
  uint32_t s = b.AddScope();
  uint32_t i = Span(b, r, s, kTraceA, "0000000000000001", "", "op", 1000, 2000);
  SpanAttrs(b, i,
            {
                {"i", ValueType::kInt, "12x"},
                {"d", ValueType::kDouble, "oops"},
                {"d2", ValueType::kDouble, ""},
                {"b", ValueType::kBool, "maybe"},
            });
  Parsed p(RenderJaegerTraces(b));
  ASSERT_TRUE(p.ok());
  RenderedTrace t = GetTrace(p.root(), 0);
  std::vector<Tag> want = {
      {"i", "int64", "\"12x\""},
      {"d", "float64", "\"oops\""},
      {"d2", "float64", "\"\""},
      {"b", "bool", "false"},
  };
  EXPECT_EQ(Tags(t.spans[0]["tags"]), want);
}

TEST(JaegerJsonError, Shape) {
  std::string json = RenderJaegerError(404, "trace not found");
  EXPECT_EQ(
      json,
      R"({"data":null,"total":0,"limit":0,"offset":0,"errors":[{"code":404,"msg":"trace not found"}]})");
  Parsed p(json);
  ASSERT_TRUE(p.ok());
}

TEST(JaegerJsonError, MessageEscaped) {
  std::string json = RenderJaegerError(400, "bad \"id\"\n\xff");
  Parsed p(json);
  ASSERT_TRUE(p.ok());
  object o;
  ASSERT_EQ(p.root().get_object().get(o), simdjson::SUCCESS);
  EXPECT_TRUE(o["data"].is_null());
  array errors;
  ASSERT_EQ(o["errors"].get_array().get(errors), simdjson::SUCCESS);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(Int(errors.at(0)["code"]), 400);
  EXPECT_EQ(Str(errors.at(0)["msg"]), "bad \"id\"\n\xEF\xBF\xBD");
}

}  // namespace
}  // namespace spanhouse::query
