// Whether the other nodes of the `peers` list are up, as this node sees
// them: a thread connects to each one's OTLP/gRPC port every probe
// interval. A node that answers is up at once; one that has not answered
// for `down_after` is down, and the ring (ring.h) stops giving it traces:
// its share goes to the nodes that scored next for each trace. Until then
// its spans wait for it in this node's durable queue (the peer sink's
// backlog), the same `down_after` after which that sink decides them here.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/prom_text.h"
#include "peers/ring.h"

namespace spanhouse::peers {

struct HealthOptions {
  std::chrono::milliseconds probe_interval{1000};
  std::chrono::milliseconds connect_timeout{500};
  std::chrono::milliseconds down_after{30000};
};

// Connects to `host_port` (a TCP connection, closed at once) within
// `timeout`; false when it is refused, unreachable or too slow.
bool CanConnect(const std::string& host_port, std::chrono::milliseconds timeout);

class PeerHealth {
 public:
  PeerHealth(PeerRing& ring, HealthOptions options);
  ~PeerHealth();  // stops the thread
  PeerHealth(const PeerHealth&) = delete;
  PeerHealth& operator=(const PeerHealth&) = delete;

  void Start();
  void Stop();

  // One round of probes now (the thread's body; tests call it).
  void ProbeOnce();

  // spanhouse_peer_in_ring{peer}, spanhouse_peer_probe_failures_total{peer},
  // spanhouse_peers_up.
  void AppendMetrics(PromText& out) const;
  // For /readyz: "a up, b down 12 s, c up" (this node is not listed).
  std::string Summary() const;

 private:
  struct State {
    std::atomic<uint64_t> failures{0};
    // Since when it has not answered (steady clock ns; 0: it answers).
    std::atomic<int64_t> failing_since_ns{0};
  };
  PeerRing& ring_;
  const HealthOptions opts_;
  std::unique_ptr<State[]> state_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
};

}  // namespace spanhouse::peers
