// Which node owns a trace, when several spanhouse nodes act as one system
// (the `peers` section): every node applies the same rule to the same list,
// so a span sent to any node is handed to the same owner, where its trace's
// sampling decision, its recent-traces entry and its dedup keys live.
//
// The rule is rendezvous (highest random weight) hashing over the nodes that
// are up: each node scores a trace id, the highest score owns it. A node
// going down moves only the traces it owned (each to the node that scored
// second for it), and coming back takes exactly those back; no ring of
// virtual nodes to tune, and an even share at a handful of nodes.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/span_batch.h"

namespace spanhouse::peers {

// One node of the `peers` list: its name (the same on every node's list),
// where it takes OTLP/gRPC, and its query URL.
struct PeerNode {
  std::string name;
  std::string otlp;   // host:port
  std::string query;  // http(s)://host:port
};

// A view (SpanBatch::peer_view) has one bit per node; all 64 set means "this node".
inline constexpr size_t kMaxPeerNodes = 63;

// Parses `peers.nodes` ("name=host:port=url;..."; the YAML list of maps is
// turned into this form), into `out`. False, with `why`, on a malformed
// entry or a name given twice.
bool ParsePeerNodes(const std::string& text, std::vector<PeerNode>* out, std::string* why);

class PeerRing {
 public:
  // `self`: this node's index in `nodes`. Every node starts up.
  PeerRing(std::vector<PeerNode> nodes, size_t self);

  size_t size() const { return nodes_.size(); }
  size_t self() const { return self_; }
  const PeerNode& node(size_t i) const { return nodes_[i]; }

  // The nodes up now (bit i: node i), this node always among them: it never hands its own
  // traces away because it cannot reach the others. What the intake stamps on a request
  // (SpanBatch::peer_view).
  uint64_t View() const;
  // The index of the node that owns `trace`: the node of `view` scoring highest (view 0:
  // View(), the nodes up now; SpanBatch::kViewHere: this node). Every node answers the same
  // for the same view.
  size_t Owner(const TraceId& trace, uint64_t view = 0) const;
  bool OwnedHere(const TraceId& trace, uint64_t view = 0) const {
    return Owner(trace, view) == self_;
  }

  // Set by the health checks (health.h); this node's own flag is ignored.
  void SetUp(size_t i, bool up) { up_[i].store(up, std::memory_order_relaxed); }
  bool Up(size_t i) const { return i == self_ || up_[i].load(std::memory_order_relaxed); }
  size_t UpCount() const;

  // The score of node `i` for `trace` (exposed for tests).
  uint64_t Score(size_t i, const TraceId& trace) const;

 private:
  std::vector<PeerNode> nodes_;
  std::vector<uint64_t> seeds_;  // a hash of each node's name
  std::unique_ptr<std::atomic<bool>[]> up_;
  size_t self_;
};

}  // namespace spanhouse::peers
