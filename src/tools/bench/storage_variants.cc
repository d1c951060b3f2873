#include "tools/bench/storage_variants.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include <fmt/format.h>

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

// Every variant, grouped; add() a variant of schema 4's time (its sort order,
// values in the arrays too), add5() one of the project's schema (5 and later:
// its sort order and encoding).
struct Variants {
  std::vector<StorageVariant> v;
  void add(std::string name, std::string description, storage::StorageLayout layout,
           SpanOrder order = SpanOrder::kHourTrace,
           storage::UserFieldValues values = storage::UserFieldValues::kInArrays) {
    v.push_back({std::move(name), std::move(description), std::move(layout), order, values});
  }
  void add5(std::string name, std::string description, storage::StorageLayout layout,
            storage::UserFieldValues values = storage::UserFieldValues::kMarked) {
    const SpanOrder order =
        layout.spans_order_by.empty() ? SpanOrder::kSecondTraceStart : SpanOrder::kHourTraceStart;
    v.push_back({std::move(name), std::move(description), std::move(layout), order, values});
  }
};

using storage::StorageLayout;
using storage::UserFieldValues;
using Codecs = std::map<std::string, std::string, std::less<>>;

// Schema 3's types (attribute values as plain String) and table settings
// with `fn`'s codecs, in schema 4's layout otherwise.
StorageLayout Schema3Types(CodecFn fn) {
  StorageLayout l = storage::Schema4Layout();
  l.codec = std::move(fn);
  l.low_cardinality_values = false;
  l.column_statistics = true;
  return l;
}

// The project's schema with one change.
template <typename F>
StorageLayout Chosen(F&& change) {
  StorageLayout l;
  change(l);
  return l;
}

// Schema 4 with one change (codecs: `over` on top of schema 4's).
template <typename F>
StorageLayout Schema4(F&& change, Codecs over = {}) {
  StorageLayout l = storage::Schema4Layout();
  change(l);
  if (!over.empty()) l.codec = Override(l.codec, std::move(over));
  return l;
}

void Nothing(StorageLayout&) {}

