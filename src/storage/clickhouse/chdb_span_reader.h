// SpanReader over embedded ClickHouse.
//
// Every value of a request is bound as a query parameter ({name:Type});
// tables, columns and expressions come from code. Every query carries a time
// limit and a result-row limit (ReaderLimits): past the time limit it answers
// kUnavailable, past the row limit kInvalidArgument, each with a message a client can
// act on; other engine errors are kInternal with the engine's text, for the
// log (the query API does not show it to clients).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "query/span_reader.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/schema.h"

namespace spanhouse::storage {

struct ReaderLimits {
  uint32_t max_execution_s = 30;  // per query (the engine's max_execution_time)
  uint64_t max_spans = 1000000;   // spans read back by one trace lookup
  uint64_t max_rows = 200000;     // rows of any other result
  // Resources the reader keeps in memory for lookups (a store holds a few
  // hundred, one per pod); past it the cache starts over.
  size_t max_cached_resources = 100000;
};

// What a reader answers for a failed query: past the time limit (the
// engine's TIMEOUT_EXCEEDED) kUnavailable, past the row limit
// (TOO_MANY_ROWS_OR_BYTES) kInvalidArgument, each with a message for the client;
// anything else kInternal (kUnavailable stays) with the engine's text.
Status ReaderError(const Status& engine_error, const ReaderLimits& limits, uint64_t max_rows);

// The condition on the spans table's `timestamp` that a lookup by trace id
// reads: the seconds [first, last] of each trace (trace_index's rows, a
// range cut to 48 hours past its first second), overlapping and adjacent
// ranges joined, and the closest joined further until at most max_ranges
// are left. "0" for none. The sort key (second, trace id) then finds the
// traces' granules within those seconds (kSpansOrderBy).
std::string TraceSecondsCondition(std::vector<std::pair<uint64_t, uint64_t>> ranges,
                                  size_t max_ranges = 32);

// The spans of `batch` whose trace is one of `ids`, as GetTraces answers
// them: traces in the order of `ids`, each trace's spans by start time, then
// span id.
std::vector<uint32_t> TraceOrder(const SpanBatch& batch, const std::vector<TraceId>& ids);

class ChdbSpanReader : public query::SpanReader {
 public:
  // `layout`: the tables' layout (the project's own; `bench storage` reads
  // other layouts too). `database`: where the tables are
  // (SchemaOptions::database). `distributed`: the tables are Distributed
  // ones over a cluster's shards (a subquery over another is then GLOBAL:
  // run once, its result sent to every shard).
  ChdbSpanReader(SqlConnection& conn, Capabilities caps, ReaderLimits limits = {},
                 StorageLayout layout = {}, std::string database = std::string(kDatabase),
                 bool distributed = false)
      : conn_(conn),
        caps_(caps),
        limits_(limits),
        layout_(std::move(layout)),
        database_(std::move(database)),
        in_(distributed ? "GLOBAL IN" : "IN") {}
  // Traces are read from the trace copy first (trace_copy.h), `since_s` as
  // EnsureTraceCopy gave it; from the spans table when the copy lacks one of
  // them, or holds one that may have begun before it was made.
  void set_trace_copy(uint64_t since_s) {
    copy_since_s_ = since_s;
    trace_copy_ = true;
  }
  // Reads of traces by id the copy answered, and those it left to the spans
  // table.
  uint64_t copy_answers() const { return copy_answers_.load(std::memory_order_relaxed); }
  uint64_t copy_misses() const { return copy_misses_.load(std::memory_order_relaxed); }
  Status GetTrace(const TraceId& id, SpanBatch* out) override;
  // The (trace id, span id) of every stored span of `ids`: what the import
  // checks before it stores spans (cheaper than reading them whole).
  Status SpanKeysOfTraces(const std::vector<TraceId>& ids, std::vector<query::SpanKey>* out);
  Status GetTraces(const std::vector<TraceId>& ids, SpanBatch* out) override;
  Status FindTraceIds(const query::TraceQuery& query, std::vector<TraceId>* out) override;
  Status GetServices(std::vector<std::string>* out) override;
  Status GetOperations(const std::string& service, bool any_kind, uint8_t kind,
                       std::vector<query::OperationInfo>* out) override;
  Status GetDependencies(uint64_t from_s, uint64_t to_s,
                         std::vector<query::DependencyLink>* out) override;
  Status GetRedSeries(const query::RedQuery& query, std::vector<query::RedSeries>* out) override;
  Status GetRedSummary(const query::RedSummaryQuery& query,
                       std::vector<query::RedSummaryRow>* out) override;
  // CountSpans / ListSpans: what `spanhouse reconcile` compares with a
  // cluster in Jaeger's format. The service of a span whose resource has no
  // usable service.name (the spans table keeps "" for it) is named as
  // Jaeger's documents name it (jaeger_document.h): "missing-service-name"
  // (no service.name, or a resource the resources table lacks),
  // "empty-service-name" (""), "service-name-wrong-type" (not a string); a
  // ListSpans of one of those names finds those spans (and any of a service
  // really called so). "" names no span. Rows are counted as stored: a span
  // stored twice counts twice, and is listed twice (spans is a plain
  // MergeTree, whose merges keep every row).
  Status CountSpans(const query::SpanCountQuery& query,
                    std::vector<query::SpanCountRow>* out) override;
  Status ListSpans(const query::SpanIdQuery& query, std::vector<query::SpanKey>* out) override;
  Status CountSpansWithAttr(AttrOwner owner, const std::string& key, const std::string& value,
                            uint64_t* count) override;

