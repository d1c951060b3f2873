// `spanhouse backfill --from opensearch|elasticsearch`: the history a cluster
// holds from before the dual-write began (written by Jaeger itself, or by
// anything that writes Jaeger's format), copied into ClickHouse through a
// serving spanhouse.
//
// The range is cut into chunks of about equal span counts (a histogram of
// start times, asked once; backfill_plan.h), more than there are workers:
// --parallel workers each take the next chunk not done and read it in pages
// in (startTime, traceID, spanID) order with search_after, each page posted
// to the server's POST /api/admin/import, which stores in ClickHouse only
// the spans it does not hold (nor is storing) and answers once they are in
// its durable queue. After each answered page the chunk's position is saved
// (the checkpoint file: written to a temporary file, synced, renamed), so a
// killed backfill resumes every chunk where it stopped; and since the server
// skips what is stored, a page sent twice, or a whole second run, adds
// nothing. At the end the command waits until the server has stored
// everything it accepted.
#include <fcntl.h>
#include <malloc.h>
#include <simdjson.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "storage/opensearch/index_layout.h"
#include "storage/opensearch/jaeger_document.h"
#include "storage/opensearch/opensearch_client.h"
#include "tools/migrate/admin_client.h"
#include "tools/migrate/backfill_plan.h"
#include "tools/migrate/migrate.h"

namespace spanhouse::migrate {

struct BackfillFlags {
  std::string from;
  std::string server = "http://127.0.0.1:16686";
  std::string token;
  std::string ca_file;
  std::string url;
  std::string index_prefix;
  std::string date_layout = "2006-01-02";
  bool use_aliases = false;
  std::string user;
  std::string password;
  std::string api_key;
  std::string tls_cert;
  std::string tls_key;
  std::string start;
  std::string end;
  std::string checkpoint = "backfill.checkpoint";
  uint64_t page_spans = 5000;
  int parallel = 4;
  bool quiet = false;
};

namespace {

using Clock = std::chrono::steady_clock;
using storage::opensearch::OpenSearchClient;

// Chunks per worker: enough that an uneven history keeps every worker busy
// to the end (a worker left with the last big chunk is the tail).
constexpr size_t kChunksPerWorker = 8;
// Buckets of the start-time histogram the chunks are cut from.
constexpr uint64_t kHistogramBuckets = 1000;

// The one place the history's cluster is opened (OpenSearch, or
// Elasticsearch, which reads the same).
Status OpenSource(const BackfillFlags& f, std::unique_ptr<OpenSearchClient>* out) {
  storage::opensearch::OpenSearchOptions oo;
  for (size_t p = 0; p <= f.url.size();) {
    const size_t e = std::min(f.url.find(',', p), f.url.size());
    if (e > p) oo.urls.push_back(f.url.substr(p, e - p));
    p = e + 1;
  }
  oo.user = f.user;
  oo.password = f.password;
  oo.api_key = f.api_key;
  oo.tls_ca_file = f.ca_file;
  oo.tls_cert_file = f.tls_cert;
  oo.tls_key_file = f.tls_key;
  oo.timeout = std::chrono::seconds(120);
  SH_RETURN_IF_ERROR(OpenSearchClient::Create(oo, out));
  // The engine first: an unsupported one, or another than --from names, is
  // said now rather than as a failed search.
  storage::opensearch::EngineInfo engine;
  SH_RETURN_IF_ERROR((*out)->DetectEngine(&engine));
  const std::string name(storage::opensearch::EngineName(engine.engine));
  if (storage::opensearch::EngineId(engine.engine) != f.from) {
    return Status::Invalid("--from " + f.from + ", but " + f.url + " is " + name + " " +
                           engine.version);
  }
  return Status::Ok();
}

// Where the history's span documents lie: every dated index of the layout,
// or the read alias.
Status SourceIndices(const BackfillFlags& f, std::string* out) {
  storage::opensearch::IndexLayoutOptions o;
  o.prefix = f.index_prefix;
  o.date_layout = f.date_layout;
  o.use_aliases = f.use_aliases;
  storage::opensearch::IndexLayout layout;
  SH_RETURN_IF_ERROR(storage::opensearch::IndexLayout::Create(o, &layout));
  *out = layout.AllIndices(storage::opensearch::IndexKind::kSpan);
  return Status::Ok();
}

Status SaveFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Internal("cannot write the checkpoint " + tmp);
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::Internal("cannot write the checkpoint " + path);
  }
  return Status::Ok();
}

