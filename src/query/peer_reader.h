// Fresh traces from any node, when several spanhouse nodes act as one (the
// `peers` section): the spans of a trace meet on its owner and sit in the
// owner's recent-traces index until its writer has stored them. A trace
// lookup or search on any node therefore also asks the other nodes that are
// up, in parallel, and merges their answers into its own, each span once.
// Every node up is asked, not only the trace's owner now: after a node's
// death or return, a trace's spans may lie on its old owner and its new one.
//
// PeerEndpoint is the other side: what a node answers a peer (its own
// spans, never asked on to the others, so a lookup is one hop).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/prom_text.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "query/params.h"
#include "query/recent_traces.h"
#include "query/span_reader.h"

namespace spanhouse::query {

// One node as the readers see it: its name and its query URL (http://host:port).
struct PeerQueryNode {
  std::string name;
  std::string url;
};

struct PeerReaderOptions {
  std::vector<PeerQueryNode> nodes;  // every node of the list, this one too
  size_t self = 0;                   // this node's index in `nodes`
  // Whether node i is up now (the peers' health checks); unset: all are.
  std::function<bool(size_t)> up;
  // Every node reads one shared store (a ClickHouse server or cluster): the
  // peers are asked for their recent spans only, the store is read here.
  // Otherwise each node keeps its own store and answers from both.
  bool shared_store = false;
  std::chrono::milliseconds timeout{2000};  // each peer's answer
  std::string bearer_token;                 // the peers' query API token; "": none
  std::string tls_ca_file;  // https:// URLs: the CA certificates (PEM); "": the system's
};

class PeerReader final : public ReaderInFront {
 public:
  // `local`: this node's own reader (its recent index and store). Fails on a
  // node URL that is not http(s)://host:port.
  static Status Make(SpanReader& local, PeerReaderOptions options,
                     std::unique_ptr<PeerReader>* out);
  ~PeerReader() override;

  Status GetTrace(const TraceId& id, SpanBatch* out) override;
  Status GetTraces(const std::vector<TraceId>& ids, SpanBatch* out) override;
  // This node's ids, then the peers' not among them, in turns (each node's
  // newest first), up to the query's limit.
  Status FindTraceIds(const TraceQuery& query, std::vector<TraceId>* out) override;

  // The nodes whose spans this thread's last lookup or search lacks ("node-c down",
  // "node-b: timed out"), then cleared; the query API says so in X-Spanhouse-Peers-Missing.
  static std::string TakeMissing();
  void AppendMetrics(PromText& out) const;

 private:
  struct Peer;
  PeerReader(SpanReader& local, PeerReaderOptions options,
             std::vector<std::unique_ptr<Peer>> peers);
  // GETs `target` from every peer up, in parallel; `take(i, body)` gets each answer
  // (called on this thread, in peer order). The peers not heard are noted for TakeMissing.
  void AskPeers(const std::string& target, const std::function<Status(size_t, std::string&)>& take);
  // Appends the spans of a peer's answer (columnar bytes) that `out` lacks.
  Status MergeSpans(std::string& columnar, SpanBatch* out);

  const PeerReaderOptions opts_;
  std::vector<std::unique_ptr<Peer>> peers_;  // one per node but this one
  std::atomic<uint64_t> merged_spans_{0};     // spans only a peer had
};

// The peer side: GET /api/spanhouse/peer/traces?scope=&id=...  (the spans of
// those traces, as columnar bytes; with format=json, as Jaeger's JSON, for
// people and tests asking what this node alone holds) and
// /api/spanhouse/peer/find?scope=&... (trace ids, one hex id a line).
// scope=recent answers from the recent index alone, scope=all from the local
// reader (index and store). Every node serves it, with peers or not.
class PeerEndpoint {
 public:
  // `recent`: null when the index is off (scope=recent then answers nothing).
  PeerEndpoint(SpanReader& local, RecentTraces* recent, QueryLimits limits = {})
      : local_(local), recent_(recent), limits_(limits) {}
  // `what`: "traces" or "find".
  void Handle(std::string_view what, const QueryString& q, net::HttpResponse& resp);

 private:
  SpanReader& local_;
  RecentTraces* recent_;
  QueryLimits limits_;
};

// A search as the peer endpoint reads it (query-string pairs, percent-encoded), and back.
std::string EncodePeerFind(const TraceQuery& q);
Status DecodePeerFind(const QueryString& qs, const QueryLimits& limits, TraceQuery* out);

}  // namespace spanhouse::query
