#include "storage/opensearch/opensearch_sink.h"

#include <fcntl.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <limits>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "codec/value_text.h"
#include "model/service_name.h"
#include "sink/plugin.h"
#include "sink/runtime.h"
#include "storage/opensearch/bulk_action.h"
#include "storage/opensearch/jaeger_document.h"

namespace spanhouse::storage::opensearch {

namespace {
// A field that may be absent: its lookup error is not one.
inline void Optional(simdjson::error_code /*absent*/) {}
}  // namespace

using Clock = std::chrono::steady_clock;

namespace {

// Appends `lines` to the dead letter, each a refused document with the
// reason; synced.
Status AppendDeadLetter(const std::string& dir, const std::vector<std::string>& lines) {
  if (dir.empty() || lines.empty()) return Status::Ok();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = dir + "/opensearch.ndjson";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::Internal("cannot open the dead letter " + path + ": " + strerror(errno));
  }
  std::string text;
  for (const auto& l : lines) {
    text += l;
    text += '\n';
  }
  Status st;
  for (size_t off = 0; off < text.size();) {
    const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      st = Status::Internal("writing the dead letter " + path + ": " + strerror(errno));
      break;
    }
    off += static_cast<size_t>(n);
  }
  if (st.ok() && ::fdatasync(fd) != 0) {
    st = Status::Internal("syncing the dead letter " + path + ": " + strerror(errno));
  }
  ::close(fd);
  return st;
}

// The spans of `b` stored as documents: all but those sampled out
// (metrics_only), which count only in the metrics ClickHouse keeps.
size_t StoredSpans(const SpanBatch& b) {
  size_t n = 0;
  for (const uint8_t m : b.spans.metrics_only) n += m == 0 ? 1 : 0;
  return n;
}

// The stored spans of what a request or a replayed block holds.
size_t StoredSpans(const sink::QueuedBatch& q) {
  if (q.batch != nullptr) return StoredSpans(*q.batch);
  size_t n = 0;
  if (q.block != nullptr) {
    for (const auto& part : q.block->parts) n += StoredSpans(*part);
  }
  return n;
}

enum class ItemResult { kDone, kRetry, kDeadLetter };

ItemResult ClassifyItem(int status) {
  if ((status >= 200 && status < 300) || status == 409) return ItemResult::kDone;
  if (status == 429 || status >= 500 || status == 0) return ItemResult::kRetry;
  return ItemResult::kDeadLetter;
}

// A service document written: its day (since the epoch, UTC: one daily
// index) and its id's hash, which stand for "<index>/<id>".
struct ServiceKey {
  uint64_t day = 0;
  uint64_t hash = 0;
  bool operator==(const ServiceKey&) const = default;
};
struct ServiceKeyHash {
  size_t operator()(const ServiceKey& k) const { return k.hash ^ (k.day * 0x9e3779b97f4a7c15ull); }
};

// The index of a kind for the time of a span, made once per period seen
// (the layout formats the date each call).
class IndexName {
 public:
  IndexName(const IndexLayout& layout, IndexKind kind) : layout_(layout), kind_(kind) {}
  const std::string& For(uint64_t time_ns) {
    const uint64_t period = time_ns / layout_.period_ns();
    if (period != period_ || name_.empty()) {
      name_ = layout_.WriteIndex(kind_, time_ns);
      period_ = period;
    }
    return name_;
  }

 private:
  const IndexLayout& layout_;
  const IndexKind kind_;
  uint64_t period_ = 0;
  std::string name_;
};

// What a _bulk answer should hold: per item its status, and the error of
// one refused (the rest of each item is not read).
constexpr std::string_view kBulkTarget = "/_bulk?filter_path=errors,items.*.status,items.*.error";

// One _bulk: the documents of the spans it holds, and which are still to
// write (a retry sends only the items that failed).
struct BulkWrite : sink::Write {
  // Where one item lies in `text`: its action line, then its source line.
  struct Doc {
    size_t begin = 0;   // the action: {"create":{...}}
    size_t source = 0;  // the source, after the action's newline
    size_t end = 0;     // past the source's newline
    bool service = false;
  };
  // Every item's "<action>\n<source>\n", in the order of `docs`: the body
  // of the first attempt as it is, sent without a copy.
  std::string text;
  std::vector<Doc> docs;
  std::vector<size_t> todo;              // ascending
  std::vector<ServiceKey> new_services;  // first written by this one
  std::vector<Reservation> memory;       // the items' share of the budget, held until done

  std::string_view Action(const Doc& d) const {
    return std::string_view(text).substr(d.begin, d.source - d.begin - 1);
  }
  std::string_view Source(const Doc& d) const {
    return std::string_view(text).substr(d.source, d.end - d.source - 1);
  }
};

