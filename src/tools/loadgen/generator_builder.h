// The trace generator's builder (see generator.h for the shape of the corpus).
//
// A trace is first built into scratch records owned by the builder (spans,
// attributes, events, links and one text buffer, all reused from trace to
// trace), then written to the SpanBatch grouped by resource. Building in
// scratch lets a failure found late (an error, a 404) rewrite attributes of
// spans written earlier, and lets the batch hold each resource's spans
// together whatever order the call tree visited them in.
//
// Its parts, by source:
//   generator_spans.cc  random values, attributes, opening and closing spans
//   generator_calls.cc  the spans of one call: gRPC, database, internal,
//                       third-party HTTP, kafka
//   generator_flows.cc  the frontend's work for each route (which calls)
//   generator_trace.cc  one whole trace: its context, the gateway and the
//                       frontend's spans, the injected failure
//   generator_emit.cc   the scratch records into a SpanBatch
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "model/span_batch.h"
#include "tools/loadgen/generator.h"
#include "tools/loadgen/generator_world.h"
#include "tools/loadgen/rng.h"

namespace spanhouse::loadgen::corpus {

// ---------------------------------------------------------------------------
// Scratch records of the traces being built.

struct AttrRec {
  std::string_view key;
  ValueType type;
  uint32_t off;  // value text in TraceBuilder::text
  uint32_t len;
};

struct EventRec {
  uint64_t time;
  std::string_view name;
  uint32_t attr_begin;  // into TraceBuilder::event_attrs
  uint32_t attr_end;
};

struct LinkRec {
  TraceId trace_id;
  SpanId span_id;
};

struct SpanRec {
  uint8_t svc;
  uint16_t pod;
  int32_t parent;  // index into TraceBuilder::spans, -1 for the root
  TraceId trace_id;
  SpanId id;
  SpanId parent_id;
  std::string_view name;
  SpanKind kind;
  uint64_t start;
  uint64_t end;
  StatusCodeOtlp status;
  std::string_view status_message;
  uint32_t attr_begin, attr_end;
  uint32_t event_begin, event_end;
  uint32_t link_begin, link_end;
  bool has_child;
};

// app.* fields a span may carry beyond the per-trace ones every span has.
enum Field : uint32_t {
  kFSku = 1,
  kFQty = 2,
  kFPrice = 4,
  kFOrder = 8,
  kFFlag = 16,
  kFQuery = 32,
  kFCategory = 64,
};

struct RpcMethod {
  const char* full;  // span name
  const char* service;
  const char* method;
};

struct DbDef {
  const char* system;
  const char* name;  // db.name; for redis the database index
  const char* address;
  int port;
  const char* user;  // db.user; none for redis
  const char* ip;
  double median_us;  // typical duration of one statement
};

inline constexpr uint32_t kMaxSpans = 30;
inline constexpr uint64_t kUs = 1000;

struct TraceBuilder {
  explicit TraceBuilder(const CorpusOptions& o)
      : rng(o.seed),
        mark_rng(o.seed ^ 0x6d61726b73686170ull),
        fresh(o.kind == CorpusKind::kFresh),
        fresh_rng(o.seed ^ 0x667265736876616cull) {}

  Rng rng;
  std::string run_id;
  MarkShape shape;
  Rng mark_rng;  // draws of MarkFailurePath only: the corpus's stream stays as it is
  // CorpusKind::kFresh: the values it changes are drawn from fresh_rng only,
  // so `rng` draws as for the replay corpus and the traces keep its shape.
  const bool fresh;
  Rng fresh_rng;

  // ---- the world ----
  World world;

  // ---- scratch ----
  std::vector<SpanRec> spans;
  std::vector<AttrRec> attrs;
  std::vector<AttrRec> event_attrs;
  std::vector<EventRec> events;
  std::vector<LinkRec> links;
  std::string text;
  std::vector<AttrRec>* target = &attrs;  // where A*() appends
  // Pods this call may use per service (AppendTraces), empty = any pod.
  std::array<std::vector<uint16_t>, kServiceCount> pod_pool;
  std::vector<uint32_t> groups;      // (svc << 16 | pod) in order of first use
  std::vector<uint32_t> span_group;  // per span, index into groups
  std::string stmt;                  // db.statement being built
  std::string path;                  // fresh: a third party's URL path

  // ---- the trace being built ----
  struct Ctx {
    TraceId trace_id;
    uint32_t first;  // its first span in `spans`
    uint32_t user;
    uint64_t session[2];
    uint64_t request[2];
    uint32_t client_ip;
    uint32_t ua;
    uint32_t region;
    uint32_t bucket;
    uint32_t store;
    uint32_t sku;
    uint32_t category;
    int64_t order_id;
    int cart_items;
    double price;
    bool flag;
    // Fresh corpus only: the user agent's rank in its family, a page of
    // results, a ship-to zip code, the second sku a call touches.
    uint32_t ua_rank;
    uint32_t page;
    uint32_t zip;
    uint32_t other_sku;
    const Route* route;
    std::array<int32_t, kServiceCount> pod;
  } ctx{};

