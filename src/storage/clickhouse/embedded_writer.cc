#include "storage/clickhouse/embedded_writer.h"

#include "sink/retry.h"
#include "sink/sharded_queue.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "storage/clickhouse/dead_letter.h"
#include "storage/clickhouse/insert_errors.h"
#include "storage/clickhouse/row_formats.h"
#include "storage/clickhouse/span_block.h"

namespace spanhouse::storage {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

EmbeddedWriter::EmbeddedWriter(SqlConnection* conn, Capabilities caps, WriterOptions options,
                               WriterStats& stats, const SinkFaults* faults, LegacyLayout layout)
    : conn_(conn),
      caps_(caps),
      opts_(std::move(options)),
      faults_(faults),
      layout_(layout),
      stats_(stats),
      user_fields_(opts_.well_known) {}

EmbeddedWriter::~EmbeddedWriter() {
  Stop();
}

void EmbeddedWriter::Start() {
  user_fields_map_ = layout_.user_fields_map;
  if (user_fields_map_ && caps_.json_type && conn_ != nullptr) {
    // A spans table made before schema 13 keeps its JSON column; without an
    // answer, the Map of a table EnsureSchema made (an insert of the wrong
    // type fails, is counted and retried, and loses nothing).
    if (Status st = SpansUserFieldsMap(*conn_, opts_.database, &user_fields_map_); !st.ok()) {
      spdlog::warn("writer: the type of {}.spans.user_fields is unknown ({}); writing a Map",
                   opts_.database, st.message());
      user_fields_map_ = true;
    }
  }
  CleanSpool();
}

void EmbeddedWriter::Stop() {
  RemoveKeptSpoolFiles();
}

void EmbeddedWriter::AddTo(uint32_t day, std::unique_ptr<SpanBatch> part, Reservation res,
                           sink::Ticket ticket) {
  Pending& p = pending_[day];
  if (p.rows == 0) p.since = Clock::now();
  std::vector<uint64_t> ids = ResourceIds(*part);
  // With spans sampled out, only the resources of the spans stored are.
  const auto& sampled = part->spans.metrics_only;
  std::vector<uint8_t> stored;
  if (std::find_if(sampled.begin(), sampled.end(), [](uint8_t m) { return m != 0; }) !=
      sampled.end()) {
    stored.assign(ids.size(), 0);
    for (size_t i = 0; i < sampled.size(); ++i) {
      if (sampled[i] == 0) stored[part->spans.resource[i]] = 1;
    }
  }
  std::vector<uint32_t> fresh;
  for (uint32_t r = 0; r < ids.size(); ++r) {
    if ((!stored.empty() && stored[r] == 0) || known_resources_.count(ids[r]) != 0 ||
        std::find(p.new_resources.begin(), p.new_resources.end(), ids[r]) !=
            p.new_resources.end() ||
        std::find_if(fresh.begin(), fresh.end(), [&](uint32_t f) { return ids[f] == ids[r]; }) !=
            fresh.end()) {
      continue;
    }
    fresh.push_back(r);
  }
  if (!fresh.empty()) {
    const auto now = static_cast<uint32_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count());
    EncodeResourceBlock(*part, fresh, ids, now, caps_, &p.resource_blocks);
    for (uint32_t r : fresh) p.new_resources.push_back(ids[r]);
  }
  p.rows += part->span_count();
  p.bytes += part->MemoryBytes();
  p.batches.push_back(std::move(part));
  p.resource_ids.push_back(std::move(ids));
  p.reservations.push_back(std::move(res));
  if (ticket.valid()) p.tickets.push_back(std::move(ticket));
}

