// The read queries: a trace's seconds from trace_index, spans selected in
// the layout DecodeSpanBlocks reads, their resources joined back.
#include "storage/clickhouse/schema.h"

#include <fmt/format.h>

namespace spanhouse::storage {
namespace {

// The resources-table column a read's resource column comes from.
const char* ResourceSource(Col id) {
  switch (id) {
    case Col::kResourceAttrKeys:
      return "attr_keys";
    case Col::kResourceAttrTypes:
      return "attr_types";
    case Col::kResourceAttrValues:
      return "attr_values";
    case Col::kResourceDroppedAttrs:
      return "dropped_attributes_count";
    case Col::kResourceSchemaUrl:
      return "schema_url";
    default:
      return nullptr;
  }
}

// A read column: CAST to its wire type, but user_fields as the JSON type
// itself where the engine has it (the reader takes span attribute values
// from it, in the flattened layout: kFlattenedJsonSetting).
std::string ReadExpr(const ColumnSpec& c, std::string_view table, std::string_view column,
                     const Capabilities& caps) {
  if (c.logical == Logical::kJson && caps.json_type) {
    return fmt::format("{}{} AS {}", table, column, c.name);
  }
  return fmt::format("CAST({}{} AS {}) AS {}", table, column, WireType(c.logical, caps), c.name);
}

}  // namespace

std::string TraceRangeQuery(const StorageLayout& layout, std::string_view database,
                            bool simple_aggregate, bool one_id) {
  // The ids are made FixedString before the set is built: a set of Strings
  // loses an id's trailing zero bytes when the engine compares it with the
  // FixedString column (an id ending in 00 was not found). One id is
  // compared without a set: the set's subquery was ~1.5 of ~3.5 ms.
  std::string where;
  if (one_id) {
    where = layout.trace_index_short_id
                ? "trace_id8 = toFixedString(substring(unhex({id:String}), 1, 8), 8)"
                : "trace_id = toFixedString(unhex({id:String}), 16)";
  } else {
    where =
        layout.trace_index_short_id
            ? "trace_id8 IN (SELECT toFixedString(substring(unhex(arrayJoin({ids:Array(String)})), "
              "1, 8), 8))"
            : "trace_id IN (SELECT toFixedString(unhex(arrayJoin({ids:Array(String)})), 16))";
  }
  const std::string times = layout.trace_index_seconds
                                ? "start_s, end_s"
                                : "intDiv(start_ns, 1000000000), intDiv(end_ns, 1000000000) + 1";
  // Rows as stored, not grouped per id: the reader only takes the union of
  // their hours, and the aggregation's pipeline (with the threads it
  // starts) cost more than the lookup itself (in chDB over the 49.4M store:
  // ~4 vs ~7 ms).
  if (!simple_aggregate && layout.trace_index_seconds) {
    // States (AggregateFunction): each row's value is only its state's merge.
    return fmt::format(
        "SELECT minMerge(start_s), maxMerge(end_s) FROM {}.trace_index WHERE {} GROUP BY day, "
        "trace_id8 SETTINGS max_threads = 1",
        database, where);
  }
  return fmt::format("SELECT {} FROM {}.trace_index WHERE {} SETTINGS max_threads = 1", times,
                     database, where);
}

std::string SpanSelectList(const Capabilities& caps) {
  std::string s;
  for (const auto& c : SpanColumns()) {
    if (!s.empty()) s += ", ";
    s += ReadExpr(c, "", c.name, caps);
  }
  return s;
}

std::vector<ColumnSpec> SpanReadColumns(const Capabilities& caps, const StorageLayout& layout) {
  std::vector<ColumnSpec> out;
  for (const auto& c : ReadColumns(layout.extras_column, AttrColumnsStored(caps, layout))) {
    if (ResourceSource(c.id) != nullptr) continue;  // ResourceReadQuery
    if (layout.span_ids_column && c.id == Col::kParentSpanId) continue;
    out.push_back(c);
  }
  return out;
}

std::string SpanReadQuery(const Capabilities& caps, const StorageLayout& layout,
                          std::string_view where, std::string_view database,
                          const std::unordered_map<std::string, std::string>& stored_types,
                          bool one_trace) {
  // Each column as the table stores it (LowCardinality kept: DecodeSpanBlocks
  // reads both, and turning dictionaries into strings cost ~10 ms of a
  // 32768-row granule); the CAST is a no-op unless an older table differs.
  // The span ids as stored too, one column: the two aliases' expressions
  // were planned in every lookup.
  std::string list;
  for (const ColumnSpec& c : SpanReadColumns(caps, layout)) {
    if (!list.empty()) list += ", ";
    if (layout.span_ids_column && c.id == Col::kSpanId) {
      list += "span_ids";
      continue;
    }
    const std::string type = TableType(c.logical, caps, layout);
    const auto stored = stored_types.find(c.name);
    if ((c.logical == Logical::kJson && caps.json_type) ||
        (stored != stored_types.end() && stored->second == type)) {
      // No CAST where the column has the type already: the 22 no-op CASTs
      // were ~1.8 ms of a ~10 ms lookup's planning.
      list += c.name;
    } else {
      list += fmt::format("CAST({0} AS {1}) AS {0}", c.name, type);
    }
  }
  std::string settings;
  if (caps.json_type) settings = fmt::format("{} = 1", kFlattenedJsonSetting);
  if (one_trace && caps.one_trace_read_settings) {
    settings += fmt::format("{}{}", settings.empty() ? "" : ", ", kOneTraceReadSettings);
  }
  return fmt::format("SELECT {} FROM {}.spans WHERE {}{}{}", list, database, where,
                     settings.empty() ? "" : " SETTINGS ", settings);
}

std::string ResourceReadQuery(const Capabilities& caps, std::string_view database, size_t recent,
                              std::string_view in) {
  std::string list;
  for (const auto& c : ReadColumns()) {
    const char* from = ResourceSource(c.id);
    if (from == nullptr) continue;
    list += ReadExpr(c, "", from, caps) + ", ";
  }
  // Merges may not have collapsed repeated inserts of a resource yet.
  const std::string where =
      recent > 0 ? fmt::format(
                       "resource_id IN (SELECT arrayJoin({{resource_ids:Array(UInt64)}})) "
                       "OR resource_id {} (SELECT resource_id FROM {}.resources ORDER BY "
                       "last_seen DESC LIMIT {})",
                       in, database, recent)
                 : "resource_id IN (SELECT arrayJoin({resource_ids:Array(UInt64)}))";
  return fmt::format(
      "SELECT {}CAST(resource_id AS UInt64) AS resource_id FROM {}.resources WHERE {} ORDER BY "
      "last_seen DESC LIMIT 1 BY resource_id",
      list, database, where);
}

}  // namespace spanhouse::storage
