#include "storage/opensearch/jaeger_document.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "storage/opensearch/index_templates.h"

namespace spanhouse::storage::opensearch {
namespace {

constexpr std::string_view kTrace = "0af7651916cd43dd8448eb211c80319c";

template <size_t N>
std::array<uint8_t, N> Id(std::string_view hex) {
  std::array<uint8_t, N> id{};
  EXPECT_TRUE(FromHex(hex, id.data(), N)) << hex;
  return id;
}

void Attr(SpanBatch& b, AttrColumns& cols, std::string_view key, ValueType type,
          std::string_view value) {
  SpanBatch::AddAttr(cols, b.AddString(key), type, b.AddString(value));
}

Range Attrs(SpanBatch& b, AttrColumns& cols,
            const std::vector<std::tuple<std::string, ValueType, std::string>>& attrs) {
  const auto begin = static_cast<uint32_t>(cols.size());
  for (const auto& [k, t, v] : attrs) Attr(b, cols, k, t, v);
  return {begin, static_cast<uint32_t>(cols.size())};
}

// One rich span: every value type, an error status, a scope, trace state,
// events (one with an "event" attribute), a link to the parent and two others.
SpanBatch RichSpan() {
  SpanBatch b;
  const uint32_t r = b.AddResource();
  b.resources.attrs[r] = Attrs(b, b.resource_attrs,
                               {{"service.name", ValueType::kString, "checkout"},
                                {"host.name", ValueType::kString, "node-7"},
                                {"process.pid", ValueType::kInt, "4242"}});
  b.ResolveServiceName(r);
  const uint32_t sc = b.AddScope();
  b.scopes.name[sc] = b.AddString("io.opentelemetry.http");
  b.scopes.version[sc] = b.AddString("1.2.3");
  const uint32_t s = b.AddSpan(r, sc);
  auto& sp = b.spans;
  sp.trace_id[s] = Id<16>(kTrace);
  sp.span_id[s] = Id<8>("00f067aa0ba902b7");
  sp.parent_span_id[s] = Id<8>("53995c3f42cd8ad8");
  sp.name[s] = b.AddString("POST /pay");
  sp.kind[s] = static_cast<uint8_t>(SpanKind::kServer);
  sp.flags[s] = 1;
  sp.start_ns[s] = 1764720000123456789ull;  // 2025-12-03
  sp.end_ns[s] = 1764720000123456789ull + 2500000;
  sp.status_code[s] = static_cast<uint8_t>(StatusCodeOtlp::kError);
  sp.status_message[s] = b.AddString("card declined");
  sp.trace_state[s] = b.AddString("ot=th:8");
  sp.attrs[s] = Attrs(b, b.span_attrs,
                      {{"http.method", ValueType::kString, "POST"},
                       {"big", ValueType::kInt, "-9007199254740993"},
                       {"ratio", ValueType::kDouble, "0.25"},
                       {"ok", ValueType::kBool, "false"},
                       {"blob", ValueType::kBytes, std::string("\x01\xab", 2)},
                       {"list", ValueType::kArray, "[\"a\",1]"}});
  uint32_t e = b.AddEvent();
  b.events.time_ns[e] = sp.start_ns[s] + 1000;
  b.events.name[e] = b.AddString("exception");
  b.events.attrs[e] = Attrs(b, b.event_attrs, {{"exception.type", ValueType::kString, "E"}});
  e = b.AddEvent();
  b.events.time_ns[e] = sp.start_ns[s] + 2000;
  b.events.name[e] = b.AddString("named");
  b.events.attrs[e] = Attrs(b, b.event_attrs, {{"event", ValueType::kString, "own"}});
  sp.events[s] = {0, 2};
  // A link to the parent (folded into the parent's reference), a plain one,
  // and one that says it is a child_of.
  using Link = std::tuple<std::string_view, std::string_view, std::string>;
  for (const auto& [trace, span, ref] :
       {Link{kTrace, "53995c3f42cd8ad8", ""},
        Link{"ffeeddccbbaa99887766554433221100", "0102030405060708", ""},
        Link{"11112222333344445555666677778888", "1111222233334444", "child_of"}}) {
    const uint32_t l = b.AddLink();
    b.links.trace_id[l] = Id<16>(trace);
    b.links.span_id[l] = Id<8>(span);
    b.links.attrs[l] =
        ref.empty() ? Range{static_cast<uint32_t>(b.link_attrs.size()),
                            static_cast<uint32_t>(b.link_attrs.size())}
                    : Attrs(b, b.link_attrs, {{"opentracing.ref_type", ValueType::kString, ref}});
  }
  sp.links[s] = {0, 3};
  return b;
}

std::string Doc(const SpanBatch& b, uint32_t s = 0) {
  DocumentWriter w(b);
  std::string out;
  w.AppendSpan(out, s);
  return out;
}

TEST(JaegerDocument, WritesJaegersFieldsInJaegersOrder) {
  const std::string doc = Doc(RichSpan());
  simdjson::dom::parser parser;
  simdjson::dom::element e;
  ASSERT_EQ(parser.parse(doc).get(e), simdjson::SUCCESS) << doc;
  EXPECT_EQ(std::string_view(e["traceID"]), kTrace);
  EXPECT_EQ(std::string_view(e["spanID"]), "00f067aa0ba902b7");
  EXPECT_EQ(int64_t(e["flags"]), 1);
  EXPECT_EQ(uint64_t(e["startTime"]), 1764720000123456ull);
  EXPECT_EQ(uint64_t(e["startTimeMillis"]), 1764720000123ull);
  EXPECT_EQ(uint64_t(e["duration"]), 2500u);
  // The parent first, typed by nothing (the link to it had no ref_type:
  // FOLLOWS_FROM, as Jaeger's translator does), then the other links.
  EXPECT_NE(
      doc.find(
          R"("references":[{"refType":"FOLLOWS_FROM","traceID":"0af7651916cd43dd8448eb211c80319c","spanID":"53995c3f42cd8ad8"},{"refType":"FOLLOWS_FROM","traceID":"ffeeddccbbaa99887766554433221100","spanID":"0102030405060708"},{"refType":"CHILD_OF","traceID":"11112222333344445555666677778888","spanID":"1111222233334444"}])"),
      std::string::npos)
      << doc;
  EXPECT_NE(
      doc.find(
          R"("tags":[{"key":"otel.scope.name","type":"string","value":"io.opentelemetry.http"},{"key":"otel.scope.version","type":"string","value":"1.2.3"},{"key":"http.method","type":"string","value":"POST"},{"key":"big","type":"int64","value":-9007199254740993},{"key":"ratio","type":"float64","value":0.25},{"key":"ok","type":"bool","value":false},{"key":"blob","type":"binary","value":"01ab"},{"key":"list","type":"string","value":"[\"a\",1]"},{"key":"otel.status_description","type":"string","value":"card declined"},{"key":"w3c.tracestate","type":"string","value":"ot=th:8"}],"tag":{"error":true,"span@kind":"server"})"),
      std::string::npos)
      << doc;
  // The event's name first, unless it has an attribute "event".
  EXPECT_NE(
      doc.find(
          R"("logs":[{"timestamp":1764720000123457,"fields":[{"key":"event","type":"string","value":"exception"},{"key":"exception.type","type":"string","value":"E"}]},{"timestamp":1764720000123458,"fields":[{"key":"event","type":"string","value":"own"}]}])"),
      std::string::npos)
      << doc;
  EXPECT_NE(
      doc.find(
          R"("process":{"serviceName":"checkout","tags":[{"key":"host.name","type":"string","value":"node-7"},{"key":"process.pid","type":"int64","value":4242}]})"),
      std::string::npos)
      << doc;
}

TEST(JaegerDocument, ResourceWithoutAttributesAndFlagsZero) {
  SpanBatch b = RichSpan();
  const uint32_t r = b.AddResource();
  b.ResolveServiceName(r);
  b.spans.resource[0] = r;
  b.spans.flags[0] = 0;
  const std::string doc = Doc(b);
  EXPECT_NE(doc.find(R"("process":{"serviceName":"missing-service-name","tags":[]})"),
            std::string::npos)
      << doc;
  EXPECT_EQ(doc.find("\"flags\""), std::string::npos) << doc;
}

TEST(JaegerDocument, ReadBackWritesTheSameDocument) {
  const SpanBatch b = RichSpan();
  const std::string doc = Doc(b);
  SpanBatch back;
  ASSERT_TRUE(AppendSpanFromDocument(doc, &back).ok());
  ASSERT_EQ(back.span_count(), 1u);
  EXPECT_EQ(Doc(back), doc);
  // The fields the format keeps come back as they were.
  EXPECT_EQ(back.spans.kind[0], static_cast<uint8_t>(SpanKind::kServer));
  EXPECT_EQ(back.spans.status_code[0], static_cast<uint8_t>(StatusCodeOtlp::kError));
  EXPECT_EQ(back.Str(back.spans.status_message[0]), "card declined");
  EXPECT_EQ(back.Str(back.spans.trace_state[0]), "ot=th:8");
  EXPECT_EQ(back.Str(back.scopes.name[0]), "io.opentelemetry.http");
  EXPECT_EQ(back.spans.parent_span_id[0], Id<8>("53995c3f42cd8ad8"));
  EXPECT_EQ(back.Str(back.resources.service_name[0]), "checkout");
  EXPECT_EQ(back.spans.start_ns[0], 1764720000123456000ull);
  EXPECT_EQ(back.spans.end_ns[0], 1764720000125956000ull);
  bool big = false, blob = false;
  for (uint32_t i = 0; i < back.span_attrs.size(); ++i) {
    if (back.Str(back.span_attrs.key[i]) == "big") {
      big = back.span_attrs.type[i] == ValueType::kInt &&
            back.Str(back.span_attrs.value[i]) == "-9007199254740993";
    }
    if (back.Str(back.span_attrs.key[i]) == "blob") {
      blob = back.span_attrs.type[i] == ValueType::kBytes &&
             back.Str(back.span_attrs.value[i]) == std::string("\x01\xab", 2);
    }
  }
  EXPECT_TRUE(big);
  EXPECT_TRUE(blob);
}

TEST(JaegerDocument, ReadsOtherWritersForms) {
  // A 64-bit legacy id without leading zeros, the deprecated parentSpanID,
  // tags stored as fields ('@' for '.'), numbers as text and floats.
  const std::string doc = R"({"traceID":"abc","spanID":"1f","parentSpanID":"2","operationName":"op",
    "startTime":1000,"duration":5,"tags":[{"key":"n","type":"int64","value":"12"},
    {"key":"f","type":"float64","value":3},{"key":"span.kind","type":"string","value":"client"},
    {"key":"otel.status_code","type":"string","value":"OK"}],
    "tag":{"http@status_code":200,"cache@hit":true},
    "process":{"serviceName":"svc","tag":{"k8s@pod":"p-1"}}})";
  SpanBatch b;
  ASSERT_TRUE(AppendSpanFromDocument(doc, &b).ok());
  EXPECT_EQ(b.spans.trace_id[0], Id<16>("00000000000000000000000000000abc"));
  EXPECT_EQ(b.spans.span_id[0], Id<8>("000000000000001f"));
  EXPECT_EQ(b.spans.parent_span_id[0], Id<8>("0000000000000002"));
  EXPECT_EQ(b.spans.kind[0], static_cast<uint8_t>(SpanKind::kClient));
  EXPECT_EQ(b.spans.status_code[0], static_cast<uint8_t>(StatusCodeOtlp::kOk));
  std::vector<std::string> got;
  for (uint32_t i = 0; i < b.span_attrs.size(); ++i) {
    got.push_back(std::string(b.Str(b.span_attrs.key[i])) + "=" +
                  std::to_string(static_cast<int>(b.span_attrs.type[i])) + ":" +
                  std::string(b.Str(b.span_attrs.value[i])));
  }
  EXPECT_EQ(got, (std::vector<std::string>{"n=3:12", "f=4:3", "http.status_code=3:200",
                                           "cache.hit=2:true"}));
  ASSERT_EQ(b.resource_attrs.size(), 2u);
  EXPECT_EQ(b.Str(b.resource_attrs.key[1]), "k8s.pod");
}

