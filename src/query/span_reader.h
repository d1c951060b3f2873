// What the query API needs from a store. One implementation per backend
// (embedded ClickHouse now; remote ClickHouse and OpenSearch later).
//
// Every value in these requests has been checked by query/params.h; an
// implementation binds each one as a query parameter and builds the rest of
// its queries from code. Each query is bounded in time and in rows: a store
// that hits a bound answers kUnavailable (time) or kInvalidArgument (rows:
// the request asked for too much) with a
// message for the client, and keeps its own error text for its log.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/span_batch.h"

namespace spanhouse::query {

// One tag filter of a trace search: Jaeger's tag=key:value.
struct TagFilter {
  std::string key;
  std::string value;
};

// A trace search (GET /api/traces?service=...): the traces that have a span
// matching every condition at once, as Jaeger finds them.
struct TraceQuery {
  std::string service;
  std::string operation;  // empty: any
  // Each matches the span's attributes or its resource's; "error",
  // "otel.status_code", "span.kind", "otel.status_description",
  // "otel.scope.name" and "otel.scope.version" also match the span fields
  // Jaeger shows as those tags, and "user_fields.<path>" a key of the
  // user_fields column (a Map, or the JSON type in older ClickHouse stores).
  std::vector<TagFilter> tags;
  uint64_t start_ns = 0;  // the span starts within [start_ns, end_ns]
  uint64_t end_ns = 0;
  uint64_t min_duration_ns = 0;  // 0: no bound
  uint64_t max_duration_ns = 0;  // 0: no bound
  uint32_t limit = 100;          // traces, newest first
};

struct OperationInfo {
  std::string name;
  uint8_t kind = 0;  // SpanKind
  // False where the store keeps no kinds (OpenSearch's service documents,
  // asked for every kind): kind is then 0, as Jaeger's own reader answers.
  bool kind_known = true;
};

struct DependencyLink {
  std::string parent;
  std::string child;
  uint64_t calls = 0;
};

// Per-minute RED series (red_1m) read as Jaeger's SPM metrics: points at
// end_s, end_s - step_s, ... back to end_s - lookback_s; the point at t
// covers the minutes in [t - window_s, t).
struct RedQuery {
  std::vector<std::string> services;
  std::vector<uint8_t> kinds;  // empty: every kind
  bool by_operation = false;
  uint64_t end_s = 0;  // a whole minute
  uint64_t lookback_s = 0;
  uint64_t step_s = 60;     // whole minutes
  uint64_t window_s = 600;  // whole minutes (Jaeger's ratePer)
  bool want_quantile = false;
  double quantile = 0.95;  // in (0, 1]
};

struct RedPoint {
  uint64_t time_s = 0;
  uint64_t calls = 0;
  uint64_t errors = 0;
  double quantile_ms = 0;  // when RedQuery::want_quantile and calls > 0
};

struct RedSeries {
  std::string service;
  std::string operation;         // when by_operation
  std::vector<RedPoint> points;  // ascending time, only points whose window has calls
};

// Totals over [from_s, to_s) (minutes that start in it) per service, or per
// operation and kind of one service.
struct RedSummaryQuery {
  std::string service;         // empty: one row per service; set: per operation of it
  std::vector<uint8_t> kinds;  // empty: every kind
  uint64_t from_s = 0;
  uint64_t to_s = 0;
};

struct RedSummaryRow {
  std::string service;
  std::string operation;  // per-operation rows
  uint8_t kind = 0;       // per-operation rows
  uint64_t calls = 0;
  uint64_t errors = 0;
  double p50_ms = 0;
  double p95_ms = 0;
  double p99_ms = 0;
};

// Spans per (time bucket, service, span kind) over [start_ns, end_ns): what
// `spanhouse reconcile` compares between two stores.
struct SpanCountQuery {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint64_t bucket_s = 3600;  // buckets start at multiples of it (UTC)
};

struct SpanCountRow {
  uint64_t bucket_s = 0;  // the bucket's start, unix seconds
  std::string service;
  uint8_t kind = 0;  // SpanKind
  uint64_t spans = 0;
};

// The spans of one service started in [start_ns, end_ns), by id.
struct SpanIdQuery {
  std::string service;
  uint8_t kind = 0;
  bool any_kind = true;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t limit = 10000;  // more: kInvalidArgument
};

struct SpanKey {
  TraceId trace_id{};
  SpanId span_id{};
  bool operator<(const SpanKey& o) const {
    return trace_id != o.trace_id ? trace_id < o.trace_id : span_id < o.span_id;
  }
  bool operator==(const SpanKey& o) const = default;
};

class SpanReader {
 public:
  virtual ~SpanReader() = default;
  // Appends every stored span of the trace to `out`; kNotFound if none.
  virtual Status GetTrace(const TraceId& id, SpanBatch* out) = 0;
  // Appends every stored span of each of `ids` (those stored; the others are
  // left out), traces in the order of `ids`, spans by start time.
  virtual Status GetTraces(const std::vector<TraceId>& ids, SpanBatch* out) = 0;
  // The ids of the traces matching `query`, newest first, at most its limit.
  virtual Status FindTraceIds(const TraceQuery& query, std::vector<TraceId>* out) = 0;
  // Every service name stored, sorted.
  virtual Status GetServices(std::vector<std::string>* out) = 0;
  // The operations of `service` (of `kind` only when `any_kind` is false),
  // sorted by name then kind.
  virtual Status GetOperations(const std::string& service, bool any_kind, uint8_t kind,
                               std::vector<OperationInfo>* out) = 0;
  // Calls between services in the minutes of [from_s, to_s), summed per
  // (parent, child), sorted.
  virtual Status GetDependencies(uint64_t from_s, uint64_t to_s,
                                 std::vector<DependencyLink>* out) = 0;
  virtual Status GetRedSeries(const RedQuery& query, std::vector<RedSeries>* out) = 0;
  virtual Status GetRedSummary(const RedSummaryQuery& query, std::vector<RedSummaryRow>* out) = 0;