class OpenSearchPlugin final : public sink::Plugin {
 public:
  OpenSearchPlugin(std::shared_ptr<OpenSearchClient> client, OpenSearchSinkOptions options)
      : client_(std::move(client)),
        opts_(std::move(options)),
        pending_(shards()),
        ready_(shards()),
        text_hint_(shards(), 0) {}

  size_t shards() const override { return static_cast<size_t>(std::max(1, opts_.workers)); }
  size_t Rows(const sink::QueuedBatch& item) const override { return StoredSpans(item); }

  void Add(size_t shard, sink::QueuedBatch item) override {
    if (item.block != nullptr) {
      // A block sealed by an earlier version of this sink: a write of its
      // own, finishing the block.
      Flush(shard);
      auto w = std::make_unique<BulkWrite>();
      w->since = Clock::now();
      w->text.reserve(text_hint_[shard]);
      w->sealed = item.block->sealed;
      w->tickets = std::move(item.block->tickets);
      for (const auto& part : item.block->parts) AddBatch(*w, *part);
      ready_[shard].push_back(std::move(w));
      return;
    }
    auto& w = pending_[shard];
    if (w == nullptr) {
      w = std::make_unique<BulkWrite>();
      w->since = Clock::now();
      // About the last write's size: the text grows without copies as a rule.
      w->text.reserve(text_hint_[shard]);
    }
    if (item.batch != nullptr) AddBatch(*w, *item.batch);
    if (item.ticket.valid()) w->tickets.push_back(std::move(item.ticket));
    w->memory.push_back(std::move(item.reservation));
  }

  void TakeDue(size_t shard, bool idle, bool flush,
               std::vector<std::unique_ptr<sink::Write>>* out) override {
    const auto& w = pending_[shard];
    if (w != nullptr && (idle || flush || w->rows >= opts_.bulk_spans)) Flush(shard);
    for (auto& r : ready_[shard]) out->push_back(std::move(r));
    ready_[shard].clear();
  }

  Status WriteOnce(size_t shard, sink::Write& w) override;

  sink::Failure Classify(const Status& st) const override {
    // A whole request refused as bad (4xx but 429) cannot be fixed by a
    // retry; anything else (unreachable, 429, 5xx, items to retry) can.
    return st.code() == StatusCode::kInvalidArgument ? sink::Failure::kPermanent
                                                     : sink::Failure::kRetryable;
  }

  Status DeadLetter(size_t /*shard*/, sink::Write& w, const Status& why) override {
    auto& bulk = static_cast<BulkWrite&>(w);
    std::vector<std::string> dead;
    for (size_t i : bulk.todo) dead.push_back(DeadLine(why.message(), bulk, bulk.docs[i]));
    return WriteDeadLetter(dead);
  }

  void Finished(size_t /*shard*/, sink::Write& w, bool stored) override {
    if (stored) return;
    // Not written: the services are written again with the spans later.
    std::lock_guard<std::mutex> lock(mu_);
    for (const ServiceKey& k : static_cast<BulkWrite&>(w).new_services) services_.erase(k);
  }

  void AppendMetrics(const std::string& name, PromText& out) const override {
    out.One("spanhouse_sink_items_retried_total", "counter",
            "Documents sent again after a retryable refusal (429, 5xx, unreachable).",
            PromText::Label("sink", name), items_retried_.load());
  }

 private:
  void Flush(size_t shard) {
    if (pending_[shard] == nullptr) return;
    text_hint_[shard] = pending_[shard]->text.size();
    ready_[shard].push_back(std::move(pending_[shard]));
  }
  // The documents of the stored spans of `b`, and of operations not written yet.
  void AddBatch(BulkWrite& w, const SpanBatch& b);
  Status EnsureTemplates();
  // One _bulk of the documents still to write; those refused for now stay in `todo`.
  Status Bulk(BulkWrite& bulk);
  static std::string DeadLine(std::string_view why, const BulkWrite& w, const BulkWrite::Doc& d) {
    std::string line = "{\"error\":";
    codec::AppendJsonString(line, why);
    line += ",\"action\":";
    line += w.Action(d);
    line += ",\"document\":";
    line += w.Source(d);
    line += '}';
    return line;
  }
  Status WriteDeadLetter(const std::vector<std::string>& lines) const {
    return AppendDeadLetter(opts_.dead_letter_dir, lines);
  }

