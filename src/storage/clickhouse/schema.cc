// The spans table's logical row: the capabilities read from the engine's
// version, every column of a span with where it is stored and its codec,
// and the types a column takes in a table and in a Native block. The DDL is
// schema_ddl.cc, the older schemas and EnsureSchema's upgrades
// schema_upgrade.cc, the read queries schema_read.cc.
#include "storage/clickhouse/schema.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <initializer_list>

#include <fmt/format.h>

#include "storage/clickhouse/schema_ddl.h"

namespace spanhouse::storage {

Capabilities Capabilities::FromVersion(std::string_view version) {
  Capabilities c;
  auto dot = version.find('.');
  std::from_chars(version.data(), version.data() + version.size(), c.major);
  if (dot != std::string_view::npos) {
    std::from_chars(version.data() + dot + 1, version.data() + version.size(), c.minor);
  }
  auto at_least = [&](int maj, int min) {
    return c.major > maj || (c.major == maj && c.minor >= min);
  };
  c.datetime64 = at_least(20, 1);
  c.low_cardinality = at_least(19, 1);
  c.simple_aggregate = at_least(19, 8);
  c.if_not_exists_column = at_least(19, 1);
  c.compact_parts = at_least(20, 3);
  // Granules cut by bytes as well as rows (index_granularity_bytes) came in
  // 19.11; before, granules are index_granularity rows, whatever their size.
  c.adaptive_granularity = at_least(19, 11);
  // Run on real servers: 26.5 (chDB) cascades, 18.16 does not (a view's
  // inserts fire no view on its target table). Versions between are
  // untested and get what works on both: views fed from spans.
  c.cascading_views = at_least(26, 1);
  c.ttl = at_least(19, 6);
  c.json_type = at_least(25, 3);
  // All there by 22.1 (the last of them, materialize_ttl_recalculate_only,
  // came in 21.x).
  c.ttl_moves = at_least(22, 1);
  // ZSTD and Delta codecs came in 19.1, DoubleDelta and T64 later in 19.x;
  // 20.1 has every codec the schema uses.
  c.codecs = at_least(20, 1);
  // The Default codec (also inside a list, "T64, Default") came in 20.10.
  c.default_codec = at_least(20, 10);
  // auto_statistics_types came in 25.10 with no default; 26.3 made it
  // "minmax, uniq".
  c.auto_statistics = at_least(26, 3);
  c.merge_selector_base = at_least(24, 11);
  // Came in 24.12; asked from 25.1, the first release it is sure to be in.
  c.prewarm_mark_cache = at_least(25, 1);
  // The value got its name in 25.11; before it was 'default'.
  c.single_stream_strings = at_least(25, 11);
  // Came in 24.1; asked from 24.3, an LTS release.
  c.column_settings = at_least(24, 3);
  // The setting is old; measured on 26.5 with it given in the CREATE's
  // SETTINGS, which older servers read as table settings only.
  c.low_cardinality_numbers = at_least(25, 3);
  c.format_row = at_least(20, 7);
  c.dedup_token = at_least(22, 2);
  c.query_params = at_least(20, 1);
  c.jit_settings = at_least(22, 8);
  c.json_functions = at_least(20, 1);
  c.one_trace_read_settings = at_least(25, 3);
  return c;
}

namespace {

using ddl::kSized;
using ddl::kT64Sized;
using ddl::kZstd3;
using ddl::kZstd6;

// Where a column of a span is stored.
enum class In : uint8_t {
  kSpans,      // a column of the spans table
  kResources,  // the resources table (read joined back)
  kRare,       // one of the 21 rare fields: in extras, or its own column (schema 7)
  kExtras,     // the extras column
  kSpanIds,    // the span_ids column (schema 11), in place of span_id and parent_span_id
  kAttr,       // an attribute column (schema 12), where AttrColumnsStored
};

// Every column of a span as read, in block order, and where it is stored.
struct MasterColumn {
  ColumnSpec spec;
  In in;
};

// Every column of a span with its place and codec (schema_ddl.h says why
// each codec).
const std::vector<MasterColumn>& Master() {
  using L = Logical;
  static const std::vector<MasterColumn> cols = {
      {{Col::kTimestamp, "timestamp", L::kDateTimeSec, kSized}, In::kSpans},
      {{Col::kTraceId, "trace_id", L::kTraceId, kSized}, In::kSpans},
      {{Col::kSpanId, "span_id", L::kSpanId, kSized}, In::kSpans},
      {{Col::kParentSpanId, "parent_span_id", L::kSpanId, kZstd3}, In::kSpans},
      {{Col::kTraceState, "trace_state", L::kString, kSized}, In::kSpans},
      {{Col::kFlags, "flags", L::kUInt32, kSized}, In::kSpans},
      {{Col::kName, "name", L::kKey, kSized}, In::kSpans},
      {{Col::kKind, "kind", L::kUInt8, kSized}, In::kSpans},
      {{Col::kStartTime, "start_time", L::kTimeNs, kSized}, In::kSpans},
      {{Col::kDurationNs, "duration_ns", L::kUInt64, kT64Sized}, In::kSpans},
      {{Col::kStatusCode, "status_code", L::kUInt8, kSized}, In::kSpans},
      {{Col::kStatusMessage, "status_message", L::kString, kSized}, In::kSpans},
      {{Col::kServiceName, "service_name", L::kKey, kSized}, In::kSpans},
      {{Col::kResourceAttrKeys, "resource_attr_keys", L::kKeyArray, kSized}, In::kResources},
      {{Col::kResourceAttrTypes, "resource_attr_types", L::kUInt8Array, kSized}, In::kResources},
      {{Col::kResourceAttrValues, "resource_attr_values", L::kStringArray, kSized}, In::kResources},
      {{Col::kResourceDroppedAttrs, "resource_dropped_attributes_count", L::kUInt32, kSized},
       In::kResources},
      {{Col::kResourceSchemaUrl, "resource_schema_url", L::kKey, kSized}, In::kResources},
      {{Col::kScopeName, "scope_name", L::kKey, kSized}, In::kSpans},
      {{Col::kScopeVersion, "scope_version", L::kKey, kSized}, In::kSpans},
      {{Col::kScopeAttrKeys, "scope_attr_keys", L::kKeyArray, kSized}, In::kRare},
      {{Col::kScopeAttrTypes, "scope_attr_types", L::kUInt8Array, kSized}, In::kRare},
      {{Col::kScopeAttrValues, "scope_attr_values", L::kStringArray, kSized}, In::kRare},
      {{Col::kScopeDroppedAttrs, "scope_dropped_attributes_count", L::kUInt32, kSized}, In::kRare},
      {{Col::kScopeSchemaUrl, "scope_schema_url", L::kKey, kSized}, In::kRare},
      {{Col::kAttrKeys, "attr_keys", L::kKeyArray, kZstd6}, In::kSpans},
      {{Col::kAttrTypes, "attr_types", L::kUInt8Array, kZstd6}, In::kSpans},
      {{Col::kAttrValues, "attr_values", L::kStringArray, kZstd3}, In::kSpans},
      {{Col::kDroppedAttrs, "dropped_attributes_count", L::kUInt32, kSized}, In::kSpans},
      {{Col::kEventTimes, "event_times", L::kTimeNsArray, kSized}, In::kRare},
      {{Col::kEventNames, "event_names", L::kKeyArray, kSized}, In::kRare},
      {{Col::kEventAttrKeys, "event_attr_keys", L::kKeyArray2, kSized}, In::kRare},
      {{Col::kEventAttrTypes, "event_attr_types", L::kUInt8Array2, kSized}, In::kRare},
      {{Col::kEventAttrValues, "event_attr_values", L::kStringArray2, kSized}, In::kRare},
      {{Col::kEventDroppedAttrs, "event_dropped_attributes_counts", L::kUInt32Array, kSized},
       In::kRare},
      {{Col::kDroppedEvents, "dropped_events_count", L::kUInt32, kSized}, In::kRare},
      {{Col::kLinkTraceIds, "link_trace_ids", L::kTraceIdArray, kSized}, In::kRare},
      {{Col::kLinkSpanIds, "link_span_ids", L::kSpanIdArray, kSized}, In::kRare},
      {{Col::kLinkTraceStates, "link_trace_states", L::kStringArray, kSized}, In::kRare},
      {{Col::kLinkFlags, "link_flags", L::kUInt32Array, kSized}, In::kRare},
      {{Col::kLinkAttrKeys, "link_attr_keys", L::kKeyArray2, kSized}, In::kRare},
      {{Col::kLinkAttrTypes, "link_attr_types", L::kUInt8Array2, kSized}, In::kRare},
      {{Col::kLinkAttrValues, "link_attr_values", L::kStringArray2, kSized}, In::kRare},
      {{Col::kLinkDroppedAttrs, "link_dropped_attributes_counts", L::kUInt32Array, kSized},
       In::kRare},
      {{Col::kDroppedLinks, "dropped_links_count", L::kUInt32, kSized}, In::kRare},
      {{Col::kResourceId, "resource_id", L::kUInt64, kZstd3}, In::kSpans},
      {{Col::kUserFields, "user_fields", L::kJson, kZstd3}, In::kSpans},
      // ZSTD(3): as measured for the value (bench/trace_read_layouts.py).
      {{Col::kExtras, "extras", L::kString, kZstd3}, In::kExtras},
      // ZSTD(3): 8.69 bytes per span for both ids on the fresh corpus,
      // ZSTD(1) 8.86 (`bench storage`).
      {{Col::kSpanIds, "span_ids", L::kTraceId, kZstd3}, In::kSpanIds},
      // LowCardinality but the port (a plain string compressed 1.83
      // bytes per span, LowCardinality 2.05: ephemeral ports repeat little
      // within a granule); ZSTD(3) as attr_values (`bench storage`).
      {{Col::kAttrNetworkPeerAddress, "attr_network_peer_address", L::kKey, kZstd3}, In::kAttr},
      {{Col::kAttrNetworkPeerPort, "attr_network_peer_port", L::kString, kZstd3}, In::kAttr},
      {{Col::kAttrUserAgentOriginal, "attr_user_agent_original", L::kKey, kZstd3}, In::kAttr},
      {{Col::kAttrDbStatement, "attr_db_statement", L::kKey, kZstd3}, In::kAttr},
  };
  return cols;
}

// The Master() columns whose place is one of `in`.
std::vector<ColumnSpec> MasterIn(std::initializer_list<In> in) {
  std::vector<ColumnSpec> v;
  for (const auto& m : Master()) {
    if (std::find(in.begin(), in.end(), m.in) != in.end()) v.push_back(m.spec);
  }
  return v;
}

// `layout` is null for the wire type (no LowCardinality).
std::string Scalar(Logical l, const Capabilities& caps, const StorageLayout* layout) {
  const bool lc_keys = layout != nullptr && caps.low_cardinality && layout->low_cardinality_keys;
  const bool lc_values =
      layout != nullptr && caps.low_cardinality && layout->low_cardinality_values;
  switch (l) {
    case Logical::kDateTimeSec:
      return "DateTime";
    case Logical::kTraceId:
    case Logical::kTraceIdArray:
      return "FixedString(16)";
    case Logical::kSpanId:
    case Logical::kSpanIdArray:
      return "FixedString(8)";
    case Logical::kString:
      return "String";
    case Logical::kStringArray:
    case Logical::kStringArray2:
      return lc_values ? "LowCardinality(String)" : "String";
    case Logical::kKey:
    case Logical::kKeyArray:
    case Logical::kKeyArray2:
      return lc_keys ? "LowCardinality(String)" : "String";
    case Logical::kUInt8:
    case Logical::kUInt8Array:
    case Logical::kUInt8Array2:
      return "UInt8";
    case Logical::kUInt32:
    case Logical::kUInt32Array:
      return "UInt32";
    case Logical::kUInt64:
      return "UInt64";
    case Logical::kTimeNs:
    case Logical::kTimeNsArray:
      return caps.datetime64 ? "DateTime64(9)" : "UInt64";
    case Logical::kJson:  // read back as JSON text; the table's type where the engine has it
      if (layout == nullptr || !caps.json_type) return "String";
      if (!layout->user_fields_map) return "JSON";
      return fmt::format("Map({}, {})", lc_keys ? "LowCardinality(String)" : "String",
                         lc_values ? "LowCardinality(String)" : "String");
  }
  return "String";
}

std::string Wrap(std::string t, int depth) {
  for (int i = 0; i < depth; ++i) t = "Array(" + t + ")";
  return t;
}

}  // namespace

namespace {

// `cols` without span_id and parent_span_id.
std::vector<ColumnSpec> WithoutIdColumns(std::vector<ColumnSpec> cols) {
  std::erase_if(
      cols, [](const ColumnSpec& c) { return c.id == Col::kSpanId || c.id == Col::kParentSpanId; });
  return cols;
}

}  // namespace

const std::vector<ColumnSpec>& SpanColumns(bool extras_column, bool span_ids_column,
                                           bool attr_columns) {
  // Every combination, made once: [extras][span_ids][attr].
  static const auto lists = [] {
    std::array<std::vector<ColumnSpec>, 8> l;
    for (int i = 0; i < 8; ++i) {
      std::vector<In> in = {In::kSpans, (i & 4) != 0 ? In::kExtras : In::kRare};
      if ((i & 2) != 0) in.push_back(In::kSpanIds);
      if ((i & 1) != 0) in.push_back(In::kAttr);
      std::vector<ColumnSpec> cols;
      for (const auto& m : Master()) {
        if (std::find(in.begin(), in.end(), m.in) != in.end()) cols.push_back(m.spec);
      }
      l[i] = (i & 2) != 0 ? WithoutIdColumns(std::move(cols)) : std::move(cols);
    }
    return l;
  }();
  return lists[(extras_column ? 4 : 0) + (span_ids_column ? 2 : 0) + (attr_columns ? 1 : 0)];
}

const std::vector<AttrColumnKey>& AttrColumnKeys() {
  static const std::vector<AttrColumnKey> keys = {
      {Col::kAttrNetworkPeerAddress, "network.peer.address", "attr_network_peer_address"},
      {Col::kAttrNetworkPeerPort, "network.peer.port", "attr_network_peer_port"},
      {Col::kAttrUserAgentOriginal, "user_agent.original", "attr_user_agent_original"},
      {Col::kAttrDbStatement, "db.statement", "attr_db_statement"},
  };
  static_assert(static_cast<size_t>(Col::kAttrDbStatement) -
                        static_cast<size_t>(Col::kAttrNetworkPeerAddress) + 1 ==
                    kAttrColumnCount,
                "an attribute column for each key, in Col order");
  return keys;
}

int AttrColumnOf(std::string_view key) {
  // Called per span attribute by the encoder: the length first.
  const auto& keys = AttrColumnKeys();
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].key.size() == key.size() && keys[i].key == key) return static_cast<int>(i);
  }
  return -1;
}