void EmbeddedWriter::Add(sink::QueuedBatch item) {
  if (item.block != nullptr) return AddReplayed(*item.block);
  const SpanBatch& b = *item.batch;
  const size_t n = b.span_count();
  if (n == 0) {
    item.ticket.Ack();  // nothing of this record is left to store
    return;
  }
  if (Clock::now() - known_since_ >= opts_.resource_refresh) {
    // Batches from now on store their resources again (fresh last_seen).
    known_resources_.clear();
    known_since_ = Clock::now();
  }
  const uint32_t first_day = PartitionDay(b.spans.start_ns[0]);
  bool one_day = true;
  for (size_t i = 1; i < n && one_day; ++i)
    one_day = PartitionDay(b.spans.start_ns[i]) == first_day;
  if (one_day) {
    return AddTo(first_day, std::move(item.batch), std::move(item.reservation),
                 std::move(item.ticket));
  }
  // Rare: a batch across midnight. One part per day, so each insert stays
  // within one partition.
  std::map<uint32_t, std::vector<uint32_t>> by_day;
  for (uint32_t i = 0; i < n; ++i) by_day[PartitionDay(b.spans.start_ns[i])].push_back(i);
  const size_t reserved = item.reservation.bytes();
  for (auto& [day, idx] : by_day) {
    auto part = std::make_unique<SpanBatch>();
    part->AppendSpans(b, idx.data(), idx.size());
    AddTo(day, std::move(part), item.reservation.Split(reserved * idx.size() / n),
          item.ticket.Clone());
  }
  item.ticket.Ack();  // each part holds the record now
}

std::chrono::milliseconds EmbeddedWriter::NextDue() const {
  const auto now = Clock::now();
  auto wait = std::chrono::milliseconds(100);
  auto until = [&](Clock::time_point due) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(due - now);
    wait = std::clamp(left, std::chrono::milliseconds(0), wait);
  };
  for (const auto& [day, p] : pending_) until(p.since + BlockAge());
  for (const auto& [day, f] : open_) until(f->since + opts_.max_age);
  return wait;
}

void EmbeddedWriter::Due(std::unique_ptr<Flight> f,
                         std::vector<std::unique_ptr<sink::Write>>* out) const {
  if (!f->sealed.sealed()) {
    f->key = InsertKey{opts_.shard, opts_.shards, f->day}.Encode();
    f->chunks = static_cast<uint32_t>(std::max<size_t>(1, f->spooled.size()));
  }
  out->push_back(std::move(f));
}

void EmbeddedWriter::TakeDue(bool flush, std::vector<std::unique_ptr<sink::Write>>* out) {
  for (auto& f : replayed_) out->push_back(std::move(f));
  replayed_.clear();
  TakeDueOnce(flush, out);
  // Stopping: this is the last call, so everything leaves now. A spool that
  // keeps failing is retried a bounded number of times, then what it held
  // is given up (or left in the durable queue for the next start).
  while (flush && !pending_.empty()) {
    if (spool_failures_ >= opts_.shutdown_retries) {
      for (auto& [day, p] : pending_) GiveUpAtShutdown(p.rows, !p.tickets.empty());
      pending_.clear();
      for (auto& [day, f] : open_) Due(std::move(f), out);
      open_.clear();
      break;
    }
    std::this_thread::sleep_for(std::min(
        opts_.max_backoff, std::chrono::milliseconds(100 << std::min(spool_failures_, 5))));
    TakeDueOnce(flush, out);
  }
  if (!flush && spool_failures_ > 0 && !pending_.empty()) {
    std::this_thread::sleep_for(std::min(
        opts_.max_backoff, std::chrono::milliseconds(100 << std::min(spool_failures_, 5))));
  }
}

void EmbeddedWriter::TakeDueOnce(bool flush, std::vector<std::unique_ptr<sink::Write>>* out) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    Pending& p = it->second;
    // Encoded and spooled when it holds enough, when its oldest span has
    // waited a quarter of max_age (its memory is better freed early: the
    // receivers' budget may be waiting for it), or when the day's open
    // insert is due.
    const auto open = open_.find(it->first);
    const bool due = p.rows >= opts_.max_rows || p.bytes >= opts_.max_bytes ||
                     Clock::now() - p.since >= BlockAge() ||
                     (open != open_.end() && Clock::now() - open->second->since >= opts_.max_age);
    // The day's insert will be this block only: none open, and the one it
    // opens is due at once (the same test as the hand-off's below; once
    // stopping, every day's open insert goes after this loop).
    const bool alone = open == open_.end() && (InsertDue(p.rows, p.since) || flush);
    if (p.rows > 0 && (due || flush) && Spool(it->first, p, alone)) {
      it = pending_.erase(it);  // frees the batches
    } else {
      ++it;
    }
  }
  for (auto it = open_.begin(); it != open_.end();) {
    const Flight& f = *it->second;
    if (InsertDue(f.rows + f.other_rows, f.since) || (flush && pending_.empty())) {
      Due(std::move(it->second), out);
      it = open_.erase(it);
    } else {
      ++it;
    }
  }
}

