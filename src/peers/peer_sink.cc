#include "peers/peer_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "codec/otlp_encode.h"
#include "common/clock.h"

namespace spanhouse::peers {

namespace {

using Clock = std::chrono::steady_clock;

const char* CodeName(grpc::StatusCode c) {
  switch (c) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "?";
  }
}

// A failed Export as the runtime's vocabulary: kUnavailable is retried,
// kInvalidArgument dead-lettered, kInternal retried a bounded number of
// times (Classify). Retryable are the codes the OTLP specification names
// retryable; RESOURCE_EXHAUSTED only with RetryInfo (without it, gRPC's own
// "message larger than max": the same request would be refused again).
Status StatusOf(const ExportResult& r, const std::string& what) {
  const std::string m = fmt::format("{}: gRPC {}: {}", what, CodeName(r.code), r.message);
  switch (r.code) {
    case grpc::StatusCode::OK:
      return Status::Ok();
    case grpc::StatusCode::UNAVAILABLE:  // also: no connection
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::DATA_LOSS:
      return Status::Unavailable(m);
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return r.retry_after_s >= 0 ? Status::Unavailable(m) : Status::Internal(m);
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      return Status::Invalid(m);
    default:
      return Status::Internal(m);
  }
}

// A node name as part of a file name: letters, digits, '.', '_' and '-' kept.
std::string FileSafe(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  return out.empty() ? "_" : out;
}

// Writes `data` to `path` whole and synced, through a temporary name so a
// crash never leaves half a file under the final one.
Status WriteFileSynced(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Internal("cannot create " + tmp + ": " + std::strerror(errno));
  Status st;
  for (size_t off = 0; off < data.size();) {
    const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      st = Status::Internal("writing " + tmp + ": " + std::strerror(errno));
      break;
    }
    off += static_cast<size_t>(n);
  }
  if (st.ok() && ::fdatasync(fd) != 0) {
    st = Status::Internal("syncing " + tmp + ": " + std::strerror(errno));
  }
  ::close(fd);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    st = Status::Internal("renaming " + tmp + ": " + std::strerror(errno));
  }
  if (!st.ok()) ::unlink(tmp.c_str());
  return st;
}

OtlpGrpcClientOptions ClientOptions(const PeerSinkOptions& o, std::string tls_ca_pem) {
  OtlpGrpcClientOptions c;
  c.target = o.address;
  c.timeout = o.timeout;
  c.max_reconnect_backoff = o.max_reconnect_backoff;
  c.tls = o.tls;
  c.tls_ca_pem = std::move(tls_ca_pem);
  c.tls_server_name = o.tls_server_name;
  c.metadata.emplace_back(kForwardedByMetadata, o.self);
  if (!o.bearer_token.empty()) c.metadata.emplace_back("authorization", "Bearer " + o.bearer_token);
  return c;
}

}  // namespace

// One Export: the spans it holds, as batches (for decide_here) and encoded
// (the request, the concatenation of each batch's ExportTraceServiceRequest,
// which protobuf reads as one message holding every ResourceSpans).
struct PeerPlugin::PeerWrite : sink::Write {
  std::string body;
  std::vector<std::unique_ptr<SpanBatch>> parts;
  std::vector<Reservation> memory;  // the items' share of the budget, held until done
};

struct PeerPlugin::ShardState {
  std::unique_ptr<PeerWrite> pending;
  std::vector<std::unique_ptr<sink::Write>> ready;
};

PeerPlugin::PeerPlugin(PeerSinkOptions options, std::string tls_ca_pem)
    : opts_(std::move(options)), client_(ClientOptions(opts_, std::move(tls_ca_pem))) {
  for (size_t s = 0; s < std::max<size_t>(1, opts_.writers); ++s) {
    pending_.push_back(std::make_unique<ShardState>());
  }
}

PeerPlugin::~PeerPlugin() = default;

std::chrono::milliseconds PeerPlugin::down_for() const {
  const int64_t since = failing_since_ns_.load();
  if (since == 0) return std::chrono::milliseconds(0);
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::nanoseconds(SteadyClockNs() - since));
}

bool PeerPlugin::Select(const SpanBatch& b, std::vector<uint32_t>* idx) const {
  if (!opts_.owns) return false;
  idx->clear();
  SpansOfTraces(
      b, [&](const TraceId& t) { return opts_.owns(t, b.peer_view); }, idx);
  return true;
}

