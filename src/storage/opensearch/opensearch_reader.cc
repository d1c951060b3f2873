#include "storage/opensearch/opensearch_reader.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "codec/json_writer.h"
#include "codec/value_text.h"
#include "storage/opensearch/jaeger_document.h"

namespace spanhouse::storage::opensearch {

namespace {

constexpr uint64_t kNsPerDay = 86400ull * 1000000000ull;
constexpr uint64_t kNsPerS = 1000000000ull;
// Buckets one aggregation may return (search.max_buckets' default).
constexpr uint64_t kMaxBuckets = 65535;
// track_total_hits is an int on the cluster's side.
constexpr uint64_t kMaxTrackedHits = 2147483647;

using simdjson::dom::element;

uint64_t PlusOne(uint64_t v) {
  return v == UINT64_MAX ? v : v + 1;
}

using codec::Commas;

// {"term":{<field>:<value>}}
void AppendTerm(std::string& out, std::string_view field, std::string_view value) {
  out += R"({"term":{)";
  codec::AppendJsonString(out, field);
  out += ':';
  codec::AppendJsonString(out, value);
  out += "}}";
}

// A nested query on the key-values at `path` (tags, process.tags,
// logs.fields): key `key` and, unless `any_value`, value `value`. An index
// without the path (no mapping yet) matches nothing instead of failing.
void AppendNestedKv(std::string& out, std::string_view path, std::string_view key,
                    std::string_view value, bool any_value = false) {
  out += R"({"nested":{"path":")";
  out += path;
  out += R"(","ignore_unmapped":true,"query":)";
  const std::string key_field = std::string(path) + ".key";
  if (any_value) {
    AppendTerm(out, key_field, key);
  } else {
    out += R"({"bool":{"filter":[)";
    AppendTerm(out, key_field, key);
    out += ',';
    AppendTerm(out, std::string(path) + ".value", value);
    out += "]}}";
  }
  out += "}}";
}

// A tag stored as an object field: '.' in its key written as '@'.
std::string ObjectTagField(std::string_view object, std::string_view key) {
  std::string field(object);
  field += '.';
  for (char c : key) field += c == '.' ? '@' : c;
  return field;
}

// {"bool":{"must_not":[<clauses>]}}
std::string MustNot(const std::vector<std::string>& clauses) {
  std::string out = R"({"bool":{"must_not":[)";
  Commas commas(out);
  for (const std::string& c : clauses) {
    commas.Next();
    out += c;
  }
  out += "]}}";
  return out;
}

std::string NestedKv(std::string_view path, std::string_view key, std::string_view value,
                     bool any_value = false) {
  std::string out;
  AppendNestedKv(out, path, key, value, any_value);
  return out;
}

// {"bool":{"should":[...],"minimum_should_match":1}}
std::string AnyOf(const std::vector<std::string>& clauses) {
  std::string out = R"({"bool":{"should":[)";
  Commas commas(out);
  for (const std::string& c : clauses) {
    commas.Next();
    out += c;
  }
  out += R"(],"minimum_should_match":1}})";
  return out;
}

// The span's own tag `key` is `value`: nested in tags, or a field of `tag`
// (where Jaeger's v2 writer, and jaeger_document.h, keep span.kind and error).
std::string SpanTagIs(std::string_view key, std::string_view value) {
  std::string object;
  AppendTerm(object, ObjectTagField("tag", key), value);
  return AnyOf({NestedKv("tags", key, value), object});
}

// The span has its own tag `key`, whatever its value.
std::string SpanHasTag(std::string_view key) {
  std::string exists = R"({"exists":{"field":)";
  codec::AppendJsonString(exists, ObjectTagField("tag", key));
  exists += "}}";
  return AnyOf({NestedKv("tags", key, "", true), exists});
}

std::string TimeLimitMessage(std::chrono::milliseconds timeout) {
  return fmt::format(
      "the query ran past its time limit ({} ms): narrow it (a shorter time range, a service, an "
      "operation or more tags)",
      timeout.count());
}

std::string RowLimitMessage(uint64_t max_rows) {
  return fmt::format(
      "the answer is over the limit of {} rows: ask for fewer traces or a shorter range", max_rows);
}