  // ---- random values (generator_spans.cc) ----

  TraceId NewTraceId();
  SpanId NewSpanId();
  // A duration in ns: log-normal around `median_us`, with a rare 10x outlier.
  uint64_t Dur(double median_us, double sigma = 0.6);
  uint64_t Net() { return Dur(300, 0.5); }
  const Route& PickRoute();
  uint16_t PodFor(Svc s);
  const Pod& PodOf(Svc s) { return world.pods[s][PodFor(s)]; }

  // ---- attributes, appended to *target (generator_spans.cc) ----

  uint32_t Mark() const { return static_cast<uint32_t>(text.size()); }
  void Push(std::string_view key, ValueType type, uint32_t begin) {
    target->push_back(AttrRec{key, type, begin, static_cast<uint32_t>(text.size()) - begin});
  }
  void AStr(std::string_view key, std::string_view v) {
    const uint32_t b = Mark();
    text += v;
    Push(key, ValueType::kString, b);
  }
  void AInt(std::string_view key, int64_t v) {
    const uint32_t b = Mark();
    codec::AppendInt(text, v);
    Push(key, ValueType::kInt, b);
  }
  void ADouble(std::string_view key, double v);
  void ABool(std::string_view key, bool v);
  void AIp(std::string_view key, uint32_t ip);
  void AUser(std::string_view key);
  void ASku(std::string_view key);
  void AQuery(std::string_view key);
  // Rewrites the value of `key` on span `i`, if it has one.
  void SetAttr(uint32_t i, std::string_view key, ValueType type, std::string_view value);

  // ---- spans (generator_spans.cc) ----

  uint32_t Open(Svc svc, SpanKind kind, std::string_view name, int32_t parent, uint64_t start);
  // Ends span `i`'s attribute list: the per-trace fields every span carries
  // (as a baggage span processor would copy them) and the app.* `fields`.
  void Seal(uint32_t i, uint32_t fields);
  // Sets span `i`'s end; one span in ten gets an event somewhere inside it.
  void Close(uint32_t i, uint64_t end);

  uint32_t Count() const { return static_cast<uint32_t>(spans.size()) - ctx.first; }
  bool Room(uint32_t n) const { return Count() + n <= kMaxSpans; }

  // ---- calls (generator_calls.cc) ----

  void ThreadAttrs(Svc s);
  void RpcAttrs(Svc callee, const RpcMethod& m, bool server, const Pod& peer);
  // A gRPC call from span `parent`'s service to `to`. `body(server_span, t)`
  // does the server's work from time t and returns when it ended.
  template <typename Body>
  uint64_t Rpc(uint32_t parent, Svc to, const RpcMethod& m, uint32_t fields, uint64_t t,
               Body&& body);
  // Rpc with nothing inside but the server's own work.
  uint64_t Leaf(uint32_t parent, Svc to, const RpcMethod& m, uint32_t fields, uint64_t t,
                double work_us);
  // A database client span under `parent`. `name` is the span name, the
  // statement is in `stmt`.
  uint64_t Db(uint32_t parent, const DbDef& db, std::string_view name, std::string_view op,
              std::string_view table, const char* code_fn, uint64_t t);
  uint64_t Internal(uint32_t parent, std::string_view name, const char* code_fn, uint32_t fields,
                    uint64_t t, double median_us);
  // An HTTP call to a third party (payment provider, mail service).
  uint64_t External(uint32_t parent, const char* method, const char* host, std::string_view path,
                    int status, uint64_t t, double median_us);
  void KafkaAttrs(bool consumer, uint32_t partition);
  // Publishes the order event from span `parent`; the consumer in `consumer`
  // processes it later (async: it may outlive the producer) via `body`.
  template <typename Body>
  uint64_t Kafka(uint32_t parent, Svc consumer, uint64_t t, Body&& body);

  // ---- statements (generator_calls.cc) ----

  void Stmt(std::string_view s) { stmt.assign(s); }
  // The replay corpus's statement, or the fresh corpus's own.
  void Stmt(std::string_view replay, std::string_view fresh_text) {
    stmt.assign(fresh ? fresh_text : replay);
  }
  // Fresh corpus: each `$n` of stmt becomes the n-th of `lits` and each `?`
  // the next one in order (those past the end stay), as a driver's logged
  // statement shows them. Nothing in the replay corpus.
  void Bind(std::initializer_list<std::string_view> lits);
  // Literals for Bind (temporaries: they live until Bind returns).
  static std::string LitSku(uint32_t sku, bool quoted);
  static std::string LitInt(int64_t v);
  static std::string LitPadded(uint64_t v, int width);
  static std::string LitText(std::string_view v);
  // The trace's start, `days` before, as a timestamp literal.
  std::string LitTime(uint32_t days) const;
  // The trace's search words, separated by `sep`.
  std::string Words(char sep) const;
  void RedisKey(const char* cmd, const char* prefix, uint64_t id, int width);

  // ---- flows: the frontend's work for each route, under its SERVER span
  // (generator_flows.cc) ----

