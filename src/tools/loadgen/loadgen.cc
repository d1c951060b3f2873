// `spanhouse loadgen` (see loadgen.h): sending threads, pacing, retries,
// progress, the report and --verify.
#include "tools/loadgen/loadgen.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "codec/compressor.h"
#include "codec/value_text.h"
#include "net/http_client.h"
#include "tools/loadgen/generator.h"
#include "tools/loadgen/grpc_client.h"
#include "tools/loadgen/histogram.h"
#include "tools/loadgen/payload.h"
#include "tools/loadgen/rng.h"

namespace spanhouse::loadgen {
namespace {

using Clock = std::chrono::steady_clock;
using net::HttpClient;
using net::HttpUrl;
using net::ParseHttpUrl;
using std::chrono::duration;
using std::chrono::milliseconds;

constexpr double kMaxRetryAfterS = 5;
// Generated traces are placed this long before "now" when sent: whole traces
// (~100 ms each) then end in the past, as a real exporter's would.
constexpr int64_t kLagNs = 1'000'000'000;

uint64_t WallNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// Entropy for this run's ids (not the corpus, which --seed fixes): clocks, pid
// and an address, mixed. Two runs with the same seed must not send equal ids.
uint64_t RunEntropy() {
  uint64_t x = WallNs();
  x ^= static_cast<uint64_t>(Clock::now().time_since_epoch().count()) * 0x9e3779b97f4a7c15ull;
  x ^= static_cast<uint64_t>(getpid()) << 32;
  int local = 0;
  x ^= reinterpret_cast<uintptr_t>(&local);
  return SplitMix64(x);
}

struct ConnStats {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> requests_ok{0};
  std::atomic<uint64_t> spans_sent{0};
  std::atomic<uint64_t> spans_accepted{0};
  std::atomic<uint64_t> traces_sent{0};
  std::atomic<uint64_t> traces_accepted{0};
  std::atomic<uint64_t> error_traces{0};
  std::atomic<uint64_t> error_traces_accepted{0};
  std::atomic<uint64_t> slow_traces{0};
  std::atomic<uint64_t> slow_traces_accepted{0};
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> rejected_requests{0};
  std::atomic<uint64_t> rejected_spans{0};
  std::atomic<uint64_t> retried{0};
  std::atomic<uint64_t> throttled{0};
  std::atomic<uint64_t> connection_errors{0};
  LatencyHistogram latency;  // written by its thread only; read after join
};

struct Totals {
  uint64_t requests = 0, requests_ok = 0, spans_sent = 0, spans_accepted = 0, bytes_sent = 0,
           rejected_requests = 0, rejected_spans = 0, retried = 0, throttled = 0,
           connection_errors = 0, traces_sent = 0, traces_accepted = 0, error_traces = 0,
           error_traces_accepted = 0, slow_traces = 0, slow_traces_accepted = 0;
};

Totals Sum(const std::vector<std::unique_ptr<ConnStats>>& stats) {
  Totals t;
  for (const auto& s : stats) {
    t.requests += s->requests.load(std::memory_order_relaxed);
    t.requests_ok += s->requests_ok.load(std::memory_order_relaxed);
    t.spans_sent += s->spans_sent.load(std::memory_order_relaxed);
    t.spans_accepted += s->spans_accepted.load(std::memory_order_relaxed);
    t.bytes_sent += s->bytes_sent.load(std::memory_order_relaxed);
    t.rejected_requests += s->rejected_requests.load(std::memory_order_relaxed);
    t.rejected_spans += s->rejected_spans.load(std::memory_order_relaxed);
    t.retried += s->retried.load(std::memory_order_relaxed);
    t.throttled += s->throttled.load(std::memory_order_relaxed);
    t.connection_errors += s->connection_errors.load(std::memory_order_relaxed);
    t.traces_sent += s->traces_sent.load(std::memory_order_relaxed);
    t.traces_accepted += s->traces_accepted.load(std::memory_order_relaxed);
    t.error_traces += s->error_traces.load(std::memory_order_relaxed);
    t.error_traces_accepted += s->error_traces_accepted.load(std::memory_order_relaxed);
    t.slow_traces += s->slow_traces.load(std::memory_order_relaxed);
    t.slow_traces_accepted += s->slow_traces_accepted.load(std::memory_order_relaxed);
  }
  return t;
}

// rejected_spans of an ExportTraceServiceResponse's partial_success; 0 if absent.
int64_t PartialRejected(std::string_view body) {
  auto varint = [](std::string_view& in, uint64_t* v) {
    *v = 0;
    for (int i = 0; i < 10 && !in.empty(); ++i) {
      const auto b = static_cast<uint8_t>(in[0]);
      in.remove_prefix(1);
      *v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if ((b & 0x80) == 0) return true;
    }
    return false;
  };
  // ExportTraceServiceResponse { ExportTracePartialSuccess partial_success = 1; }
  std::string_view in = body;
  while (!in.empty()) {
    uint64_t tag, v;
    if (!varint(in, &tag)) return 0;
    const uint64_t wire = tag & 7;
    if (wire == 2) {
      if (!varint(in, &v) || v > in.size()) return 0;
      std::string_view payload = in.substr(0, v);
      in.remove_prefix(v);
      if (tag >> 3 != 1) continue;
      // ExportTracePartialSuccess { int64 rejected_spans = 1; string error_message = 2; }
      while (!payload.empty()) {
        uint64_t t2, v2;
        if (!varint(payload, &t2)) return 0;
        if ((t2 & 7) == 0) {
          if (!varint(payload, &v2)) return 0;
          if (t2 >> 3 == 1) return static_cast<int64_t>(v2);
        } else if ((t2 & 7) == 2) {
          if (!varint(payload, &v2) || v2 > payload.size()) return 0;
          payload.remove_prefix(v2);
        } else {
          return 0;
        }
      }
    } else if (wire == 0) {
      if (!varint(in, &v)) return 0;
    } else {
      return 0;
    }
  }
  return 0;
}

// Where a worker's requests go: one keep-alive connection or one gRPC channel.
class Sender {
 public:
  virtual ~Sender() = default;
  // As HttpClient::Post.
  virtual bool Post(std::string* body, std::string_view encoding, HttpResult* res) = 0;
};

class HttpSender final : public Sender {
 public:
  HttpSender(const HttpUrl& url, milliseconds timeout) : client_(url, timeout) {}
  bool Post(std::string* body, std::string_view encoding, HttpResult* res) override {
    return client_.Post(body, "application/x-protobuf", encoding, res);
  }

