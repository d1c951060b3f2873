#include "peers/ring.h"

#include <cstring>

#include "common/hash.h"

namespace spanhouse::peers {

namespace {

uint64_t NameSeed(const std::string& name) {
  uint64_t h = 0x84222325cbf29ce4ull;
  for (const char c : name) h = Murmur3Fmix(h ^ static_cast<uint8_t>(c));
  return Murmur3Fmix(h ^ name.size());
}

// host:port with a port of 1..65535 and a host without spaces.
bool IsHostPort(const std::string& v) {
  const size_t colon = v.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == v.size()) return false;
  if (v.find_first_of(" \t/?#") != std::string::npos) return false;
  uint32_t port = 0;
  for (size_t i = colon + 1; i < v.size(); ++i) {
    if (v[i] < '0' || v[i] > '9' || (port = port * 10 + (v[i] - '0')) > 65535) return false;
  }
  return port != 0;
}

bool IsHttpUrl(const std::string& v) {
  const size_t scheme = v.rfind("http://", 0) == 0 ? 7 : v.rfind("https://", 0) == 0 ? 8 : 0;
  return scheme != 0 && v.size() > scheme && v.find_first_of(" \t?#") == std::string::npos;
}

bool IsNodeName(const std::string& v) {
  if (v.empty() || v.size() > 64) return false;
  for (const char c : v) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_' || c == '.')) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool ParsePeerNodes(const std::string& text, std::vector<PeerNode>* out, std::string* why) {
  out->clear();
  if (text.empty()) return true;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string::npos) end = text.size();
    const std::string entry = text.substr(start, end - start);
    start = end + 1;
    const size_t a = entry.find('=');
    const size_t b = a == std::string::npos ? a : entry.find('=', a + 1);
    if (b == std::string::npos) {
      *why = "'" + entry + "': want name=host:port=http(s)://host:port";
      return false;
    }
    PeerNode n{entry.substr(0, a), entry.substr(a + 1, b - a - 1), entry.substr(b + 1)};
    if (!IsNodeName(n.name)) {
      *why = "'" + n.name + "': a node name is 1 to 64 letters, digits, '-', '_' or '.'";
      return false;
    }
    if (!IsHostPort(n.otlp)) {
      *why = "node " + n.name + ": otlp '" + n.otlp + "' is not host:port";
      return false;
    }
    if (!IsHttpUrl(n.query)) {
      *why = "node " + n.name + ": query '" + n.query + "' is not an http(s):// URL";
      return false;
    }
    for (const PeerNode& seen : *out) {
      if (seen.name == n.name) {
        *why = "node " + n.name + " is listed twice";
        return false;
      }
    }
    out->push_back(std::move(n));
    if (out->size() > kMaxPeerNodes) {
      *why = "more than " + std::to_string(kMaxPeerNodes) + " nodes";
      return false;
    }
  }
  return true;
}

PeerRing::PeerRing(std::vector<PeerNode> nodes, size_t self)
    : nodes_(std::move(nodes)),
      up_(std::make_unique<std::atomic<bool>[]>(nodes_.size())),
      self_(self) {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    seeds_.push_back(NameSeed(nodes_[i].name));
    up_[i].store(true);
  }
}

uint64_t PeerRing::Score(size_t i, const TraceId& trace) const {
  uint64_t lo;
  uint64_t hi;
  std::memcpy(&hi, trace.data(), 8);
  std::memcpy(&lo, trace.data() + 8, 8);
  return Murmur3Fmix(Murmur3Fmix(lo ^ seeds_[i]) ^ hi);
}

uint64_t PeerRing::View() const {
  uint64_t v = 0;
  for (size_t i = 0; i < nodes_.size(); ++i) v |= Up(i) ? uint64_t{1} << i : 0;
  return v;
}

size_t PeerRing::Owner(const TraceId& trace, uint64_t view) const {
  if (view == SpanBatch::kViewHere) return self_;
  if (view == 0) view = View();
  size_t best = nodes_.size();
  uint64_t best_score = 0;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if ((view >> i & 1) == 0) continue;
    const uint64_t s = Score(i, trace);
    // Ties (never in practice) go to the earlier name in the list, the same on every node.
    if (best == nodes_.size() || s > best_score) {
      best = i;
      best_score = s;
    }
  }
  // A view naming none of the nodes (a record logged under a longer list): this node.
  return best == nodes_.size() ? self_ : best;
}

size_t PeerRing::UpCount() const {
  size_t n = 0;
  for (size_t i = 0; i < nodes_.size(); ++i) n += Up(i) ? 1 : 0;
  return n;
}

}  // namespace spanhouse::peers