// false in *found: no checkpoint there.
Status Load(const std::string& path, BackfillCheckpoint* c, bool* found) {
  std::ifstream in(path);
  *found = false;
  if (!in) return Status::Ok();
  std::stringstream ss;
  ss << in.rdbuf();
  SH_RETURN_IF_ERROR(ParseCheckpoint(ss.str(), path, c));
  *found = true;
  return Status::Ok();
}

std::string SearchTarget(const std::string& index) {
  return "/" + index + "/_search?ignore_unavailable=true&allow_no_indices=true";
}

// The spans of [start, end) in about kHistogramBuckets buckets (those with
// any), in time order.
Status Histogram(OpenSearchClient& os, const std::string& index, uint64_t start, uint64_t end,
                 std::vector<SpanCount>* out) {
  const uint64_t width =
      std::max<uint64_t>(1, (end - start + kHistogramBuckets - 1) / kHistogramBuckets);
  const std::string q =
      "{\"size\":0,\"track_total_hits\":false,\"query\":{\"range\":{\"startTime\":{\"gte\":" +
      std::to_string(start) + ",\"lt\":" + std::to_string(end) +
      "}}},\"aggs\":{\"t\":{\"histogram\":{\"field\":\"startTime\",\"interval\":" +
      std::to_string(width) + ",\"offset\":" + std::to_string(start % width) +
      ",\"min_doc_count\":1}}}}";
  std::string answer;
  if (Status st = os.PostJson(SearchTarget(index), q, &answer); !st.ok()) {
    return Status::Unavailable("counting the spans to read: " + st.message());
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(answer).get(doc) != simdjson::SUCCESS) {
    return Status::Unavailable("the cluster's answer to a search is not JSON: " +
                               answer.substr(0, 200));
  }
  simdjson::dom::array buckets;
  if (doc["aggregations"]["t"]["buckets"].get_array().get(buckets) != simdjson::SUCCESS) {
    if (doc["hits"].error() == simdjson::SUCCESS && doc["aggregations"].error()) {
      return Status::Ok();  // no index matches: nothing to read
    }
    return Status::Unavailable(
        "the cluster answered the histogram of start times with something else: " +
        answer.substr(0, 200));
  }
  for (simdjson::dom::element b : buckets) {
    double key = 0;
    uint64_t spans = 0;
    if (b["key"].get_double().get(key) != simdjson::SUCCESS ||
        b["doc_count"].get_uint64().get(spans) != simdjson::SUCCESS || key < 0) {
      return Status::Unavailable("a histogram bucket without key or doc_count");
    }
    const auto first = std::max(start, static_cast<uint64_t>(std::llround(key)));
    out->push_back({first, std::min(end, first + width), spans});
  }
  return Status::Ok();
}

// The chunks of [start, end): a histogram of the start times, its buckets
// that hold more than a chunk's share counted again finer (a busy hour in a
// quiet week), cut into about `n` chunks of equal span counts. *total: the
// spans counted.
Status Plan(OpenSearchClient& os, const std::string& index, uint64_t start, uint64_t end, size_t n,
            std::vector<BackfillChunk>* chunks, uint64_t* total) {
  std::vector<SpanCount> coarse;
  SH_RETURN_IF_ERROR(Histogram(os, index, start, end, &coarse));
  *total = 0;
  for (const SpanCount& b : coarse) *total += b.spans;
  const uint64_t share = (*total + n - 1) / std::max<size_t>(n, 1);
  std::vector<SpanCount> fine;
  size_t refined = 0;
  for (const SpanCount& b : coarse) {
    if (b.spans > share && b.end_us - b.start_us > 1 && refined < n) {
      ++refined;
      SH_RETURN_IF_ERROR(Histogram(os, index, b.start_us, b.end_us, &fine));
    } else {
      fine.push_back(b);
    }
  }
  *chunks = PlanChunks(start, end, fine, n);
  return Status::Ok();
}

