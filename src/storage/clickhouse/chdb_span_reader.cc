#include "storage/clickhouse/chdb_span_reader.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "model/service_name.h"
#include "storage/clickhouse/insert_errors.h"
#include "storage/clickhouse/span_block.h"
#include "storage/clickhouse/trace_copy.h"

namespace spanhouse::storage {

namespace {

constexpr int kTimeoutExceeded = 159;          // TIMEOUT_EXCEEDED
constexpr int kTooManyRows = 396;              // TOO_MANY_ROWS_OR_BYTES
constexpr uint64_t kMaxDateTime = 4294967295;  // DateTime is a UInt32 of seconds
constexpr uint64_t kNsPerS = 1000000000;

uint64_t ToU64(std::string_view s) {
  uint64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

double ToDouble(std::string_view s) {
  double v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

// "[1.5,2,3]" (a TSV array of numbers) -> its values.
std::vector<double> ToDoubles(std::string_view s) {
  std::vector<double> out;
  if (s.size() < 2) return out;
  s = s.substr(1, s.size() - 2);
  while (!s.empty()) {
    const size_t comma = s.find(',');
    out.push_back(ToDouble(s.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

// The trace ids of the {ids} parameter (hex) as a set. The ids are made
// FixedString(16) before the set is built: a set of Strings loses an id's
// trailing zero bytes when the engine compares it with the FixedString
// column (an id ending in 00 was not found).
constexpr const char* kIdSet = "SELECT toFixedString(unhex(arrayJoin({ids:Array(String)})), 16)";

std::string Seconds(uint64_t s) {
  return std::to_string(std::min(s, kMaxDateTime));
}

// The bound Array(String) value of hex trace ids. Only for text the engine
// needs no escaping for: ChdbConnection escapes each value as a TSV field,
// but the engine reads an array's quoted elements with their own escapes,
// so a user's string (a quote, a backslash) goes in a String parameter of
// its own (ParamList).
std::string HexArray(const std::vector<TraceId>& ids) {
  std::string out = "[";
  for (const TraceId& id : ids)
    fmt::format_to(std::back_inserter(out), "{}'{}'", out.size() > 1 ? "," : "", ToHex(id));
  out += ']';
  return out;
}

// "{p0:String}, {p1:String}, ..." binding each of `values` as its own
// parameter.
std::string ParamList(std::string_view prefix, const std::vector<std::string>& values,
                      std::vector<QueryParam>* params) {
  std::string list;
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string name = fmt::format("{}{}", prefix, i);
    list += fmt::format("{}{{{}:String}}", i == 0 ? "" : ", ", name);
    params->emplace_back(name, values[i]);
  }
  return list;
}

template <typename T>
std::string NumberArray(const std::vector<T>& values) {
  std::string out = "[";
  for (const T& v : values) out += fmt::format("{}{}", out.size() > 1 ? "," : "", uint64_t{v});
  out += ']';
  return out;
}

// The user field `key` as the JSON column's own subcolumn,
// user_fields.`app.channel`, which the engine reads alone (~27 ms over an
// hour of the 50M store), where getSubcolumn(user_fields, {param}) reads
// every path of the column (~116 ms): empty unless the engine has the JSON
// type and `key` is a plain path, ASCII letters, digits, '_' and '-' in
// segments joined by single dots (nothing that could end the quoted
// identifier or mean more than one path).
std::string UserFieldColumn(const Capabilities& caps, std::string_view key) {
  if (!caps.json_type || key.empty() || key.size() > 256) return {};
  char prev = '.';
  for (const char c : key) {
    const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-';
    if (!word && (c != '.' || prev == '.')) return {};
    prev = c;
  }
  if (prev == '.') return {};
  return fmt::format("user_fields.`{}`", key);
}

// A user field's value as text, and whether the span has it; `param` names
// the bound path, `key` is its value. A map (StorageLayout::user_fields_map)
// is read whole and looked up by the bound key.
std::string UserFieldText(const Capabilities& caps, const StorageLayout& layout,
                          std::string_view param, std::string_view key) {
  if (caps.json_type && layout.user_fields_map) {
    return fmt::format("user_fields[{{{}:String}}]", param);
  }
  if (const std::string column = UserFieldColumn(caps, key); !column.empty()) {
    return fmt::format("toString({})", column);
  }
  if (caps.json_type) {
    return fmt::format("toString(getSubcolumn(user_fields, {{{}:String}}))", param);
  }
  // Before the JSON functions: the flat object's key found in its text.
  return fmt::format("{}(user_fields, {{{}:String}})",
                     caps.json_functions ? "JSONExtractString" : "visitParamExtractString", param);
}
std::string UserFieldPresent(const Capabilities& caps, const StorageLayout& layout,
                             std::string_view param, std::string_view key) {
  if (caps.json_type && layout.user_fields_map) {
    return fmt::format("mapContains(user_fields, {{{}:String}})", param);
  }
  if (const std::string column = UserFieldColumn(caps, key); !column.empty()) {
    return fmt::format("isNotNull({})", column);
  }
  if (caps.json_type) {
    return fmt::format("isNotNull(getSubcolumn(user_fields, {{{}:String}}))", param);
  }
  return fmt::format("{}(user_fields, {{{}:String}})",
                     caps.json_functions ? "JSONHas" : "visitParamHas", param);
}

// The attribute arrays of a table have key {k} with value {v}.
std::string AttrEquals(std::string_view k, std::string_view v) {
  return fmt::format(
      "(has(attr_keys, {{{0}:String}}) AND attr_values[indexOf(attr_keys, "
      "{{{0}:String}})] = {{{1}:String}})",
      k, v);
}

// Spans with attribute {k} = {v} where a marked value (attr_types has
// `mark`) is `marked_value` and the others are in attr_values.
std::string MarkedAttrEquals(std::string_view k, std::string_view v, uint8_t mark,
                             std::string_view marked_value) {
  return fmt::format(
      "(has(attr_keys, {{{0}:String}}) AND if(bitAnd(attr_types[indexOf(attr_keys, "
      "{{{0}:String}})], {2}) = 0, attr_values[indexOf(attr_keys, {{{0}:String}})], {3}) = "
      "{{{1}:String}})",
      k, v, static_cast<int>(mark), marked_value);
}

// The span's own attributes have key {k} with value {v}. A value the arrays
// leave to user_fields (its type marked kTypeInUserFields, schema 5) is
// compared as the engine prints it. `key` is {k}'s value. A key in the
// built-in semantic-convention namespaces is never a user field (the
// configuration only adds namespaces to them), so its value is always in
// the arrays: the condition then reads neither attr_types nor user_fields
// (the scan of a service + span-tag search over an hour of the 50M store:
// 133 -> 108 ms in chDB).
std::string SpanAttrEquals(const Capabilities& caps, const StorageLayout& layout,
                           std::string_view k, std::string_view v, std::string_view key) {
  if (const int column = AttrColumnOf(key); column >= 0 && AttrColumnsStored(caps, layout)) {
    // A key with an attribute column (schema 12): its value there where
    // attr_types marks it, in the arrays in rows stored before.
    return MarkedAttrEquals(k, v, kTypeInAttrColumn, AttrColumnKeys()[column].column);
  }
  if (!caps.json_type || !UserFields::Default().IsUserField(key)) return AttrEquals(k, v);
  return MarkedAttrEquals(k, v, kTypeInUserFields, UserFieldText(caps, layout, k, key));
}

// Spans whose resource has attribute {k} = {v}: the resources table first
// (one row per distinct resource), then the spans that carry them.
std::string ResourceAttrEquals(std::string_view db, std::string_view in, std::string_view k,
                               std::string_view v) {
  return fmt::format("resource_id {} (SELECT resource_id FROM {}.resources WHERE {})", in, db,
                     AttrEquals(k, v));
}

// The condition of one tag filter, its key and value bound as {k<i>} and
// {v<i>}: the span's attributes or its resource's, or (keys Jaeger derives
// from span fields) the field the tag shows.
std::string TagCondition(const Capabilities& caps, const StorageLayout& layout, std::string_view db,
                         std::string_view in, const query::TagFilter& tag, size_t i,
                         std::vector<QueryParam>* params) {
  const std::string k = fmt::format("k{}", i);
  const std::string v = fmt::format("v{}", i);
  constexpr std::string_view kUserFields = "user_fields.";
  if (tag.key.size() > kUserFields.size() && tag.key.starts_with(kUserFields)) {
    const std::string_view path = std::string_view(tag.key).substr(kUserFields.size());
    params->emplace_back(k, std::string(path));
    params->emplace_back(v, tag.value);
    return fmt::format("({} AND {} = {{{}:String}})", UserFieldPresent(caps, layout, k, path),
                       UserFieldText(caps, layout, k, path), v);
  }
  params->emplace_back(k, tag.key);
  params->emplace_back(v, tag.value);
  const std::string generic = fmt::format("({} OR {})", SpanAttrEquals(caps, layout, k, v, tag.key),
                                          ResourceAttrEquals(db, in, k, v));
  // Tags the Jaeger JSON derives from span fields (jaeger_json.h).
  std::string field;
  if (tag.key == "error") {
    if (tag.value == "true") field = "status_code = 2";
    if (tag.value == "false") field = "status_code != 2";
  } else if (tag.key == "otel.status_code") {
    if (tag.value == "ERROR") field = "status_code = 2";
    if (tag.value == "OK") field = "status_code = 1";
    if (tag.value == "UNSET") field = "status_code = 0";
  } else if (tag.key == "span.kind") {
    uint8_t kind = 0;
    if (ParseSpanKind(tag.value, &kind) && !tag.value.empty()) {
      field = fmt::format("kind = {}", kind);
    }
  } else if (tag.key == "otel.status_description") {
    field = fmt::format("status_message = {{{}:String}}", v);
  } else if (tag.key == "otel.scope.name") {
    field = fmt::format("scope_name = {{{}:String}}", v);
  } else if (tag.key == "otel.scope.version") {
    field = fmt::format("scope_version = {{{}:String}}", v);
  }
  return field.empty() ? generic : fmt::format("(({}) OR {})", field, generic);
}

// The RED table a query per operation, or per service, reads.
const char* RedTable(bool per_operation) {
  return per_operation ? "red_1m" : "red_service_1m";
}

// The aggregate over red_1m's sum columns (SimpleAggregateFunction, or a
// state on servers without it).
std::string SumOf(const Capabilities& caps, std::string_view column) {
  return fmt::format("{}({})", caps.simple_aggregate ? "sum" : "sumMerge", column);
}

}  // namespace

Status ReaderError(const Status& engine_error, const ReaderLimits& limits, uint64_t max_rows) {
  switch (ClickHouseErrorCode(engine_error.message())) {
    case kTimeoutExceeded:
      return Status::Unavailable(
          fmt::format("the query ran past its time limit ({} s): narrow it (a shorter time range, "
                      "a service, an operation or more tags)",
                      limits.max_execution_s));
    case kTooManyRows:
      return Status::Invalid(fmt::format(
          "the answer is over the limit of {} rows: ask for fewer traces or a shorter range",
          max_rows));
    default:
      return {engine_error.code() == StatusCode::kUnavailable ? StatusCode::kUnavailable
                                                              : StatusCode::kInternal,
              engine_error.message()};
  }
}

// The engine compiles an expression, an aggregation or a sort (LLVM) the
// fourth time it sees it, within the query that sees it: a 7-day RED query
// of ~12 ms took 90-150 ms that once (its CompileExpressionsMicroseconds
// ~111 ms), the stall behind the RED and trace-lookup p99s. Compiled code
// gains nothing measurable on queries of this size (the same RED query:
// median 11.4-14.0 ms without, 11.6-12.1 with), so the reader never asks
// for it. Inserts and their views keep the engine's default.
constexpr std::string_view kNoJit =
    "compile_expressions = 0, compile_aggregate_expressions = 0, compile_sort_description = 0";

Status ChdbSpanReader::Run(const std::string& sql, std::string_view format, QueryResult* result,
                           const std::vector<QueryParam>& params, uint64_t max_rows) {
  // A statement's own SETTINGS clause (the last, outside any subquery) is
  // extended: older servers take one clause only.
  const size_t own = sql.rfind(" SETTINGS ");
  const bool has_settings = own != std::string::npos && sql.find(')', own) == std::string::npos;
  const std::string bounded = fmt::format(
      "{}{} max_execution_time = {}, timeout_overflow_mode = 'throw', max_result_rows = "
      "{}, result_overflow_mode = 'throw'{}{}",
      sql, has_settings ? "," : " SETTINGS", limits_.max_execution_s, max_rows,
      caps_.jit_settings ? ", " : "", caps_.jit_settings ? kNoJit : "");
  const auto began = std::chrono::steady_clock::now();
  Status st = conn_.Query(bounded, format, result, params);
  if (spdlog::should_log(spdlog::level::debug)) {
    std::string bound;
    for (const auto& [name, value] : params) bound += fmt::format(" {}={}", name, value);
    spdlog::debug(
        "query: {:.1f} ms, {} bytes out: {};{}",
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count(),
        result != nullptr ? result->data.size() : 0, bounded, bound);
  }
  return st.ok() ? st : ReaderError(st, limits_, max_rows);
}

std::vector<uint32_t> TraceOrder(const SpanBatch& batch, const std::vector<TraceId>& ids) {
  std::unordered_map<TraceId, uint32_t, TraceIdHash> rank;
  for (const TraceId& id : ids) rank.try_emplace(id, static_cast<uint32_t>(rank.size()));
  const SpanBatch::Spans& sp = batch.spans;
  std::vector<std::pair<uint32_t, uint32_t>> keyed;  // (rank, span)
  keyed.reserve(batch.span_count());
  for (uint32_t i = 0; i < batch.span_count(); ++i) {
    auto it = rank.find(sp.trace_id[i]);
    if (it != rank.end()) keyed.emplace_back(it->second, i);
  }
  std::sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return std::tie(a.first, sp.start_ns[a.second], sp.span_id[a.second]) <
           std::tie(b.first, sp.start_ns[b.second], sp.span_id[b.second]);
  });
  std::vector<uint32_t> order;
  order.reserve(keyed.size());
  for (const auto& k : keyed) order.push_back(k.second);
  return order;
}

std::string TraceSecondsCondition(std::vector<std::pair<uint64_t, uint64_t>> ranges,
                                  size_t max_ranges) {
  constexpr uint64_t kMaxTraceSeconds = 48 * 3600;
  for (auto& [first, last] : ranges) last = std::clamp(last, first, first + kMaxTraceSeconds);
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<uint64_t, uint64_t>> joined;
  for (const auto& r : ranges) {
    if (!joined.empty() && r.first <= joined.back().second + 1) {
      joined.back().second = std::max(joined.back().second, r.second);
    } else {
      joined.push_back(r);
    }
  }
  if (joined.empty()) return "0";
  // Past max_ranges: the (n - max_ranges) smallest gaps closed (every gap
  // below the largest of them, and of those equal to it the first ones), so
  // the condition stays short for a lookup of many traces.
  if (max_ranges == 0) max_ranges = 1;
  if (joined.size() > max_ranges) {
    std::vector<uint64_t> gaps;
    for (size_t i = 1; i < joined.size(); ++i) {
      gaps.push_back(joined[i].first - joined[i - 1].second);
    }
    const size_t close = joined.size() - max_ranges;
    std::vector<uint64_t> sorted = gaps;
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<ptrdiff_t>(close - 1),
                     sorted.end());
    const uint64_t limit = sorted[close - 1];
    size_t equal_left =
        close - static_cast<size_t>(
                    std::count_if(gaps.begin(), gaps.end(), [&](uint64_t g) { return g < limit; }));
    std::vector<std::pair<uint64_t, uint64_t>> fewer = {joined[0]};
    for (size_t i = 1; i < joined.size(); ++i) {
      const bool join = gaps[i - 1] < limit || (gaps[i - 1] == limit && equal_left > 0);
      if (join && gaps[i - 1] == limit) --equal_left;
      if (join) {
        fewer.back().second = joined[i].second;
      } else {
        fewer.push_back(joined[i]);
      }
    }
    joined.swap(fewer);
  }
  std::string out = "(";
  for (const auto& [first, last] : joined) {
    out += fmt::format("{}timestamp BETWEEN {} AND {}", out.size() > 1 ? " OR " : "", first, last);
  }
  return out + ")";
}

Status ChdbSpanReader::GetTrace(const TraceId& id, SpanBatch* out) {
  const size_t before = out->span_count();
  if (Status st = GetTraces({id}, out); !st.ok()) return st;
  if (out->span_count() == before) return {StatusCode::kNotFound, "trace not found"};
  return Status::Ok();
}

Status ChdbSpanReader::TraceSeconds(const std::vector<TraceId>& ids, std::string* ids_param,
                                    std::string* condition) {
  // The trace index says which seconds hold each trace, so the spans table
  // is read only in those, where its key (second, trace id) finds the
  // traces' granules (an older layout's (hour, trace id) too: the engine
  // takes a range of seconds as one of hours).
  condition->clear();
  *ids_param = HexArray(ids);
  if (ids.empty()) return Status::Ok();
  QueryResult r;
  const bool one = ids.size() == 1;
  Status st = Run(TraceRangeQuery(layout_, database_, caps_.simple_aggregate, one), "TSV", &r,
                  {one ? QueryParam{"id", ToHex(ids[0])} : QueryParam{"ids", *ids_param}},
                  limits_.max_rows);
  if (!st.ok()) return st;
  std::vector<std::pair<uint64_t, uint64_t>> seconds;
  for (const auto& row : TsvRows(r.data)) {
    if (row.size() == 2) seconds.emplace_back(ToU64(row[0]), ToU64(row[1]));
  }
  if (!seconds.empty()) *condition = TraceSecondsCondition(std::move(seconds));
  return Status::Ok();
}

Status ChdbSpanReader::GetTraces(const std::vector<TraceId>& ids, SpanBatch* out) {
  if (ids.empty()) return Status::Ok();
  const bool one = ids.size() == 1;
  const std::vector<QueryParam> id_params = {one ? QueryParam{"id", ToHex(ids[0])}
                                                 : QueryParam{"ids", HexArray(ids)}};
  if (trace_copy_) {
    // One query of the copy; every id found there is the answer, else the
    // spans table is read as below (a trace older than the copy keeps).
    SpanBatch copy;
    size_t found = 0;
    if (Status st = ReadTraceCopy(ids, id_params, &copy, &found); !st.ok()) return st;
    (found == ids.size() ? copy_answers_ : copy_misses_).fetch_add(1, std::memory_order_relaxed);
    if (found == ids.size()) {
      if (out->empty()) {
        *out = std::move(copy);
      } else {
        std::vector<uint32_t> all(copy.span_count());
        for (uint32_t i = 0; i < all.size(); ++i) all[i] = i;
        out->AppendSpans(copy, all.data(), all.size());
      }
      return Status::Ok();
    }
  }
  std::string ids_param, seconds;
  Status st = TraceSeconds(ids, &ids_param, &seconds);
  if (!st.ok() || seconds.empty()) return st;
  QueryResult r;
  // One id: compared without a set (~1 ms less planning of a ~10 ms lookup).
  st = Run(
      SpanReadQuery(
          caps_, layout_,
          one ? fmt::format("{} AND trace_id = toFixedString(unhex({{id:String}}), 16)", seconds)
              : fmt::format("{} AND trace_id IN ({})", seconds, kIdSet),
          database_, SpanColumnTypes(), one),
      "Native", &r, id_params, limits_.max_spans);
  if (!st.ok()) return st;
  return DecodeTraces(ids, r.data, out);
}

Status ChdbSpanReader::ReadTraceCopy(const std::vector<TraceId>& ids,
                                     const std::vector<QueryParam>& id_params, SpanBatch* out,
                                     size_t* found) {
  *found = 0;
  if (std::find(ids.begin(), ids.end(), TraceId{}) != ids.end()) return Status::Ok();
  const auto columns = TraceCopyColumns(caps_, SpanColumnTypes());
  if (columns.empty()) return Status::Ok();
  QueryResult r;
  Status st = Run(TraceCopyRowsQuery(database_, ids.size() == 1), "RowBinary", &r, id_params,
                  limits_.max_spans);
  if (!st.ok()) return st;
  std::string native;
  if (st = CopyRowsToNative(r.data, columns, ids, &native); !st.ok()) return st;
  if (st = DecodeTraces(ids, native, out); !st.ok()) return st;
  // Taken only when each trace's first span there began well after the
  // copy did (kTraceCopyMarginS): none of its spans was stored before.
  std::unordered_map<TraceId, uint64_t, TraceIdHash> first_ns;
  for (uint32_t i = 0; i < out->span_count(); ++i) {
    auto [it, fresh] = first_ns.try_emplace(out->spans.trace_id[i], out->spans.start_ns[i]);
    if (!fresh) it->second = std::min(it->second, out->spans.start_ns[i]);
  }
  const uint64_t trusted_ns = (copy_since_s_ + kTraceCopyMarginS) * 1000000000ull;
  for (const auto& [id, ns] : first_ns) {
    if (ns < trusted_ns) return Status::Ok();
  }
  *found = first_ns.size();
  return Status::Ok();
}

Status ChdbSpanReader::DecodeTraces(const std::vector<TraceId>& ids, std::string_view native,
                                    SpanBatch* out) {
  SpanBatch got;
  std::vector<uint64_t> resource_ids;
  Status st = DecodeSpanBlocks(native, &got, &resource_ids);
  if (!st.ok()) return st;
  if (st = AttachResources(resource_ids, 0, &got); !st.ok()) return st;
  const std::vector<uint32_t> order = TraceOrder(got, ids);
  // One trace is nearly always read in its order already (the table's key
  // after the second is the start time): then the batch is taken whole.
  bool identity = out->empty() && order.size() == got.span_count();
  for (uint32_t i = 0; identity && i < order.size(); ++i) identity = order[i] == i;
  if (identity) {
    *out = std::move(got);
  } else {
    out->AppendSpans(got, order.data(), order.size());
  }
  return Status::Ok();
}

StorageLayout ChdbSpanReader::StoredLayout() {
  StorageLayout layout = layout_;
  if (layout.user_fields_map && caps_.json_type) {
    // A spans table made before schema 13 keeps user_fields as the JSON type.
    const auto types = SpanColumnTypes();
    const auto it = types.find("user_fields");
    if (it != types.end()) layout.user_fields_map = it->second.starts_with("Map(");
  }
  return layout;
}

std::unordered_map<std::string, std::string> ChdbSpanReader::SpanColumnTypes() {
  std::lock_guard<std::mutex> lock(types_mu_);
  if (types_read_) return span_types_;
  QueryResult r;
  // Failing, every column is CAST (as before) and the types are asked again.
  Status st =
      Run("SELECT name, type FROM system.columns WHERE database = {db:String} AND table = "
          "'spans'",
          "TSV", &r, {{"db", database_}}, limits_.max_rows);
  if (!st.ok()) {
    spdlog::warn("span reader: the spans table's column types: {}", st.message());
    return span_types_;
  }
  for (const auto& row : TsvRows(r.data)) {
    if (row.size() == 2) span_types_.emplace(row[0], row[1]);
  }
  types_read_ = true;
  return span_types_;
}

Status ChdbSpanReader::SpanKeysOfTraces(const std::vector<TraceId>& ids,
                                        std::vector<query::SpanKey>* out) {
  std::string ids_param, seconds;
  Status st = TraceSeconds(ids, &ids_param, &seconds);
  if (!st.ok() || seconds.empty()) return st;
  QueryResult r;
  st = Run(fmt::format("SELECT lower(hex(trace_id)), lower(hex(span_id)) FROM {}.spans WHERE {} "
                       "AND trace_id IN ({})",
                       database_, seconds, kIdSet),
           "TSV", &r, {{"ids", ids_param}}, limits_.max_spans);
  if (!st.ok()) return st;
  for (const auto& row : TsvRows(r.data)) {
    query::SpanKey k;
    if (row.size() == 2 && FromHex(row[0], k.trace_id.data(), 16) &&
        FromHex(row[1], k.span_id.data(), 8)) {
      out->push_back(k);
    }
  }
  return Status::Ok();
}

Status ChdbSpanReader::AttachResources(const std::vector<uint64_t>& ids, uint32_t first,
                                       SpanBatch* out) {
  std::lock_guard<std::mutex> lock(resources_mu_);
  std::vector<uint64_t> missing;
  for (uint64_t id : ids) {
    if (!resource_.contains(id)) missing.push_back(id);
  }
  if (!missing.empty()) {
    if (resource_.size() + missing.size() > limits_.max_cached_resources) {
      // Starting over: every resource of these spans is read again.
      resources_ = SpanBatch();
      resource_.clear();
      missing = ids;
    }
    std::sort(missing.begin(), missing.end());
    missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
    // The first read also takes the resources seen last: later lookups
    // then rarely miss one (each miss was one more query, ~3 ms).
    const size_t recent = resource_.empty() ? limits_.max_cached_resources / 8 : 0;
    QueryResult r;
    Status st = Run(ResourceReadQuery(caps_, database_, recent, in_), "Native", &r,
                    {{"resource_ids", NumberArray(missing)}}, missing.size() + recent);
    if (!st.ok()) return st;
    const auto before = static_cast<uint32_t>(resources_.span_count());
    std::vector<uint64_t> found;
    if (st = DecodeSpanBlocks(r.data, &resources_, &found); !st.ok()) return st;
    for (size_t k = 0; k < found.size(); ++k) {
      resource_.emplace(found[k], resources_.spans.resource[before + k]);
    }
  }
  // A span whose resource the table lacks keeps an empty one, as before
  // resources had a table of their own.
  for (size_t k = 0; k < ids.size(); ++k) {
    auto it = resource_.find(ids[k]);
    if (it == resource_.end()) continue;
    const uint32_t from = it->second;
    const uint32_t to = out->spans.resource[first + k];
    const Range attrs = resources_.resources.attrs[from];
    const auto begin = static_cast<uint32_t>(out->resource_attrs.size());
    for (uint32_t a = attrs.begin; a < attrs.end; ++a) {
      SpanBatch::AddAttr(out->resource_attrs,
                         out->AddString(resources_.Str(resources_.resource_attrs.key[a])),
                         resources_.resource_attrs.type[a],
                         out->AddString(resources_.Str(resources_.resource_attrs.value[a])));
    }
    out->resources.attrs[to] = {begin, static_cast<uint32_t>(out->resource_attrs.size())};
    out->resources.dropped_attributes_count[to] =
        resources_.resources.dropped_attributes_count[from];
    out->resources.schema_url[to] =
        out->AddString(resources_.Str(resources_.resources.schema_url[from]));
  }
  return Status::Ok();
}

Status ChdbSpanReader::FindTraceIds(const query::TraceQuery& q, std::vector<TraceId>* out) {
  out->clear();
  const std::string start_ns =
      caps_.datetime64 ? "toUnixTimestamp64Nano(start_time)" : "toUInt64(start_time)";
  // The hour leads the sort key: the time range prunes parts and granules.
  std::string where = fmt::format(
      "timestamp >= toDateTime({{lo:UInt32}}) AND timestamp <= toDateTime({{hi:UInt32}}) AND {0} "
      ">= {{start_ns:UInt64}} AND {0} <= {{end_ns:UInt64}} AND service_name = {{service:String}}",
      start_ns);
  std::vector<QueryParam> params = {{"lo", Seconds(q.start_ns / kNsPerS)},
                                    {"hi", Seconds(q.end_ns / kNsPerS)},
                                    {"start_ns", std::to_string(q.start_ns)},
                                    {"end_ns", std::to_string(q.end_ns)},
                                    {"service", q.service},
                                    {"limit", std::to_string(q.limit)}};
  if (!q.operation.empty()) {
    where += " AND name = {operation:String}";
    params.emplace_back("operation", q.operation);
  }
  if (q.min_duration_ns != 0) {
    where += " AND duration_ns >= {min_duration:UInt64}";
    params.emplace_back("min_duration", std::to_string(q.min_duration_ns));
  }
  if (q.max_duration_ns != 0) {
    where += " AND duration_ns <= {max_duration:UInt64}";
    params.emplace_back("max_duration", std::to_string(q.max_duration_ns));
  }
  const StorageLayout layout = q.tags.empty() ? layout_ : StoredLayout();
  for (size_t i = 0; i < q.tags.size(); ++i) {
    where += " AND " + TagCondition(caps_, layout, database_, in_, q.tags[i], i, &params);
  }
  QueryResult r;
  Status st = Run(fmt::format("SELECT lower(hex(trace_id)) FROM {}.spans WHERE {} GROUP BY "
                              "trace_id ORDER BY max(start_time) DESC, trace_id LIMIT "
                              "{{limit:UInt32}}",
                              database_, where),
                  "TSV", &r, params, q.limit);
  if (!st.ok()) return st;
  for (const auto& row : TsvRows(r.data)) {
    TraceId id{};
    if (row.size() == 1 && FromHex(row[0], id.data(), id.size())) out->push_back(id);
  }
  return Status::Ok();
}

Status ChdbSpanReader::GetServices(std::vector<std::string>* out) {
  out->clear();
  QueryResult r;
  Status st = Run(fmt::format("SELECT DISTINCT service_name FROM {}.operations ORDER BY "
                              "service_name",
                              database_),
                  "TSV", &r, {}, limits_.max_rows);
  if (!st.ok()) return st;
  for (const auto& row : TsvRows(r.data)) out->push_back(UnescapeTsv(row[0]));
  return Status::Ok();
}

Status ChdbSpanReader::GetOperations(const std::string& service, bool any_kind, uint8_t kind,
                                     std::vector<query::OperationInfo>* out) {
  out->clear();
  QueryResult r;
  Status st =
      Run(fmt::format("SELECT name, kind FROM {}.operations WHERE service_name = "
                      "{{service:String}}{} GROUP BY name, kind ORDER BY name, kind",
                      database_, any_kind ? "" : " AND kind = {kind:UInt8}"),
          "TSV", &r, {{"service", service}, {"kind", std::to_string(kind)}}, limits_.max_rows);
  if (!st.ok()) return st;
  // An empty name is an empty first field: a row of one tab-separated pair.
  for (const auto& row : TsvRows(r.data)) {
    if (row.size() != 2) continue;
    out->push_back({UnescapeTsv(row[0]), static_cast<uint8_t>(ToU64(row[1]))});
  }
  return Status::Ok();
}

Status ChdbSpanReader::GetDependencies(uint64_t from_s, uint64_t to_s,
                                       std::vector<query::DependencyLink>* out) {
  out->clear();
  QueryResult r;
  // FINAL: a recomputed minute replaces its rows (ReplacingMergeTree).
  Status st = Run(fmt::format("SELECT parent, child, sum(calls) FROM {}.dependencies_1m FINAL "
                              "WHERE minute >= toDateTime({{lo:UInt32}}) AND minute < "
                              "toDateTime({{hi:UInt32}}) GROUP BY parent, child ORDER BY parent, "
                              "child",
                              database_),
                  "TSV", &r, {{"lo", Seconds(from_s)}, {"hi", Seconds(to_s)}}, limits_.max_rows);
  if (!st.ok()) return st;
  for (const auto& row : TsvRows(r.data)) {
    if (row.size() != 3) continue;
    out->push_back({UnescapeTsv(row[0]), UnescapeTsv(row[1]), ToU64(row[2])});
  }
  return Status::Ok();
}

Status ChdbSpanReader::GetRedSeries(const query::RedQuery& q, std::vector<query::RedSeries>* out) {
  out->clear();
  if (q.step_s == 0 || q.window_s == 0) return Status::Invalid("step and window must be positive");
  // Points t_k = E - k*S for k in [0, N); the point t covers the minutes m
  // with t - W <= m < t. Each row (red_1m's per operation, else
  // red_service_1m's, ~13x fewer for loadgen's services) is copied once per
  // point it covers (k from ceil((E-m-W)/S) to ceil((E-m)/S) - 1), then the
  // copies are merged per point: sums for calls and errors, the t-digest
  // states for the quantile. (range() of one argument: 18.16 has no other.)
  const uint64_t points = q.lookback_s / q.step_s + 1;
  const uint64_t span = (points - 1) * q.step_s + q.window_s;
  const uint64_t lo = q.end_s > span ? q.end_s - span : 0;
  const std::string m = "toInt64(toUnixTimestamp(minute))";
  const std::string k_first = fmt::format(
      "greatest(0, intDiv({{e:Int64}} - {} - {{w:Int64}} + {{s:Int64}} - 1, "
      "{{s:Int64}}))",
      m);
  const std::string k_end =
      fmt::format("least({{n:Int64}}, intDiv({{e:Int64}} - {} + {{s:Int64}} - 1, {{s:Int64}}))", m);
  std::vector<QueryParam> params = {{"e", std::to_string(q.end_s)},
                                    {"s", std::to_string(q.step_s)},
                                    {"w", std::to_string(q.window_s)},
                                    {"n", std::to_string(points)},
                                    {"lo", Seconds(lo)},
                                    {"kinds", NumberArray(q.kinds)},
                                    {"q", fmt::format("{}", q.quantile)}};
  const std::string sql = fmt::format(
      "SELECT service_name, op, t, {sum_calls}, {sum_errors}{quantile} FROM (SELECT service_name, "
      "{op} AS op, calls, errors, duration_quantiles, {{e:Int64}} - {{s:Int64}} * "
      "arrayJoin(arrayMap(x -> {k_first} + x, range(toUInt64(greatest(0, {k_end} - {k_first}))))) "
      "AS t FROM {db}.{table} WHERE "
      "service_name IN ({services}){kinds} AND minute >= toDateTime({{lo:UInt32}}) "
      "AND minute < toDateTime({{e:UInt32}})) GROUP BY service_name, op, t ORDER BY service_name, "
      "op, t",
      fmt::arg("sum_calls", SumOf(caps_, "calls")), fmt::arg("sum_errors", SumOf(caps_, "errors")),
      fmt::arg("quantile", q.want_quantile
                               ? ", quantilesTDigestMerge({q:Float64})(duration_quantiles)[1] / 1e6"
                               : ""),
      fmt::arg("op", q.by_operation ? "name" : "''"), fmt::arg("table", RedTable(q.by_operation)),
      fmt::arg("k_first", k_first), fmt::arg("k_end", k_end), fmt::arg("db", database_),
      fmt::arg("kinds", q.kinds.empty() ? "" : " AND has({kinds:Array(UInt8)}, kind)"),
      fmt::arg("services", ParamList("svc", q.services, &params)));
  QueryResult r;
  if (Status st = Run(sql, "TSV", &r, params, limits_.max_rows); !st.ok()) return st;
  for (const auto& row : TsvRows(r.data)) {
    if (row.size() < 5) continue;
    std::string service = UnescapeTsv(row[0]);
    std::string op = UnescapeTsv(row[1]);
    if (out->empty() || out->back().service != service || out->back().operation != op) {
      out->push_back({std::move(service), std::move(op), {}});
    }
    query::RedPoint p;
    p.time_s = ToU64(row[2]);
    p.calls = ToU64(row[3]);
    p.errors = ToU64(row[4]);
    if (q.want_quantile && row.size() > 5) p.quantile_ms = ToDouble(row[5]);
    out->back().points.push_back(p);
  }
  return Status::Ok();
}

Status ChdbSpanReader::GetRedSummary(const query::RedSummaryQuery& q,
                                     std::vector<query::RedSummaryRow>* out) {
  out->clear();
  // Per operation from red_1m, per service from red_service_1m.
  const bool per_op = !q.service.empty();
  const std::string keys = per_op ? "service_name, name, kind" : "service_name";
  const std::string sql = fmt::format(
      "SELECT {keys}, {calls}, {errors}, quantilesTDigestMerge(0.5, 0.95, 0.99)"
      "(duration_quantiles) FROM {db}.{table} WHERE minute >= toDateTime({{lo:UInt32}}) AND minute "
      "< toDateTime({{hi:UInt32}}){service}{kinds} GROUP BY {keys} ORDER BY {keys}",
      fmt::arg("keys", keys), fmt::arg("table", RedTable(per_op)),
      fmt::arg("calls", SumOf(caps_, "calls")), fmt::arg("errors", SumOf(caps_, "errors")),
      fmt::arg("db", database_),
      fmt::arg("service", per_op ? " AND service_name = {service:String}" : ""),
      fmt::arg("kinds", q.kinds.empty() ? "" : " AND has({kinds:Array(UInt8)}, kind)"));
  QueryResult r;
  Status st = Run(sql, "TSV", &r,
                  {{"lo", Seconds(q.from_s)},
                   {"hi", Seconds(q.to_s)},
                   {"service", q.service},
                   {"kinds", NumberArray(q.kinds)}},
                  limits_.max_rows);
  if (!st.ok()) return st;
  const size_t n_keys = per_op ? 3 : 1;
  for (const auto& row : TsvRows(r.data)) {
    if (row.size() != n_keys + 3) continue;
    query::RedSummaryRow s;
    s.service = UnescapeTsv(row[0]);
    if (per_op) {
      s.operation = UnescapeTsv(row[1]);
      s.kind = static_cast<uint8_t>(ToU64(row[2]));
    }
    s.calls = ToU64(row[n_keys]);
    s.errors = ToU64(row[n_keys + 1]);
    const std::vector<double> qs = ToDoubles(row[n_keys + 2]);
    if (qs.size() == 3) {
      s.p50_ms = qs[0] / 1e6;
      s.p95_ms = qs[1] / 1e6;
      s.p99_ms = qs[2] / 1e6;
    }
    out->push_back(std::move(s));
  }
  return Status::Ok();
}

Status ChdbSpanReader::CountSpansWithAttr(AttrOwner owner, const std::string& key,
                                          const std::string& value, uint64_t* count) {
  // A user field by its path: the map read whole, or the JSON type's one
  // path's subcolumn (UserFieldColumn); on engines without either, the JSON
  // text is parsed per row.
  const StorageLayout layout = StoredLayout();
  std::string cond;
  switch (owner) {
    case AttrOwner::kUserField:
      cond = value.empty() ? UserFieldPresent(caps_, layout, "k", key)
                           : UserFieldText(caps_, layout, "k", key) + " = {v:String}";
      break;
    case AttrOwner::kResource:
      cond = ResourceAttrEquals(database_, in_, "k", "v");
      break;
    case AttrOwner::kSpan:
      cond = SpanAttrEquals(caps_, layout, "k", "v", key);
      break;
  }
  QueryResult r;
  Status st = Run(fmt::format("SELECT count() FROM {}.spans WHERE {}", database_, cond), "TSV", &r,
                  {{"k", key}, {"v", value}}, 1);
  if (!st.ok()) return st;
  *count = ToU64(r.data);
  return Status::Ok();
}

// Buckets longer than a century would overflow bucket_s * 1e9.
constexpr uint64_t kMaxBucketS = 100ull * 366 * 86400;

bool ChdbSpanReader::StartRange(uint64_t start_ns, uint64_t end_ns, std::string* where,
                                std::vector<QueryParam>* params) const {
  if (end_ns <= start_ns) return false;
  const std::string start =
      caps_.datetime64 ? "toUnixTimestamp64Nano(start_time)" : "toUInt64(start_time)";
  // The second leads the sort key: the range prunes parts and granules.
  *where = fmt::format(
      "timestamp >= toDateTime({{lo:UInt32}}) AND timestamp <= toDateTime({{hi:UInt32}}) AND {0} "
      ">= {{start_ns:UInt64}} AND {0} < {{end_ns:UInt64}}",
      start);
  params->emplace_back("lo", Seconds(start_ns / kNsPerS));
  params->emplace_back("hi", Seconds((end_ns - 1) / kNsPerS));
  params->emplace_back("start_ns", std::to_string(start_ns));
  params->emplace_back("end_ns", std::to_string(end_ns));
  return true;
}

std::string ChdbSpanReader::ServiceExpr() const {
  // The spans table keeps "" for a resource without a string service.name;
  // the resources table (a few rows of them) tells which of Jaeger's names
  // it gets. ValueType::kString is 1 (the high bit marks a user field).
  const std::string type = "bitAnd(attr_types[indexOf(attr_keys, 'service.name')], 127)";
  const std::string of = fmt::format(
      "resource_id {} (SELECT resource_id FROM {}.resources WHERE service_name = '' AND "
      "has(attr_keys, 'service.name') AND {}",
      in_, database_, type);
  return fmt::format(
      "if(service_name != '', CAST(service_name AS String), multiIf({0} != 1), '{1}', {0} = 1), "
      "'{2}', '{3}'))",
      of, kWrongTypeServiceName, kEmptyServiceName, kMissingServiceName);
}

Status ChdbSpanReader::CountSpans(const query::SpanCountQuery& q,
                                  std::vector<query::SpanCountRow>* out) {
  out->clear();
  if (q.bucket_s == 0 || q.bucket_s > kMaxBucketS) {
    return Status::Invalid(
        fmt::format("the bucket must be from 1 s to {} s, not {}", kMaxBucketS, q.bucket_s));
  }
  std::string where;
  std::vector<QueryParam> params;
  if (!StartRange(q.start_ns, q.end_ns, &where, &params)) return Status::Ok();
  params.emplace_back("bucket_s", std::to_string(q.bucket_s));
  params.emplace_back("bucket_ns", std::to_string(q.bucket_s * kNsPerS));
  const std::string start =
      caps_.datetime64 ? "toUnixTimestamp64Nano(start_time)" : "toUInt64(start_time)";
  const std::string sql = fmt::format(
      "SELECT intDiv({start}, {{bucket_ns:UInt64}}) * {{bucket_s:UInt64}} AS bucket, {svc} AS svc, "
      "kind, count() FROM {db}.spans WHERE {where} GROUP BY bucket, svc, kind ORDER BY bucket, "
      "svc, kind",
      fmt::arg("start", start), fmt::arg("svc", ServiceExpr()), fmt::arg("db", database_),
      fmt::arg("where", where));
  QueryResult r;
  if (Status st = Run(sql, "TSV", &r, params, limits_.max_rows); !st.ok()) return st;
  for (const auto& row : TsvRows(r.data)) {
    if (row.size() != 4) continue;
    out->push_back(
        {ToU64(row[0]), UnescapeTsv(row[1]), static_cast<uint8_t>(ToU64(row[2])), ToU64(row[3])});
  }
  // The engine sorts strings by their bytes, as std::string does; sorted
  // here too, whatever the server's collation.
  std::sort(out->begin(), out->end(), [](const auto& a, const auto& b) {
    return std::tie(a.bucket_s, a.service, a.kind) < std::tie(b.bucket_s, b.service, b.kind);
  });
  return Status::Ok();
}

Status ChdbSpanReader::ListSpans(const query::SpanIdQuery& q, std::vector<query::SpanKey>* out) {
  out->clear();
  std::string where;
  std::vector<QueryParam> params;
  if (q.service.empty() || !StartRange(q.start_ns, q.end_ns, &where, &params)) {
    return Status::Ok();
  }
  params.emplace_back("service", q.service);
  params.emplace_back("kind", std::to_string(q.kind));
  params.emplace_back("limit", std::to_string(uint64_t{q.limit} + 1));
  const bool jaeger_name = q.service == kMissingServiceName || q.service == kEmptyServiceName ||
                           q.service == kWrongTypeServiceName;
  where += jaeger_name ? fmt::format(
                             " AND (service_name = {{service:String}} OR (service_name = '' AND "
                             "{} = {{service:String}}))",
                             ServiceExpr())
                       : " AND service_name = {service:String}";
  if (!q.any_kind) where += " AND kind = {kind:UInt8}";
  QueryResult r;
  Status st = Run(fmt::format("SELECT lower(hex(trace_id)), lower(hex(span_id)) FROM {}.spans "
                              "WHERE {} ORDER BY trace_id, span_id LIMIT {{limit:UInt64}}",
                              database_, where),
                  "TSV", &r, params, uint64_t{q.limit} + 1);
  if (!st.ok()) return st;
  for (const auto& row : TsvRows(r.data)) {
    query::SpanKey k;
    if (row.size() == 2 && FromHex(row[0], k.trace_id.data(), k.trace_id.size()) &&
        FromHex(row[1], k.span_id.data(), k.span_id.size())) {
      out->push_back(k);
    }
  }
  if (out->size() > q.limit) {
    out->clear();
    return Status::Invalid(fmt::format(
        "more than {} spans of service {} in the range: ask for a shorter range or a higher limit",
        q.limit, q.service));
  }
  std::sort(out->begin(), out->end());
  return Status::Ok();
}

}  // namespace spanhouse::storage
