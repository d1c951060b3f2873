// The spans of the CountSpans / ListSpans tests, written to ClickHouse and to
// OpenSearch alike, and what both readers must answer for them: the
// answers computed here from the batch, the service as Jaeger's documents
// name it (JaegerServiceName).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "model/service_name.h"
#include "model/span_batch.h"
#include "query/span_reader.h"
#include "storage/opensearch/jaeger_document.h"

namespace spanhouse::testdata {

// 2024-03-10T22:00:00Z: the spans run past midnight (two daily indices).
inline constexpr uint64_t kCountsT0 = 1710108000ull * 1000000000ull;
inline constexpr uint64_t kCountsS = 1000000000ull;

inline const std::string& CountsHostileService() {
  static const std::string s = "svc \"q\" \\ \xc3\xa9 {x}";
  return s;
}

// 96 spans over seven hours from kCountsT0, of six resources (frontend, db,
// one without service.name, one with an empty one, one with an int one, one
// with quotes and backslashes), every kind; starts not on whole
// microseconds; and spans on the edges of the range CountsQuery asks for:
// at its start, a nanosecond before its end, at its end, on a bucket's
// first nanosecond and its last.
inline SpanBatch CountsCorpus() {
  SpanBatch b;
  const uint32_t scope = b.AddScope();
  b.scopes.name[scope] = b.AddString("counts.scope");
  const auto resource = [&](const std::vector<std::tuple<std::string, ValueType, std::string>>& a) {
    const uint32_t r = b.AddResource();
    const auto begin = static_cast<uint32_t>(b.resource_attrs.size());
    for (const auto& [k, t, v] : a) {
      SpanBatch::AddAttr(b.resource_attrs, b.AddString(k), t, b.AddString(v));
    }
    b.resources.attrs[r] = {begin, static_cast<uint32_t>(b.resource_attrs.size())};
    b.ResolveServiceName(r);
    return r;
  };
  const std::vector<uint32_t> res = {
      resource({{"service.name", ValueType::kString, "frontend"}}),
      resource(
          {{"service.name", ValueType::kString, "db"}, {"host.name", ValueType::kString, "h"}}),
      resource({{"host.name", ValueType::kString, "no-service"}}),
      resource({{"service.name", ValueType::kString, ""}}),
      resource({{"service.name", ValueType::kInt, "7"}}),
      resource({{"service.name", ValueType::kString, CountsHostileService()}}),
  };
  uint32_t n = 0;
  const auto span = [&](uint32_t r, uint8_t kind, uint64_t start_ns) {
    const uint32_t s = b.AddSpan(r, scope);
    TraceId t{};
    t[0] = static_cast<uint8_t>(0x10 + n / 4);
    t[15] = static_cast<uint8_t>(n / 4);
    b.spans.trace_id[s] = t;
    b.spans.span_id[s] =
        SpanId{0, 0, 0, 0, 0, 0, static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n & 0xff)};
    if (n % 4 != 0) b.spans.parent_span_id[s] = SpanId{0, 0, 0, 0, 0, 0, 0, 1};
    b.spans.name[s] = b.AddString("op" + std::to_string(n % 3));
    b.spans.kind[s] = kind;
    b.spans.start_ns[s] = start_ns;
    b.spans.end_ns[s] = start_ns + 1000000;
    ++n;
  };
  for (uint32_t i = 0; i < 84; ++i) {
    span(res[(i * 5) % res.size()], static_cast<uint8_t>((i / 6) % 6),
         kCountsT0 + uint64_t{i} * 5 * 60 * kCountsS + uint64_t{i} * 1234567);
  }
  // The edges of CountsQuery's range [T0 + 10 min, T0 + 6 h): its start,
  // a nanosecond before its end, its end; the first and last nanosecond of
  // the hour from T0 + 2 h.
  span(res[0], 2, kCountsT0 + 600 * kCountsS);
  span(res[1], 3, kCountsT0 + 6 * 3600 * kCountsS - 1);
  span(res[1], 3, kCountsT0 + 6 * 3600 * kCountsS);
  span(res[2], 0, kCountsT0 + 2 * 3600 * kCountsS);
  span(res[2], 0, kCountsT0 + 3 * 3600 * kCountsS - 1);
  span(res[3], 1, kCountsT0 + 3 * 3600 * kCountsS);
  span(res[4], 4, kCountsT0 + 3 * 3600 * kCountsS - 1);
  span(res[5], 5, kCountsT0 + 2 * 3600 * kCountsS + 1);
  // Before and after the range.
  span(res[0], 2, kCountsT0 + 600 * kCountsS - 1);
  span(res[0], 2, kCountsT0 + 8 * 3600 * kCountsS);
  span(res[1], 0, kCountsT0 - 3600 * kCountsS);
  span(res[0], 1, kCountsT0 + 600 * kCountsS + 999);
  return b;
}

