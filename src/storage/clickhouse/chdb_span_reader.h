// SpanReader over embedded ClickHouse.
#pragma once

#include <utility>

#include "query/span_reader.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/schema.h"

namespace spanhouse::storage {

class ChdbSpanReader : public query::SpanReader {
 public:
  // `layout`: the tables' layout (the project's own; `bench storage` reads
  // other layouts too).
  ChdbSpanReader(ChdbConnection& conn, Capabilities caps, StorageLayout layout = {})
      : conn_(conn), caps_(caps), layout_(std::move(layout)) {}
  Status GetTrace(const TraceId& id, SpanBatch* out) override;
  Status CountSpansWithAttr(AttrOwner owner, const std::string& key, const std::string& value,
                            uint64_t* count) override;

 private:
  ChdbConnection& conn_;
  const Capabilities caps_;
  const StorageLayout layout_;
};

}  // namespace spanhouse::storage
