// SpanReader over the span and service indices Jaeger keeps in OpenSearch
// (or Elasticsearch): the documents of jaeger_document.h, queried as Jaeger's
// own Elasticsearch reader queries them, so that the query API answers from a
// cluster that spanhouse or Jaeger wrote.
//
// Indices. A read with a time range (a trace search, dependencies) names the
// daily indices of its days (the wildcard below when the list would be over
// 3000 characters, ~4 months, too long for a request line; startTimeMillis,
// a date, still lets the cluster skip the shards outside the range). A read without one (a trace by
// id, services, operations, counts) names every daily index by default
// (`<base>*-*-*`, which leaves out Jaeger's `-archive` and rollover indices),
// or with max_span_age set those of the days in [now - max_span_age, now],
// as Jaeger does (its default is 72h). Every daily index is the default
// because SpanReader's contract is "every service stored" and "every stored
// span of the trace", as the ClickHouse reader answers: retention is the
// cluster's to enforce (deleting old indices), and the service indices hold
// one small document per (service, operation) and day, cheap to aggregate
// over all of them. Every search has ignore_unavailable and
// allow_no_indices: a day without an index, or a cluster without any,
// answers empty (kNotFound for a trace by id).
//
// Bounds and errors, as ChdbSpanReader's: each search carries the `timeout`
// parameter, and an answer that says it timed out (or a node that did not
// answer within the client's own timeout, OpenSearchOptions::timeout, which
// should be the longer) is kUnavailable with a message for the client; an answer
// over max_spans / max_rows is kInvalidArgument; a cluster that cannot be
// reached is kUnavailable; a refused query, a failed shard or an answer that
// is not what a search answers is kInternal with the cluster's reason (for
// the log: the query API does not show it to clients).
//
// Every value of a request goes into the request's JSON through
// codec::AppendJsonString; names of indices and fields come from code.
//
// What the format cannot answer:
// - GetOperations: the service documents have no span kind. With any_kind the
//   operations are those documents' names, each with kind 0 (unspecified),
//   as Jaeger answers; for one kind they come from the span documents (the
//   span.kind tag; kind 0: spans without one).
// - GetRedSeries / GetRedSummary: kInvalidArgument (service metrics are
//   ClickHouse's tables).
// - CountSpansWithAttr(kUserField): kInvalidArgument (no user_fields column;
//   user-defined attributes are ordinary tags).
// - Tag filters compare a value as the keyword it was indexed as: the text
//   of a number or bool ("200", "true"), exactly (Jaeger matches a regular
//   expression); values over 256 characters are not indexed (the template's
//   ignore_above) and match nothing. A tag may be nested (tags) or a field
//   of `tag` (Jaeger's v2 writer keeps span.kind and error there); both are
//   searched. "error", "otel.status_code" and "span.kind" also match the span
//   fields Jaeger writes as other tags (see TagFilterQuery);
//   "user_fields.<path>" matches the tag <path>.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <simdjson.h>

#include "query/span_reader.h"
#include "storage/opensearch/index_layout.h"
#include "storage/opensearch/opensearch_client.h"

namespace spanhouse::storage::opensearch {

struct ReaderOptions {
  IndexLayout layout;                        // where the documents lie, as the writer's
  uint64_t max_spans = 1000000;              // spans read back by one trace lookup
  uint64_t max_rows = 200000;                // rows of any other answer (buckets, documents)
  std::chrono::milliseconds timeout{30000};  // each search's `timeout`
  // How far back a read without a time range looks (whole UTC days, as
  // Jaeger's --es.max-span-age); zero: every daily index.
  std::chrono::seconds max_span_age{0};
  // Documents one search returns: a trace of more is read in pages
  // (search_after). At most the cluster's index.max_result_window.
  uint64_t page_size = 10000;
};

class OpenSearchReader final : public query::SpanReader {
 public:
  OpenSearchReader(std::shared_ptr<OpenSearchClient> client, ReaderOptions options);