 private:
  // Runs `sql` with the limits appended as its SETTINGS; maps the engine's
  // limit errors to kUnavailable / kInvalidArgument.
  Status Run(const std::string& sql, std::string_view format, QueryResult* result,
             const std::vector<QueryParam>& params, uint64_t max_rows);

  // The condition on the spans table's timestamp that covers the traces
  // `ids` (the trace index's seconds; "" when none is indexed), and `ids` as
  // the queries' {ids} parameter.
  Status TraceSeconds(const std::vector<TraceId>& ids, std::string* ids_param,
                      std::string* condition);

  // The spans table's column types (name -> type), read once: the span read
  // CASTs only the columns stored in another type than it reads.
  std::unordered_map<std::string, std::string> SpanColumnTypes();
  // layout_ as the spans table stores it: user_fields a Map or the JSON
  // type (a table made before schema 13), for the searches' conditions.
  StorageLayout StoredLayout();

  // The traces `ids` from the trace copy, appended to `out` (empty) as
  // GetTraces orders them; `found`: how many of them, 0 when one may have
  // begun before the copy.
  Status ReadTraceCopy(const std::vector<TraceId>& ids, const std::vector<QueryParam>& id_params,
                       SpanBatch* out, size_t* found);
  // `native` (Native blocks of SpanReadQuery's columns) decoded, its spans'
  // resources attached, and appended to `out` as GetTraces orders them.
  Status DecodeTraces(const std::vector<TraceId>& ids, std::string_view native, SpanBatch* out);

  // Gives the spans of `out` from `first` on the resources `ids` name (one id
  // per span), from the cache or the resources table.
  Status AttachResources(const std::vector<uint64_t>& ids, uint32_t first, SpanBatch* out);

  // The condition on the spans table of a start in [start_ns, end_ns),
  // its values bound as {lo}, {hi}, {start_ns} and {end_ns}; false when the
  // range is empty.
  bool StartRange(uint64_t start_ns, uint64_t end_ns, std::string* where,
                  std::vector<QueryParam>* params) const;
  // The service a span is counted under (see CountSpans).
  std::string ServiceExpr() const;

  SqlConnection& conn_;
  const Capabilities caps_;
  const ReaderLimits limits_;
  const StorageLayout layout_;
  const std::string database_;
  const std::string in_;  // "IN", or "GLOBAL IN" over Distributed tables
  std::atomic<bool> trace_copy_{false};
  std::atomic<uint64_t> copy_since_s_{0};
  std::atomic<uint64_t> copy_answers_{0};
  std::atomic<uint64_t> copy_misses_{0};
  // Resources read so far, by id. An id is a fingerprint of the resource's
  // attributes (ResourceFingerprint), so an entry never goes stale; the
  // cache starts over past limits_.max_cached_resources. Reading them here,
  // not joined into each lookup, saves reading the trace's spans a second
  // time (a third of a lookup).
  std::mutex types_mu_;
  bool types_read_ = false;
  std::unordered_map<std::string, std::string> span_types_;
  std::mutex resources_mu_;
  SpanBatch resources_;                              // one span and resource a row
  std::unordered_map<uint64_t, uint32_t> resource_;  // id -> resource index in resources_
};

}  // namespace spanhouse::storage