  std::shared_ptr<OpenSearchClient> client_;
  const OpenSearchSinkOptions opts_;
  // Per shard, on its encoding thread only: the write being gathered, and
  // those made and not yet handed over.
  std::vector<std::unique_ptr<BulkWrite>> pending_;
  std::vector<std::vector<std::unique_ptr<sink::Write>>> ready_;
  std::vector<size_t> text_hint_;  // the last write's text size
  std::atomic<bool> templates_ok_{false};
  std::atomic<uint64_t> items_retried_{0};
  std::mutex mu_;
  std::unordered_set<ServiceKey, ServiceKeyHash> services_;  // written; guarded by mu_
};

void OpenSearchPlugin::AddBatch(BulkWrite& w, const SpanBatch& b) {
  DocumentWriter writer(b);
  IndexName span_index(opts_.layout, IndexKind::kSpan);
  IndexName service_index(opts_.layout, IndexKind::kService);
  std::string id;
  for (uint32_t s = 0; s < b.span_count(); ++s) {
    if (b.spans.metrics_only[s] != 0) continue;  // no span document, no service document
    w.rows += 1;
    const uint64_t start = b.spans.start_ns[s];
    BulkWrite::Doc d;
    d.begin = w.text.size();
    id.clear();
    AppendSpanDocumentId(id, b, s);
    AppendBulkAction(w.text, "create", span_index.For(start), id);
    w.text += '\n';
    d.source = w.text.size();
    writer.AppendSpan(w.text, s);
    w.text += '\n';
    d.end = w.text.size();
    w.todo.push_back(w.docs.size());
    w.docs.push_back(d);
    const std::string_view service = JaegerServiceName(b, b.spans.resource[s]);
    const std::string_view op = b.Str(b.spans.name[s]);
    const ServiceKey key{start / opts_.layout.period_ns(), ServiceDocumentHash(service, op)};
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (services_.size() > 200000) services_.clear();
      if (!services_.insert(key).second) continue;
    }
    w.new_services.push_back(key);
    BulkWrite::Doc sd;
    sd.service = true;
    sd.begin = w.text.size();
    id.clear();
    AppendServiceDocumentId(id, key.hash);
    AppendBulkAction(w.text, "index", service_index.For(start), id);
    w.text += '\n';
    sd.source = w.text.size();
    DocumentWriter::AppendService(w.text, service, op);
    w.text += '\n';
    sd.end = w.text.size();
    w.todo.push_back(w.docs.size());
    w.docs.push_back(sd);
  }
}

}  // namespace

Status EnsureAliases(OpenSearchClient& client, const IndexLayout& layout, IndexKind kind) {
  const std::string base = layout.Base(kind);
  net::HttpResult r;
  SH_RETURN_IF_ERROR(client.Get("/_alias/" + base + "write", &r));
  if (r.status == 200) return Status::Ok();
  if (r.status != 404) {
    return Status::Unavailable("opensearch: GET /_alias/" + base + "write: HTTP " +
                               std::to_string(r.status) + ": " + ErrorReason(r.body));
  }
  // The names es-rollover init gives: the first index of a series, both
  // aliases on it, the write alias marked as such.
  std::string body =
      R"({"aliases":{")" + base + R"(read":{},")" + base + R"(write":{"is_write_index":true}}})";
  Status st = client.SendJson("PUT", "/" + base + "000001", std::move(body), nullptr);
  // Another writer made it meanwhile: its aliases are the same.
  if (!st.ok() && st.message().find("resource_already_exists") != std::string::npos) {
    return Status::Ok();
  }
  return st;
}