 private:
  HttpClient client_;
};

class GrpcSender final : public Sender {
 public:
  GrpcSender(const std::string& target, milliseconds timeout, bool gzip, int index)
      : client_(target, timeout, gzip, index) {}
  bool Post(std::string* body, std::string_view, HttpResult* res) override {
    return client_.Post(body, res);
  }

 private:
  GrpcExportClient client_;
};

// host:port of a gRPC --endpoint: as given, or a URL's.
std::string GrpcTarget(const std::string& endpoint) {
  HttpUrl url;
  std::string err;
  if (endpoint.find("://") != std::string::npos && ParseHttpUrl(endpoint, &url, &err)) {
    return url.host + ":" + std::to_string(url.port);
  }
  return endpoint;
}

class Run {
 public:
  Run(const LoadgenOptions& o, HttpUrl url, std::string run_id, uint64_t entropy)
      : o_(o),
        url_(std::move(url)),
        run_id_(std::move(run_id)),
        entropy_(entropy),
        shape_{o.error_traces >= 0, o.slow_traces >= 0 ? o.slow_ms * 1'000'000 : 0},
        marks_{o.error_traces, o.slow_traces, o.slow_ms * 1'000'000} {}

  // Pre-generates the payloads; returns false (message printed) on failure.
  void Prepare() {
    if (o_.payloads == 0) return;
    const auto t0 = Clock::now();
    payloads_ = BuildPayloads(CorpusOptions{o_.seed, o_.corpus}, run_id_, o_.payloads,
                              o_.spans_per_request, WallNs() - kLagNs, shape_);
    uint64_t spans = 0, bytes = 0;
    for (const Payload& p : payloads_) {
      spans += p.spans;
      bytes += p.body.size();
    }
    if (!o_.quiet) {
      std::fprintf(stderr,
                   "loadgen: %zu payloads pre-generated (%s corpus): %" PRIu64
                   " spans, %.1f MB, %.2f s\n",
                   payloads_.size(), CorpusKindName(o_.corpus), spans,
                   static_cast<double>(bytes) / 1e6, duration<double>(Clock::now() - t0).count());
    }
  }