std::string InsertKey::Encode() const {
  std::string out;
  for (uint32_t v : {shard, shards, day}) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
  }
  return out;
}

bool InsertKey::Decode(std::string_view key) {
  if (key.size() != 12) return false;
  uint32_t v[3];
  for (int k = 0; k < 3; ++k) {
    v[k] = 0;
    for (int i = 3; i >= 0; --i) v[k] = (v[k] << 8) | static_cast<uint8_t>(key[4 * k + i]);
  }
  if (v[1] == 0 || v[0] >= v[1]) return false;
  shard = v[0];
  shards = v[1];
  day = v[2];
  return true;
}

bool InsertKey::Holds(const SpanBatch& b, uint32_t i) const {
  return sink::ShardOf(b.spans.trace_id[i], shards) == shard &&
         PartitionDay(b.spans.start_ns[i]) == day;
}

bool EmbeddedWriter::InsertDue(size_t rows, std::chrono::steady_clock::time_point since) const {
  return rows >= opts_.insert_rows || opts_.insert_rows <= opts_.max_rows ||
         Clock::now() - since >= opts_.max_age;
}

std::chrono::milliseconds EmbeddedWriter::BlockAge() const {
  return opts_.insert_rows <= opts_.max_rows ? opts_.max_age : opts_.max_age / 4;
}

std::string EmbeddedWriter::SpoolPath(uint64_t seq) const {
  return fmt::format("{}/insert-{}-spans-{}.native", opts_.spool_dir, opts_.name, seq);
}

std::string EmbeddedWriter::SampledSpoolPath() const {
  return fmt::format("{}/insert-{}-sampled_spans.native", opts_.spool_dir, opts_.name);
}

std::string EmbeddedWriter::SpoolPattern(const std::vector<uint64_t>& seqs) const {
  if (seqs.size() == 1) return SpoolPath(seqs[0]);
  // file()'s {a,b,c}: every block of the insert, read as one input.
  return fmt::format("{}/insert-{}-spans-{{{}}}.native", opts_.spool_dir, opts_.name,
                     fmt::join(seqs, ","));
}

void EmbeddedWriter::ReleaseSpooled(const Flight& f) {
  std::lock_guard<std::mutex> lock(kept_mu_);
  for (uint64_t seq : f.spooled) {
    if (kept_spool_files_.size() < kKeptSpoolFiles) {
      kept_spool_files_.push_back(seq);
    } else {
      std::remove(SpoolPath(seq).c_str());
    }
  }
}

void EmbeddedWriter::ReuseSpoolFile(uint64_t seq) {
  uint64_t old = 0;
  {
    std::lock_guard<std::mutex> lock(kept_mu_);
    if (kept_spool_files_.empty()) return;
    old = kept_spool_files_.back();
    kept_spool_files_.pop_back();
  }
  // Names stay in spool order (an insert's blocks are read in that order);
  // on failure the new file is simply made afresh.
  if (std::rename(SpoolPath(old).c_str(), SpoolPath(seq).c_str()) != 0) {
    std::remove(SpoolPath(old).c_str());
    return;
  }
  stats_.spool_files_reused += 1;
}

void EmbeddedWriter::RemoveKeptSpoolFiles() {
  std::lock_guard<std::mutex> lock(kept_mu_);
  for (uint64_t seq : kept_spool_files_) std::remove(SpoolPath(seq).c_str());
  kept_spool_files_.clear();
  std::remove(SampledSpoolPath().c_str());
}