// A page of span documents: their `_source`s as NDJSON, and the last one's
// sort values.
struct Page {
  std::string ndjson;
  std::string last_sort;
  size_t hits = 0;
};

// Reads the hits of a search answer without rebuilding them: each `_source`
// is copied as the cluster wrote it (minified only if it has line breaks,
// which NDJSON cannot carry).
Status ReadPage(simdjson::ondemand::parser& parser, std::string& answer, Page* page) {
  answer.reserve(answer.size() + simdjson::SIMDJSON_PADDING);
  simdjson::ondemand::document doc;
  simdjson::ondemand::array hits;
  auto bad = [&](const char* what) {
    return Status::Unavailable(std::string("the cluster answered a search with something else (") +
                               what + "): " + answer.substr(0, 200));
  };
  if (parser.iterate(answer.data(), answer.size(), answer.capacity()).get(doc) !=
          simdjson::SUCCESS ||
      doc["hits"]["hits"].get_array().get(hits) != simdjson::SUCCESS) {
    return bad("no hits");
  }
  std::string minified;
  for (auto hit_result : hits) {
    simdjson::ondemand::object hit;
    if (hit_result.get_object().get(hit) != simdjson::SUCCESS) return bad("a hit");
    bool source_seen = false;
    for (auto field : hit) {
      std::string_view key;
      if (field.unescaped_key().get(key) != simdjson::SUCCESS) return bad("a hit's field");
      if (key == "_source") {
        simdjson::ondemand::object source;
        std::string_view raw;
        if (field.value().get_object().get(source) != simdjson::SUCCESS ||
            source.raw_json().get(raw) != simdjson::SUCCESS) {
          return bad("a _source");
        }
        // (JSON has line breaks only between tokens, never in strings.)
        if (std::memchr(raw.data(), '\n', raw.size()) != nullptr ||
            std::memchr(raw.data(), '\r', raw.size()) != nullptr) {
          minified.resize(raw.size());
          size_t len = 0;
          if (simdjson::minify(raw.data(), raw.size(), minified.data(), len) != simdjson::SUCCESS) {
            return bad("a _source");
          }
          raw = std::string_view(minified.data(), len);
        }
        page->ndjson += raw;
        page->ndjson += '\n';
        source_seen = true;
      } else if (key == "sort") {
        simdjson::ondemand::array sort;
        std::string_view raw;
        if (field.value().get_array().get(sort) != simdjson::SUCCESS ||
            sort.raw_json().get(raw) != simdjson::SUCCESS) {
          return bad("sort values");
        }
        page->last_sort.assign(raw);
      }
    }
    if (!source_seen) return bad("a hit without _source");
    ++page->hits;
  }
  if (page->hits > 0 && page->last_sort.empty()) return bad("hits without sort values");
  return Status::Ok();
}

// The workers' shared state: the checkpoint, which chunks are free, what
// went wrong first.
class Run {
 public:
  Run(const BackfillFlags& f, BackfillCheckpoint cp, OpenSearchClient& os)
      : f_(f), cp_(std::move(cp)), os_(os) {
    for (size_t i = 0; i < cp_.chunks.size(); ++i) {
      if (!cp_.chunks[i].done) free_.push_back(i);
    }
    for (const BackfillChunk& k : cp_.chunks) {
      if (!k.done) continue;
      done_spans_ += k.spans;
      done_us_ += k.end_us - k.start_us;
    }
    position_.resize(cp_.chunks.size());
    for (size_t i = 0; i < cp_.chunks.size(); ++i) {
      position_[i] = cp_.chunks[i].start_us;
      if (!cp_.chunks[i].after.empty()) CursorStartTime(cp_.chunks[i].after, &position_[i]);
    }
  }

  // Runs the workers to the end; the checkpoint is saved after each page.
  Status Go();
  const BackfillCheckpoint& checkpoint() const { return cp_; }
  uint64_t read_this_run() const { return read_run_.load(); }