// The buckets of aggregation `name` in a search answer; false when the
// answer has none (no index matched: no aggregations at all).
bool Buckets(element answer, std::string_view name, simdjson::dom::array* buckets,
             uint64_t* other_docs) {
  element agg;
  if (answer["aggregations"][name].get(agg) != simdjson::SUCCESS) return false;
  if (agg["buckets"].get_array().get(*buckets) != simdjson::SUCCESS) return false;
  uint64_t other = 0;
  if (agg["sum_other_doc_count"].get_uint64().get(other) != simdjson::SUCCESS) other = 0;
  *other_docs = other;
  return true;
}

Status NotASearchAnswer(std::string_view what) {
  return Status::Internal("opensearch: unexpected answer to " + std::string(what));
}

// The string keys of aggregation `name`'s buckets, in the answer's order.
Status BucketKeys(const std::string& answer, std::string_view name, uint64_t max_rows,
                  std::vector<std::string>* out) {
  simdjson::dom::parser parser;
  element doc;
  if (parser.parse(answer).get(doc) != simdjson::SUCCESS) return NotASearchAnswer(name);
  simdjson::dom::array buckets;
  uint64_t other = 0;
  if (!Buckets(doc, name, &buckets, &other)) return Status::Ok();
  if (other > 0 || buckets.size() > max_rows) return Status::Invalid(RowLimitMessage(max_rows));
  for (element b : buckets) {
    std::string_view key;
    if (b["key"].get_string().get(key) != simdjson::SUCCESS) return NotASearchAnswer(name);
    out->emplace_back(key);
  }
  return Status::Ok();
}