  LoadgenReport Go() {
    for (int i = 0; i < o_.connections; ++i) stats_.push_back(std::make_unique<ConnStats>());
    start_ = Clock::now();
    const bool timed = o_.duration_s > 0;
    const auto deadline = start_ + std::chrono::duration_cast<Clock::duration>(
                                       duration<double>(timed ? o_.duration_s : 0));
    std::vector<std::thread> threads;
    threads.reserve(static_cast<size_t>(o_.connections));
    for (int i = 0; i < o_.connections; ++i) threads.emplace_back([this, i] { Worker(i); });

    // The signal mask main() set (SIGINT/SIGTERM blocked in every thread)
    // lets this loop take them synchronously; without it (tests), just sleep.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigset_t current;
    pthread_sigmask(SIG_BLOCK, nullptr, &current);
    const bool can_wait_signals =
        sigismember(&current, SIGINT) == 1 && sigismember(&current, SIGTERM) == 1;

    auto last_print = start_;
    uint64_t last_accepted = 0;
    while (finished_.load() < o_.connections) {
      if (can_wait_signals) {
        const timespec ts{0, 100'000'000};
        if (sigtimedwait(&sigs, nullptr, &ts) > 0) {
          if (!o_.quiet) std::fprintf(stderr, "loadgen: interrupted, stopping\n");
          stop_soft_ = true;
          stop_hard_ = true;
        }
      } else {
        std::this_thread::sleep_for(milliseconds(100));
      }
      const auto now = Clock::now();
      if (timed && now >= deadline) stop_soft_ = true;
      if (!o_.quiet && now - last_print >= std::chrono::seconds(1)) {
        const Totals t = Sum(stats_);
        const double dt = duration<double>(now - last_print).count();
        std::fprintf(stderr,
                     "[%6.1fs] sent %" PRIu64 "  accepted %" PRIu64
                     "  %.0f spans/s  429/503 %" PRIu64 "  retried %" PRIu64 "  rejected %" PRIu64
                     "  conn errors %" PRIu64 "\n",
                     duration<double>(now - start_).count(), t.spans_sent, t.spans_accepted,
                     static_cast<double>(t.spans_accepted - last_accepted) / dt, t.throttled,
                     t.retried, t.rejected_requests, t.connection_errors);
        last_print = now;
        last_accepted = t.spans_accepted;
      }
    }
    for (std::thread& t : threads) t.join();
    const double elapsed = duration<double>(EndTime() - start_).count();

    LoadgenReport r;
    r.run_id = run_id_;
    r.elapsed_s = elapsed;
    const Totals t = Sum(stats_);
    r.requests = t.requests;
    r.requests_ok = t.requests_ok;
    r.spans_sent = t.spans_sent;
    r.spans_accepted = t.spans_accepted;
    r.bytes_sent = t.bytes_sent;
    r.rejected_requests = t.rejected_requests;
    r.rejected_spans = t.rejected_spans;
    r.retried = t.retried;
    r.throttled = t.throttled;
    r.connection_errors = t.connection_errors;
    r.traces_sent = t.traces_sent;
    r.traces_accepted = t.traces_accepted;
    r.error_traces = t.error_traces;
    r.error_traces_accepted = t.error_traces_accepted;
    r.slow_traces = t.slow_traces;
    r.slow_traces_accepted = t.slow_traces_accepted;
    r.spans_per_s = elapsed > 0 ? static_cast<double>(t.spans_accepted) / elapsed : 0;
    LatencyHistogram all;
    for (const auto& s : stats_) all.Merge(s->latency);
    r.latency_p50_ms = all.PercentileUs(0.50) / 1000;
    r.latency_p99_ms = all.PercentileUs(0.99) / 1000;
    r.latency_max_ms = static_cast<double>(all.MaxUs()) / 1000;
    return r;
  }

  bool Interrupted() const { return stop_hard_.load(); }

 private:
  Clock::time_point EndTime() const { return Clock::time_point(Clock::duration(last_end_.load())); }

  // Sleeps until `until`; false at once if `flag` gets set meanwhile.
  static bool SleepUntil(Clock::time_point until, const std::atomic<bool>& flag) {
    for (;;) {
      if (flag.load(std::memory_order_relaxed)) return false;
      const auto now = Clock::now();
      if (now >= until) return true;
      std::this_thread::sleep_for(std::min<Clock::duration>(until - now, milliseconds(20)));
    }
  }

  void Worker(int index) {
    ConnStats& st = *stats_[index];
    Rng rng(entropy_ ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(index + 1)));
    const auto timeout = std::chrono::duration_cast<milliseconds>(duration<double>(o_.timeout_s));
    const bool grpc = o_.protocol == "grpc";
    std::unique_ptr<Sender> client;
    if (grpc) {
      client = std::make_unique<GrpcSender>(GrpcTarget(o_.endpoint), timeout,
                                            o_.compression == "gzip", index);
    } else {
      client = std::make_unique<HttpSender>(url_, timeout);
    }
    // gRPC compresses the message itself.
    codec::Compressor comp(grpc ? "none" : o_.compression);
    const bool compress = !comp.Encoding().empty();
    std::string raw;
    std::string body;
    // --payloads 0: this connection generates every request itself.
    std::unique_ptr<TraceGenerator> gen;
    Payload fresh;
    if (payloads_.empty()) {
      uint64_t x = o_.seed + static_cast<uint64_t>(index);
      gen = std::make_unique<TraceGenerator>(CorpusOptions{SplitMix64(x), o_.corpus});
      gen->SetRunId(run_id_);
      gen->SetMarkShape(shape_);
    }
    size_t next = static_cast<size_t>(index);
    const double conn_rate = o_.rate / o_.connections;  // spans/s
    auto next_send = Clock::now();