// The schemas as they were, and the codecs alone on schema 3's types.
void AddSchemasAndCodecs(Variants& b) {
  const CodecFn zstd1 = Everywhere("ZSTD(1)");
  const char* values[] = {"attr_values", "event_attr_values", "scope_attr_values",
                          "link_attr_values"};
  b.add("schema3", "schema 3 as it was: no codecs (LZ4), LowCardinality keys, (hour, trace_id)",
        Schema3Types(Everywhere("LZ4")));
  b.add("schema4",
        "schema 4 as it was: user-field values in the arrays too, (hour, trace_id), granules of "
        "8192, trace_index by 16 bytes in ns, user_fields with the part-size codec",
        storage::Schema4Layout());
  b.v.push_back(
      {"upgrade4to5",
       "schema4 loaded and merged, then upgraded to the project's schema at start (EnsureSchema's "
       "copy, timed; sizes as the copy leaves them, before any merge)",
       storage::Schema4Layout(), SpanOrder::kHourTrace, UserFieldValues::kInArrays, 0, true});
  b.add5("schema5",
         "schema 5 as it was: granules of 32768 rows, resource_id UInt64, ZSTD(3) on attr_keys "
         "and attr_types, the part-size codec on parent_span_id and resource_id, 21 rare columns",
         storage::Schema5Layout());
  b.add5("schema8",
         "schema 8 as it was: spans sorted by (hour, trace_id, start_time), the rare fields in "
         "extras",
         storage::Schema8Layout());
  b.add5("schema10",
         "schema 10 (and 9) as it was: span_id and parent_span_id in columns of their own",
         storage::Schema10Layout());
  b.add5("schema12", "schema 12 as it was: user_fields as the JSON type, one subcolumn per path",
         storage::Schema12Layout());
  b.add5("chosen",
         "the project's schema (13): schema.cc's codecs, the default StorageLayout (spans sorted "
         "by (second, trace_id, start_time)), user-field values once, both span ids in span_ids, "
         "user_fields a Map",
         StorageLayout{});
  // Codecs alone, on schema 3's types.
  b.add("zstd1", "schema 3, ZSTD(1) on every column of every table", Schema3Types(zstd1));
  b.add("zstd3", "schema 3, ZSTD(3) on every column of every table",
        Schema3Types(Everywhere("ZSTD(3)")));
  b.add("zstd1-strings", "schema 3, ZSTD(1) on String and Array columns, LZ4 on the rest",
        Schema3Types(OnStringsAndArrays("ZSTD(1)")));
  b.add("zstd1+delta-times", "zstd1, Delta before ZSTD on timestamp, start_time, event_times",
        Schema3Types(Override(zstd1, {{"timestamp", "Delta, ZSTD(1)"},
                                      {"start_time", "Delta, ZSTD(1)"},
                                      {"event_times", "Delta, ZSTD(1)"}})));
  b.add("zstd1+doubledelta-times",
        "zstd1, DoubleDelta before ZSTD on timestamp, start_time, event_times",
        Schema3Types(Override(zstd1, {{"timestamp", "DoubleDelta, ZSTD(1)"},
                                      {"start_time", "DoubleDelta, ZSTD(1)"},
                                      {"event_times", "DoubleDelta, ZSTD(1)"}})));
  b.add("zstd1+t64", "zstd1, T64 before ZSTD on timestamp, duration_ns, flags",
        Schema3Types(Override(zstd1, {{"timestamp", "T64, ZSTD(1)"},
                                      {"duration_ns", "T64, ZSTD(1)"},
                                      {"flags", "T64, ZSTD(1)"}})));
  {
    std::map<std::string, std::string, std::less<>> over;
    for (const char* c : values) over[c] = "ZSTD(6)";
    b.add("zstd1+values-zstd6", "zstd1, ZSTD(6) on the attribute values",
          Schema3Types(Override(zstd1, std::move(over))));
  }
  {
    StorageLayout l = Schema3Types(zstd1);
    l.low_cardinality_values = true;
    b.add("zstd1+lc-values", "zstd1, attribute values Array(LowCardinality(String))", std::move(l));
  }
}

