#include "server/serve.h"

#include <signal.h>

#include <filesystem>

#include <spdlog/spdlog.h>

#include "pipeline/queue/span_queue.h"
#include "query/query_api.h"
#include "receivers/otlp_http/otlp_http_receiver.h"
#include "server/data_dir_lock.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/chdb_span_reader.h"
#include "storage/clickhouse/embedded_writer.h"
#include "storage/clickhouse/schema.h"

namespace spanhouse::server {

namespace {

sigset_t ShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

int Fail(const Status& st) {
  spdlog::error("{}", st.message());
  return 1;
}

}  // namespace

void BlockShutdownSignals() {
  sigset_t set = ShutdownSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int Serve(const Config& cfg) {
  DataDirLock lock;
  if (Status st = DataDirLock::Acquire(cfg.data_dir, &lock); !st.ok()) return Fail(st);
  const std::string dir = std::filesystem::absolute(cfg.data_dir).lexically_normal().string();

  std::shared_ptr<storage::ChdbLibrary> lib;
  if (Status st = storage::ChdbLibrary::Load(&lib); !st.ok()) return Fail(st);
  // Two connections to the one engine: the writer's inserts never wait
  // behind a slow query, and queries never wait behind an insert.
  std::unique_ptr<storage::ChdbConnection> write_conn;
  std::unique_ptr<storage::ChdbConnection> read_conn;
  if (Status st = storage::ChdbConnection::Open(lib, dir + "/clickhouse", {}, &write_conn);
      !st.ok()) {
    return Fail(st);
  }
  storage::Capabilities caps;
  if (Status st = storage::EnsureSchema(*write_conn, &caps); !st.ok()) {
    write_conn->Close();
    return Fail(st);
  }
  if (Status st = storage::ChdbConnection::Open(lib, dir + "/clickhouse", {}, &read_conn);
      !st.ok()) {
    write_conn->Close();
    return Fail(st);
  }
  spdlog::info("embedded ClickHouse {}.{} ready in {}/clickhouse", caps.major, caps.minor, dir);

  pipeline::SpanQueue queue(cfg.queue.max_bytes);
  storage::WriterOptions wopts;
  wopts.max_rows = cfg.writer.max_rows;
  wopts.max_bytes = cfg.writer.max_bytes;
  wopts.max_age = std::chrono::milliseconds(cfg.writer.max_age_ms);
  wopts.spool_dir = dir + "/spool";
  storage::EmbeddedWriter writer(*write_conn, caps, queue, wopts);
  writer.Start();

  storage::ChdbSpanReader reader(*read_conn, caps);
  query::QueryApi query_api({cfg.query.listen, 2}, reader);
  receivers::OtlpHttpReceiver receiver(
      {cfg.otlp_http.listen, cfg.otlp_http.max_body_bytes, cfg.otlp_http.threads}, queue);

  auto shutdown_storage = [&] {
    queue.Close();
    writer.Join();
    read_conn->Close();
    write_conn->Close();
  };
  if (Status st = query_api.Start(); !st.ok()) {
    shutdown_storage();
    return Fail(st);
  }
  if (Status st = receiver.Start(); !st.ok()) {
    query_api.Stop();
    shutdown_storage();
    return Fail(st);
  }
  spdlog::info("OTLP/HTTP on {} (port {}), query API on {} (port {})", cfg.otlp_http.listen,
               receiver.port(), cfg.query.listen, query_api.port());
  spdlog::info("spanhouse ready");

  sigset_t set = ShutdownSignals();
  int sig = 0;
  sigwait(&set, &sig);
  spdlog::info("{} received: stopping intake, flushing queued spans", strsignal(sig));

  receiver.Stop();
  queue.Close();
  writer.Join();
  query_api.Stop();
  const auto& ws = writer.stats();
  spdlog::info("flushed: {} spans written in {} inserts, {} lost", ws.rows_written.load(),
               ws.inserts.load(), ws.rows_lost.load());
  read_conn->Close();
  write_conn->Close();
  spdlog::info("stopped");
  return ws.rows_lost.load() == 0 ? 0 : 3;
}

}  // namespace spanhouse::server