namespace {

Status OpenSearchPlugin::EnsureTemplates() {
  if (!opts_.create_templates || templates_ok_.load()) return Status::Ok();
  TemplateOptions t = opts_.templates;
  t.index_prefix = opts_.layout.options().prefix;
  SH_RETURN_IF_ERROR(
      client_->PostJson("/_template/" + SpanTemplateName(t), SpanTemplate(t), nullptr));
  SH_RETURN_IF_ERROR(
      client_->PostJson("/_template/" + ServiceTemplateName(t), ServiceTemplate(t), nullptr));
  if (opts_.layout.use_aliases()) {
    for (IndexKind kind : {IndexKind::kSpan, IndexKind::kService}) {
      SH_RETURN_IF_ERROR(EnsureAliases(*client_, opts_.layout, kind));
    }
  }
  templates_ok_.store(true);
  return Status::Ok();
}

Status OpenSearchPlugin::WriteOnce(size_t /*shard*/, sink::Write& w) {
  auto& bulk = static_cast<BulkWrite&>(w);
  Status st = Bulk(bulk);
  // What a retry sends again: every document left (unreachable, 429, 5xx),
  // or the items refused for now.
  if (!st.ok() && Classify(st) == sink::Failure::kRetryable) items_retried_ += bulk.todo.size();
  return st;
}

Status OpenSearchPlugin::Bulk(BulkWrite& bulk) {
  if (bulk.todo.empty()) return Status::Ok();  // every span sampled out: nothing to send
  SH_RETURN_IF_ERROR(EnsureTemplates());
  net::HttpResult r;
  if (bulk.todo.size() == bulk.docs.size()) {
    // Every item (todo is ascending): the text is the body, lent to the call.
    bulk.bytes_sent += bulk.text.size();
    SH_RETURN_IF_ERROR(client_->Post(kBulkTarget, &bulk.text, &r, "application/x-ndjson"));
  } else {
    size_t bytes = 0;
    for (size_t i : bulk.todo) bytes += bulk.docs[i].end - bulk.docs[i].begin;
    std::string body;
    body.reserve(bytes);
    for (size_t i : bulk.todo) {
      const BulkWrite::Doc& d = bulk.docs[i];
      body.append(bulk.text, d.begin, d.end - d.begin);
    }
    bulk.bytes_sent += body.size();
    SH_RETURN_IF_ERROR(client_->Post(kBulkTarget, &body, &r, "application/x-ndjson"));
  }
  if (r.status < 200 || r.status >= 300) {
    const std::string reason = "HTTP " + std::to_string(r.status) + ": " + ErrorReason(r.body);
    // Credentials refused: the documents are fine; they wait for the fix.
    if (r.status == 401 || r.status == 403) {
      return Status::Unavailable(reason + " (the cluster refused the credentials)");
    }
    return ClassifyItem(r.status) == ItemResult::kRetry ? Status::Unavailable(reason)
                                                        : Status::Invalid(reason);
  }
  // errors:false -> every item done; else read each item's status.
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element doc;
  bool errors = true;
  if (parser.parse(r.body).get(doc) != simdjson::SUCCESS ||
      doc["errors"].get_bool().get(errors) != simdjson::SUCCESS) {
    return Status::Unavailable("unreadable _bulk answer");
  }
  if (!errors) {
    bulk.todo.clear();
    return Status::Ok();
  }
  simdjson::dom::array items;
  if (doc["items"].get_array().get(items) != simdjson::SUCCESS ||
      items.size() != bulk.todo.size()) {
    return Status::Unavailable("_bulk answer without one item per document");
  }
  std::vector<size_t> retry;
  std::vector<std::string> dead;
  std::vector<size_t> dead_docs;
  std::string reason;
  size_t k = 0;
  for (simdjson::dom::element item : items) {
    const size_t i = bulk.todo[k++];
    simdjson::dom::object o;
    int64_t status = 0;
    simdjson::dom::element inner;
    if (item.get_object().get(o) == simdjson::SUCCESS && o.size() == 1) {
      inner = (*o.begin()).value;
      Optional(inner["status"].get_int64().get(status));
    }
    switch (ClassifyItem(static_cast<int>(status))) {
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
          why += ": " + ErrorReason(std::string("{\"error\":") + simdjson::minify(err) + "}");
        }
        dead.push_back(DeadLine(why, bulk, bulk.docs[i]));
        dead_docs.push_back(i);
        spdlog::warn("opensearch sink: a document refused for good, dead-lettered: {}", why);
        break;
      }
    }
  }
  if (Status st = WriteDeadLetter(dead); !st.ok()) {
    // Kept nowhere: sent again (and refused again) rather than lost.
    spdlog::error("opensearch sink: {}", st.message());
    retry.insert(retry.end(), dead_docs.begin(), dead_docs.end());
    std::sort(retry.begin(), retry.end());
    if (reason.empty()) reason = st.message();
  } else {
    for (size_t i : dead_docs) bulk.dead_lettered += bulk.docs[i].service ? 0 : 1;
  }
  bulk.todo = std::move(retry);
  if (bulk.todo.empty()) return Status::Ok();
  return Status::Unavailable(
      fmt::format("{} of {} documents to retry: {}", bulk.todo.size(), items.size(), reason));
}

}  // namespace

std::unique_ptr<sink::Sink> MakeOpenSearchSink(std::shared_ptr<OpenSearchClient> client,
                                               OpenSearchSinkOptions options) {
  sink::RuntimeOptions r;
  r.name = options.name;
  r.queue_bytes = options.queue_bytes;
  r.retry.backoff_min = options.backoff_min;
  r.retry.backoff_max = options.backoff_max;
  r.retry.drain_timeout = options.drain_timeout;
  // Retried until the drain deadline, however many attempts that is.
  r.retry.stopping_attempts = std::numeric_limits<int>::max();
  return std::make_unique<sink::RuntimeSink>(
      std::make_unique<OpenSearchPlugin>(std::move(client), std::move(options)), std::move(r));
}

}  // namespace spanhouse::storage::opensearch