inline query::SpanCountQuery CountsQuery(uint64_t bucket_s = 3600) {
  query::SpanCountQuery q;
  q.start_ns = kCountsT0 + 600 * kCountsS;
  q.end_ns = kCountsT0 + 6 * 3600 * kCountsS;
  q.bucket_s = bucket_s;
  return q;
}

inline std::vector<query::SpanCountRow> ExpectedCounts(const SpanBatch& b,
                                                       const query::SpanCountQuery& q) {
  std::map<std::tuple<uint64_t, std::string, uint8_t>, uint64_t> cells;
  for (uint32_t s = 0; s < b.span_count(); ++s) {
    const uint64_t start = b.spans.start_ns[s];
    if (start < q.start_ns || start >= q.end_ns) continue;
    const uint64_t bucket = start / kCountsS / q.bucket_s * q.bucket_s;
    ++cells[{bucket, std::string(JaegerServiceName(b, b.spans.resource[s])), b.spans.kind[s]}];
  }
  std::vector<query::SpanCountRow> out;
  for (const auto& [k, n] : cells)
    out.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k), n});
  return out;
}

inline std::vector<query::SpanKey> ExpectedKeys(const SpanBatch& b, const query::SpanIdQuery& q) {
  std::vector<query::SpanKey> out;
  for (uint32_t s = 0; s < b.span_count(); ++s) {
    const uint64_t start = b.spans.start_ns[s];
    if (start < q.start_ns || start >= q.end_ns) continue;
    if (JaegerServiceName(b, b.spans.resource[s]) != q.service) continue;
    if (!q.any_kind && b.spans.kind[s] != q.kind) continue;
    out.push_back({b.spans.trace_id[s], b.spans.span_id[s]});
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The ListSpans queries the tests ask: each service, any kind and each kind.
inline std::vector<query::SpanIdQuery> ListQueries() {
  std::vector<query::SpanIdQuery> out;
  const query::SpanCountQuery range = CountsQuery();
  for (const std::string& service :
       {std::string("frontend"), std::string("db"), std::string("missing-service-name"),
        std::string("empty-service-name"), std::string("service-name-wrong-type"),
        CountsHostileService(), std::string("nobody")}) {
    for (int kind = -1; kind < 6; ++kind) {
      query::SpanIdQuery q;
      q.service = service;
      q.any_kind = kind < 0;
      q.kind = static_cast<uint8_t>(kind < 0 ? 0 : kind);
      q.start_ns = range.start_ns;
      q.end_ns = range.end_ns;
      out.push_back(q);
    }
  }
  return out;
}

inline std::string Describe(const query::SpanIdQuery& q) {
  return q.service + (q.any_kind ? std::string(" any kind") : " kind " + std::to_string(q.kind));
}

}  // namespace spanhouse::testdata

namespace spanhouse::query {

inline std::ostream& operator<<(std::ostream& os, const SpanCountRow& r) {
  return os << "{" << r.bucket_s << ", " << r.service << ", " << int{r.kind} << ", " << r.spans
            << "}";
}
inline bool operator==(const SpanCountRow& a, const SpanCountRow& b) {
  return a.bucket_s == b.bucket_s && a.service == b.service && a.kind == b.kind &&
         a.spans == b.spans;
}
inline std::ostream& operator<<(std::ostream& os, const SpanKey& k) {
  return os << ToHex(k.trace_id) << "/" << ToHex(k.span_id);
}

}  // namespace spanhouse::query