    while (!stop_soft_.load(std::memory_order_relaxed)) {
      const Payload* p;
      if (gen) {
        BuildPayload(*gen, o_.spans_per_request, WallNs() - kLagNs, &fresh);
        p = &fresh;
      } else {
        p = &payloads_[next % payloads_.size()];
        next += static_cast<size_t>(o_.connections);
      }
      if (o_.spans > 0 && claimed_.fetch_add(p->spans) >= o_.spans) break;
      if (conn_rate > 0) {
        if (!SleepUntil(next_send, stop_soft_)) break;
        next_send += std::chrono::duration_cast<Clock::duration>(
            duration<double>(static_cast<double>(p->spans) / conn_rate));
        // After a stall, do not burst to catch up more than a second.
        const auto now = Clock::now();
        if (next_send < now - std::chrono::seconds(1)) next_send = now;
      }
      // Fresh payloads are made for now already; stored ones are moved to it.
      const int64_t delta =
          gen ? 0 : static_cast<int64_t>(WallNs() - kLagNs) - static_cast<int64_t>(p->base_ns);
      Patch patch = Patch::Random(rng, delta);
      if (o_.fresh_values && !gen) patch.value_seed = rng.Next() | 1;
      TraceCounts traces;
      if (compress) {
        ApplyPatch(*p, patch, marks_, &raw, &traces);
        if (!comp.Compress(raw, &body)) {
          std::fprintf(stderr, "loadgen: %s compression failed\n", o_.compression.c_str());
          break;
        }
      } else {
        ApplyPatch(*p, patch, marks_, &body, &traces);
      }
      st.requests.fetch_add(1, std::memory_order_relaxed);
      st.spans_sent.fetch_add(p->spans, std::memory_order_relaxed);
      st.traces_sent.fetch_add(traces.traces, std::memory_order_relaxed);
      st.error_traces.fetch_add(traces.error_traces, std::memory_order_relaxed);
      st.slow_traces.fetch_add(traces.slow_traces, std::memory_order_relaxed);
      if (Send(st, *client, comp.Encoding(), p->spans, &body)) {
        st.traces_accepted.fetch_add(traces.traces, std::memory_order_relaxed);
        st.error_traces_accepted.fetch_add(traces.error_traces, std::memory_order_relaxed);
        st.slow_traces_accepted.fetch_add(traces.slow_traces, std::memory_order_relaxed);
      }
      NoteEnd();
    }
    finished_.fetch_add(1);
  }

  void NoteEnd() {
    const int64_t now = Clock::now().time_since_epoch().count();
    int64_t prev = last_end_.load();
    while (now > prev && !last_end_.compare_exchange_weak(prev, now)) {
    }
  }