// The aggregation body of distinct values of `field`, `size` buckets.
std::string TermsAgg(std::string_view name, std::string_view field, uint64_t size) {
  std::string out = R"({")";
  out += name;
  out += R"(":{"terms":{"field":")";
  out += field;
  out += R"(","size":)";
  codec::AppendUint(out, size);
  out += R"(,"order":{"_key":"asc"}}}})";
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------
// the pieces of the requests

std::string TraceIdsQuery(const std::vector<TraceId>& ids) {
  std::string out = R"({"terms":{"traceID":[)";
  Commas commas(out);
  for (const TraceId& id : ids) {
    const std::string hex = ToHex(id);
    commas.Next();
    codec::AppendJsonString(out, hex);
    // Jaeger wrote ids without leading zeros before 1.16.
    const size_t digits = hex.find_first_not_of('0');
    if (digits != 0 && digits != std::string::npos) {
      commas.Next();
      codec::AppendJsonString(out, std::string_view(hex).substr(digits));
    }
  }
  out += "]}}";
  return out;
}

std::string TagFilterQuery(const query::TagFilter& tag) {
  std::string_view key = tag.key;
  constexpr std::string_view kUserFields = "user_fields.";
  if (key.size() > kUserFields.size() && key.starts_with(kUserFields)) {
    key.remove_prefix(kUserFields.size());
  }
  const std::string_view value = tag.value;
  std::vector<std::string> any = {
      NestedKv("tags", key, value),
      NestedKv("process.tags", key, value),
      NestedKv("logs.fields", key, value),
  };
  for (std::string_view object : {"tag", "process.tag"}) {
    std::string term;
    AppendTerm(term, ObjectTagField(object, key), value);
    any.push_back(std::move(term));
  }
  // Span fields Jaeger's documents show as other tags (jaeger_document.h):
  // the status ERROR as error=true, the kind as span.kind in lowercase.
  const std::string error_tag = SpanTagIs("error", "true");
  if (key == "error" && value == "false") {
    any.push_back(MustNot({error_tag}));
  } else if (key == "otel.status_code") {
    if (value == "ERROR") any.push_back(error_tag);
    if (value == "UNSET") {
      any.push_back(MustNot({error_tag, SpanHasTag("otel.status_code")}));
    }
  } else if (key == "span.kind") {
    uint8_t kind = 0;
    if (!value.empty() && ParseSpanKind(value, &kind)) {
      any.push_back(kind == 0 ? MustNot({SpanHasTag("span.kind")})
                              : SpanTagIs("span.kind", SpanKindName(kind)));
    }
  }
  return AnyOf(any);
}

std::string FindTraceIdsBody(const query::TraceQuery& q) {
  std::string out = R"({"size":0,"track_total_hits":false,"query":{"bool":{"filter":[)";
  // startTimeMillis, a date, lets the cluster skip shards outside the range;
  // startTime (microseconds) is the finer bound. A start in [start_ns,
  // end_ns] is stored truncated to its microsecond.
  out += R"({"range":{"startTimeMillis":{"gte":)";
  codec::AppendUint(out, q.start_ns / 1000000);
  out += R"(,"lte":)";
  codec::AppendUint(out, q.end_ns / 1000000);
  out += R"(,"format":"epoch_millis"}}},{"range":{"startTime":{"gte":)";
  codec::AppendUint(out, q.start_ns / 1000);
  out += R"(,"lte":)";
  codec::AppendUint(out, q.end_ns / 1000);
  out += "}}}";
  if (!q.service.empty()) {
    out += ',';
    AppendTerm(out, "process.serviceName", q.service);
  }
  if (!q.operation.empty()) {
    out += ',';
    AppendTerm(out, "operationName", q.operation);
  }
  if (q.min_duration_ns != 0 || q.max_duration_ns != 0) {
    out += R"(,{"range":{"duration":{)";
    Commas commas(out);
    if (q.min_duration_ns != 0) {
      commas.Next();
      out += R"("gte":)";
      codec::AppendUint(out, q.min_duration_ns / 1000);
    }
    if (q.max_duration_ns != 0) {
      commas.Next();
      out += R"("lte":)";
      codec::AppendUint(out, q.max_duration_ns / 1000);
    }
    out += "}}}";
  }
  for (const query::TagFilter& tag : q.tags) {
    out += ',';
    out += TagFilterQuery(tag);
  }
  out += R"(]}},"aggs":{"traces":{"terms":{"field":"traceID","size":)";
  codec::AppendUint(out, q.limit);
  out += R"(,"order":[{"last":"desc"},{"_key":"asc"}]},)";
  out += R"("aggs":{"last":{"max":{"field":"startTime"}}}}}})";
  return out;
}

std::string StartRangeFilter(uint64_t start_ns, uint64_t end_ns) {
  const auto ceil_us = [](uint64_t ns) { return ns / 1000 + (ns % 1000 != 0 ? 1 : 0); };
  std::string out = R"({"range":{"startTimeMillis":{"gte":)";
  codec::AppendUint(out, start_ns / 1000000);
  out += R"(,"lte":)";
  codec::AppendUint(out, end_ns > 0 ? (end_ns - 1) / 1000000 : 0);
  out += R"(,"format":"epoch_millis"}}},{"range":{"startTime":{"gte":)";
  codec::AppendUint(out, ceil_us(start_ns));
  out += R"(,"lt":)";
  codec::AppendUint(out, ceil_us(end_ns));
  out += "}}}";
  return out;
}

namespace {

// Kinds 0 (no span.kind tag) to 5 (consumer).
constexpr uint8_t kKinds = 6;

// The filter of spans of `kind`; "" for a kind that has no name.
std::string KindFilter(uint8_t kind) {
  if (kind == 0) return MustNot({SpanHasTag("span.kind")});
  const std::string_view name = SpanKindName(kind);
  return name.empty() ? std::string() : SpanTagIs("span.kind", name);
}

// A span id in hex, at most 16 digits (legacy ids lack leading zeros).
bool ParseSpanIdHex(std::string_view hex, SpanId* out) {
  if (hex.empty() || hex.size() > 2 * out->size()) return false;
  std::string padded(2 * out->size() - hex.size(), '0');
  padded += hex;
  return FromHex(padded, out->data(), out->size());
}

}  // namespace

std::string CountSpansBody(const query::SpanCountQuery& q, uint64_t page,
                           std::string_view after_key) {
  std::string out = R"({"size":0,"track_total_hits":false,"query":{"bool":{"filter":[)";
  out += StartRangeFilter(q.start_ns, q.end_ns);
  out += R"(]}},"aggs":{"cells":{"composite":{"size":)";
  codec::AppendUint(out, page);
  out += R"(,"sources":[{"bucket":{"date_histogram":{"field":"startTimeMillis","fixed_interval":")";
  codec::AppendUint(out, q.bucket_s);
  out += R"(s"}}},{"service":{"terms":{"field":"process.serviceName"}}}])";
  if (!after_key.empty()) {
    out += R"(,"after":)";
    out += after_key;
  }
  out += R"(},"aggs":{"kinds":{"filters":{"filters":{)";
  Commas commas(out);
  for (uint8_t k = 0; k < kKinds; ++k) {
    const std::string filter = KindFilter(k);
    if (filter.empty()) continue;
    commas.Next();
    out += '"';
    codec::AppendUint(out, k);
    out += "\":";
    out += filter;
  }
  out += "}}}}}}}";
  return out;
}