bool AttrColumnsStored(const Capabilities& caps, const StorageLayout& layout) {
  return layout.attr_columns && caps.low_cardinality && caps.codecs;
}

const std::vector<AliasColumn>& SpanIdAliases() {
  // substring of a FixedString is a String: the CAST gives the alias the
  // type the readers and the Native decoder expect.
  static const std::vector<AliasColumn> aliases = {
      {Col::kSpanId, "span_id", "toFixedString(substring(span_ids, 1, 8), 8)"},
      {Col::kParentSpanId, "parent_span_id", "toFixedString(substring(span_ids, 9, 8), 8)"},
  };
  return aliases;
}

const std::vector<ColumnSpec>& ReadColumns(bool extras_column, bool attr_columns) {
  static const std::vector<ColumnSpec> extras = MasterIn({In::kSpans, In::kResources, In::kExtras});
  static const std::vector<ColumnSpec> rare = MasterIn({In::kSpans, In::kResources, In::kRare});
  static const std::vector<ColumnSpec> extras_attr =
      MasterIn({In::kSpans, In::kResources, In::kExtras, In::kAttr});
  static const std::vector<ColumnSpec> rare_attr =
      MasterIn({In::kSpans, In::kResources, In::kRare, In::kAttr});
  if (attr_columns) return extras_column ? extras_attr : rare_attr;
  return extras_column ? extras : rare;
}

