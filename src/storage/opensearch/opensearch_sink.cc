#include "storage/opensearch/opensearch_sink.h"

#include <fcntl.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "codec/value_text.h"
#include "model/service_name.h"
#include "pipeline/durable/sink_cursor.h"
#include "storage/opensearch/jaeger_document.h"

namespace spanhouse::storage::opensearch {

namespace {
// A field that may be absent: its lookup error is not one.
inline void Optional(simdjson::error_code /*absent*/) {}
}  // namespace

using Clock = std::chrono::steady_clock;

// What one worker writes at once: the items it took, and for each span
// still to write its bulk action and document.
struct OpenSearchSink::Work {
  std::vector<pipeline::QueuedBatch> items;
  struct Doc {
    std::string action;  // {"create":{...}}
    std::string source;
    bool service = false;
  };
  std::vector<Doc> docs;
  size_t spans = 0;
};

namespace {

void AppendAction(std::string& out, std::string_view verb, std::string_view index,
                  std::string_view id) {
  out += "{\"";
  out += verb;
  out += "\":{\"_index\":";
  codec::AppendJsonString(out, index);
  out += ",\"_id\":";
  codec::AppendJsonString(out, id);
  out += "}}";
}

// Appends `doc` as lines of the dead letter, with the reason; fsynced.
void DeadLetter(const std::string& dir, const std::vector<std::string>& lines) {
  if (dir.empty() || lines.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = dir + "/opensearch.ndjson";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    spdlog::error("opensearch sink: cannot open the dead letter {}: {}", path, strerror(errno));
    return;
  }
  std::string text;
  for (const auto& l : lines) {
    text += l;
    text += '\n';
  }
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n <= 0) {
      if (errno == EINTR) continue;
      spdlog::error("opensearch sink: writing the dead letter {}: {}", path, strerror(errno));
      break;
    }
    off += static_cast<size_t>(n);
  }
  ::fdatasync(fd);
  ::close(fd);
}

// The spans of `b` stored as documents: all but those sampled out
// (metrics_only), which count only in the metrics ClickHouse keeps.
size_t StoredSpans(const SpanBatch& b) {
  size_t n = 0;
  for (const uint8_t m : b.spans.metrics_only) n += m == 0 ? 1 : 0;
  return n;
}

// The stored spans of what a request or a replayed block holds.
size_t StoredSpans(const pipeline::QueuedBatch& q) {
  if (q.batch != nullptr) return StoredSpans(*q.batch);
  size_t n = 0;
  if (q.block != nullptr) {
    for (const auto& part : q.block->parts) n += StoredSpans(*part);
  }
  return n;
}

enum class ItemResult { kDone, kRetry, kDeadLetter };

ItemResult Classify(int status) {
  if ((status >= 200 && status < 300) || status == 409) return ItemResult::kDone;
  if (status == 429 || status >= 500 || status == 0) return ItemResult::kRetry;
  return ItemResult::kDeadLetter;
}

}  // namespace

OpenSearchSink::OpenSearchSink(std::shared_ptr<OpenSearchClient> client,
                               OpenSearchSinkOptions options)
    : client_(std::move(client)), opts_(std::move(options)), queue_(opts_.queue_bytes) {}

OpenSearchSink::~OpenSearchSink() {
  queue_.Close();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

Status OpenSearchSink::Start() {
  holding_since_.assign(static_cast<size_t>(std::max(1, opts_.workers)), Clock::time_point{});
  for (int i = 0; i < std::max(1, opts_.workers); ++i) {
    threads_.emplace_back([this, i] { Loop(static_cast<size_t>(i)); });
  }
  return Status::Ok();
}

Status OpenSearchSink::Push(pipeline::QueuedBatch& item) {
  const size_t spans = StoredSpans(item);
  Status st = queue_.Push(item);
  if (st.ok()) stats_.pending_rows += spans;
  return st;
}

void OpenSearchSink::Drain() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    drain_deadline_ = Clock::now() + opts_.drain_timeout;
  }
  draining_.store(true);
  queue_.Close();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

Status OpenSearchSink::EnsureTemplates() {
  if (!opts_.create_templates || templates_ok_.load()) return Status::Ok();
  TemplateOptions t = opts_.templates;
  t.index_prefix = opts_.index_prefix;
  SH_RETURN_IF_ERROR(
      client_->PostJson("/_template/" + SpanTemplateName(t), SpanTemplate(t), nullptr));
  SH_RETURN_IF_ERROR(
      client_->PostJson("/_template/" + ServiceTemplateName(t), ServiceTemplate(t), nullptr));
  templates_ok_.store(true);
  return Status::Ok();
}

double OpenSearchSink::LagSeconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  Clock::time_point oldest{};
  for (auto t : holding_since_) {
    if (t != Clock::time_point{} && (oldest == Clock::time_point{} || t < oldest)) oldest = t;
  }
  const double held = oldest == Clock::time_point{}
                          ? 0
                          : std::chrono::duration<double>(Clock::now() - oldest).count();
  // What waits for it on disk is older still.
  const double waiting = cursor_ != nullptr ? cursor_->OldestWaitingSeconds() : 0;
  return std::max(held, waiting);
}