bool ParseTraceIdHex(std::string_view hex, TraceId* out) {
  if (hex.empty() || hex.size() > 2 * out->size()) return false;
  std::string padded(2 * out->size() - hex.size(), '0');
  padded += hex;
  return FromHex(padded, out->data(), out->size());
}

// ---------------------------------------------------------------------------
// the reader

OpenSearchReader::OpenSearchReader(std::shared_ptr<OpenSearchClient> client, ReaderOptions options)
    : client_(std::move(client)), opts_(std::move(options)) {}

uint64_t OpenSearchReader::max_buckets() const {
  return std::clamp<uint64_t>(opts_.max_rows, 1, kMaxBuckets);
}

std::string OpenSearchReader::UndatedIndices(IndexKind kind) const {
  if (opts_.max_span_age.count() <= 0) return opts_.layout.AllIndices(kind);
  const auto now = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count());
  const auto age = static_cast<uint64_t>(opts_.max_span_age.count()) * kNsPerS;
  return opts_.layout.ReadIndices(kind, now > age ? now - age : 0, now);
}

Status OpenSearchReader::Search(const std::string& indices, std::string body, std::string* answer) {
  const std::string target =
      fmt::format("/{}/_search?ignore_unavailable=true&allow_no_indices=true&timeout={}ms", indices,
                  opts_.timeout.count());
  const auto began = std::chrono::steady_clock::now();
  net::HttpResult r;
  const bool debug = spdlog::should_log(spdlog::level::debug);
  std::string logged = debug ? body : std::string();
  Status st = client_->Post(target, std::move(body), &r);
  if (debug) {
    spdlog::debug(
        "opensearch: {:.1f} ms, HTTP {}, {} bytes back: POST {} {}",
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count(),
        r.status, r.body.size(), target, logged);
  }
  if (!st.ok()) {
    // No node answered; one that did not answer in time is a slow cluster.
    if (st.message().find("timed out") != std::string::npos) {
      return Status::Unavailable(TimeLimitMessage(opts_.timeout) + " (" + st.message() + ")");
    }
    return st;
  }
  if (r.status == 404) {
    // An index named outright that does not exist: nothing stored there.
    *answer = "{}";
    return Status::Ok();
  }
  if (r.status < 200 || r.status >= 300) {
    const std::string why =
        fmt::format("opensearch {}: HTTP {}: {}", target, r.status, ErrorReason(r.body));
    if (r.status == 429 || r.status == 502 || r.status == 503 || r.status == 504) {
      return Status::Unavailable(why);
    }
    return Status::Internal(why);
  }
  simdjson::dom::parser parser;
  element doc;
  if (parser.parse(r.body).get(doc) != simdjson::SUCCESS || !doc.is_object()) {
    return Status::Internal("opensearch " + target + ": the answer is not JSON");
  }
  bool timed_out = false;
  if (doc["timed_out"].get_bool().get(timed_out) == simdjson::SUCCESS && timed_out) {
    return Status::Unavailable(TimeLimitMessage(opts_.timeout));
  }
  uint64_t failed = 0;
  if (doc["_shards"]["failed"].get_uint64().get(failed) == simdjson::SUCCESS && failed > 0) {
    element failure;
    std::string reason;
    if (doc["_shards"]["failures"].at(0).get(failure) == simdjson::SUCCESS) {
      reason = simdjson::minify(failure);
    }
    return Status::Internal(
        fmt::format("opensearch {}: {} shards failed: {}", target, failed, reason));
  }
  *answer = std::move(r.body);
  return Status::Ok();
}

Status OpenSearchReader::GetTrace(const TraceId& id, SpanBatch* out) {
  const size_t before = out->span_count();
  SH_RETURN_IF_ERROR(GetTraces({id}, out));
  if (out->span_count() == before) return {StatusCode::kNotFound, "trace not found"};
  return Status::Ok();
}