// Schema 4, one thing changed: the steps to schema 5, measured alone; then
// the same steps one on top of the other.
void AddSchema4Steps(Variants& b) {
  b.add("schema4+uf-marked",
        "schema4, a span's user fields keep their value in user_fields only (key and marked type "
        "stay in the arrays)",
        Schema4(Nothing), SpanOrder::kHourTrace, UserFieldValues::kMarked);
  b.add("schema4+uf-dropped",
        "schema4, a span's user fields left out of the attribute arrays (user_fields only)",
        Schema4(Nothing), SpanOrder::kHourTrace, UserFieldValues::kDropped);
  b.add("schema4+sort-trace-start", "schema4, ORDER BY (hour, trace_id, start_time)",
        Schema4([](StorageLayout& l) {
          l.spans_order_by = std::string(storage::kSchema8SpansOrderBy);
        }),
        SpanOrder::kHourTraceStart);
  b.add("schema4+granule-32k",
        "schema4, granules (and merge blocks) of 32768 rows, 40 MiB, instead of 8192, 10 MiB",
        Schema4([](StorageLayout& l) { l.index_granularity = 32768; }));
  b.add("schema4+ti-seconds", "schema4, trace_index times in seconds (UInt32), not ns",
        Schema4([](StorageLayout& l) { l.trace_index_seconds = true; }));
  b.add("schema4+ti-short", "schema4, trace_index by the id's first 8 bytes, times in seconds",
        Schema4([](StorageLayout& l) {
          l.trace_index_seconds = true;
          l.trace_index_short_id = true;
        }));
  b.add("schema4+uf-zstd3", "schema4, ZSTD(3) on user_fields",
        Schema4(Nothing, {{"user_fields", "ZSTD(3)"}}));
  // The same steps one on top of the other (the last adds the granules: chosen).
  b.add("schema4+uf-marked+sort", "schema4+uf-marked, ORDER BY (hour, trace_id, start_time)",
        Schema4([](StorageLayout& l) {
          l.spans_order_by = std::string(storage::kSchema8SpansOrderBy);
        }),
        SpanOrder::kHourTraceStart, UserFieldValues::kMarked);
  b.add("schema4+uf-marked+sort+ti-short", "schema4+uf-marked+sort, trace_index short",
        Schema4([](StorageLayout& l) {
          l.spans_order_by = std::string(storage::kSchema8SpansOrderBy);
          l.trace_index_seconds = true;
          l.trace_index_short_id = true;
        }),
        SpanOrder::kHourTraceStart, UserFieldValues::kMarked);
  b.add("schema4+uf-marked+sort+ti-short+uf-zstd3",
        "schema4+uf-marked+sort+ti-short, ZSTD(3) on user_fields",
        Schema4(
            [](StorageLayout& l) {
              l.spans_order_by = std::string(storage::kSchema8SpansOrderBy);
              l.trace_index_seconds = true;
              l.trace_index_short_id = true;
            },
            {{"user_fields", "ZSTD(3)"}}),
        SpanOrder::kHourTraceStart, UserFieldValues::kMarked);
  b.add("schema4+uf-marked+sort+ti-short+uf-zstd3+g32k",
        "schema4+uf-marked+sort+ti-short+uf-zstd3, granules of 32768 (chosen with attr_values "
        "on the part-size codec)",
        Schema4(
            [](StorageLayout& l) {
              l.spans_order_by = std::string(storage::kSchema8SpansOrderBy);
              l.trace_index_seconds = true;
              l.trace_index_short_id = true;
              l.index_granularity = 32768;
            },
            {{"user_fields", "ZSTD(3)"}}),
        SpanOrder::kHourTraceStart, UserFieldValues::kMarked);
}