TEST(JaegerDocument, ADecoderSharesResourcesAndScopesAcrossItsDocuments) {
  // Spans of two processes (one with its tags as fields), two scopes, some tags as fields.
  auto doc = [](int i) {
    const std::string process =
        i % 2 == 0 ? R"({"serviceName":"cart","tags":[{"key":"host.name","type":"string",)"
                     R"("value":"node-1"},{"key":"pid","type":"int64","value":41}]})"
                   : R"({"serviceName":"shop","tag":{"k8s@pod":"p-1"}})";
    return R"({"traceID":"0af7651916cd43dd8448eb211c80319c","spanID":"00000000000000)" +
           std::to_string(10 + i) + R"(","operationName":"op-)" + std::to_string(i % 3) +
           R"(","startTime":)" + std::to_string(1000 + i) +
           R"(,"duration":5,"tags":[{"key":"otel.scope.name","type":"string","value":"lib-)" +
           std::to_string(i % 2) + R"("},{"key":"n","type":"int64","value":)" + std::to_string(i) +
           R"(},{"key":"long","type":"string","value":")" +
           std::string(40, static_cast<char>('a' + i)) + R"("}],"tag":{"http@status_code":200},)" +
           R"("logs":[{"timestamp":1001,"fields":[{"key":"event","type":"string","value":"x"}]}],)" +
           R"("process":)" + process + "}";
  };
  SpanBatch shared;
  SpanBatch alone;
  DocumentDecoder decoder(&shared);
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(decoder.Append(doc(i)).ok()) << doc(i);
    ASSERT_TRUE(AppendSpanFromDocument(doc(i), &alone).ok());
    // A document that is not a span leaves the batch as it was.
    EXPECT_FALSE(decoder.Append(R"({"traceID":"zz","spanID":"1","startTime":1})").ok());
  }
  ASSERT_EQ(shared.span_count(), 12u);
  EXPECT_EQ(shared.resources.attrs.size(), 2u);  // one per process
  EXPECT_EQ(alone.resources.attrs.size(), 12u);  // one per document
  EXPECT_EQ(shared.scopes.name.size(), 2u);      // one per process and scope: lib-0 and lib-1
  for (uint32_t s = 0; s < 12; ++s) {
    EXPECT_EQ(Doc(shared, s), Doc(alone, s)) << s;
    EXPECT_EQ(ResourceFingerprint(shared, shared.spans.resource[s]),
              ResourceFingerprint(alone, alone.spans.resource[s]))
        << s;
  }
  // Both as OTLP-like columns: the same after a columnar round trip too.
  std::string record;
  shared.AppendColumnar(&record);
  SpanBatch back;
  ASSERT_TRUE(back.ReadColumnar(record));
  for (uint32_t s = 0; s < 12; ++s) EXPECT_EQ(Doc(back, s), Doc(alone, s)) << s;
  std::string alone_record;
  alone.AppendColumnar(&alone_record);
  EXPECT_LT(record.size(), alone_record.size());
}