Status OpenSearchReader::SearchPages(const std::string& indices, const PagedSearch& s,
                                     const std::function<Status(element hit)>& each) {
  simdjson::dom::parser parser;
  std::string search_after;
  for (bool first = true;; first = false) {
    std::string body = R"({"size":)";
    codec::AppendUint(body, s.page);
    body += R"(,"track_total_hits":)";
    if (first && s.max_hits != 0) {
      codec::AppendUint(body, std::min(PlusOne(s.max_hits), kMaxTrackedHits));
    } else {
      body += "false";
    }
    if (!s.source) body += R"(,"_source":false)";
    body += R"(,"query":)";
    body += s.query;
    body += R"(,"sort":)";
    body += s.sort;
    if (!search_after.empty()) {
      body += R"(,"search_after":)";
      body += search_after;
    }
    body += '}';
    std::string answer;
    SH_RETURN_IF_ERROR(Search(indices, std::move(body), &answer));
    element doc;
    if (parser.parse(answer).get(doc) != simdjson::SUCCESS) return NotASearchAnswer(s.what);
    uint64_t total = 0;
    if (first && s.max_hits != 0 &&
        doc["hits"]["total"]["value"].get_uint64().get(total) == simdjson::SUCCESS &&
        total > s.max_hits) {
      return Status::Invalid(RowLimitMessage(s.max_hits));
    }
    simdjson::dom::array hits;
    if (doc["hits"]["hits"].get_array().get(hits) != simdjson::SUCCESS) break;  // no index
    size_t n = 0;
    element last;
    for (element hit : hits) {
      SH_RETURN_IF_ERROR(each(hit));
      last = hit;
      ++n;
    }
    if (n < s.page) break;
    element sort;
    if (last["sort"].get(sort) != simdjson::SUCCESS) return NotASearchAnswer(s.what);
    search_after = simdjson::minify(sort);
  }
  return Status::Ok();
}