void EmbeddedWriter::CleanSpool() {
  if (spool_cleaned_) return;
  spool_cleaned_ = true;
  std::error_code ec;
  std::filesystem::create_directories(opts_.spool_dir, ec);
  // Blocks spooled by a process that stopped before inserting them: their
  // spans are in the durable queue (replayed) or were given up then.
  const std::string prefix = fmt::format("insert-{}-", opts_.name);
  for (const auto& e : std::filesystem::directory_iterator(opts_.spool_dir, ec)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) std::filesystem::remove(e.path(), ec);
  }
}

namespace {

// Writes `pieces` over the file at `path` (made if missing), then cuts it
// to their size: a file written over keeps the pages it has.
Status WriteSpoolFile(const std::string& path, std::span<const std::string> pieces) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Internal("cannot write " + path + ": " + std::strerror(errno));
  off_t at = 0;
  bool ok = true;
  for (const std::string& piece : pieces) {
    for (size_t done = 0; ok && done < piece.size();) {
      const ssize_t n = ::pwrite(fd, piece.data() + done, piece.size() - done, at);
      if (n < 0 && errno == EINTR) continue;
      ok = n > 0;
      if (ok) {
        done += static_cast<size_t>(n);
        at += n;
      }
    }
  }
  ok = ok && ::ftruncate(fd, at) == 0;
  ok = (::close(fd) == 0) && ok;
  if (!ok) return Status::Internal("short write to " + path);
  return Status::Ok();
}

