#include "storage/clickhouse/chdb_span_reader.h"

#include <charconv>

#include <fmt/format.h>

#include "storage/clickhouse/span_block.h"

namespace spanhouse::storage {

Status ChdbSpanReader::GetTrace(const TraceId& id, SpanBatch* out) {
  const std::string hex = ToHex(id);
  // The trace index says which seconds of the spans table hold the trace, so
  // the lookup reads only those hours' granules.
  QueryResult r;
  Status st = conn_.Query(TraceRangeQuery(layout_), "TSV", &r, {{"id", hex}});
  if (!st.ok()) return st;
  uint64_t first = 0;
  uint64_t last = 0;
  uint64_t rows = 0;
  {
    const char* p = r.data.data();
    const char* e = p + r.data.size();
    auto a = std::from_chars(p, e, first);
    if (a.ptr < e) a = std::from_chars(a.ptr + 1, e, last);
    if (a.ptr < e) std::from_chars(a.ptr + 1, e, rows);
  }
  if (rows == 0) return {StatusCode::kNotFound, "trace not found"};
  st = conn_.Query(
      SpanReadQuery(caps_,
                    "timestamp >= toDateTime({lo:UInt32}) AND timestamp <= toDateTime({hi:UInt32}) "
                    "AND trace_id = unhex({id:String})",
                    "start_time, span_id"),
      "Native", &r, {{"id", hex}, {"lo", std::to_string(first)}, {"hi", std::to_string(last)}});
  if (!st.ok()) return st;
  const size_t before = out->span_count();
  st = DecodeSpanBlocks(r.data, out);
  if (!st.ok()) return st;
  if (out->span_count() == before) return {StatusCode::kNotFound, "trace not found"};
  return Status::Ok();
}

Status ChdbSpanReader::CountSpansWithAttr(AttrOwner owner, const std::string& key,
                                          const std::string& value, uint64_t* count) {
  // A user field by its path: the JSON type reads just that path's
  // subcolumn; on engines without it, the JSON text is parsed per row.
  const std::string user_field = caps_.json_type ? "toString(getSubcolumn(user_fields, {k:String}))"
                                                 : "JSONExtractString(user_fields, {k:String})";
  const std::string user_field_present = caps_.json_type
                                             ? "isNotNull(getSubcolumn(user_fields, {k:String}))"
                                             : "JSONHas(user_fields, {k:String})";
  const std::string sql =
      owner == AttrOwner::kUserField
          ? fmt::format("SELECT count() FROM {}.spans WHERE {}", kDatabase,
                        value.empty() ? user_field_present : user_field + " = {v:String}")
      : owner == AttrOwner::kResource
          // Matching resources first (a small table), then the spans that carry them.
          ? fmt::format(
                "SELECT count() FROM {0}.spans WHERE resource_id IN (SELECT resource_id "
                "FROM {0}.resources WHERE has(attr_keys, {{k:String}}) AND "
                "attr_values[indexOf(attr_keys, {{k:String}})] = {{v:String}})",
                kDatabase)
          : caps_.json_type
                // A value the arrays leave to user_fields (its type marked) is
                // compared as the engine prints it.
                ? fmt::format(
                      "SELECT count() FROM {}.spans WHERE has(attr_keys, {{k:String}}) AND "
                      "if(bitAnd(attr_types[indexOf(attr_keys, {{k:String}})], {}) = 0, "
                      "attr_values[indexOf(attr_keys, {{k:String}})], "
                      "toString(getSubcolumn(user_fields, {{k:String}}))) = {{v:String}}",
                      kDatabase, static_cast<int>(kTypeInUserFields))
                : fmt::format(
                      "SELECT count() FROM {}.spans WHERE has(attr_keys, {{k:String}}) AND "
                      "attr_values[indexOf(attr_keys, {{k:String}})] = {{v:String}}",
                      kDatabase);
  QueryResult r;
  Status st = conn_.Query(sql, "TSV", &r, {{"k", key}, {"v", value}});
  if (!st.ok()) return st;
  *count = 0;
  std::from_chars(r.data.data(), r.data.data() + r.data.size(), *count);
  return Status::Ok();
}

}  // namespace spanhouse::storage
