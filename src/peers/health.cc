#include "peers/health.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/clock.h"

namespace spanhouse::peers {

bool CanConnect(const std::string& host_port, std::chrono::milliseconds timeout) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = host_port.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const std::string port = host_port.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr) return false;
  bool ok = false;
  for (addrinfo* a = res; a != nullptr && !ok; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      ok = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, static_cast<int>(timeout.count())) == 1) {
        int err = 0;
        socklen_t len = sizeof(err);
        ok = ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
      }
    }
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return ok;
}

PeerHealth::PeerHealth(PeerRing& ring, HealthOptions options)
    : ring_(ring), opts_(options), state_(std::make_unique<State[]>(ring.size())) {}

PeerHealth::~PeerHealth() {
  Stop();
}

void PeerHealth::Start() {
  if (thread_.joinable() || ring_.size() <= 1) return;
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      lock.unlock();
      ProbeOnce();
      lock.lock();
      cv_.wait_for(lock, opts_.probe_interval, [this] { return stop_; });
    }
  });
}

void PeerHealth::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PeerHealth::ProbeOnce() {
  for (size_t i = 0; i < ring_.size(); ++i) {
    if (i == ring_.self()) continue;
    State& s = state_[i];
    if (CanConnect(ring_.node(i).otlp, opts_.connect_timeout)) {
      s.failing_since_ns.store(0);
      if (!ring_.Up(i)) {
        spdlog::info("peers: {} answers again: its traces come back to it", ring_.node(i).name);
      }
      ring_.SetUp(i, true);
      continue;
    }
    s.failures += 1;
    int64_t since = s.failing_since_ns.load();
    if (since == 0) {
      since = SteadyClockNs();
      s.failing_since_ns.store(since);
    }
    // Down only after down_after: a restart or a short outage keeps its traces.
    if (SteadyClockNs() - since >= std::chrono::nanoseconds(opts_.down_after).count() &&
        ring_.Up(i)) {
      spdlog::warn(
          "peers: {} has not answered at {} for {} s: down, its traces go to the nodes "
          "next in line",
          ring_.node(i).name, ring_.node(i).otlp,
          std::chrono::duration_cast<std::chrono::seconds>(opts_.down_after).count());
      ring_.SetUp(i, false);
    }
  }
}

void PeerHealth::AppendMetrics(PromText& out) const {
  out.Family("spanhouse_peer_in_ring", "gauge",
             "Whether this node gives a peer its traces: 1 while it answers, 0 once it has not "
             "answered for peers.down_after_s (its traces then go to the nodes next in line).");
  for (size_t i = 0; i < ring_.size(); ++i) {
    if (i == ring_.self()) continue;
    out.Sample("spanhouse_peer_in_ring", PromText::Label("peer", ring_.node(i).name),
               ring_.Up(i) ? 1 : 0);
  }
  out.Family("spanhouse_peer_probe_failures_total", "counter",
             "Connections to a peer's OTLP/gRPC port that failed (one probe each).");
  for (size_t i = 0; i < ring_.size(); ++i) {
    if (i == ring_.self()) continue;
    out.Sample("spanhouse_peer_probe_failures_total", PromText::Label("peer", ring_.node(i).name),
               state_[i].failures.load());
  }
  out.One("spanhouse_peers_up", "gauge",
          "Nodes of the peers list that own traces now, this one included.", "", ring_.UpCount());
}

std::string PeerHealth::Summary() const {
  std::string out;
  for (size_t i = 0; i < ring_.size(); ++i) {
    if (i == ring_.self()) continue;
    if (!out.empty()) out += ", ";
    out += ring_.node(i).name;
    const int64_t since = state_[i].failing_since_ns.load();
    if (since == 0) {
      out += " up";
    } else {
      out += fmt::format(" {} {} s", ring_.Up(i) ? "not answering" : "down",
                         (SteadyClockNs() - since) / 1000000000);
    }
  }
  return out;
}

}  // namespace spanhouse::peers