void OpenSearchSink::Loop(size_t me) {
  const std::string span_base = SpanIndexBase(opts_.index_prefix);
  const std::string service_base = ServiceIndexBase(opts_.index_prefix);
  auto set_holding = [&](Clock::time_point t) {
    std::lock_guard<std::mutex> lock(mu_);
    holding_since_[me] = t;
  };
  while (true) {
    std::optional<pipeline::QueuedBatch> first = queue_.Pop(std::chrono::milliseconds(200));
    if (!first) {
      if (queue_.closed_and_empty()) return;
      continue;
    }
    set_holding(Clock::now());
    Work work;
    work.items.push_back(std::move(*first));
    // Spans sampled out are no document: a request of only those is done
    // (acknowledged) as soon as it is taken, with whatever else it came with.
    const auto count = [](const pipeline::QueuedBatch& q) { return StoredSpans(q); };
    work.spans = count(work.items.back());
    while (work.spans < opts_.bulk_spans) {
      std::optional<pipeline::QueuedBatch> more = queue_.Pop(std::chrono::milliseconds(0));
      if (!more) break;
      work.spans += count(*more);
      work.items.push_back(std::move(*more));
    }
    // The documents of every span taken.
    std::vector<std::string> new_services;
    auto add_batch = [&](const SpanBatch& b) {
      DocumentWriter writer(b);
      for (uint32_t s = 0; s < b.span_count(); ++s) {
        if (b.spans.metrics_only[s] != 0) continue;  // no span document, no service document
        Work::Doc d;
        const uint64_t start = b.spans.start_ns[s];
        AppendAction(d.action, "create", DailyIndex(span_base, start), SpanDocumentId(b, s));
        writer.AppendSpan(d.source, s);
        work.docs.push_back(std::move(d));
        const std::string_view service = JaegerServiceName(b, b.spans.resource[s]);
        const std::string_view op = b.Str(b.spans.name[s]);
        const std::string index = DailyIndex(service_base, start);
        std::string id = ServiceDocumentId(service, op);
        std::string key = index + "/" + id;
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (services_.size() > 200000) services_.clear();
          if (!services_.insert(key).second) continue;
        }
        new_services.push_back(std::move(key));
        Work::Doc sd;
        sd.service = true;
        AppendAction(sd.action, "index", index, id);
        DocumentWriter::AppendService(sd.source, service, op);
        work.docs.push_back(std::move(sd));
      }
    };
    for (const auto& item : work.items) {
      if (item.batch != nullptr) add_batch(*item.batch);
      if (item.block != nullptr) {
        for (const auto& part : item.block->parts) add_batch(*part);
      }
    }
    bool past_deadline = false;
    if (draining_.load()) {
      std::lock_guard<std::mutex> lock(mu_);
      past_deadline = Clock::now() >= drain_deadline_;
    }
    const bool done = !past_deadline && Write(work);
    if (!done) {
      // Given up at shutdown: the spans stay in the durable queue (their
      // tickets are dropped unacked) and are written after the next start;
      // the services are written again then too.
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& k : new_services) services_.erase(k);
      stats_.rows_left_queued += work.spans;
    } else {
      std::vector<pipeline::durable::Ticket> tickets;
      pipeline::durable::SealedBlock unsealed;
      for (auto& item : work.items) {
        if (item.ticket.valid()) tickets.push_back(std::move(item.ticket));
        if (item.block != nullptr) {
          unsealed = item.block->sealed;
          for (auto& t : item.block->tickets) tickets.push_back(std::move(t));
          // A block sealed by an earlier version of this sink: finished now.
          if (cursor_ != nullptr) cursor_->Done(unsealed, &tickets);
          unsealed = {};
        }
      }
      if (cursor_ != nullptr) {
        cursor_->Done(pipeline::durable::SealedBlock{}, &tickets);
      } else {
        for (auto& t : tickets) t.Ack();
      }
    }
    stats_.pending_rows -= std::min<uint64_t>(stats_.pending_rows.load(), work.spans);
    set_holding(Clock::time_point{});
    // The items (and their memory reservations) are released here.
  }
}