 private:
  void Work();
  Status ReadChunk(size_t i, AdminClient& server);
  // Takes page `page`'s import answer into chunk i (and saves the checkpoint).
  Status Imported(size_t i, const Page& page, const std::string& answer, bool last);
  void Fail(const Status& st);
  void Progress();
  std::string Snapshot();

  const BackfillFlags& f_;
  BackfillCheckpoint cp_;  // guarded by mu_
  OpenSearchClient& os_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<size_t> free_;         // chunks no worker took yet
  std::vector<uint64_t> position_;  // each chunk's start time reached
  uint64_t done_spans_ = 0;         // the planned spans of the chunks done
  uint64_t done_us_ = 0;            // their length
  size_t active_ = 0;               // chunks being read
  Status failed_;
  bool finished_ = false;
  std::mutex save_mu_;  // one write of the file at a time, newest last
  std::atomic<uint64_t> read_run_{0}, imported_run_{0};
};

Status Run::Go() {
  std::vector<std::thread> workers;
  const size_t n = std::min<size_t>(static_cast<size_t>(f_.parallel), free_.size());
  for (size_t i = 0; i < n; ++i) workers.emplace_back([this] { Work(); });
  std::thread progress;
  if (!f_.quiet) progress = std::thread([this] { Progress(); });
  for (auto& t : workers) t.join();
  {
    std::lock_guard lock(mu_);
    finished_ = true;
  }
  cv_.notify_all();
  if (progress.joinable()) progress.join();
  std::lock_guard lock(mu_);
  return failed_;
}

void Run::Fail(const Status& st) {
  std::lock_guard lock(mu_);
  if (failed_.ok()) failed_ = st;
  free_.clear();  // the others stop after their page
}

void Run::Work() {
  std::unique_ptr<AdminClient> server;
  if (Status st = AdminClient::Open(f_.server, f_.token, f_.ca_file, &server); !st.ok()) {
    return Fail(st);
  }
  for (;;) {
    size_t i = 0;
    {
      std::lock_guard lock(mu_);
      if (free_.empty()) return;
      i = free_.front();
      free_.pop_front();
      ++active_;
    }
    Status st = ReadChunk(i, *server);
    {
      std::lock_guard lock(mu_);
      --active_;
    }
    if (!st.ok()) return Fail(st);
  }
}

Status Run::ReadChunk(size_t i, AdminClient& server) {
  simdjson::ondemand::parser parser;
  std::string after;
  uint64_t start = 0, end = 0;
  {
    std::lock_guard lock(mu_);
    after = cp_.chunks[i].after;
    start = cp_.chunks[i].start_us;
    end = cp_.chunks[i].end_us;
  }
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (!failed_.ok()) return Status::Ok();  // another worker's failure ends the run
    }
    // From the cursor's start time on: the search skips what is before it
    // at once, and search_after the rest of what was read.
    uint64_t from = start;
    if (!after.empty()) CursorStartTime(after, &from);
    std::string q = "{\"size\":" + std::to_string(f_.page_spans) +
                    ",\"track_total_hits\":false,\"query\":{\"range\":{\"startTime\":{\"gte\":" +
                    std::to_string(std::max(from, start)) + ",\"lt\":" + std::to_string(end) +
                    "}}},\"sort\":[{\"startTime\":\"asc\"},{\"traceID\":\"asc\"},{\"spanID\":"
                    "\"asc\"}]";
    if (!after.empty()) q += ",\"search_after\":" + after;
    q += "}";
    std::string answer;
    if (Status st = os_.PostJson(SearchTarget(cp_.index), q, &answer); !st.ok()) {
      return Status::Unavailable("reading the cluster: " + st.message());
    }
    // (Documents with the same sort values, a span written twice, are passed
    // by search_after together when a page ends at the first: the second is
    // not read. The server would keep one of them anyway.)
    Page page;
    SH_RETURN_IF_ERROR(ReadPage(parser, answer, &page));
    answer = std::string();
    // Fewer than asked: the chunk's last page.
    const bool last = page.hits < f_.page_spans;
    std::string result;
    if (page.hits > 0) {
      if (Status st = server.PostNdjson("/api/admin/import", std::move(page.ndjson), &result);
          !st.ok()) {
        return Status::Unavailable("importing into spanhouse: " + st.message());
      }
    }
    SH_RETURN_IF_ERROR(Imported(i, page, result, last));
    if (last) return Status::Ok();
    after = page.last_sort;
  }
}