const std::vector<ColumnSpec>& RareColumns() {
  static const std::vector<ColumnSpec> cols = MasterIn({In::kRare});
  return cols;
}

std::string ExtrasFromRareColumns() {
  // EncodeSpanExtras writes nothing where every field is empty; the engine
  // writes RowBinary as that encoder does (span_extras_test.cc).
  std::string empty;
  std::string names;
  for (const auto& c : RareColumns()) {
    const char* sep = names.empty() ? "" : ", ";
    names += fmt::format("{}{}", sep, c.name);
    const std::string_view and_ = empty.empty() ? "" : " AND ";
    if (ArrayDepth(c.logical) > 0) {
      empty += fmt::format("{}empty({})", and_, c.name);
    } else if (c.logical == Logical::kUInt32) {
      empty += fmt::format("{}{} = 0", and_, c.name);
    } else {
      empty += fmt::format("{}{} = ''", and_, c.name);
    }
  }
  return fmt::format("if({}, '', formatRowNoNewline('RowBinary', {}))", empty, names);
}

const std::vector<ColumnSpec>& SampledColumns() {
  static const std::vector<ColumnSpec> cols = [] {
    std::vector<ColumnSpec> v;
    for (const Col id :
         {Col::kTimestamp, Col::kTraceId, Col::kSpanId, Col::kParentSpanId, Col::kServiceName,
          Col::kName, Col::kKind, Col::kStatusCode, Col::kDurationNs}) {
      for (const auto& m : Master()) {
        if (m.spec.id == id) v.push_back(m.spec);
      }
    }
    return v;
  }();
  return cols;
}