  uint64_t RunFlow(Flow flow, uint32_t fe, uint64_t t);
  static uint32_t FlowFields(Flow f);
  // Calls more than one flow makes.
  uint64_t CachedProduct(uint32_t s, uint64_t t, double miss);
  uint64_t GetProducts(uint32_t parent, uint64_t t);
  uint64_t Recommendations(uint32_t parent, uint64_t t);
  uint64_t GetCart(uint32_t parent, uint64_t t);
  // One per Flow.
  uint64_t Home(uint32_t fe, uint64_t t);
  uint64_t Product(uint32_t fe, uint64_t t);
  uint64_t Browse(uint32_t fe, uint64_t t);
  uint64_t Search(uint32_t fe, uint64_t t);
  uint64_t Suggest(uint32_t fe, uint64_t t);
  uint64_t CartView(uint32_t fe, uint64_t t);
  uint64_t CartAdd(uint32_t fe, uint64_t t);
  uint64_t CartRemove(uint32_t fe, uint64_t t);
  uint64_t Checkout(uint32_t fe, uint64_t t);
  uint64_t PlaceOrder(uint32_t s, uint64_t t);
  uint64_t OrderStatus(uint32_t fe, uint64_t t);
  uint64_t OrderList(uint32_t fe, uint64_t t);
  uint64_t OrderCancel(uint32_t fe, uint64_t t);
  uint64_t Login(uint32_t fe, uint64_t t);
  uint64_t Profile(uint32_t fe, uint64_t t);
  uint64_t ShipQuote(uint32_t fe, uint64_t t);
  uint64_t Review(uint32_t fe, uint64_t t);

  // ---- one whole trace (generator_trace.cc) ----

  // Builds one trace into the scratch records; returns its span count.
  uint32_t BuildTrace(uint64_t start);
  // Draws the trace's user, session, client and app.* values.
  void NewContext();
  uint32_t GatewayClient(uint32_t root, uint64_t t);
  void HttpServerAttrs(uint32_t i, bool gateway);
  // The route's path with the trace's sku, order id or category in it.
  void AppendPath();
  // Fresh corpus: the route's query string (no '?'), empty for none.
  void AppendQuery();
  // Fails one leaf span of the trace just built and carries the failure up
  // to the root, stopping at an async (kafka consumer) boundary.
  void InjectError();
  // MarkShape::markable_errors: puts one failure path of the trace just built
  // in status ERROR, nothing else changed.
  void MarkFailurePath();
  // MarkShape::max_root_ns: squeezes the trace just built (root `root`) if
  // its root lasts too long.
  void CapRoot(uint32_t root);
  void ClearScratch();

  // ---- output (generator_emit.cc) ----

  // Writes the scratch spans to `out` grouped by (service, pod).
  size_t Emit(SpanBatch* out);
  void GroupByResource();
  void EmitResource(uint32_t group, SpanBatch* out, uint32_t* resource, uint32_t* scope);
  void EmitSpan(const SpanRec& s, uint32_t resource, uint32_t scope, SpanBatch* out);
};

template <typename Body>
uint64_t TraceBuilder::Rpc(uint32_t parent, Svc to, const RpcMethod& m, uint32_t fields, uint64_t t,
                           Body&& body) {
  const Svc from = static_cast<Svc>(spans[parent].svc);
  const uint32_t c = Open(from, SpanKind::kClient, m.full, static_cast<int32_t>(parent), t);
  RpcAttrs(to, m, false, PodOf(to));
  Seal(c, fields);
  const uint64_t t0 = t + Net();
  const uint32_t s = Open(to, SpanKind::kServer, m.full, static_cast<int32_t>(c), t0);
  RpcAttrs(to, m, true, PodOf(from));
  ThreadAttrs(to);
  Seal(s, fields);
  uint64_t t1 = body(s, t0 + Dur(25));
  t1 += Dur(30);
  Close(s, t1);
  const uint64_t end = t1 + Net();
  Close(c, end);
  return end;
}

template <typename Body>
uint64_t TraceBuilder::Kafka(uint32_t parent, Svc consumer, uint64_t t, Body&& body) {
  const Svc svc = static_cast<Svc>(spans[parent].svc);
  const uint32_t partition = rng.Below(12);
  const uint32_t p =
      Open(svc, SpanKind::kProducer, "orders publish", static_cast<int32_t>(parent), t);
  KafkaAttrs(false, partition);
  Seal(p, kFOrder);
  const uint64_t end = t + Dur(900, 0.7);
  Close(p, end);
  const uint32_t c = Open(consumer, SpanKind::kConsumer, "orders process", static_cast<int32_t>(p),
                          t + Dur(15000, 1.0));
  KafkaAttrs(true, partition);
  Seal(c, kFOrder);
  spans[c].link_begin = static_cast<uint32_t>(links.size());
  links.push_back(LinkRec{ctx.trace_id, spans[p].id});
  spans[c].link_end = static_cast<uint32_t>(links.size());
  const uint64_t t1 = body(c, spans[c].start + Dur(40));
  Close(c, t1 + Dur(60));
  return end;
}

}  // namespace spanhouse::loadgen::corpus