void PeerPlugin::Keep(sink::QueuedBatch& item) const {
  if (!opts_.owns) return;
  // A record read back from the backlog holds every span of its request;
  // a live request's copy holds this peer's only (then nothing is copied).
  auto keep = [this](std::unique_ptr<SpanBatch>& b) {
    std::vector<uint32_t> own;
    Select(*b, &own);
    if (own.size() == b->span_count()) return;
    auto part = std::make_unique<SpanBatch>();
    if (!own.empty()) part->AppendSpans(*b, own.data(), own.size());
    b = std::move(part);
  };
  if (item.block != nullptr) {
    for (auto& p : item.block->parts) keep(p);
    return;
  }
  if (item.batch == nullptr) return;
  keep(item.batch);
  item.reservation.Resize(std::min(item.reservation.bytes(), item.batch->MemoryBytes()));
}

PeerPlugin::PeerWrite& PeerPlugin::Pending(size_t shard) {
  auto& p = pending_[shard]->pending;
  if (p == nullptr) {
    p = std::make_unique<PeerWrite>();
    p->since = Clock::now();
  }
  return *p;
}

void PeerPlugin::Flush(size_t shard) {
  ShardState& s = *pending_[shard];
  if (s.pending != nullptr) s.ready.push_back(std::move(s.pending));
}

void PeerPlugin::AddBatch(size_t shard, std::unique_ptr<SpanBatch> b,
                          std::vector<PeerWrite*>* touched) {
  const size_t n = b->span_count();
  if (n == 0) return;
  auto split = [&](size_t piece) {
    std::vector<uint32_t> idx(n);
    std::iota(idx.begin(), idx.end(), 0u);
    for (size_t off = 0; off < n; off += piece) {
      auto part = std::make_unique<SpanBatch>();
      part->AppendSpans(*b, idx.data() + off, std::min(piece, n - off));
      AddBatch(shard, std::move(part), touched);
    }
  };
  if (n > opts_.max_export_spans) return split(opts_.max_export_spans);
  std::string body;
  codec::EncodeOtlpProto(*b, &body, nullptr);
  // Too large for one Export: in halves (a single span goes alone, whatever its size).
  if (body.size() > opts_.max_export_bytes && n > 1) return split((n + 1) / 2);
  Place(shard, std::move(b), std::move(body), touched);
}

void PeerPlugin::Place(size_t shard, std::unique_ptr<SpanBatch> b, std::string body,
                       std::vector<PeerWrite*>* touched) {
  const size_t n = b->span_count();
  PeerWrite* w = pending_[shard]->pending.get();
  if (w != nullptr && w->rows != 0 &&
      (w->rows + n > opts_.max_export_spans ||
       w->body.size() + body.size() > opts_.max_export_bytes)) {
    Flush(shard);
  }
  PeerWrite& p = Pending(shard);
  p.rows += n;
  if (p.body.empty()) {
    p.body = std::move(body);
  } else {
    p.body += body;
  }
  p.parts.push_back(std::move(b));
  if (touched->empty() || touched->back() != &p) touched->push_back(&p);
  if (p.rows >= opts_.max_export_spans) Flush(shard);  // full: sent at once
}

void PeerPlugin::Add(size_t shard, sink::QueuedBatch item) {
  std::vector<PeerWrite*> touched;
  std::vector<sink::Ticket> tickets;
  if (item.block != nullptr) {
    // Never sealed by this sink (no key), so not expected: its spans go as new.
    for (auto& p : item.block->parts) AddBatch(shard, std::move(p), &touched);
    tickets = std::move(item.block->tickets);
  }
  if (item.batch != nullptr) AddBatch(shard, std::move(item.batch), &touched);
  if (item.ticket.valid()) tickets.push_back(std::move(item.ticket));
  // Every write holding spans of the record holds a claim on it, so the
  // record is done once all of them are. Nothing of it kept (another
  // node's traces only): its claims ride with the next write.
  PeerWrite& last = touched.empty() ? Pending(shard) : *touched.back();
  for (PeerWrite* w : touched) {
    if (w == &last) continue;
    for (const auto& t : tickets) w->tickets.push_back(t.Clone());
  }
  for (auto& t : tickets) last.tickets.push_back(std::move(t));
  last.memory.push_back(std::move(item.reservation));
}

