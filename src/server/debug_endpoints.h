// /debug/* on the query listener, for tests only (debug.fault_injection):
//   POST /debug/sink?insert_delay_ms=N&fail_inserts=true|false
//                   &fail_permanent=true|false&kill_after_insert=true|false[&sink=NAME]
//       slow or failing inserts on demand, in the named embedded sink (by
//       default the first);
//   GET /debug/spans[?database=NAME]   (by default the primary's)
//       how many span rows a database stores, how many distinct span ids, and
//       the calls its red_1m view counted: the crash and outage tests check
//       that nothing was stored twice (tables and views alike).
#pragma once

#include <string>
#include <vector>

#include "net/http_server.h"
#include "storage/clickhouse/embedded_writer.h"
#include "storage/clickhouse/schema.h"
#include "storage/clickhouse/sql_connection.h"

namespace spanhouse::server {

struct DebugSink {
  std::string name;
  storage::SinkFaults* faults = nullptr;
};

// The store /debug/spans asks.
struct DebugStore {
  storage::SqlConnection* conn = nullptr;
  std::string database;
  storage::Capabilities caps;
};

void HandleDebug(const net::HttpRequest& req, net::HttpResponse& resp, const DebugStore& store,
                 const std::vector<DebugSink>& sinks);

}  // namespace spanhouse::server