// The project's schema, one thing changed.
void AddChosenVariants(Variants& b) {
  b.add5("chosen+uf-dropped",
         "chosen, a span's user fields left out of the attribute arrays, not marked (the reader "
         "cannot restore them)",
         StorageLayout{}, UserFieldValues::kDropped);
  b.add5("chosen+uf-in-arrays", "chosen, user-field values in the arrays too (as schema 4)",
         StorageLayout{}, UserFieldValues::kInArrays);
  b.add5("chosen+string-values", "chosen, attribute values plain String (not LowCardinality)",
         Chosen([](StorageLayout& l) { l.low_cardinality_values = false; }));
  // The project's schema with other codecs on some spans columns.
  auto with_codecs = [](Codecs over) {
    StorageLayout l;
    l.codec = Override(nullptr, std::move(over));
    return l;
  };
  b.add5("chosen+values-default-codec", "chosen, attr_values with the part-size codec, not ZSTD(3)",
         with_codecs({{"attr_values", "Default"}}));
  b.add5("chosen+start-delta", "chosen, Delta before the codec on start_time",
         with_codecs({{"start_time", "Delta, Default"}}));
  b.add5("chosen+start-doubledelta", "chosen, DoubleDelta before the codec on start_time",
         with_codecs({{"start_time", "DoubleDelta, Default"}}));
  b.add5("chosen+rare-columns",
         "chosen, a span's scope attributes, events and links in 21 columns as schema 7 had "
         "them, not one extras column",
         Chosen([](StorageLayout& l) { l.extras_column = false; }));
  {
    StorageLayout l = storage::Schema10Layout();
    l.codec = Override(nullptr, {{"span_id", "ZSTD(3)"}, {"parent_span_id", "ZSTD(3)"}});
    b.add5("schema10+ids-zstd3", "schema10, ZSTD(3) on span_id and parent_span_id", std::move(l));
  }
  b.add5("chosen+ids-zstd1", "chosen, ZSTD(1) on span_ids, not ZSTD(3)",
         with_codecs({{"span_ids", "ZSTD(1)"}}));
  b.add5("chosen+types-zstd9", "chosen, ZSTD(9) on attr_types, not ZSTD(6)",
         with_codecs({{"attr_types", "ZSTD(9)"}}));
  b.add5("chosen+extras-zstd6", "chosen, ZSTD(6) on extras, not ZSTD(3)",
         with_codecs({{"extras", "ZSTD(6)"}}));
  b.add5("chosen+start-zstd3", "chosen, ZSTD(3) on start_time, not the part-size codec",
         with_codecs({{"start_time", "ZSTD(3)"}}));
  b.add5("chosen+no-attr-columns",
         "chosen without the attribute columns (schema 11): every value in attr_values",
         Chosen([](StorageLayout& l) { l.attr_columns = false; }));
  b.add5("chosen+no-small-blocks",
         "chosen without column-level 16 KiB compressed blocks (every column from 64 KiB)",
         Chosen([](StorageLayout& l) { l.small_block_columns.clear(); }));
  b.add5("chosen+size-streams",
         "chosen with each String's sizes in a stream of their own (the engine's default)",
         Chosen([](StorageLayout& l) { l.single_stream_strings = false; }));
  b.add5("chosen+uf-small-blocks", "chosen, 16 KiB compressed blocks for user_fields only",
         Chosen([](StorageLayout& l) { l.small_block_columns = {"user_fields"}; }));
  b.add5("chosen+uf-default-codec", "chosen, user_fields with the part-size codec, not ZSTD(6)",
         with_codecs({{"user_fields", "Default"}}));
  b.add5("chosen+uf-zstd3", "chosen, user_fields (the Map) ZSTD(3), not ZSTD(6)",
         with_codecs({{"user_fields", "ZSTD(3)"}}));
  b.add5("chosen+uf-zstd9", "chosen, user_fields (the Map) ZSTD(9), not ZSTD(6)",
         with_codecs({{"user_fields", "ZSTD(9)"}}));
  b.add5(
      "chosen+strings-zstd9", "chosen, ZSTD(9) on attr_values, user_fields and extras",
      with_codecs({{"attr_values", "ZSTD(9)"}, {"user_fields", "ZSTD(9)"}, {"extras", "ZSTD(9)"}}));
  b.add5("chosen+strings-zstd15", "chosen, ZSTD(15) on attr_values, user_fields and extras",
         with_codecs(
             {{"attr_values", "ZSTD(15)"}, {"user_fields", "ZSTD(15)"}, {"extras", "ZSTD(15)"}}));
  {
    StorageVariant z{"chosen+large-parts-zstd3",
                     "chosen, ZSTD(3) (not 1) for CODEC(Default) columns of large parts",
                     StorageLayout{}, SpanOrder::kHourTraceStart, UserFieldValues::kMarked};
    z.zstd_level = 3;
    b.v.push_back(std::move(z));
  }
}