  // Sends one request until it is answered for good; true if answered 2xx.
  bool Send(ConnStats& st, Sender& client, std::string_view encoding, uint32_t spans,
            std::string* body) {
    HttpResult res;
    int throttled_tries = 0;
    int conn_tries = 0;
    for (;;) {
      const auto t0 = Clock::now();
      st.bytes_sent.fetch_add(body->size(), std::memory_order_relaxed);
      if (!client.Post(body, encoding, &res)) {
        st.connection_errors.fetch_add(1, std::memory_order_relaxed);
        ++conn_tries;
        if (conn_errors_logged_.fetch_add(1) < 3) {
          std::fprintf(stderr, "loadgen: %s: %s\n", o_.endpoint.c_str(), res.error.c_str());
        }
        // Past the deadline, a dead server must not hold the run open.
        if (stop_hard_.load() || (stop_soft_.load() && conn_tries >= 3)) {
          Reject(st, spans);
          return false;
        }
        const auto backoff = milliseconds(std::min(2000, 100 << std::min(conn_tries - 1, 5)));
        SleepUntil(Clock::now() + backoff, stop_hard_);
        st.retried.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0);
      st.latency.Record(static_cast<uint64_t>(us.count()));
      if (res.status >= 200 && res.status < 300) {
        const int64_t partial = std::clamp<int64_t>(PartialRejected(res.body), 0, spans);
        st.requests_ok.fetch_add(1, std::memory_order_relaxed);
        st.spans_accepted.fetch_add(spans - static_cast<uint64_t>(partial),
                                    std::memory_order_relaxed);
        if (partial > 0) st.rejected_spans.fetch_add(partial, std::memory_order_relaxed);
        return true;
      }
      if (res.status == 429 || res.status == 503) {
        st.throttled.fetch_add(1, std::memory_order_relaxed);
        if (throttled_tries < o_.max_retries && !stop_hard_.load()) {
          ++throttled_tries;
          const double wait =
              res.retry_after_s >= 0 ? std::min(res.retry_after_s, kMaxRetryAfterS) : 1.0;
          SleepUntil(
              Clock::now() + std::chrono::duration_cast<Clock::duration>(duration<double>(wait)),
              stop_hard_);
          st.retried.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
      } else if (rejections_logged_.fetch_add(1) < 3) {
        std::string text = res.body.substr(0, 300);
        for (char& c : text) {
          if (static_cast<unsigned char>(c) < 0x20) c = ' ';
        }
        std::fprintf(stderr, "loadgen: request rejected with HTTP %d: %s\n", res.status,
                     text.c_str());
      }
      Reject(st, spans);
      return false;
    }
  }

  static void Reject(ConnStats& st, uint32_t spans) {
    st.rejected_requests.fetch_add(1, std::memory_order_relaxed);
    st.rejected_spans.fetch_add(spans, std::memory_order_relaxed);
  }

  const LoadgenOptions& o_;
  const HttpUrl url_;
  const std::string run_id_;
  const uint64_t entropy_;
  const MarkShape shape_;
  const TraceMarks marks_;
  std::vector<Payload> payloads_;
  std::vector<std::unique_ptr<ConnStats>> stats_;
  Clock::time_point start_;
  std::atomic<int64_t> last_end_{0};
  std::atomic<bool> stop_soft_{false};  // start no new request
  std::atomic<bool> stop_hard_{false};  // interrupted: give up retries too
  std::atomic<uint64_t> claimed_{0};    // spans taken towards --spans
  std::atomic<int> finished_{0};
  std::atomic<int> conn_errors_logged_{0};
  std::atomic<int> rejections_logged_{0};
};

// Polls the query API's span count for this run until it equals `accepted`
// or the time is up. Returns the last count read, -1 if none.
int64_t Verify(const LoadgenOptions& o, const HttpUrl& q, const std::string& run_id,
               uint64_t accepted) {
  HttpClient client(q, milliseconds(10000));
  std::string base = q.target;
  while (!base.empty() && base.back() == '/') base.pop_back();
  const std::string target = base + "/api/spans/count?resource_attr=loadgen.run_id&value=" + run_id;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           duration<double>(o.verify_timeout_s));
  int64_t count = -1;
  std::string last_problem;
  auto last_print = Clock::now();
  for (;;) {
    HttpResult res;
    if (!client.Get(target, &res)) {
      last_problem = res.error;
    } else if (res.status != 200) {
      last_problem = "HTTP " + std::to_string(res.status) + ": " + res.body.substr(0, 200);
    } else {
      // {"count":N}
      const size_t k = res.body.find("\"count\"");
      const size_t colon = k == std::string::npos ? k : res.body.find(':', k);
      long long n = -1;
      if (colon != std::string::npos) {
        size_t i = colon + 1;
        while (i < res.body.size() && res.body[i] == ' ') ++i;
        if (std::sscanf(res.body.c_str() + i, "%lld", &n) != 1) n = -1;
      }
      if (n < 0) {
        last_problem = "unexpected answer: " + res.body.substr(0, 200);
      } else {
        count = n;
        last_problem.clear();
        // The count only grows: more than accepted will not come back down.
        if (static_cast<uint64_t>(count) >= accepted) return count;
      }
    }
    if (Clock::now() >= deadline) break;
    if (!o.quiet && Clock::now() - last_print >= std::chrono::seconds(5)) {
      std::fprintf(stderr, "loadgen: verify: stored %lld of %" PRIu64 " so far%s%s\n",
                   static_cast<long long>(count), accepted, last_problem.empty() ? "" : "; ",
                   last_problem.c_str());
      last_print = Clock::now();
    }
    std::this_thread::sleep_for(milliseconds(500));
  }
  if (!last_problem.empty()) {
    std::fprintf(stderr, "loadgen: verify: %s%s\n", o.query_endpoint.c_str(),
                 (target + ": " + last_problem).c_str());
  }
  return count;
}

void PrintText(FILE* f, const LoadgenOptions& o, const LoadgenReport& r) {
  std::fprintf(f, "run id            %s\n", r.run_id.c_str());
  std::fprintf(f, "spans accepted    %" PRIu64 " of %" PRIu64 " sent\n", r.spans_accepted,
               r.spans_sent);
  std::fprintf(f, "requests          %" PRIu64 " (%" PRIu64 " accepted)\n", r.requests,
               r.requests_ok);
  std::fprintf(f,
               "traces accepted   %" PRIu64 " of %" PRIu64 " sent; with an error %" PRIu64
               " of %" PRIu64 "; slow (root >= %" PRIu64 " ms) %" PRIu64 " of %" PRIu64 "\n",
               r.traces_accepted, r.traces_sent, r.error_traces_accepted, r.error_traces, o.slow_ms,
               r.slow_traces_accepted, r.slow_traces);
  std::fprintf(f, "achieved          %.0f spans/s over %.2f s (%.1f MB/s sent)\n", r.spans_per_s,
               r.elapsed_s,
               r.elapsed_s > 0 ? static_cast<double>(r.bytes_sent) / 1e6 / r.elapsed_s : 0.0);
  std::fprintf(f, "latency           p50 %.2f ms  p99 %.2f ms  max %.2f ms\n", r.latency_p50_ms,
               r.latency_p99_ms, r.latency_max_ms);
  std::fprintf(f, "rejected          %" PRIu64 " requests, %" PRIu64 " spans\n",
               r.rejected_requests, r.rejected_spans);
  std::fprintf(f,
               "retried           %" PRIu64 " (429/503 answers %" PRIu64
               ", connection errors %" PRIu64 ")\n",
               r.retried, r.throttled, r.connection_errors);
  if (r.verified) {
    std::fprintf(f,
                 "verify            stored %lld, accepted %" PRIu64 ": %s (%.1f s after sending)\n",
                 static_cast<long long>(r.stored), r.spans_accepted,
                 r.verify_ok ? "OK" : "MISMATCH", r.verify_s);
  }
}

void PrintJson(FILE* f, const LoadgenOptions& o, const LoadgenReport& r) {
  std::string endpoint;
  codec::AppendJsonString(endpoint, o.endpoint);
  std::fprintf(f,
               "{\"run_id\":\"%s\",\"protocol\":\"%s\",\"endpoint\":%s,\"connections\":%d,"
               "\"elapsed_s\":%.3f,"
               "\"requests\":%" PRIu64 ",\"requests_ok\":%" PRIu64 ",\"spans_sent\":%" PRIu64
               ",\"spans_accepted\":%" PRIu64 ",\"traces_sent\":%" PRIu64
               ",\"traces_accepted\":%" PRIu64 ",\"error_traces\":%" PRIu64
               ",\"error_traces_accepted\":%" PRIu64 ",\"slow_traces\":%" PRIu64
               ",\"slow_traces_accepted\":%" PRIu64 ",\"slow_ms\":%" PRIu64
               ",\"corpus\":\"%s\",\"fresh_values\":%s"
               ",\"spans_per_s\":%.1f,\"bytes_sent\":%" PRIu64
               ",\"latency_p50_ms\":%.3f,\"latency_p99_ms\":%.3f,\"latency_max_ms\":%.3f,"
               "\"rejected_requests\":%" PRIu64 ",\"rejected_spans\":%" PRIu64
               ",\"retried\":%" PRIu64 ",\"throttled\":%" PRIu64 ",\"connection_errors\":%" PRIu64,
               r.run_id.c_str(), o.protocol == "grpc" ? "grpc" : "http", endpoint.c_str(),
               o.connections, r.elapsed_s, r.requests, r.requests_ok, r.spans_sent,
               r.spans_accepted, r.traces_sent, r.traces_accepted, r.error_traces,
               r.error_traces_accepted, r.slow_traces, r.slow_traces_accepted, o.slow_ms,
               CorpusKindName(o.corpus), o.fresh_values ? "true" : "false", r.spans_per_s,
               r.bytes_sent, r.latency_p50_ms, r.latency_p99_ms, r.latency_max_ms,
               r.rejected_requests, r.rejected_spans, r.retried, r.throttled, r.connection_errors);
  if (r.verified) {
    std::fprintf(f, ",\"verify\":{\"stored\":%lld,\"ok\":%s,\"seconds\":%.1f}",
                 static_cast<long long>(r.stored), r.verify_ok ? "true" : "false", r.verify_s);
  }
  std::fprintf(f, "}\n");
}

std::string FormatSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

int BadFlag(const std::string& message) {
  std::fprintf(stderr, "spanhouse loadgen: %s\n", message.c_str());
  return 2;
}

}  // namespace