void PeerPlugin::TakeDue(size_t shard, bool idle, bool flush,
                         std::vector<std::unique_ptr<sink::Write>>* out) {
  ShardState& s = *pending_[shard];
  if (s.pending != nullptr && (idle || flush)) Flush(shard);
  for (auto& w : s.ready) out->push_back(std::move(w));
  s.ready.clear();
}

bool PeerPlugin::HandoffDue() const {
  if (!opts_.decide_here || opts_.handoff_after.count() <= 0) return false;
  const int64_t since = failing_since_ns_.load();
  return since != 0 && std::chrono::nanoseconds(SteadyClockNs() - since) >=
                           std::chrono::nanoseconds(opts_.handoff_after);
}

void PeerPlugin::MarkDown() {
  if (up_.exchange(false)) {
    spdlog::warn("peer sink {}: peer {} ({}) is not answering", opts_.name, opts_.peer,
                 opts_.address);
  }
  int64_t none = 0;
  failing_since_ns_.compare_exchange_strong(none, SteadyClockNs());
}

Status PeerPlugin::HandOver(PeerWrite& w) {
  // A copy: on failure the write keeps its spans for the next attempt.
  auto b = std::make_unique<SpanBatch>();
  for (const auto& p : w.parts) b->Append(*p);
  if (Status st = opts_.decide_here(std::move(b)); !st.ok()) {
    return Status::Unavailable(fmt::format("peer {} down and deciding its spans here failed: {}",
                                           opts_.peer, st.message()));
  }
  stats_.handoffs += 1;
  if (!handing_over_.exchange(true)) {
    spdlog::warn("peer sink {}: peer {} down for {} ms: its spans are decided on this node",
                 opts_.name, opts_.peer, down_for().count());
  }
  stats_.spans_decided_here += w.rows;
  return Status::Ok();
}

Status PeerPlugin::WriteOnce(size_t /*shard*/, sink::Write& w) {
  auto& pw = static_cast<PeerWrite&>(w);
  if (pw.rows == 0) return Status::Ok();  // claims of records with nothing for this peer
  // Down past handoff_after: sent only once the channel is connected again,
  // so a peer that stays down costs no timeout per write.
  if (HandoffDue() && !client_.Connected(/*try_to_connect=*/true)) return HandOver(pw);
  const ExportResult r = client_.Export(pw.body);
  pw.bytes_sent += pw.body.size();
  if (r.ok()) {
    failing_since_ns_.store(0);
    handing_over_.store(false);
    if (!up_.exchange(true)) {
      spdlog::info("peer sink {}: peer {} answers again", opts_.name, opts_.peer);
    }
    stats_.exports += 1;
    // Refused for good by the peer (its filter, its clock checks): counted, not sent again.
    const auto rejected = static_cast<size_t>(
        std::clamp<int64_t>(r.rejected_spans, 0, static_cast<int64_t>(pw.rows)));
    stats_.spans_forwarded += pw.rows - rejected;
    if (rejected != 0) {
      stats_.spans_rejected += rejected;
      spdlog::warn("peer sink {}: peer {} refused {} of {} spans: {}", opts_.name, opts_.peer,
                   rejected, pw.rows, r.partial_message);
    }
    return Status::Ok();
  }
  Status st = StatusOf(r, fmt::format("peer {} ({})", opts_.peer, opts_.address));
  switch (Classify(st)) {
    case sink::Failure::kRetryable:
      stats_.failures_retryable += 1;
      break;
    case sink::Failure::kPermanent:
      stats_.failures_permanent += 1;
      break;
    case sink::Failure::kUnknown:
      stats_.failures_unknown += 1;
      break;
  }
  if (Classify(st) == sink::Failure::kPermanent) {
    // It answered: up, but refusing this request (or this node's token).
    failing_since_ns_.store(0);
    up_.store(true);
    return st;
  }
  MarkDown();
  if (HandoffDue()) return HandOver(pw);
  return st;
}

sink::Failure PeerPlugin::Classify(const Status& st) const {
  switch (st.code()) {
    case StatusCode::kUnavailable:
      return sink::Failure::kRetryable;
    case StatusCode::kInvalidArgument:
      return sink::Failure::kPermanent;
    default:
      return sink::Failure::kUnknown;
  }
}