Status Run::Imported(size_t i, const Page& page, const std::string& answer, bool last) {
  uint64_t received = 0, imported = 0, stored = 0, invalid = 0;
  if (page.hits > 0) {
    simdjson::dom::parser parser;
    simdjson::dom::element r;
    if (parser.parse(answer).get(r) != simdjson::SUCCESS ||
        r["received"].get_uint64().get(received) != simdjson::SUCCESS ||
        r["imported"].get_uint64().get(imported) != simdjson::SUCCESS ||
        r["already_stored"].get_uint64().get(stored) != simdjson::SUCCESS ||
        r["invalid"].get_uint64().get(invalid) != simdjson::SUCCESS) {
      return Status::Unavailable("spanhouse answered the import with something else: " +
                                 answer.substr(0, 200));
    }
  }
  {
    std::lock_guard lock(mu_);
    BackfillChunk& k = cp_.chunks[i];
    if (page.hits > 0) {
      k.after = page.last_sort;
      CursorStartTime(k.after, &position_[i]);
      cp_.pages += 1;
    }
    k.read += received;
    cp_.read += received;
    cp_.imported += imported;
    cp_.already_stored += stored;
    cp_.invalid += invalid;
    if (last) {
      k.done = true;
      done_spans_ += k.spans;
      done_us_ += k.end_us - k.start_us;
    }
  }
  read_run_ += received;
  imported_run_ += imported;
  std::lock_guard save(save_mu_);
  return SaveFile(f_.checkpoint, Snapshot());
}

std::string Run::Snapshot() {
  std::lock_guard lock(mu_);
  return CheckpointJson(cp_);
}