// Appends the file at `path` to `out`.
Status AppendFile(const std::string& path, std::string* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Internal("cannot read " + path + ": " + std::strerror(errno));
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0;
  const size_t at = out->size();
  const auto size = static_cast<size_t>(ok ? st.st_size : 0);
  out->resize(at + size);
  for (size_t done = 0; ok && done < size;) {
    const ssize_t n = ::pread(fd, out->data() + at + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (!ok) return Status::Internal("short read of " + path);
  return Status::Ok();
}

}  // namespace

bool EmbeddedWriter::Spool(uint32_t day, Pending& p, bool alone) {
  Encode(p, alone);
  const bool spans = !rows_.empty();  // else every span was sampled out: no spans block
  const uint64_t seq = spans ? ++spool_seq_ : 0;
  if (spans) {
    ReuseSpoolFile(seq);
    if (Status st = WriteSpoolFile(SpoolPath(seq), block_.pieces); !st.ok()) {
      std::remove(SpoolPath(seq).c_str());
      ++spool_failures_;
      stats_.write_errors += 1;
      stats_.retryable_errors += 1;
      spdlog::warn("writer {}: cannot spool {} spans (day {}), attempt {}: {}", opts_.name, p.rows,
                   day, spool_failures_, st.message());
      return false;
    }
    stats_.blocks_spooled += 1;
    if (alone) stats_.blocks_sorted += 1;
  }
  spool_failures_ = 0;
  std::unique_ptr<Flight>& slot = open_[day];
  const bool fresh = slot == nullptr;
  if (fresh) slot = std::make_unique<Flight>();
  Flight& f = *slot;
  if (fresh) {
    f.day = day;
    f.since = p.since;
  }
  f.since = std::min(f.since, p.since);
  f.rows += rows_.size();
  f.resource_blocks += p.resource_blocks;
  if (spans) f.spooled.push_back(seq);
  if (!sampled_.empty()) {
    // The sampled rows stay in memory until their insert: that much of the
    // batches' reservations stays with them.
    size_t keep = sampled_.bytes();
    for (auto& r : p.reservations) {
      if (keep == 0) break;
      Reservation part = r.Split(keep);
      if (part.bytes() == 0) continue;
      keep -= std::min(keep, part.bytes());
      f.sampled_memory.push_back(std::move(part));
    }
    f.sampled.Append(sampled_);
    f.other_rows = f.sampled.rows();
  }
  for (auto& t : p.tickets) f.tickets.push_back(std::move(t));
  // Counted as stored from here: inserts are stored in order, resources
  // before spans, and each is retried until stored (or given up at
  // shutdown, spans counted as lost), so a later insert never stores a span
  // whose resource was not stored.
  if (known_resources_.size() + p.new_resources.size() > kMaxKnownResources) {
    known_resources_.clear();
  }
  known_resources_.insert(p.new_resources.begin(), p.new_resources.end());
  // The spans are on disk now (and in the durable queue, if any): their
  // memory goes back to the receivers. The runtime's hand-off (one insert
  // waiting at most) is what keeps a slow store from piling up spool files.
  p.reservations.clear();
  return true;
}

void EmbeddedWriter::Encode(const Pending& p, bool sorted) {
  // `sorted`: in the table's sort order (kSpansOrderBy: second, trace_id,
  // start_time). The engine checks whether an inserted block is already
  // sorted and then skips sorting it and permuting every column, measured as
  // about a third of an insert's CPU. Only of use when the insert is this
  // block alone: the engine squashes an insert's blocks into one and sorts
  // that, sorted runs or not (bench: 12.6 vs 13.4-14.1 CPU-s per million
  // spans end to end without the writer's sort of such blocks).
  rows_.clear();
  rows_.reserve(p.rows);
  sampled_.Clear();
  for (size_t k = 0; k < p.batches.size(); ++k) {
    GatherSpanRows(*p.batches[k], p.resource_ids[k], &rows_, &sampled_);
  }
  if (rows_.empty()) return;  // all sampled out
  if (sorted) SortByTableKey(&rows_);
  EncodeSpanRows(rows_, caps_, &block_, user_fields_, layout_.user_field_values,
                 layout_.extras_column, layout_.span_ids_column, layout_.attr_columns,
                 user_fields_map_);
}

Status EmbeddedWriter::WriteOnce(Flight& f) {
  if (faults_ != nullptr) {
    std::this_thread::sleep_for(std::chrono::milliseconds(faults_->insert_delay_ms.load()));
    if (faults_->fail_inserts.load()) return Status::Unavailable("injected insert failure");
    if (faults_->fail_permanent.load()) {
      return Status::Internal("Code: 53. injected permanent insert failure (TYPE_MISMATCH)");
    }
  }
  SH_RETURN_IF_ERROR(InsertOnce(f));
  if (faults_ != nullptr && faults_->kill_after_insert.load()) ::raise(SIGKILL);
  return Status::Ok();
}

void EmbeddedWriter::Finished(Flight& f, bool stored) {
  if (stored) stats_.sampled_rows_written += f.sampled.rows();
  ReleaseSpooled(f);  // stored, dead-lettered or left in the durable queue
  f.sampled_memory.clear();
}

Status EmbeddedWriter::InsertOnce(Flight& p) {
  if (!conn_->local_files()) return InsertInline(p);
  if (!p.spans_stored) {
    // Resources first: a span is never stored before its resource.
    if (!p.resource_blocks.empty()) {
      const std::string path =
          fmt::format("{}/insert-{}-resources.native", opts_.spool_dir, opts_.name);
      if (Status st = WriteSpoolFile(path, {&p.resource_blocks, 1}); !st.ok()) return st;
      Status st = InsertFiles("resources", path, 0);
      std::remove(path.c_str());
      if (!st.ok()) return st;
    }
    if (!p.spooled.empty()) {
      SH_RETURN_IF_ERROR(InsertFiles("spans", SpoolPattern(p.spooled), p.rows, p.sealed.token));
    }
    p.spans_stored = true;
  }
  if (p.sampled.empty()) return Status::Ok();
  // Written over at each insert (its pages stay cached), removed at the end.
  SH_RETURN_IF_ERROR(WriteSpoolFile(SampledSpoolPath(), p.sampled.Block(caps_)));
  return InsertFiles("sampled_spans", SampledSpoolPath(), p.sampled.rows(), p.sealed.token);
}

std::vector<QueryParam> EmbeddedWriter::InsertSettings(std::string_view table, size_t rows,
                                                       const std::string& token) const {
  std::vector<QueryParam> settings;
  if (table == "spans" && caps_.json_type) {
    // A user field both on the span and its resource: the first (the
    // span's) is kept, rather than the whole insert failing.
    settings.emplace_back("type_json_skip_duplicated_paths", "1");
  }
  if (rows > 0) {
    // The blocks squashed into one, so one part (bytes: no limit).
    settings.emplace_back("min_insert_block_size_rows", std::to_string(rows));
    settings.emplace_back("min_insert_block_size_bytes", "0");
  }
  if (!token.empty() && caps_.dedup_token) {
    // The views' tables (trace_index, red_1m, red_service_1m, operations)
    // deduplicate with it too.
    settings.emplace_back("insert_deduplicate", "1");
    settings.emplace_back("insert_deduplication_token", token);
    settings.emplace_back("deduplicate_blocks_in_dependent_materialized_views", "1");
  }
  return settings;
}

Status EmbeddedWriter::InsertFiles(std::string_view table, const std::string& path, size_t rows,
                                   const std::string& token) {
  // Columns are matched by name (the file carries them), so the block and
  // the table cannot silently disagree on order.
  std::string sql = InsertFromFileSql(fmt::format("{}.{}", opts_.database, table),
                                      RowFormat::kNative, caps_, FileStructure::kTable);
  std::vector<std::string> settings;
  for (const auto& [name, value] : InsertSettings(table, rows, token)) {
    // The token is ours (hex and digits, records.h: DedupToken): safe inline.
    settings.push_back(name == "insert_deduplication_token" ? fmt::format("{} = '{}'", name, value)
                                                            : fmt::format("{} = {}", name, value));
  }
  if (!settings.empty()) {
    sql.insert(sql.find(" SELECT "), fmt::format(" SETTINGS {}", fmt::join(settings, ", ")));
  }
  return conn_->Run(sql, "", nullptr, {{"path", path}});
}

Status EmbeddedWriter::InsertInline(Flight& p) {
  // The same blocks as the files the embedded engine reads, as the
  // request's body: a retry sends the same bytes, so a replicated table
  // knows the block again where the server has no token.
  // What went on the wire (compressed, or not), counted however it ends.
  const uint64_t sent_before = conn_->bytes_sent();
  struct CountSent {
    SqlConnection* conn;
    WriterStats& stats;
    uint64_t before;
    ~CountSent() { stats.bytes_sent += conn->bytes_sent() - before; }
  } count{conn_, stats_, sent_before};
  if (!p.spans_stored) {
    if (!p.resource_blocks.empty()) {
      SH_RETURN_IF_ERROR(
          conn_->Insert(fmt::format("INSERT INTO {}.resources FORMAT Native", opts_.database),
                        p.resource_blocks, InsertSettings("resources", 0, {})));
    }
    if (!p.spooled.empty()) {
      std::string body;
      for (uint64_t seq : p.spooled) SH_RETURN_IF_ERROR(AppendFile(SpoolPath(seq), &body));
      SH_RETURN_IF_ERROR(
          conn_->Insert(fmt::format("INSERT INTO {}.spans FORMAT Native", opts_.database),
                        std::move(body), InsertSettings("spans", p.rows, p.sealed.token)));
    }
    p.spans_stored = true;
  }
  if (p.sampled.empty()) return Status::Ok();
  std::string body;
  for (const std::string& piece : p.sampled.Block(caps_)) body += piece;
  return conn_->Insert(fmt::format("INSERT INTO {}.sampled_spans FORMAT Native", opts_.database),
                       std::move(body),
                       InsertSettings("sampled_spans", p.sampled.rows(), p.sealed.token));
}

void EmbeddedWriter::GiveUpAtShutdown(size_t rows, bool logged) {
  stats_.pending_rows -= std::min<uint64_t>(stats_.pending_rows.load(), rows);
  if (logged) {
    // Still in the durable queue: the next start stores them.
    spdlog::error("writer {}: {} spans left in the durable queue at shutdown", opts_.name, rows);
    stats_.rows_left_queued += rows;
    return;
  }
  spdlog::error("writer {}: giving up on {} spans at shutdown", opts_.name, rows);
  stats_.rows_lost += rows;
}

Status EmbeddedWriter::DeadLetter(Flight& f, const Status& why) {
  // What is not stored yet: the spans block (unless stored before the
  // sampled rows were refused), the sampled_spans block.
  DeadLetterEntry e;
  e.writer = opts_.name;
  e.day = f.day;
  e.error = why.message();
  if (f.spans_stored) f.stored = f.rows;
  if (!f.spans_stored && !f.spooled.empty()) {
    e.rows = f.rows;
    std::vector<std::string> pieces;  // the spooled blocks, read back
    for (uint64_t seq : f.spooled) {
      std::ifstream in(SpoolPath(seq), std::ios::binary);
      pieces.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    SH_RETURN_IF_ERROR(WriteDeadLetter(DeadLetterDir(), e, pieces));
  }
  if (f.sampled.empty()) return Status::Ok();
  e.table = "sampled_spans";
  e.rows = f.sampled.rows();
  return WriteDeadLetter(DeadLetterDir(), e, f.sampled.Block(caps_));
}

std::string EmbeddedWriter::DeadLetterDir() const {
  if (!opts_.dead_letter_dir.empty()) return opts_.dead_letter_dir;
  return (std::filesystem::path(opts_.spool_dir).parent_path() / "dead-letter").string();
}

void EmbeddedWriter::AddReplayed(sink::ReplayBlock& block) {
  // Spooled apart from the live pending sets and open inserts, and inserted
  // alone: its token stands for exactly these spans in as many blocks.
  std::map<uint32_t, Pending> saved;
  saved.swap(pending_);
  std::map<uint32_t, std::unique_ptr<Flight>> saved_open;
  saved_open.swap(open_);
  InsertKey key;
  (void)key.Decode(block.key);  // read by the sink's BlockMembers already
  const uint32_t day = key.day;
  const size_t rows = block.spans();
  // As many spooled blocks of spans as the first insert read (each
  // record's spans went to one of them; which one does not matter to the
  // engine). Only records with spans to store make a spans block: one
  // whose spans were all sampled out joins its neighbours' (their sampled
  // rows are one block of their own whatever the grouping).
  auto& parts = block.parts;
  std::vector<uint8_t> stores(parts.size());
  size_t storing = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto& m = parts[i]->spans.metrics_only;
    stores[i] = std::find(m.begin(), m.end(), uint8_t{0}) != m.end() ? 1 : 0;
    storing += stores[i];
  }
  if (block.chunks > std::max<size_t>(1, storing)) {
    spdlog::warn("writer {}: a sealed insert of {} blocks formed again from {} records", opts_.name,
                 block.chunks, storing);
  }
  const size_t n = std::max<size_t>(1, std::min<size_t>(block.chunks, storing));
  bool spooled = true;
  size_t next = 0;  // the next part to add
  size_t seen = 0;  // parts with spans to store added so far
  for (size_t k = 0; k < n && spooled; ++k) {
    // The k-th share of the parts with spans, and the sampled-only parts
    // before the next of them (the last block: all that is left).
    const size_t until = (k + 1) * storing / n;
    while (next < parts.size() && (seen < until || k + 1 == n)) {
      seen += stores[next];
      AddTo(day, std::move(parts[next++]), Reservation(), sink::Ticket());
    }
    for (int attempt = 1; !Spool(day, pending_[day], n == 1); ++attempt) {
      if (attempt >= opts_.unknown_error_attempts) {
        spooled = false;
        break;
      }
      std::this_thread::sleep_for(std::min(opts_.max_backoff, std::chrono::milliseconds(100)));
    }
    pending_.erase(day);
  }
  std::unique_ptr<Flight> f = std::move(open_[day]);
  pending_.swap(saved);
  open_.swap(saved_open);
  if (!spooled || f == nullptr) {
    // Its tickets go unacked: the records stay for the next start.
    spdlog::error("writer {}: {} replayed spans left in the durable queue: cannot spool them",
                  opts_.name, rows);
    stats_.pending_rows -= std::min<uint64_t>(stats_.pending_rows.load(), rows);
    stats_.rows_left_queued += rows;
    spool_failures_ = 0;
    if (f != nullptr) ReleaseSpooled(*f);
    return;
  }
  f->tickets = std::move(block.tickets);
  f->sealed = block.sealed;
  f->key = block.key;
  f->chunks = block.chunks;
  replayed_.push_back(std::move(f));
}

}  // namespace spanhouse::storage