Status OpenSearchReader::GetTraces(const std::vector<TraceId>& ids, SpanBatch* out) {
  if (ids.empty()) return Status::Ok();
  const std::string query = TraceIdsQuery(ids);
  PagedSearch search;
  search.query = query;
  // Spans by start time; the trace and span ids make each position unique.
  search.sort = R"([{"startTime":{"order":"asc","unmapped_type":"long"}},)"
                R"({"traceID":{"order":"asc","unmapped_type":"keyword"}},)"
                R"({"spanID":{"order":"asc","unmapped_type":"keyword"}}])";
  search.page = std::min(PlusOne(opts_.max_spans), std::max<uint64_t>(opts_.page_size, 1));
  search.max_hits = opts_.max_spans;
  search.what = "a trace";
  SpanBatch found;
  SH_RETURN_IF_ERROR(SearchPages(UndatedIndices(IndexKind::kSpan), search, [&](element hit) {
    element source;
    if (hit["_source"].get(source) != simdjson::SUCCESS) return NotASearchAnswer("a trace");
    if (Status st = AppendSpanFromDocument(simdjson::minify(source), &found); !st.ok()) {
      std::string_view index, id;
      if (hit["_index"].get_string().get(index) != simdjson::SUCCESS) index = "?";
      if (hit["_id"].get_string().get(id) != simdjson::SUCCESS) id = "?";
      return Status::Internal(
          fmt::format("opensearch: document {} of {}: {}", id, index, st.message()));
    }
    if (found.span_count() > opts_.max_spans) {
      return Status::Invalid(RowLimitMessage(opts_.max_spans));
    }
    return Status::Ok();
  }));
  // Traces in the order of `ids`, each one's spans by start time (the order
  // they came in).
  std::map<TraceId, size_t> position;
  for (size_t i = 0; i < ids.size(); ++i) position.emplace(ids[i], i);
  std::vector<std::pair<size_t, uint32_t>> order;
  order.reserve(found.span_count());
  for (uint32_t s = 0; s < found.span_count(); ++s) {
    auto it = position.find(found.spans.trace_id[s]);
    if (it != position.end()) order.emplace_back(it->second, s);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<uint32_t> which;
  which.reserve(order.size());
  for (const auto& [pos, s] : order) which.push_back(s);
  out->AppendSpans(found, which.data(), which.size());
  return Status::Ok();
}

Status OpenSearchReader::FindTraceIds(const query::TraceQuery& q, std::vector<TraceId>* out) {
  out->clear();
  if (q.limit == 0) return Status::Ok();
  std::string answer;
  SH_RETURN_IF_ERROR(Search(opts_.layout.ReadIndices(IndexKind::kSpan, q.start_ns, q.end_ns),
                            FindTraceIdsBody(q), &answer));
  simdjson::dom::parser parser;
  element doc;
  if (parser.parse(answer).get(doc) != simdjson::SUCCESS) return NotASearchAnswer("a search");
  simdjson::dom::array buckets;
  uint64_t other = 0;
  if (!Buckets(doc, "traces", &buckets, &other)) return Status::Ok();
  for (element b : buckets) {
    std::string_view key;
    TraceId id{};
    if (b["key"].get_string().get(key) != simdjson::SUCCESS || !ParseTraceIdHex(key, &id)) {
      continue;
    }
    // A legacy id and its full form are one trace.
    if (std::find(out->begin(), out->end(), id) == out->end()) out->push_back(id);
  }
  return Status::Ok();
}

Status OpenSearchReader::GetServices(std::vector<std::string>* out) {
  out->clear();
  std::string body = R"({"size":0,"track_total_hits":false,"aggs":)";
  body += TermsAgg("services", "serviceName", max_buckets());
  body += '}';
  std::string answer;
  SH_RETURN_IF_ERROR(Search(UndatedIndices(IndexKind::kService), std::move(body), &answer));
  SH_RETURN_IF_ERROR(BucketKeys(answer, "services", opts_.max_rows, out));
  std::sort(out->begin(), out->end());
  return Status::Ok();
}

Status OpenSearchReader::GetOperations(const std::string& service, bool any_kind, uint8_t kind,
                                       std::vector<query::OperationInfo>* out) {
  out->clear();
  std::string body = R"({"size":0,"track_total_hits":false,"query":{"bool":{"filter":[)";
  std::string indices;
  if (any_kind) {
    // The service documents: one per (service, operation) and day.
    AppendTerm(body, "serviceName", service);
    indices = UndatedIndices(IndexKind::kService);
  } else {
    // The span documents, by their span.kind tag.
    if (kind != 0 && SpanKindName(kind).empty()) return Status::Ok();
    AppendTerm(body, "process.serviceName", service);
    body += ',';
    body +=
        kind == 0 ? MustNot({SpanHasTag("span.kind")}) : SpanTagIs("span.kind", SpanKindName(kind));
    indices = UndatedIndices(IndexKind::kSpan);
  }
  body += R"(]}},"aggs":)";
  body += TermsAgg("operations", "operationName", max_buckets());
  body += '}';
  std::string answer;
  SH_RETURN_IF_ERROR(Search(indices, std::move(body), &answer));
  std::vector<std::string> names;
  SH_RETURN_IF_ERROR(BucketKeys(answer, "operations", opts_.max_rows, &names));
  std::sort(names.begin(), names.end());
  for (std::string& name : names) {
    out->push_back({std::move(name), any_kind ? uint8_t{0} : kind, !any_kind});
  }
  return Status::Ok();
}

Status OpenSearchReader::GetDependencies(uint64_t from_s, uint64_t to_s,
                                         std::vector<query::DependencyLink>* out) {
  out->clear();
  if (to_s <= from_s) return Status::Ok();
  // Jaeger's dependency documents: {"timestamp": <RFC 3339>, "dependencies":
  // [{"parent", "child", "callCount"}]}, one per run of its dependency job.
  const uint64_t size = std::max<uint64_t>(std::min(opts_.max_rows, opts_.page_size), 1);
  std::string body = R"({"size":)";
  codec::AppendUint(body, size);
  body += R"(,"track_total_hits":)";
  codec::AppendUint(body, size + 1);
  body += R"(,"query":{"range":{"timestamp":{"gte":)";
  codec::AppendUint(body, from_s * 1000);
  body += R"(,"lt":)";
  codec::AppendUint(body, to_s * 1000);
  body += R"(,"format":"epoch_millis"}}}})";
  std::string answer;
  SH_RETURN_IF_ERROR(Search(
      opts_.layout.ReadIndices(IndexKind::kDependencies, from_s * kNsPerS, to_s * kNsPerS - 1),
      std::move(body), &answer));
  simdjson::dom::parser parser;
  element doc;
  if (parser.parse(answer).get(doc) != simdjson::SUCCESS) return NotASearchAnswer("dependencies");
  uint64_t total = 0;
  if (doc["hits"]["total"]["value"].get_uint64().get(total) == simdjson::SUCCESS && total > size) {
    return Status::Invalid(RowLimitMessage(size));
  }
  simdjson::dom::array hits;
  if (doc["hits"]["hits"].get_array().get(hits) != simdjson::SUCCESS) return Status::Ok();
  std::map<std::pair<std::string, std::string>, uint64_t> calls;
  for (element hit : hits) {
    simdjson::dom::array links;
    if (hit["_source"]["dependencies"].get_array().get(links) != simdjson::SUCCESS) continue;
    for (element link : links) {
      std::string_view parent, child;
      uint64_t n = 0;
      if (link["parent"].get_string().get(parent) != simdjson::SUCCESS ||
          link["child"].get_string().get(child) != simdjson::SUCCESS) {
        continue;
      }
      if (link["callCount"].get_uint64().get(n) != simdjson::SUCCESS) n = 0;
      calls[{std::string(parent), std::string(child)}] += n;
    }
  }
  if (calls.size() > opts_.max_rows) return Status::Invalid(RowLimitMessage(opts_.max_rows));
  for (auto& [link, n] : calls) out->push_back({link.first, link.second, n});
  return Status::Ok();
}

Status OpenSearchReader::GetRedSeries(const query::RedQuery& /*query*/,
                                      std::vector<query::RedSeries>* out) {
  out->clear();
  return Status::Invalid("service metrics come from ClickHouse: switch reads to clickhouse");
}

Status OpenSearchReader::GetRedSummary(const query::RedSummaryQuery& /*query*/,
                                       std::vector<query::RedSummaryRow>* out) {
  out->clear();
  return Status::Invalid("service metrics come from ClickHouse: switch reads to clickhouse");
}

Status OpenSearchReader::CountSpansWithAttr(AttrOwner owner, const std::string& key,
                                            const std::string& value, uint64_t* count) {
  std::string cond;
  switch (owner) {
    case AttrOwner::kUserField:
      return Status::Invalid(
          "user fields are a ClickHouse column: in OpenSearch a user-defined attribute is an "
          "ordinary tag (count it with attr= or resource_attr=)");
    case AttrOwner::kSpan:
      cond = SpanTagIs(key, value);
      break;
    case AttrOwner::kResource: {
      // The resource's service.name is the process's serviceName.
      std::string object;
      AppendTerm(object,
                 key == "service.name" ? std::string("process.serviceName")
                                       : ObjectTagField("process.tag", key),
                 value);
      cond = AnyOf({NestedKv("process.tags", key, value), object});
      break;
    }
  }
  std::string body = R"({"size":0,"track_total_hits":true,"query":)";
  body += cond;
  body += '}';
  std::string answer;
  SH_RETURN_IF_ERROR(Search(UndatedIndices(IndexKind::kSpan), std::move(body), &answer));
  simdjson::dom::parser parser;
  element doc;
  if (parser.parse(answer).get(doc) != simdjson::SUCCESS) return NotASearchAnswer("a count");
  uint64_t n = 0;
  if (doc["hits"]["total"]["value"].get_uint64().get(n) != simdjson::SUCCESS) n = 0;
  *count = n;
  return Status::Ok();
}

Status OpenSearchReader::CountSpans(const query::SpanCountQuery& q,
                                    std::vector<query::SpanCountRow>* out) {
  out->clear();
  // Whole seconds, and at most a century (as ChdbSpanReader's).
  constexpr uint64_t kMaxBucketS = 100ull * 366 * 86400;
  if (q.bucket_s == 0 || q.bucket_s > kMaxBucketS) {
    return Status::Invalid(
        fmt::format("the bucket must be from 1 s to {} s, not {}", kMaxBucketS, q.bucket_s));
  }
  if (q.end_ns <= q.start_ns) return Status::Ok();
  const std::string indices = opts_.layout.ReadIndices(IndexKind::kSpan, q.start_ns, q.end_ns - 1);
  // Each cell is a bucket and its kinds' buckets: a page stays within the
  // cluster's search.max_buckets.
  const uint64_t page =
      std::clamp<uint64_t>(std::min(opts_.page_size, max_buckets() / (kKinds + 1)), 1, 1000);
  simdjson::dom::parser parser;
  std::string after_key;
  for (;;) {
    std::string answer;
    SH_RETURN_IF_ERROR(Search(indices, CountSpansBody(q, page, after_key), &answer));
    element doc;
    if (parser.parse(answer).get(doc) != simdjson::SUCCESS) return NotASearchAnswer("a count");
    element cells;
    if (doc["aggregations"]["cells"].get(cells) != simdjson::SUCCESS) break;  // no index
    simdjson::dom::array buckets;
    if (cells["buckets"].get_array().get(buckets) != simdjson::SUCCESS) {
      return NotASearchAnswer("a count");
    }
    size_t n = 0;
    for (element b : buckets) {
      ++n;
      element key_ms;
      std::string_view service;
      if (b["key"]["bucket"].get(key_ms) != simdjson::SUCCESS ||
          b["key"]["service"].get_string().get(service) != simdjson::SUCCESS) {
        return NotASearchAnswer("a count");
      }
      int64_t ms = 0;
      double ms_double = 0;
      if (key_ms.get_int64().get(ms) != simdjson::SUCCESS) {
        if (key_ms.get_double().get(ms_double) != simdjson::SUCCESS) {
          return NotASearchAnswer("a count");
        }
        ms = static_cast<int64_t>(ms_double);
      }
      for (uint8_t k = 0; k < kKinds; ++k) {
        char name[4];
        auto res = std::to_chars(name, name + sizeof(name), k);
        uint64_t spans = 0;
        if (b["kinds"]["buckets"][std::string_view(name, res.ptr - name)]["doc_count"]
                    .get_uint64()
                    .get(spans) != simdjson::SUCCESS ||
            spans == 0) {
          continue;
        }
        if (out->size() >= opts_.max_rows) return Status::Invalid(RowLimitMessage(opts_.max_rows));
        out->push_back({static_cast<uint64_t>(std::max<int64_t>(ms, 0)) / 1000,
                        std::string(service), k, spans});
      }
    }
    element after;
    if (n < page || cells["after_key"].get(after) != simdjson::SUCCESS) break;
    after_key = simdjson::minify(after);
  }
  // The cluster orders the keys as std::string does (by their bytes); sorted
  // here with the kinds.
  std::sort(out->begin(), out->end(), [](const auto& a, const auto& b) {
    return std::tie(a.bucket_s, a.service, a.kind) < std::tie(b.bucket_s, b.service, b.kind);
  });
  return Status::Ok();
}

Status OpenSearchReader::ListSpans(const query::SpanIdQuery& q, std::vector<query::SpanKey>* out) {
  out->clear();
  if (q.service.empty() || q.end_ns <= q.start_ns) return Status::Ok();
  std::string query = R"({"bool":{"filter":[)";
  query += StartRangeFilter(q.start_ns, q.end_ns);
  query += ',';
  AppendTerm(query, "process.serviceName", q.service);
  if (!q.any_kind) {
    const std::string kind = KindFilter(q.kind);
    if (kind.empty()) return Status::Ok();
    query += ',';
    query += kind;
  }
  query += "]}}";
  PagedSearch search;
  search.query = query;
  search.sort = R"([{"traceID":{"order":"asc","unmapped_type":"keyword"}},)"
                R"({"spanID":{"order":"asc","unmapped_type":"keyword"}},)"
                R"({"startTime":{"order":"asc","unmapped_type":"long"}}])";
  search.page = std::clamp<uint64_t>(opts_.page_size, 1, uint64_t{q.limit} + 1);
  search.source = false;  // the ids are the sort values: no document is read
  search.what = "a span list";
  Status st = SearchPages(opts_.layout.ReadIndices(IndexKind::kSpan, q.start_ns, q.end_ns - 1),
                          search, [&](element hit) {
                            std::string_view trace;
                            std::string_view span;
                            query::SpanKey key;
                            if (hit["sort"].at(0).get_string().get(trace) != simdjson::SUCCESS ||
                                hit["sort"].at(1).get_string().get(span) != simdjson::SUCCESS ||
                                !ParseTraceIdHex(trace, &key.trace_id) ||
                                !ParseSpanIdHex(span, &key.span_id)) {
                              return NotASearchAnswer("a span list");
                            }
                            out->push_back(key);
                            if (out->size() > q.limit) {
                              return Status::Invalid(fmt::format(
                                  "more than {} spans of service {} in the range: ask for a "
                                  "shorter range or a higher limit",
                                  q.limit, q.service));
                            }
                            return Status::Ok();
                          });
  if (!st.ok()) {
    out->clear();
    return st;
  }
  // Legacy ids (no leading zeros) sort apart from full ones in the index.
  std::sort(out->begin(), out->end());
  return Status::Ok();
}

}  // namespace spanhouse::storage::opensearch