Status PeerPlugin::DeadLetter(size_t /*shard*/, sink::Write& w, const Status& why) {
  auto& pw = static_cast<PeerWrite&>(w);
  if (opts_.dead_letter_dir.empty()) {
    return Status::Internal("no dead-letter directory: left in the durable queue");
  }
  std::error_code ec;
  std::filesystem::create_directories(opts_.dead_letter_dir, ec);
  const auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  const std::string path = fmt::format("{}/peer-{}-{}-{}.pb", opts_.dead_letter_dir,
                                       FileSafe(opts_.peer), wall, dead_letter_seq_.fetch_add(1));
  SH_RETURN_IF_ERROR(WriteFileSynced(path, pw.body));
  stats_.dead_letter_files += 1;
  spdlog::error("peer sink {}: {} spans refused for good by peer {}, kept in {}: {}", opts_.name,
                pw.rows, opts_.peer, path, why.message());
  return Status::Ok();
}

void PeerPlugin::AppendMetrics(const std::string& /*name*/, PromText& out) const {
  const std::string label = PromText::Label("peer", opts_.peer);
  out.One("spanhouse_peer_up", "gauge",
          "1 while the last Export to the peer was answered (or none was tried), 0 after a "
          "failure to reach it.",
          label, up_.load() ? 1 : 0);
  out.One("spanhouse_peer_down_milliseconds", "gauge",
          "How long the peer has failed without a success (0: it has not).", label,
          static_cast<uint64_t>(down_for().count()));
  out.One("spanhouse_peer_spans_forwarded_total", "counter",
          "Spans the peer took (those its partial success refused not included).", label,
          stats_.spans_forwarded.load());
  out.One("spanhouse_peer_exports_total", "counter", "Export calls the peer answered OK.", label,
          stats_.exports.load());
  out.Family("spanhouse_peer_export_failures_total", "counter",
             "Export calls that failed, by class: retryable (unreachable, busy, timeout), "
             "permanent (refused: dead-lettered), unknown (retried a bounded number of times).");
  out.Sample("spanhouse_peer_export_failures_total", label + ",class=\"retryable\"",
             stats_.failures_retryable.load());
  out.Sample("spanhouse_peer_export_failures_total", label + ",class=\"permanent\"",
             stats_.failures_permanent.load());
  out.Sample("spanhouse_peer_export_failures_total", label + ",class=\"unknown\"",
             stats_.failures_unknown.load());
  out.One("spanhouse_peer_spans_rejected_total", "counter",
          "Spans the peer refused for good in a partial success.", label,
          stats_.spans_rejected.load());
  out.One("spanhouse_peer_spans_decided_here_total", "counter",
          "Spans of the peer's traces decided on this node after the peer failed for longer "
          "than the handoff time.",
          label, stats_.spans_decided_here.load());
  out.One("spanhouse_peer_dead_letter_files_total", "counter",
          "Requests the peer refused for good, kept as files in the dead-letter directory.", label,
          stats_.dead_letter_files.load());
}

Status MakePeerSink(PeerSinkOptions options, std::unique_ptr<sink::RuntimeSink>* out) {
  const std::string what = "peer sink " + options.name;
  if (options.name.empty()) return Status::Invalid("peer sink: no name");
  if (options.self.empty()) return Status::Invalid(what + ": no name for this node (self)");
  if (options.address.empty()) return Status::Invalid(what + ": no address");
  if (options.max_export_spans == 0 || options.max_export_bytes == 0) {
    return Status::Invalid(what + ": max_export_spans and max_export_bytes must be positive");
  }
  if (options.handoff_after.count() > 0 && !options.decide_here) {
    return Status::Invalid(what + ": handoff_after without a decide_here callback");
  }
  if (options.peer.empty()) options.peer = options.name;
  std::string ca;
  if (options.tls && !options.tls_ca_file.empty()) {
    std::ifstream in(options.tls_ca_file, std::ios::binary);
    if (!in.is_open()) {
      return Status::Invalid(what + ": cannot read the CA file " + options.tls_ca_file);
    }
    std::stringstream text;
    text << in.rdbuf();
    ca = text.str();
    if (ca.empty())
      return Status::Invalid(what + ": the CA file " + options.tls_ca_file + " is empty");
  }
  sink::RuntimeOptions r;
  r.name = options.name;
  r.queue_bytes = options.queue_bytes;
  r.retry = options.retry;
  *out = std::make_unique<sink::RuntimeSink>(
      std::make_unique<PeerPlugin>(std::move(options), std::move(ca)), std::move(r));
  return Status::Ok();
}

}  // namespace spanhouse::peers