const std::vector<std::pair<const char*, Logical>>& ResourceColumns() {
  using L = Logical;
  static const std::vector<std::pair<const char*, Logical>> cols = {
      {"resource_id", L::kUInt64},      {"service_name", L::kKey},
      {"attr_keys", L::kKeyArray},      {"attr_types", L::kUInt8Array},
      {"attr_values", L::kStringArray}, {"dropped_attributes_count", L::kUInt32},
      {"schema_url", L::kKey},          {"last_seen", L::kDateTimeSec},
  };
  return cols;
}

int ArrayDepth(Logical l) {
  switch (l) {
    case Logical::kKeyArray:
    case Logical::kUInt8Array:
    case Logical::kUInt32Array:
    case Logical::kStringArray:
    case Logical::kTimeNsArray:
    case Logical::kTraceIdArray:
    case Logical::kSpanIdArray:
      return 1;
    case Logical::kKeyArray2:
    case Logical::kUInt8Array2:
    case Logical::kStringArray2:
      return 2;
    default:
      return 0;
  }
}

std::string WireType(Logical l, const Capabilities& caps) {
  return Wrap(Scalar(l, caps, nullptr), ArrayDepth(l));
}

std::string TableType(Logical l, const Capabilities& caps, const StorageLayout& layout) {
  return Wrap(Scalar(l, caps, &layout), ArrayDepth(l));
}

}  // namespace spanhouse::storage
