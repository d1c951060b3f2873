// SpanReader over embedded ClickHouse.
#pragma once

#include "query/span_reader.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/schema.h"

namespace spanhouse::storage {

class ChdbSpanReader : public query::SpanReader {
 public:
  ChdbSpanReader(ChdbConnection& conn, Capabilities caps) : conn_(conn), caps_(caps) {}
  Status GetTrace(const TraceId& id, SpanBatch* out) override;
  Status CountSpansWithAttr(AttrOwner owner, const std::string& key, const std::string& value,
                            uint64_t* count) override;

 private:
  ChdbConnection& conn_;
  const Capabilities caps_;
};

}  // namespace spanhouse::storage
