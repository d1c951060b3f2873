#include "tools/bench/storage_variants.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

namespace spanhouse::bench {
namespace {

using storage::CodecQuery;
using CodecFn = std::function<std::string(const CodecQuery&)>;

// The same codec on every column of every table.
CodecFn Everywhere(std::string codec) {
  return [codec = std::move(codec)](const CodecQuery&) { return codec; };
}

// Strings and arrays get `codec`, fixed-width columns LZ4.
CodecFn OnStringsAndArrays(std::string codec) {
  return [codec = std::move(codec)](const CodecQuery& q) {
    const bool stringy = q.type.find("String") != std::string_view::npos ||
                         q.type.find("Array") != std::string_view::npos;
    return stringy ? codec : std::string("LZ4");
  };
}

// The schema's own codecs with `fixed` where they leave the choice to the
// engine's part-size rule (CODEC(Default)).
CodecFn InsteadOfDefault(std::string fixed) {
  return [fixed = std::move(fixed)](const CodecQuery& q) {
    std::string c(q.chosen);
    if (const size_t at = c.find("Default"); at != std::string::npos) c.replace(at, 7, fixed);
    return c;
  };
}

// `base` (unset: the schema's own choice), with `over` for the named columns
// of the spans table.
CodecFn Override(CodecFn base, std::map<std::string, std::string, std::less<>> over) {
  return [base = std::move(base), over = std::move(over)](const CodecQuery& q) {
    if (q.table == "spans") {
      if (auto it = over.find(q.column); it != over.end()) return it->second;
    }
    return base ? base(q) : std::string(q.chosen);
  };
}

std::vector<StorageVariant> Build() {
  using storage::StorageLayout;
  std::vector<StorageVariant> v;
  auto add = [&](std::string name, std::string description, StorageLayout layout,
                 SpanOrder order = SpanOrder::kHourTrace) {
    v.push_back({std::move(name), std::move(description), std::move(layout), order});
  };
  // Schema 3's types (attribute values as plain String) and table settings
  // with `fn`'s codecs.
  auto schema3_types = [](CodecFn fn) {
    StorageLayout l;
    l.codec = std::move(fn);
    l.low_cardinality_values = false;
    l.column_statistics = true;
    return l;
  };
  // The project's schema with one change.
  auto chosen = [](auto&& change) {
    StorageLayout l;
    change(l);
    return l;
  };
  const CodecFn zstd1 = Everywhere("ZSTD(1)");
  const char* values[] = {"attr_values", "event_attr_values", "scope_attr_values",
                          "link_attr_values"};

  add("schema3", "schema 3 as it was: no codecs (LZ4), LowCardinality keys, (hour, trace_id)",
      schema3_types(Everywhere("LZ4")));
  add("chosen", "the project's schema: schema.cc's codecs, the default StorageLayout",
      StorageLayout{});
  // Codecs alone, on schema 3's types.
  add("zstd1", "schema 3, ZSTD(1) on every column of every table", schema3_types(zstd1));
  add("zstd3", "schema 3, ZSTD(3) on every column of every table",
      schema3_types(Everywhere("ZSTD(3)")));
  add("zstd1-strings", "schema 3, ZSTD(1) on String and Array columns, LZ4 on the rest",
      schema3_types(OnStringsAndArrays("ZSTD(1)")));
  add("zstd1+delta-times", "zstd1, Delta before ZSTD on timestamp, start_time, event_times",
      schema3_types(Override(zstd1, {{"timestamp", "Delta, ZSTD(1)"},
                                     {"start_time", "Delta, ZSTD(1)"},
                                     {"event_times", "Delta, ZSTD(1)"}})));
  add("zstd1+doubledelta-times",
      "zstd1, DoubleDelta before ZSTD on timestamp, start_time, event_times",
      schema3_types(Override(zstd1, {{"timestamp", "DoubleDelta, ZSTD(1)"},
                                     {"start_time", "DoubleDelta, ZSTD(1)"},
                                     {"event_times", "DoubleDelta, ZSTD(1)"}})));
  add("zstd1+t64", "zstd1, T64 before ZSTD on timestamp, duration_ns, flags",
      schema3_types(Override(zstd1, {{"timestamp", "T64, ZSTD(1)"},
                                     {"duration_ns", "T64, ZSTD(1)"},
                                     {"flags", "T64, ZSTD(1)"}})));
  {
    std::map<std::string, std::string, std::less<>> over;
    for (const char* c : values) over[c] = "ZSTD(6)";
    add("zstd1+values-zstd6", "zstd1, ZSTD(6) on the attribute values",
        schema3_types(Override(zstd1, std::move(over))));
  }
  {
    StorageLayout l = schema3_types(zstd1);
    l.low_cardinality_values = true;
    add("zstd1+lc-values", "zstd1, attribute values Array(LowCardinality(String))", std::move(l));
  }
  // The project's schema, one thing changed.
  add("chosen+string-values", "chosen, attribute values plain String (not LowCardinality)",
      chosen([](StorageLayout& l) { l.low_cardinality_values = false; }));
  {
    std::map<std::string, std::string, std::less<>> over;
    for (const char* c : values) over[c] = "ZSTD(3)";
    add("chosen+values-zstd3", "chosen, ZSTD(3) on the attribute values",
        chosen([&](StorageLayout& l) { l.codec = Override(nullptr, over); }));
  }
  add("chosen+auto-stats",
      "chosen, with the server's automatic column statistics (minmax, uniq on every column)",
      chosen([](StorageLayout& l) { l.column_statistics = true; }));
  add("chosen+lz4", "chosen's types and settings without codecs (LZ4)",
      chosen([](StorageLayout& l) { l.codec = Everywhere("LZ4"); }));
  add("chosen+zstd1-always",
      "chosen with ZSTD(1) on every part, where chosen lets part size pick LZ4 or ZSTD(1)",
      chosen([](StorageLayout& l) { l.codec = InsteadOfDefault("ZSTD(1)"); }));
  add("chosen+string-keys", "chosen, keys and names String instead of LowCardinality",
      chosen([](StorageLayout& l) { l.low_cardinality_keys = false; }));
  add("chosen+granule-32k",
      "chosen, granules (and merge blocks) of 32768 rows, 40 MiB, instead of 8192, 10 MiB",
      chosen([](StorageLayout& l) { l.index_granularity = 32768; }));
  add("chosen+merge-blocks-32k",
      "chosen, merges writing blocks of 32768 rows instead of 8192 (granules stay 8192)",
      chosen([](StorageLayout& l) { l.table_settings = "merge_max_block_size = 32768"; }));
  add("chosen+sort-service-name", "chosen, ORDER BY (service_name, name, hour, trace_id)",
      chosen([](StorageLayout& l) {
        l.spans_order_by = "(service_name, name, toStartOfHour(timestamp), trace_id)";
      }),
      SpanOrder::kServiceNameHourTrace);
  add("chosen+sort-hour-service", "chosen, ORDER BY (hour, service_name, trace_id)",
      chosen([](StorageLayout& l) {
        l.spans_order_by = "(toStartOfHour(timestamp), service_name, trace_id)";
      }),
      SpanOrder::kHourServiceTrace);
  add("chosen+sort-trace-start", "chosen, ORDER BY (hour, trace_id, start_time)",
      chosen([](StorageLayout& l) {
        l.spans_order_by = "(toStartOfHour(timestamp), trace_id, start_time)";
      }),
      SpanOrder::kHourTraceStart);
  return v;
}

}  // namespace

const std::vector<StorageVariant>& StorageVariants() {
  static const std::vector<StorageVariant> variants = Build();
  return variants;
}

void SortRows(SpanOrder order, std::vector<storage::SpanRow>* rows) {
  if (order == SpanOrder::kHourTrace) return storage::SortByTableKey(rows);
  constexpr uint64_t kHourNs = 3600000000000ull;
  auto hour = [](const storage::SpanRow& r) { return r.batch->spans.start_ns[r.index] / kHourNs; };
  auto trace_cmp = [](const storage::SpanRow& x, const storage::SpanRow& y) {
    return std::memcmp(x.batch->spans.trace_id[x.index].data(),
                       y.batch->spans.trace_id[y.index].data(), 16);
  };
  auto service = [](const storage::SpanRow& r) {
    const SpanBatch& b = *r.batch;
    return b.Str(b.resources.service_name[b.spans.resource[r.index]]);
  };
  auto name = [](const storage::SpanRow& r) { return r.batch->Str(r.batch->spans.name[r.index]); };
  std::stable_sort(rows->begin(), rows->end(),
                   [&](const storage::SpanRow& x, const storage::SpanRow& y) {
                     switch (order) {
                       case SpanOrder::kServiceNameHourTrace:
                         if (service(x) != service(y)) return service(x) < service(y);
                         if (name(x) != name(y)) return name(x) < name(y);
                         if (hour(x) != hour(y)) return hour(x) < hour(y);
                         return trace_cmp(x, y) < 0;
                       case SpanOrder::kHourServiceTrace:
                         if (hour(x) != hour(y)) return hour(x) < hour(y);
                         if (service(x) != service(y)) return service(x) < service(y);
                         return trace_cmp(x, y) < 0;
                       case SpanOrder::kHourTraceStart:
                       case SpanOrder::kHourTrace: {
                         if (hour(x) != hour(y)) return hour(x) < hour(y);
                         const int c = trace_cmp(x, y);
                         if (c != 0 || order == SpanOrder::kHourTrace) return c < 0;
                         return x.batch->spans.start_ns[x.index] < y.batch->spans.start_ns[y.index];
                       }
                     }
                     return false;
                   });
}

}  // namespace spanhouse::bench