bool OpenSearchSink::Write(Work& work) {
  std::mt19937_64 rng(std::random_device{}());
  auto backoff = opts_.backoff_min;
  std::vector<size_t> todo(work.docs.size());
  for (size_t i = 0; i < todo.size(); ++i) todo[i] = i;
  thread_local simdjson::dom::parser parser;
  while (!todo.empty()) {
    Status st = EnsureTemplates();
    net::HttpResult r;
    std::string body;
    if (st.ok()) {
      size_t bytes = 0;
      for (size_t i : todo) bytes += work.docs[i].action.size() + work.docs[i].source.size() + 2;
      body.reserve(bytes);
      for (size_t i : todo) {
        body += work.docs[i].action;
        body += '\n';
        body += work.docs[i].source;
        body += '\n';
      }
      stats_.bytes_sent += body.size();
      const auto t0 = Clock::now();
      st = client_->Post("/_bulk", std::move(body), &r, "application/x-ndjson");
      if (st.ok()) {
        stats_.write_seconds.Record(std::chrono::duration<double>(Clock::now() - t0).count());
      }
    }
    std::vector<size_t> retry;
    std::vector<std::string> dead;
    std::string reason;
    if (!st.ok()) {
      reason = st.message();
      retry = todo;
    } else if (r.status < 200 || r.status >= 300) {
      reason = "HTTP " + std::to_string(r.status) + ": " + ErrorReason(r.body);
      if (Classify(r.status) == ItemResult::kRetry) {
        retry = todo;
      } else {
        for (size_t i : todo) {
          dead.push_back("{\"error\":" +
                         [&] {
                           std::string e;
                           codec::AppendJsonString(e, reason);
                           return e;
                         }() +
                         ",\"action\":" + work.docs[i].action +
                         ",\"document\":" + work.docs[i].source + "}");
        }
      }
    } else {
      // errors:false -> every item done; else read each item's status.
      simdjson::dom::element doc;
      bool errors = true;
      if (parser.parse(r.body).get(doc) != simdjson::SUCCESS ||
          doc["errors"].get_bool().get(errors) != simdjson::SUCCESS) {
        reason = "unreadable _bulk answer";
        retry = todo;
      } else if (errors) {
        simdjson::dom::array items;
        if (doc["items"].get_array().get(items) != simdjson::SUCCESS ||
            items.size() != todo.size()) {
          reason = "_bulk answer without one item per document";
          retry = todo;
        } else {
          size_t k = 0;
          for (simdjson::dom::element item : items) {
            const size_t i = todo[k++];
            simdjson::dom::object o;
            int64_t status = 0;
            simdjson::dom::element inner;
            if (item.get_object().get(o) == simdjson::SUCCESS && o.size() == 1) {
              inner = (*o.begin()).value;
              Optional(inner["status"].get_int64().get(status));
            }
            switch (Classify(static_cast<int>(status))) {
              case ItemResult::kDone:
                break;
              case ItemResult::kRetry:
                retry.push_back(i);
                if (reason.empty()) reason = "item status " + std::to_string(status);
                break;
              case ItemResult::kDeadLetter: {
                std::string why = "HTTP " + std::to_string(status);
                simdjson::dom::element err;
                if (inner["error"].get(err) == simdjson::SUCCESS) {
                  why +=
                      ": " + ErrorReason(std::string("{\"error\":") + simdjson::minify(err) + "}");
                }
                std::string line = "{\"error\":";
                codec::AppendJsonString(line, why);
                line += ",\"action\":" + work.docs[i].action +
                        ",\"document\":" + work.docs[i].source + "}";
                dead.push_back(std::move(line));
                if (!work.docs[i].service) stats_.rows_dead_lettered += 1;
                spdlog::warn("opensearch sink: a document refused for good, dead-lettered: {}",
                             why);
                break;
              }
            }
          }
        }
      }
    }
    if (!dead.empty()) {
      stats_.permanent_errors += 1;
      if (r.status < 200 || r.status >= 300) {
        for (size_t i : todo) {
          if (!work.docs[i].service) stats_.rows_dead_lettered += 1;
        }
        spdlog::warn("opensearch sink: {} documents refused for good, dead-lettered: {}",
                     todo.size(), reason);
      }
      DeadLetter(opts_.dead_letter_dir, dead);
      stats_.blocks_dead_lettered += 1;
    }
    if (retry.empty()) {
      stats_.writes += 1;
      size_t rows = 0;
      for (const auto& d : work.docs) rows += d.service ? 0 : 1;
      stats_.rows_written += rows;
      return true;
    }
    stats_.write_errors += 1;
    stats_.retryable_errors += 1;
    items_retried_ += retry.size();
    if (draining_.load()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (Clock::now() >= drain_deadline_) {
        spdlog::warn(
            "opensearch sink: stopping with {} documents unwritten ({}); they stay in "
            "the durable queue",
            retry.size(), reason);
        return false;
      }
    }
    spdlog::warn("opensearch sink: {} of {} documents to retry in {} ms: {}", retry.size(),
                 todo.size(), backoff.count(), reason);
    std::uniform_int_distribution<int64_t> jitter(0, backoff.count() / 2);
    std::this_thread::sleep_for(backoff + std::chrono::milliseconds(jitter(rng)));
    backoff = std::min(backoff * 2, opts_.backoff_max);
    todo = std::move(retry);
  }
  return true;
}

void OpenSearchSink::AppendMetrics(PromText& out) const {
  sink::AppendSinkMetrics(opts_.name, stats_, out);
  const std::string label = PromText::Label("sink", opts_.name);
  out.One("spanhouse_sink_items_retried_total", "counter",
          "Documents sent again after a retryable refusal (429, 5xx, unreachable).", label,
          items_retried_.load());
  out.One("spanhouse_sink_lag_milliseconds", "gauge",
          "How long the oldest request this sink has not written has waited, in memory or in "
          "its backlog on disk (0: caught up).",
          label, static_cast<uint64_t>(LagSeconds() * 1000));
}

}  // namespace spanhouse::storage::opensearch
