#include "storage/clickhouse/embedded_writer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "storage/clickhouse/span_block.h"

namespace spanhouse::storage {

EmbeddedWriter::EmbeddedWriter(ChdbConnection& conn, Capabilities caps, pipeline::SpanQueue& queue,
                               WriterOptions options)
    : conn_(conn), caps_(caps), queue_(queue), opts_(std::move(options)) {}

EmbeddedWriter::~EmbeddedWriter() {
  Join();
}

void EmbeddedWriter::Start() {
  std::filesystem::create_directories(opts_.spool_dir);
  thread_ = std::thread([this] { Run(); });
}

void EmbeddedWriter::Join() {
  if (thread_.joinable()) thread_.join();
}

void EmbeddedWriter::Run() {
  using Clock = std::chrono::steady_clock;
  while (true) {
    auto wait = std::chrono::milliseconds(100);
    if (pending_rows_ > 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          pending_since_ + opts_.max_age - Clock::now());
      wait = std::clamp(left, std::chrono::milliseconds(0), wait);
    }
    std::optional<pipeline::QueuedBatch> item = queue_.Pop(wait);
    if (item) {
      if (pending_rows_ == 0) pending_since_ = Clock::now();
      EncodeSpanBlock(*item->batch, caps_, &pending_);
      pending_rows_ += item->batch->span_count();
    }
    const bool done = !item && queue_.closed_and_empty();
    const bool due = pending_rows_ >= opts_.max_rows || pending_.size() >= opts_.max_bytes ||
                     (pending_rows_ > 0 && Clock::now() - pending_since_ >= opts_.max_age);
    if (pending_rows_ > 0 && (due || done)) Flush(done);
    if (done) return;
  }
}

bool EmbeddedWriter::Flush(bool shutting_down) {
  const std::string path = opts_.spool_dir + "/insert.native";
  auto backoff = std::chrono::milliseconds(100);
  for (int attempt = 0;; ++attempt) {
    Status st;
    if (FILE* f = std::fopen(path.c_str(), "wb"); f == nullptr) {
      st = Status::Internal("cannot write " + path);
    } else {
      size_t n = std::fwrite(pending_.data(), 1, pending_.size(), f);
      bool ok = n == pending_.size() && std::fclose(f) == 0;
      if (!ok) st = Status::Internal("short write to " + path);
    }
    if (st.ok()) {
      // Columns are matched by name (the file carries them), so the block
      // and the table cannot silently disagree on order.
      st = conn_.Query(
          fmt::format("INSERT INTO {}.spans SELECT * FROM file({{path:String}}, 'Native')",
                      kDatabase),
          "", nullptr, {{"path", path}});
    }
    if (st.ok()) {
      stats_.rows_written += pending_rows_;
      stats_.inserts += 1;
      pending_.clear();
      pending_rows_ = 0;
      std::remove(path.c_str());
      return true;
    }
    stats_.insert_errors += 1;
    spdlog::warn("insert of {} spans failed (attempt {}): {}", pending_rows_, attempt + 1,
                 st.message());
    if (shutting_down && attempt + 1 >= opts_.shutdown_retries) {
      spdlog::error("giving up on {} spans at shutdown", pending_rows_);
      stats_.rows_lost += pending_rows_;
      pending_.clear();
      pending_rows_ = 0;
      return false;
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
  }
}

}  // namespace spanhouse::storage