  // Counts stored spans whose resource (or, for kSpan, the span itself) has
  // attribute `key` equal to `value`. For verification by loadgen, tests and
  // benchmarks: a span attribute is a full scan of the spans table.
  // kUserField: a key of the user_fields column (the span's and its
  // resource's user-defined attributes); an empty value matches any value.
  enum class AttrOwner { kResource, kSpan, kUserField };

  // Spans per (bucket, service, kind), sorted by bucket, service, kind; only
  // non-empty cells. The service is the one the query API shows for the
  // span (its resource's service.name, as the store keeps it).
  virtual Status CountSpans(const SpanCountQuery& query, std::vector<SpanCountRow>* out) {
    (void)query;
    (void)out;
    return Status::Invalid("this store cannot count spans per bucket");
  }
  // The ids of the spans of `query.service` (of `query.kind` unless any_kind)
  // that started in the range, sorted; more than query.limit: kInvalidArgument.
  virtual Status ListSpans(const SpanIdQuery& query, std::vector<SpanKey>* out) {
    (void)query;
    (void)out;
    return Status::Invalid("this store cannot list span ids");
  }
  virtual Status CountSpansWithAttr(AttrOwner owner, const std::string& key,
                                    const std::string& value, uint64_t* count) = 0;
};

// A reader in front of another (the recent index's, the peers'): every call
// goes on to `inner` unless the subclass answers it itself.
class ReaderInFront : public SpanReader {
 public:
  explicit ReaderInFront(SpanReader& inner) : inner_(inner) {}

  Status GetTrace(const TraceId& id, SpanBatch* out) override { return inner_.GetTrace(id, out); }
  Status GetTraces(const std::vector<TraceId>& ids, SpanBatch* out) override {
    return inner_.GetTraces(ids, out);
  }
  Status FindTraceIds(const TraceQuery& query, std::vector<TraceId>* out) override {
    return inner_.FindTraceIds(query, out);
  }
  Status GetServices(std::vector<std::string>* out) override { return inner_.GetServices(out); }
  Status GetOperations(const std::string& service, bool any_kind, uint8_t kind,
                       std::vector<OperationInfo>* out) override {
    return inner_.GetOperations(service, any_kind, kind, out);
  }
  Status GetDependencies(uint64_t from_s, uint64_t to_s,
                         std::vector<DependencyLink>* out) override {
    return inner_.GetDependencies(from_s, to_s, out);
  }
  Status GetRedSeries(const RedQuery& query, std::vector<RedSeries>* out) override {
    return inner_.GetRedSeries(query, out);
  }
  Status GetRedSummary(const RedSummaryQuery& query, std::vector<RedSummaryRow>* out) override {
    return inner_.GetRedSummary(query, out);
  }
  Status CountSpans(const SpanCountQuery& query, std::vector<SpanCountRow>* out) override {
    return inner_.CountSpans(query, out);
  }
  Status ListSpans(const SpanIdQuery& query, std::vector<SpanKey>* out) override {
    return inner_.ListSpans(query, out);
  }
  Status CountSpansWithAttr(AttrOwner owner, const std::string& key, const std::string& value,
                            uint64_t* count) override {
    return inner_.CountSpansWithAttr(owner, key, value, count);
  }

 protected:
  SpanReader& inner_;
};

}  // namespace spanhouse::query
