// The storage layouts `spanhouse bench storage` compares. Each is a tweak of
// the project's generated schema (a StorageLayout over schema.cc's column
// list: codecs by column, LowCardinality, sort key, granule size), never DDL
// of its own, so a variant cannot drift from the columns the writer sends.
#pragma once

#include <string>
#include <vector>

#include "storage/clickhouse/schema.h"
#include "storage/clickhouse/span_block.h"

namespace spanhouse::bench {

// The order a variant's blocks are sorted in before the insert: its table
// key, as the writer does for the real one (an insert in key order is not
// sorted again by the engine).
enum class SpanOrder {
  kHourTrace,             // (toStartOfHour(timestamp), trace_id): schema 4's
  kServiceNameHourTrace,  // (service_name, name, toStartOfHour(timestamp), trace_id)
  kHourServiceTrace,      // (toStartOfHour(timestamp), service_name, trace_id)
  kHourTraceStart,        // (toStartOfHour(timestamp), trace_id, start_time): schema 5-8's
  kSecondTraceStart,      // (timestamp, trace_id, start_time): SortByTableKey
};

struct StorageVariant {
  std::string name;
  std::string description;
  storage::StorageLayout layout;
  SpanOrder order = SpanOrder::kHourTrace;
  // Where the spans' user fields keep their values (the writer's encoding).
  storage::UserFieldValues values = storage::UserFieldValues::kInArrays;
  // The ZSTD level the engine gives CODEC(Default) columns of large parts
  // (CompressionOptions::zstd_level); 0: the engine configuration's own.
  int zstd_level = 0;
  // Loaded and merged in `layout`, then upgraded in place to the project's
  // schema by EnsureSchema (its copy measured: `bench storage` prints its
  // wall and CPU time); sizes and lookups are those of the copy.
  bool upgrade = false;
};

// Every variant, the project's schema ("chosen") among them.
const std::vector<StorageVariant>& StorageVariants();

// Sorts `rows` in `order`, stably.
void SortRows(SpanOrder order, std::vector<storage::SpanRow>* rows);

}  // namespace spanhouse::bench
