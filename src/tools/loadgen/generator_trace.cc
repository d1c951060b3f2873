// One whole trace: its context, the gateway's and the frontend's spans
// around the route's flow, and the failure injected into ~1% of traces.
#include "tools/loadgen/generator_builder.h"

#include <cmath>
#include <cstring>

namespace spanhouse::loadgen::corpus {
namespace {

// Failure texts for the error injected into ~1% of traces.
struct Failure {
  const char* status;  // status message
  const char* type;    // exception.type
};
constexpr Failure kDbFailures[] = {
    {"ERROR: deadlock detected", "DeadlockDetected"},
    {"ERROR: canceling statement due to statement timeout", "QueryCanceled"},
    {"connection refused", "ConnectionRefusedError"},
    {"too many clients already", "TooManyConnections"},
};
constexpr Failure kRedisFailures[] = {
    {"READONLY You can't write against a read only replica.", "RedisReadOnlyError"},
    {"Timeout performing GET (5000ms)", "RedisTimeoutException"},
    {"LOADING Redis is loading the dataset in memory", "RedisBusyLoadingError"},
};
constexpr Failure kInternalFailures[] = {
    {"index out of range [3] with length 3", "runtime.Error"},
    {"Cannot read properties of undefined (reading 'price')", "TypeError"},
    {"Object reference not set to an instance of an object.", "NullReferenceException"},
    {"card declined: insufficient funds", "PaymentDeclined"},
    {"upstream request timeout", "TimeoutError"},
};

// A leaf span of the trace being built, drawn from `r`; its first span (the
// root) if it has none.
uint32_t PickLeaf(const TraceBuilder& m, Rng& r) {
  const auto n = static_cast<uint32_t>(m.spans.size());
  uint32_t leaves = 0;
  for (uint32_t i = m.ctx.first + 1; i < n; ++i) leaves += m.spans[i].has_child ? 0 : 1;
  if (leaves == 0) return m.ctx.first;
  uint32_t pick = r.Below(leaves);
  for (uint32_t i = m.ctx.first + 1; i < n; ++i) {
    if (m.spans[i].has_child) continue;
    if (pick-- == 0) return i;
  }
  return m.ctx.first;
}

// A failure fit for span `f` (a database's own for its client spans), drawn from `r`.
const Failure& PickFailure(const TraceBuilder& m, uint32_t f, Rng& r) {
  const SpanRec& s = m.spans[f];
  std::string_view system;
  for (uint32_t a = s.attr_begin; a < s.attr_end; ++a) {
    if (m.attrs[a].key == "db.system") {
      system = std::string_view(m.text).substr(m.attrs[a].off, m.attrs[a].len);
    }
  }
  return system.starts_with("redis") ? kRedisFailures[r.Below(std::size(kRedisFailures))]
         : !system.empty()           ? kDbFailures[r.Below(std::size(kDbFailures))]
                                     : kInternalFailures[r.Below(std::size(kInternalFailures))];
}

}  // namespace

uint32_t TraceBuilder::BuildTrace(uint64_t start) {
  NewContext();
  const Route& r = *ctx.route;

  const uint32_t root = Open(kGateway, SpanKind::kServer, r.name, -1, start);
  HttpServerAttrs(root, true);
  Seal(root, kFFlag);
  uint64_t t = start + Dur(40);
  const uint32_t gc = GatewayClient(root, t);
  t += Net();
  const uint32_t fe = Open(kFrontend, SpanKind::kServer, r.name, static_cast<int32_t>(gc), t);
  HttpServerAttrs(fe, false);
  Seal(fe, FlowFields(r.base->flow));
  // Some GETs are answered from the frontend's page cache: the smallest
  // traces (3-4 spans).
  const bool cached = std::string_view(r.base->method) == "GET" && rng.Chance(0.06);
  if (cached) {
    t += Dur(80);
    if (rng.Chance(0.5)) t = Internal(fe, "render from page cache", "renderCached", 0, t, 300);
  } else {
    t = RunFlow(r.base->flow, fe, t + Dur(60));
  }
  t += Dur(120);
  Close(fe, t);
  // The gateway client's status follows the frontend's (a 404 above).
  for (uint32_t a = spans[fe].attr_begin; a < spans[fe].attr_end; ++a) {
    if (attrs[a].key == "http.response.status_code") {
      // Copied out first: SetAttr appends to `text`, which may move.
      char code[8];
      const uint32_t n = attrs[a].len < sizeof(code) ? attrs[a].len : sizeof(code);
      std::memcpy(code, text.data() + attrs[a].off, n);
      SetAttr(gc, "http.response.status_code", ValueType::kInt, std::string_view(code, n));
      break;
    }
  }
  t += Net();
  Close(gc, t);
  Close(root, t + Dur(30));
  if (shape.markable_errors) {
    MarkFailurePath();
  } else if (rng.Chance(0.01)) {
    InjectError();
  }
  if (shape.max_root_ns > 0) CapRoot(root);
  return Count();
}

void TraceBuilder::NewContext() {
  ctx.trace_id = NewTraceId();
  ctx.first = static_cast<uint32_t>(spans.size());
  // Users: 200k ids, the low ones more active.
  ctx.user = static_cast<uint32_t>(200000.0 * std::pow(rng.Uniform(), 1.5));
  ctx.session[0] = rng.Next();
  ctx.session[1] = rng.Next();
  ctx.request[0] = rng.Next();
  ctx.request[1] = rng.Next();
  ctx.client_ip = static_cast<uint32_t>(rng.Next() >> 32);
  ctx.ua = rng.Below(std::size(kUserAgents));
  ctx.region = rng.Below(std::size(kRegions));
  ctx.bucket = rng.Below(std::size(kBuckets));
  ctx.store = 1 + rng.Below(500);
  // Skus: 20k, popular ones much more often.
  ctx.sku = static_cast<uint32_t>(20000.0 * rng.Uniform() * rng.Uniform());
  ctx.category = rng.Below(std::size(kCategories));
  ctx.order_id = static_cast<int64_t>(rng.Next() >> 1);
  ctx.cart_items = 1 + static_cast<int>(rng.Below(8));
  ctx.price = static_cast<double>(static_cast<int64_t>(rng.LogNormal(4500, 1.0))) / 100.0 + 0.99;
  ctx.flag = rng.Chance(0.3);
  ctx.pod.fill(-1);
  ctx.route = &PickRoute();
}

// The gateway's HTTP CLIENT span to the frontend, opened at `t`.
uint32_t TraceBuilder::GatewayClient(uint32_t root, uint64_t t) {
  const Route& r = *ctx.route;
  const uint32_t gc =
      Open(kGateway, SpanKind::kClient, r.base->method, static_cast<int32_t>(root), t);
  AStr("http.request.method", r.base->method);
  {
    const uint32_t b = Mark();
    text += "http://frontend:8080";
    text += r.route;
    Push("url.full", ValueType::kString, b);
  }
  AStr("server.address", "frontend");
  AInt("server.port", 8080);
  AStr("network.peer.address", PodOf(kFrontend).ip);
  AInt("network.peer.port", 8080);
  AStr("network.protocol.version", "1.1");
  AInt("http.response.status_code", r.base->ok_status);
  Seal(gc, 0);
  return gc;
}

void TraceBuilder::HttpServerAttrs(uint32_t i, bool gateway) {
  const Route& r = *ctx.route;
  AStr("http.request.method", r.base->method);
  AStr("http.route", r.route);
  {
    const uint32_t b = Mark();
    std::string_view tmpl = r.route;
    for (size_t p = 0; p < tmpl.size();) {
      if (tmpl[p] != '{') {
        text += tmpl[p++];
        continue;
      }
      const size_t close = tmpl.find('}', p);
      const std::string_view var = tmpl.substr(p + 1, close - p - 1);
      if (var == "sku") {
        text += "SKU-";
        AppendPadded(text, ctx.sku, 5);
      } else if (var == "order_id") {
        codec::AppendInt(text, ctx.order_id);
      } else {
        text += kCategories[ctx.category];
      }
      p = close + 1;
    }
    Push("url.path", ValueType::kString, b);
  }
  if (r.base->flow == Flow::kSearch || r.base->flow == Flow::kSuggest) {
    const uint32_t b = Mark();
    text += "q=";
    const uint32_t words = Mark();
    AQuery("tmp");
    target->pop_back();
    for (uint32_t k = words; k < text.size(); ++k) {
      if (text[k] == ' ') text[k] = '+';
    }
    Push("url.query", ValueType::kString, b);
  }
  AStr("url.scheme", gateway ? "https" : "http");
  AStr("server.address", gateway ? "shop.example.com" : "frontend");
  AInt("server.port", gateway ? 443 : 8080);
  AStr("network.protocol.version", gateway ? "2" : "1.1");
  if (gateway) {
    AIp("network.peer.address", (10u << 24) | (rng.Below(4) << 8) | (1 + rng.Below(254)));
  } else {
    AStr("network.peer.address", PodOf(kGateway).ip);
  }
  AInt("network.peer.port", 32768 + rng.Below(28000));
  AIp("client.address", ctx.client_ip);
  AStr("user_agent.original", kUserAgents[ctx.ua]);
  AInt("http.response.status_code", r.base->ok_status);
  AInt("http.response.body.size", static_cast<int64_t>(rng.LogNormal(4000, 1.0)));
  if (std::string_view(r.base->method) != "GET") {
    AInt("http.request.body.size", static_cast<int64_t>(rng.LogNormal(300, 0.6)));
  }
}

void TraceBuilder::InjectError() {
  const uint32_t f = PickLeaf(*this, rng);
  if (f == ctx.first) return;
  SpanRec& s = spans[f];
  const Svc svc = static_cast<Svc>(s.svc);
  const Failure& fail = PickFailure(*this, f, rng);
  s.status = StatusCodeOtlp::kError;
  s.status_message = fail.status;
  SetAttr(f, "http.response.status_code", ValueType::kInt, "503");
  SetAttr(f, "rpc.grpc.status_code", ValueType::kInt, "14");

  // The exception event: moved to the end of `events` with the span's others.
  const uint32_t first_event = static_cast<uint32_t>(events.size());
  for (uint32_t e = s.event_begin; e < s.event_end; ++e) {
    const EventRec copy = events[e];
    events.push_back(copy);
  }
  EventRec ev{};
  ev.time = s.end - (s.end - s.start) / 10;
  ev.name = "exception";
  target = &event_attrs;
  ev.attr_begin = static_cast<uint32_t>(event_attrs.size());
  AStr("exception.type", fail.type);
  AStr("exception.message", fail.status);
  {
    const uint32_t b = Mark();
    text += fail.type;
    text += ": ";
    text += fail.status;
    for (int k = 0; k < 6; ++k) {
      text += "\n\tat ";
      text += kServices[svc].code_namespace;
      text += k == 0 ? ".execute" : k < 3 ? ".handle" : ".invoke";
      text += '(';
      text += kServices[svc].name;
      text += ".src:";
      codec::AppendInt(text, 10 + rng.Below(900));
      text += ')';
    }
    Push("exception.stacktrace", ValueType::kString, b);
  }
  ABool("exception.escaped", true);
  ev.attr_end = static_cast<uint32_t>(event_attrs.size());
  target = &attrs;
  events.push_back(ev);
  s.event_begin = first_event;
  s.event_end = static_cast<uint32_t>(events.size());

  uint32_t cur = f;
  while (spans[cur].kind != SpanKind::kConsumer && spans[cur].parent >= 0) {
    cur = static_cast<uint32_t>(spans[cur].parent);
    SpanRec& p = spans[cur];
    p.status = StatusCodeOtlp::kError;
    SetAttr(cur, "http.response.status_code", ValueType::kInt, "500");
    SetAttr(cur, "rpc.grpc.status_code", ValueType::kInt, "13");
    if (p.kind == SpanKind::kClient && p.svc != kGateway) p.status_message = "INTERNAL";
  }
}

void TraceBuilder::MarkFailurePath() {
  uint32_t cur = PickLeaf(*this, mark_rng);
  if (cur == ctx.first) return;
  spans[cur].status = StatusCodeOtlp::kError;
  spans[cur].status_message = PickFailure(*this, cur, mark_rng).status;
  while (spans[cur].kind != SpanKind::kConsumer && spans[cur].parent >= 0) {
    cur = static_cast<uint32_t>(spans[cur].parent);
    SpanRec& p = spans[cur];
    p.status = StatusCodeOtlp::kError;
    if (p.kind == SpanKind::kClient && p.svc != kGateway) p.status_message = "INTERNAL";
  }
}

void TraceBuilder::CapRoot(uint32_t root) {
  const uint64_t start = spans[root].start;
  const uint64_t took = spans[root].end - start;
  if (took < shape.max_root_ns) return;
  const uint64_t to = shape.max_root_ns - 1;
  // Monotone, so children stay inside their parents and events inside their spans.
  auto squeeze = [&](uint64_t t) {
    if (t <= start) return t;
    return start + static_cast<uint64_t>(static_cast<unsigned __int128>(t - start) * to / took);
  };
  for (uint32_t i = ctx.first; i < spans.size(); ++i) {
    SpanRec& s = spans[i];
    s.start = squeeze(s.start);
    s.end = squeeze(s.end);
    for (uint32_t e = s.event_begin; e < s.event_end; ++e) events[e].time = squeeze(events[e].time);
  }
}

void TraceBuilder::ClearScratch() {
  spans.clear();
  attrs.clear();
  event_attrs.clear();
  events.clear();
  links.clear();
  text.clear();
}

}  // namespace spanhouse::loadgen::corpus