std::string Duration(double s) {
  char buf[32];
  const auto t = static_cast<uint64_t>(s);
  if (t >= 3600) {
    std::snprintf(buf, sizeof(buf), "%lluh%02llum", static_cast<unsigned long long>(t / 3600),
                  static_cast<unsigned long long>(t / 60 % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%llum%02llus", static_cast<unsigned long long>(t / 60),
                  static_cast<unsigned long long>(t % 60));
  }
  return buf;
}

// A line a second on stderr: what was read and imported, the rate over the
// last ten seconds and overall, how much of the range is done, and when the
// rest should be.
void Run::Progress() {
  const auto t0 = Clock::now();
  std::deque<std::pair<Clock::time_point, uint64_t>> recent{{t0, 0}};
  std::unique_lock lock(mu_);
  for (bool last = false; !last;) {
    last = cv_.wait_for(lock, std::chrono::seconds(1), [&] { return finished_; });
    const auto now = Clock::now();
    const uint64_t run = read_run_.load();
    recent.emplace_back(now, run);
    while (recent.size() > 2 && now - recent[1].first >= std::chrono::seconds(10)) {
      recent.pop_front();
    }
    const double window = std::chrono::duration<double>(now - recent.front().first).count();
    const double rate = window > 0 ? static_cast<double>(run - recent.front().second) / window : 0;
    const double secs = std::chrono::duration<double>(now - t0).count();
    // Done: the chunks done, and in the others the part up to their position.
    uint64_t spans_done = done_spans_;
    uint64_t us_done = done_us_;
    for (size_t i = 0; i < cp_.chunks.size(); ++i) {
      const BackfillChunk& k = cp_.chunks[i];
      if (k.done) continue;
      spans_done += std::min(k.read, k.spans);
      us_done += position_[i] - k.start_us;
    }
    const uint64_t left = cp_.total - std::min(cp_.total, spans_done);
    const double time_pct =
        100.0 * static_cast<double>(us_done) / static_cast<double>(cp_.end_us - cp_.start_us);
    const std::string eta = left == 0  ? "0m00s"
                            : rate > 0 ? Duration(static_cast<double>(left) / rate)
                                       : "?";
    std::fprintf(stderr,
                 "backfill: %llu spans read of %llu (%.1f%% of the time range), %llu imported, "
                 "%llu already stored, %llu invalid; %.0f spans/s (last 10 s), %.0f overall; "
                 "%zu chunks reading, ETA %s\n",
                 static_cast<unsigned long long>(cp_.read),
                 static_cast<unsigned long long>(cp_.total), time_pct,
                 static_cast<unsigned long long>(cp_.imported),
                 static_cast<unsigned long long>(cp_.already_stored),
                 static_cast<unsigned long long>(cp_.invalid), rate,
                 secs > 0 ? static_cast<double>(run) / secs : 0.0, active_, eta.c_str());
  }
}

int Backfill(const BackfillFlags& f) {
  auto fail = [](const std::string& m, int code = 1) {
    std::cerr << "backfill: " << m << "\n";
    return code;
  };
  if (f.from != "opensearch" && f.from != "elasticsearch") {
    return fail("--from: opensearch or elasticsearch", 2);
  }
  uint64_t start_us = 0, end_us = 0;
  if (!ParseTime(f.start, &start_us)) return fail("--start: a time like 2026-12-01T00:00:00Z", 2);
  if (!ParseTime(f.end, &end_us)) return fail("--end: a time like 2026-12-02T00:00:00Z", 2);
  if (end_us <= start_us) return fail("--end must be after --start", 2);
  if (f.url.empty()) return fail("--url: the cluster's URL, e.g. http://localhost:9200", 2);

  // Pages (~3 KB a span) are allocated from the heap and its memory kept, not
  // mapped and unmapped afresh for each (whose page faults cost this command
  // a tenth of its CPU).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  std::unique_ptr<OpenSearchClient> os;
  if (Status st = OpenSource(f, &os); !st.ok()) return fail(st.message(), 2);
  // Checked before anything is read: a wrong --server fails now.
  std::unique_ptr<AdminClient> server;
  if (Status st = AdminClient::Open(f.server, f.token, f.ca_file, &server); !st.ok()) {
    return fail(st.message(), 2);
  }

  BackfillCheckpoint cp;
  // The layout's span indices only (not Jaeger's -archive).
  if (Status st = SourceIndices(f, &cp.index); !st.ok()) return fail(st.message(), 2);
  cp.start_us = start_us;
  cp.end_us = end_us;
  bool resumed = false;
  if (Status st = Load(f.checkpoint, &cp, &resumed); !st.ok()) return fail(st.message(), 2);
  if (resumed && cp.done) {
    std::cout << "backfill: already complete (" << f.checkpoint << "): " << cp.read
              << " spans read, " << cp.imported << " imported\n";
    return 0;
  }
  if (cp.chunks.empty()) {
    // A new backfill, or one resumed from the single-cursor format: planned now.
    const size_t n = static_cast<size_t>(f.parallel) * kChunksPerWorker;
    if (Status st = Plan(*os, cp.index, start_us, end_us, n, &cp.chunks, &cp.total); !st.ok()) {
      return fail(st.message());
    }
    if (!cp.single_cursor_after.empty() &&
        !ResumeSingleCursor(cp.single_cursor_after, &cp.chunks)) {
      return fail("checkpoint " + f.checkpoint +
                      " holds a position outside its range: remove it to start over",
                  2);
    }
    cp.single_cursor_after.clear();
    if (Status st = SaveFile(f.checkpoint, CheckpointJson(cp)); !st.ok()) return fail(st.message());
  }
  size_t left = 0;
  for (const BackfillChunk& k : cp.chunks) left += k.done ? 0 : 1;
  if (!f.quiet) {
    std::cerr << "backfill: " << (resumed ? "resuming " : "") << cp.total << " spans from "
              << FormatTime(start_us) << " to " << FormatTime(end_us) << " in " << cp.chunks.size()
              << " chunks (" << left << " to read), " << f.parallel << " at a time";
    if (resumed) std::cerr << ", from " << f.checkpoint << " after " << cp.read << " spans";
    std::cerr << "\n";
  }

  const auto t0 = Clock::now();
  Run run(f, std::move(cp), *os);
  if (Status st = run.Go(); !st.ok()) {
    return fail(st.message() + " (the checkpoint " + f.checkpoint + " resumes from here)");
  }
  // Everything was accepted into the server's durable queue: done once stored.
  if (!f.quiet) std::cerr << "backfill: waiting until spanhouse has stored the last pages\n";
  std::string result;
  if (Status st = server->PostNdjson("/api/admin/import?wait=stored", "", &result); !st.ok()) {
    return fail("waiting for the last pages to be stored: " + st.message());
  }
  BackfillCheckpoint done = run.checkpoint();
  done.done = true;
  if (Status st = SaveFile(f.checkpoint, CheckpointJson(done)); !st.ok()) return fail(st.message());
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::cout << "backfill: done: " << done.read << " spans read from " << done.index << " ("
            << FormatTime(start_us) << " to " << FormatTime(end_us) << "), " << done.imported
            << " imported, " << done.already_stored << " already stored, " << done.invalid
            << " invalid; " << run.read_this_run() << " this run in " << secs << " s ("
            << static_cast<uint64_t>(static_cast<double>(run.read_this_run()) /
                                     std::max(secs, 1e-3))
            << " spans/s)\n";
  return done.invalid == 0 ? 0 : 1;
}

}  // namespace