// The project's schema with other granules, blocks, statistics, codecs, types
// and sort orders.
void AddChosenLayouts(Variants& b) {
  b.add5("chosen+granule-8k", "chosen, granules of 8192 rows (the server's default)",
         Chosen([](StorageLayout& l) { l.index_granularity = 0; }));
  for (const uint64_t mib : {0, 8, 64, 256}) {
    b.add5("chosen+wide-from-" + std::to_string(mib) + "m",
           "chosen, parts of the spans table wide from " + std::to_string(mib) +
               " MiB before compression, not 32 (256: schema 13 before decision 0062)",
           Chosen([mib](StorageLayout& l) { l.min_bytes_for_wide_part = mib << 20; }));
  }
  b.add5("chosen+granule-16k", "chosen, granules (and merge blocks) of 16384 rows",
         Chosen([](StorageLayout& l) { l.index_granularity = 16384; }));
  b.add5("chosen+granule-8k+string-values",
         "chosen, granules of 8192 rows, attribute values plain String (a LowCardinality "
         "column writes its dictionary again in every granule)",
         Chosen([](StorageLayout& l) {
           l.index_granularity = 8192;
           l.low_cardinality_values = false;
         }));
  // A lookup decompresses, per column, the compressed blocks from its
  // granule's start to the trace: blocks are cut at granule ends only from
  // min_compress_block_size (64 KiB) on, so small granules alone leave the
  // small columns' blocks as they were.
  for (const uint32_t rows : {8192u, 4096u}) {
    b.add5(fmt::format("chosen+granule-{}k+blocks-16k", rows / 1024),
           fmt::format("chosen, granules of {} rows, compressed blocks from 16 KiB (not 64) to "
                       "64 KiB (not 1 MiB)",
                       rows),
           Chosen([rows](StorageLayout& l) {
             l.index_granularity = rows;
             l.table_settings = "min_compress_block_size = 16384, max_compress_block_size = 65536";
           }));
  }
  b.add5("chosen+auto-stats",
         "chosen, with the server's automatic column statistics (minmax, uniq on every column)",
         Chosen([](StorageLayout& l) { l.column_statistics = true; }));
  b.add5("chosen+lz4", "chosen's types and settings without codecs (LZ4)",
         Chosen([](StorageLayout& l) { l.codec = Everywhere("LZ4"); }));
  b.add5("chosen+zstd1-always",
         "chosen with ZSTD(1) on every part, where chosen lets part size pick LZ4 or ZSTD(1)",
         Chosen([](StorageLayout& l) { l.codec = InsteadOfDefault("ZSTD(1)"); }));
  b.add5("chosen+string-keys", "chosen, keys and names String instead of LowCardinality",
         Chosen([](StorageLayout& l) { l.low_cardinality_keys = false; }));
  {
    StorageLayout l;
    l.spans_order_by = "(toStartOfHour(timestamp), trace_id)";
    b.add("chosen+sort-trace", "chosen, ORDER BY (hour, trace_id) (schema 4's)", std::move(l),
          SpanOrder::kHourTrace, UserFieldValues::kMarked);
  }
  b.add("chosen+sort-service-name", "chosen, ORDER BY (service_name, name, hour, trace_id)",
        Chosen([](StorageLayout& l) {
          l.spans_order_by = "(service_name, name, toStartOfHour(timestamp), trace_id)";
        }),
        SpanOrder::kServiceNameHourTrace, UserFieldValues::kMarked);
  b.add("chosen+sort-hour-service", "chosen, ORDER BY (hour, service_name, trace_id)",
        Chosen([](StorageLayout& l) {
          l.spans_order_by = "(toStartOfHour(timestamp), service_name, trace_id)";
        }),
        SpanOrder::kHourServiceTrace, UserFieldValues::kMarked);
}

std::vector<StorageVariant> Build() {
  Variants b;
  AddSchemasAndCodecs(b);
  AddSchema4Steps(b);
  AddChosenVariants(b);
  AddChosenLayouts(b);
  return std::move(b.v);
}

}  // namespace

const std::vector<StorageVariant>& StorageVariants() {
  static const std::vector<StorageVariant> variants = Build();
  return variants;
}

void SortRows(SpanOrder order, std::vector<storage::SpanRow>* rows) {
  constexpr uint64_t kHourNs = 3600000000000ull;
  if (order == SpanOrder::kSecondTraceStart) return storage::SortByTableKey(rows);
  if (order == SpanOrder::kHourTraceStart) return storage::SortByTimeTraceStart(rows, kHourNs);
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
                       case SpanOrder::kSecondTraceStart:  // sorted above, like:
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