  Status GetTrace(const TraceId& id, SpanBatch* out) override;
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
  // CountSpans / ListSpans: what `spanhouse reconcile` compares with
  // ClickHouse. A span's bucket is its startTimeMillis' (the start truncated
  // to the millisecond, which never crosses a bucket of whole seconds), its
  // service process.serviceName (Jaeger's names for a resource without one:
  // "missing-service-name", ...), its kind the span.kind tag (the field
  // tag.span@kind or a nested tag; none: 0; a value that names no kind is
  // counted under none of them). The range is on startTime, whole
  // microseconds: bounds inside a microsecond are rounded up. CountSpans is a
  // composite aggregation paged with after_key (any number of cells);
  // ListSpans reads the sort values of a search paged with search_after.
  Status CountSpans(const query::SpanCountQuery& query,
                    std::vector<query::SpanCountRow>* out) override;
  Status ListSpans(const query::SpanIdQuery& query, std::vector<query::SpanKey>* out) override;
  Status CountSpansWithAttr(AttrOwner owner, const std::string& key, const std::string& value,
                            uint64_t* count) override;

 private:
  // POSTs a search `body` to <indices>/_search; the answer's text in
  // `answer`. Maps the cluster's errors and a timed-out answer as above.
  Status Search(const std::string& indices, std::string body, std::string* answer);
  // One search read page after page of `page` hits, each page from where
  // the last ended (search_after on `sort`, whose fields must make a
  // position unique). `each` sees every hit in order; an error it returns
  // ends the search. With `max_hits`, more hits than that (counted on the
  // first page) is the row limit's error before any is read.
  struct PagedSearch {
    std::string_view query;  // the "query" object
    std::string_view sort;   // the "sort" array
    uint64_t page = 1;
    uint64_t max_hits = 0;  // 0: not counted
    bool source = true;     // false: the sort values are all that is read
    std::string_view what;  // names the search in errors: "a trace"
  };
  Status SearchPages(const std::string& indices, const PagedSearch& search,
                     const std::function<Status(simdjson::dom::element hit)>& each);
  // The indices of `kind` a read without a time range names.
  std::string UndatedIndices(IndexKind kind) const;
  uint64_t max_buckets() const;

  const std::shared_ptr<OpenSearchClient> client_;
  const ReaderOptions opts_;
};

// ---- the pieces of the requests, exposed for tests ----

// The query of spans of traces `ids`: a terms query on traceID of each id's
// 32 hex digits and, for an id whose first digit is 0, its legacy form
// without leading zeros.
std::string TraceIdsQuery(const std::vector<TraceId>& ids);

// The query of one tag filter: a `bool` whose `should` matches the key and
// value in the nested tags, process.tags and logs.fields, or the object
// fields tag.<key> / process.tag.<key> ('.' written as '@'). Besides:
// - error=true is the error tag (a generic match); error=false: spans
//   without error=true;
// - otel.status_code: OK the tag; ERROR the error tag; UNSET neither;
// - span.kind: the kind in any spelling ParseSpanKind takes, as the lowercase
//   tag Jaeger writes ("unspecified": spans without the tag);
// - user_fields.<path>: the tag <path>.
std::string TagFilterQuery(const query::TagFilter& tag);

// The body of FindTraceIds' search: the bool query of `q` and a terms
// aggregation "traces" on traceID ordered by max startTime, newest first,
// then by id, of `q.limit` buckets.
std::string FindTraceIdsBody(const query::TraceQuery& q);

// A trace id in hex, at most 32 digits (legacy ids lack leading zeros).
bool ParseTraceIdHex(std::string_view hex, TraceId* out);

// The filter of spans started in [start_ns, end_ns), two clauses of a bool
// query's filter list: startTime (whole microseconds) from
// ceil(start_ns / 1000) up to ceil(end_ns / 1000), and startTimeMillis (for
// skipping shards).
std::string StartRangeFilter(uint64_t start_ns, uint64_t end_ns);

// The body of one page of CountSpans: a composite aggregation "cells" of
// (bucket: date_histogram of startTimeMillis, service: terms of
// process.serviceName), `page` of them after `after_key` (JSON; "" for the
// first page), each with a filters aggregation "kinds" of one filter per span
// kind, named by its number.
std::string CountSpansBody(const query::SpanCountQuery& q, uint64_t page,
                           std::string_view after_key);

}  // namespace spanhouse::storage::opensearch