TEST(JaegerDocument, RefusesWhatIsNotASpan) {
  SpanBatch b;
  for (std::string_view bad :
       {"not json", "[1]", R"({"spanID":"01","startTime":1})",
        R"({"traceID":"zz","spanID":"01","startTime":1})", R"({"traceID":"01","spanID":"01"})",
        R"({"traceID":"01","spanID":"01","startTime":"x"})",
        R"({"traceID":"0102030405060708090a0b0c0d0e0f1011","spanID":"01","startTime":1})"}) {
    Status st = AppendSpanFromDocument(bad, &b);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(b.span_count(), 0u);
  EXPECT_EQ(b.resources.attrs.size(), 0u);
}

TEST(JaegerDocument, IndexNamesAndIds) {
  EXPECT_EQ(SpanIndexBase(""), "jaeger-span-");
  EXPECT_EQ(ServiceIndexBase("team-a"), "team-a-jaeger-service-");
  EXPECT_EQ(DailyIndex("jaeger-span-", 1764720000123456789ull), "jaeger-span-2025-12-03");
  // FNV-1a 64 of "a": a published test vector.
  EXPECT_EQ(ServiceDocumentId("a", ""), "af63dc4c8601ec8c");
  EXPECT_EQ(ServiceDocumentId("", "a"), ServiceDocumentId("a", ""));
  const SpanBatch b = RichSpan();
  EXPECT_EQ(SpanDocumentId(b, 0), std::string(kTrace) + "00f067aa0ba902b7");
}

TEST(IndexTemplates, AreJsonWithJaegersFieldTypes) {
  TemplateOptions o;
  o.index_prefix = "p";
  o.shards = 1;
  o.replicas = 0;
  EXPECT_EQ(SpanTemplateName(o), "p-jaeger-span");
  EXPECT_EQ(ServiceTemplateName(o), "p-jaeger-service");
  simdjson::dom::parser parser;
  simdjson::dom::element e;
  ASSERT_EQ(parser.parse(SpanTemplate(o)).get(e), simdjson::SUCCESS) << SpanTemplate(o);
  EXPECT_EQ(std::string_view(e["index_patterns"].at(0)), "p-jaeger-span-*");
  EXPECT_EQ(std::string_view(e["mappings"]["properties"]["startTimeMillis"]["type"]), "date");
  EXPECT_EQ(std::string_view(e["mappings"]["properties"]["tags"]["type"]), "nested");
  EXPECT_EQ(std::string_view(e["mappings"]["properties"]["process"]["properties"]["tags"]["type"]),
            "nested");
  EXPECT_EQ(std::string_view(e["mappings"]["properties"]["traceID"]["type"]), "keyword");
  ASSERT_EQ(parser.parse(ServiceTemplate(o)).get(e), simdjson::SUCCESS);
  EXPECT_EQ(std::string_view(e["mappings"]["properties"]["serviceName"]["type"]), "keyword");
}

}  // namespace
TEST(JaegerDocument, ProcessesThatDifferInAnyPartAreResourcesOfTheirOwn) {
  // Each differs from the first in one way: a value, a type, where a key
  // ends and its value begins, a tag as a field, the service.
  const std::vector<std::string> processes = {
      R"({"serviceName":"cart","tags":[{"key":"ab","type":"string","value":"c"},)"
      R"({"key":"pid","type":"int64","value":41}]})",
      R"({"serviceName":"cart","tags":[{"key":"ab","type":"string","value":"c"},)"
      R"({"key":"pid","type":"int64","value":42}]})",
      R"({"serviceName":"cart","tags":[{"key":"ab","type":"string","value":"c"},)"
      R"({"key":"pid","type":"string","value":"41"}]})",
      R"({"serviceName":"cart","tags":[{"key":"a","type":"string","value":"bc"},)"
      R"({"key":"pid","type":"int64","value":41}]})",
      R"({"serviceName":"cart","tags":[{"key":"ab","type":"string","value":"c"}],)"
      R"("tag":{"pid":41}})",
      R"({"serviceName":"carts","tags":[{"key":"ab","type":"string","value":"c"},)"
      R"({"key":"pid","type":"int64","value":41}]})",
  };
  SpanBatch shared;
  DocumentDecoder decoder(&shared);
  // Parsed in place from one buffer, with the padding a request body gives.
  std::string body;
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < processes.size(); ++i) {
      body += R"({"traceID":"0af7651916cd43dd8448eb211c80319c","spanID":"000000000000000)" +
              std::to_string(i) + R"(","startTime":1000,"process":)" + processes[i] + "}\n";
    }
  }
  body.reserve(body.size() + 64);
  std::string_view rest = body;
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    const std::string_view line = rest.substr(0, nl);
    rest.remove_prefix(nl + 1);
    const auto past = static_cast<size_t>(body.data() + body.capacity() - line.end());
    ASSERT_TRUE(decoder.Append(line, past).ok()) << line;
  }
  ASSERT_EQ(shared.span_count(), 2 * processes.size());
  std::set<uint64_t> fingerprints;
  for (uint32_t s = 0; s < processes.size(); ++s) {
    SpanBatch alone;
    ASSERT_TRUE(AppendSpanFromDocument(R"({"traceID":"01","spanID":"01","startTime":1,"process":)" +
                                           processes[s] + "}",
                                       &alone)
                    .ok());
    const uint64_t fp = ResourceFingerprint(shared, shared.spans.resource[s]);
    EXPECT_EQ(fp, ResourceFingerprint(alone, 0)) << processes[s];
    // The second round found the first's resources.
    EXPECT_EQ(shared.spans.resource[s + processes.size()], shared.spans.resource[s]);
    fingerprints.insert(fp);
  }
  // pid 41 as a field is the int64 tag once converted (one resource); every other is its own.
  EXPECT_EQ(fingerprints.size(), processes.size() - 1);
  EXPECT_EQ(shared.resources.attrs.size(), processes.size() - 1);
}

}  // namespace spanhouse::storage::opensearch