int RunLoadgen(const LoadgenOptions& options, LoadgenReport* report) {
  LoadgenOptions o = options;
  // The fresh corpus's replayed payloads would repeat its ids send after send.
  if (o.corpus == CorpusKind::kFresh) o.fresh_values = true;
  HttpUrl url, query;
  std::string err;
  if (o.protocol != "http" && o.protocol != "grpc") {
    return BadFlag("--protocol must be http or grpc, not '" + o.protocol + "'");
  }
  if (o.protocol == "grpc") {
    if (o.compression == "zstd") return BadFlag("--compression zstd: gRPC takes none or gzip");
    const std::string target = GrpcTarget(o.endpoint);
    if (target.find(':') == std::string::npos || target.find('/') != std::string::npos) {
      return BadFlag("--endpoint: want host:port for gRPC, not '" + o.endpoint + "'");
    }
  } else if (!ParseHttpUrl(o.endpoint, &url, &err)) {
    return BadFlag("--endpoint: " + err);
  }
  if (o.verify && !ParseHttpUrl(o.query_endpoint, &query, &err)) {
    return BadFlag("--query-endpoint: " + err);
  }
  if (o.connections < 1 || o.connections > 1024) return BadFlag("--connections must be 1-1024");
  if (!(o.rate >= 0)) return BadFlag("--rate must be >= 0");
  if (!(o.duration_s >= 0)) return BadFlag("--duration must be >= 0");
  if (o.duration_s == 0 && o.spans == 0) return BadFlag("give --duration or --spans");
  if (o.spans_per_request < 1 || o.spans_per_request > 1'000'000) {
    return BadFlag("--spans-per-request must be 1-1000000");
  }
  if (o.payloads > 100'000) return BadFlag("--payloads must be at most 100000");
  if (!codec::Compressor::Valid(o.compression)) {
    return BadFlag("--compression must be none, gzip or zstd, not '" + o.compression + "'");
  }
  if (o.max_retries < 0) return BadFlag("--max-retries must be >= 0");
  if (!(o.timeout_s > 0)) return BadFlag("--timeout must be > 0");
  if (!(o.verify_timeout_s >= 0)) return BadFlag("--verify-timeout must be >= 0");
  if (!(o.error_traces < 0 || o.error_traces <= 1)) return BadFlag("--error-traces must be 0-1");
  if (!(o.slow_traces < 0 || o.slow_traces <= 1)) return BadFlag("--slow-traces must be 0-1");
  if (o.slow_ms < 1 || o.slow_ms > 3'600'000) return BadFlag("--slow-ms must be 1-3600000");

  const uint64_t entropy = RunEntropy();
  std::string run_id;
  {
    uint64_t x = entropy;
    const uint64_t v = SplitMix64(x);
    static constexpr char kHex[] = "0123456789abcdef";
    for (int i = 15; i >= 0; --i) run_id += kHex[(v >> (4 * i)) & 0xf];
  }

  Run run(o, url, run_id, entropy);
  run.Prepare();
  if (!o.quiet) {
    std::fprintf(stderr, "loadgen: run %s: %s, %d connections, %s, %s\n", run_id.c_str(),
                 o.endpoint.c_str(), o.connections,
                 o.rate > 0 ? (std::to_string(static_cast<uint64_t>(o.rate)) + " spans/s").c_str()
                            : "flat out",
                 o.duration_s > 0 ? (FormatSeconds(o.duration_s) + " s").c_str()
                                  : (std::to_string(o.spans) + " spans").c_str());
  }
  LoadgenReport r = run.Go();

  int code = 0;
  if (r.spans_accepted == 0) {
    std::fprintf(stderr, "loadgen: no span was accepted\n");
    code = 1;
  }
  if (o.verify && !run.Interrupted()) {
    r.verified = true;
    const auto t0 = Clock::now();
    r.stored = Verify(o, query, run_id, r.spans_accepted);
    r.verify_s = duration<double>(Clock::now() - t0).count();
    r.verify_ok = r.stored >= 0 && static_cast<uint64_t>(r.stored) == r.spans_accepted;
    if (!r.verify_ok) code = 1;
  }
  if (o.json) {
    PrintText(stderr, o, r);
    PrintJson(stdout, o, r);
  } else {
    PrintText(stdout, o, r);
  }
  std::fflush(stdout);
  if (report != nullptr) *report = r;
  return code;
}

void AddLoadgenCommand(CLI::App& app, std::function<int()>* run) {
  auto o = std::make_shared<LoadgenOptions>();
  CLI::App* cmd = app.add_subcommand(
      "loadgen", "Send generated e-commerce traces to an OTLP/HTTP endpoint and report throughput");
  cmd->add_option("--protocol", o->protocol,
                  "http (OTLP/HTTP, default) or grpc (OTLP/gRPC generic calls, one channel per "
                  "connection)");
  CLI::Option* endpoint =
      cmd->add_option("--endpoint", o->endpoint,
                      "OTLP/HTTP traces URL (http:// only); with --protocol grpc host:port "
                      "(default 127.0.0.1:4317)")
          ->capture_default_str();
  cmd->add_option("--connections", o->connections,
                  "Parallel keep-alive connections, one sending thread each")
      ->capture_default_str();
  cmd->add_option("--rate", o->rate, "Target spans/s over all connections; 0 sends flat out")
      ->capture_default_str();
  CLI::Option* dur = cmd->add_option("--duration", o->duration_s,
                                     "Seconds to send for (default 10, or no limit when --spans "
                                     "is given); 0 = no time limit");
  cmd->add_option("--spans", o->spans,
                  "Stop after sending this many spans (whole requests, so a few more); 0 = no "
                  "limit")
      ->capture_default_str();
  cmd->add_option("--spans-per-request", o->spans_per_request,
                  "Spans per request (whole traces, so a few more)")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the generated corpus: same seed, same traces")
      ->capture_default_str();
  cmd->add_option("--payloads", o->payloads,
                  "Requests pre-generated and sent round-robin with fresh ids and times; 0 "
                  "generates every request afresh (more CPU, more distinct attribute values)")
      ->capture_default_str();
  auto corpus = std::make_shared<std::string>("replay");
  cmd->add_option("--corpus", *corpus,
                  "replay: the corpus every benchmark so far used (templated URLs, "
                  "parameterised SQL, fixed exception texts, 12 user agents); fresh: concrete "
                  "URLs, SQL literals, exception texts and log lines with ids, thousands of user "
                  "agents, and --fresh-values on")
      ->check(CLI::IsMember({"replay", "fresh"}))
      ->capture_default_str();
  cmd->add_flag("--fresh-values", o->fresh_values,
                "Give the pre-generated requests fresh digits per send in the values real "
                "traffic rarely repeats (ids and numbers in log lines, exception messages, URLs "
                "and SQL; message ids and keys; search queries), at a few random draws per span");
  cmd->add_option("--compression", o->compression, "Request body compression: none, gzip or zstd")
      ->capture_default_str();
  cmd->add_option("--max-retries", o->max_retries,
                  "Retries of a request answered 429/503 (after its Retry-After, at most 5 s) "
                  "before it counts as rejected")
      ->capture_default_str();
  cmd->add_option("--timeout", o->timeout_s, "Seconds to wait for a connection or an answer")
      ->capture_default_str();
  cmd->add_flag("--verify", o->verify,
                "After sending, poll the query API until it stores as many spans of this run "
                "as were accepted; exit 1 if it does not within --verify-timeout");
  cmd->add_option("--query-endpoint", o->query_endpoint, "Query API base URL, for --verify")
      ->capture_default_str();
  cmd->add_option("--verify-timeout", o->verify_timeout_s, "Seconds --verify waits at most")
      ->capture_default_str();
  cmd->add_option("--error-traces", o->error_traces,
                  "Share of traces (0-1) that fail: spans in status ERROR, one with a message; "
                  "the others carry no ERROR status. Chosen per send from each trace's fresh id. "
                  "Default: the corpus's own ~1% of failures")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--slow-traces", o->slow_traces,
                  "Share of traces (0-1) whose root span lasts --slow-ms or longer (it starts that "
                  "much earlier); the others are kept shorter. Chosen per send from each trace's "
                  "fresh id, independently of --error-traces. Default: none made slow")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--slow-ms", o->slow_ms, "Root duration (ms) of a slow trace, for --slow-traces")
      ->capture_default_str();
  cmd->add_flag("--json", o->json,
                "Print the report as one JSON line on stdout (the text report goes to stderr)");
  cmd->add_flag("-q,--quiet", o->quiet, "No progress lines on stderr");
  cmd->callback([o, dur, endpoint, corpus, run] {
    ParseCorpusKind(*corpus, &o->corpus);
    if (dur->count() == 0 && o->spans > 0) o->duration_s = 0;
    if (endpoint->count() == 0 && o->protocol == "grpc") o->endpoint = "127.0.0.1:4317";
    *run = [o] { return RunLoadgen(*o); };
  });
}

}  // namespace spanhouse::loadgen