void AddBackfillCommand(CLI::App& app, std::function<int()>* run) {
  auto flags = std::make_shared<BackfillFlags>();
  CLI::App* cmd = app.add_subcommand(
      "backfill",
      "Copy spans from OpenSearch/Elasticsearch (Jaeger's indices) into ClickHouse through a "
      "serving spanhouse; parallel, resumable (--checkpoint) and idempotent");
  cmd->add_option("--from", flags->from, "Where the history is: opensearch or elasticsearch")
      ->required();
  cmd->add_option("--start", flags->start, "From this time (2026-12-01T00:00:00Z or unix seconds)")
      ->required();
  cmd->add_option("--end", flags->end, "Up to this time, excluded")->required();
  cmd->add_option("--opensearch,--elasticsearch,--url", flags->url,
                  "The cluster's node URLs, comma-separated (http://localhost:9200)")
      ->required();
  cmd->add_option("--index-prefix", flags->index_prefix, "Jaeger's index prefix, if any");
  cmd->add_option("--date-layout", flags->date_layout,
                  "Jaeger's date layout of the span indices (2006.01.02; 2006-01-02-15 hourly)")
      ->capture_default_str();
  cmd->add_flag("--use-aliases", flags->use_aliases,
                "Rollover indices: read <prefix>-jaeger-span-read (Jaeger's use_aliases)");
  cmd->add_option("--opensearch-user,--user", flags->user, "Basic-auth user");
  cmd->add_option("--api-key", flags->api_key, "An API key (base64 of id:key), not with --user")
      ->envname("SPANHOUSE_OPENSEARCH_API_KEY");
  cmd->add_option("--tls-cert", flags->tls_cert, "A client certificate (PEM) for the cluster");
  cmd->add_option("--tls-key", flags->tls_key, "The key of --tls-cert (PEM)");
  cmd->add_option("--opensearch-password,--password", flags->password, "Basic-auth password")
      ->envname("SPANHOUSE_OPENSEARCH_PASSWORD");
  cmd->add_option("--server", flags->server,
                  "The serving spanhouse's query listener (it writes into ClickHouse)")
      ->capture_default_str();
  cmd->add_option("--token", flags->token, "A bearer token of its auth.query_tokens")
      ->envname("SPANHOUSE_QUERY_TOKEN");
  cmd->add_option("--ca-file", flags->ca_file, "CA certificates (PEM) for https URLs");
  cmd->add_option("--checkpoint", flags->checkpoint,
                  "Where the position of every chunk is kept; a second run with it resumes, or "
                  "does nothing once done")
      ->capture_default_str();
  cmd->add_option("--parallel", flags->parallel,
                  "Chunks of the range read and imported at once (a resumed run may use another "
                  "number)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--page-spans", flags->page_spans, "Spans per page")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  cmd->add_flag("--quiet", flags->quiet, "No progress lines");
  cmd->callback([flags, run] { *run = [flags] { return Backfill(*flags); }; });
}

}  // namespace spanhouse::migrate
