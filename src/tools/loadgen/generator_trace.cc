// One whole trace: its context, the gateway's and the frontend's spans
// around the route's flow, and the failure injected into ~1% of traces.
#include "tools/loadgen/generator_builder.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace spanhouse::loadgen::corpus {
namespace {

// Failure texts for the error injected into ~1% of traces.
struct Failure {
  const char* status;  // status message
  const char* type;    // exception.type
  // The fresh corpus's exception.message, its ids filled in (FillMessage).
  const char* fresh;
};
constexpr Failure kDbFailures[] = {
    {"ERROR: deadlock detected", "DeadlockDetected",
     "ERROR: deadlock detected\nDETAIL: Process %p waits for ShareLock on transaction %x; "
     "blocked by process %p.\nProcess %p waits for ShareLock on transaction %x; blocked by "
     "process %p."},
    {"ERROR: canceling statement due to statement timeout", "QueryCanceled",
     "ERROR: canceling statement due to statement timeout (backend pid %p, query id %q)"},
    {"connection refused", "ConnectionRefusedError",
     "connection refused (pool connection 0x%h, %m ms after checkout)"},
    {"too many clients already", "TooManyConnections",
     "FATAL: sorry, too many clients already (backend pid %p, session %h)"},
};
constexpr Failure kRedisFailures[] = {
    {"READONLY You can't write against a read only replica.", "RedisReadOnlyError",
     "READONLY You can't write against a read only replica. (HSET cart:user-%u, client id %p)"},
    {"Timeout performing GET (5000ms)", "RedisTimeoutException",
     "Timeout performing GET (5000ms), next: GET product:SKU-%s, inst: %d, qu: 0, qs: %d, aw: "
     "False, rs: ReadAsync, ws: Idle, in: %m, async-ops: %x, serverEndpoint: "
     "redis-cache.shop.svc.cluster.local:6379, mgr: 10 of 10 available, clientName: %h, IOCP: "
     "(Busy=0,Free=1000,Min=8,Max=1000), WORKER: (Busy=%d,Free=32757,Min=8,Max=32767)"},
    {"LOADING Redis is loading the dataset in memory", "RedisBusyLoadingError",
     "LOADING Redis is loading the dataset in memory (%m ms, client id %p)"},
};
constexpr Failure kInternalFailures[] = {
    {"index out of range [3] with length 3", "runtime.Error",
     "runtime error: index out of range [%d] with length %d (order %o)"},
    {"Cannot read properties of undefined (reading 'price')", "TypeError",
     "Cannot read properties of undefined (reading 'price') for SKU-%s in cart user-%u"},
    {"Object reference not set to an instance of an object.", "NullReferenceException",
     "Object reference not set to an instance of an object. (cart user-%u, item SKU-%s)"},
    {"card declined: insufficient funds", "PaymentDeclined",
     "card declined: insufficient funds (charge ch_%h%h, order %o)"},
    {"upstream request timeout", "TimeoutError",
     "upstream request timeout after %m ms (request %r)"},
};

// Appends `tmpl` with its ids filled in: %p a process id, %x a transaction
// id, %q a query id, %h 12 hex digits, %m milliseconds, %d a small number,
// %s the trace's sku, %u its user, %o its order id, %r its request id.
void FillMessage(TraceBuilder& m, const char* tmpl, std::string& out) {
  Rng& r = m.fresh_rng;
  for (const char* c = tmpl; *c != 0; ++c) {
    if (*c != '%' || c[1] == 0) {
      out += *c;
      continue;
    }
    switch (*++c) {
      case 'p':
        codec::AppendInt(out, 1000 + r.Below(64000));
        break;
      case 'x':
        codec::AppendInt(out, 10'000'000 + r.Below(900'000'000));
        break;
      case 'q':
        codec::AppendInt(out, static_cast<int64_t>(r.Next()));
        break;
      case 'h':
        AppendHex(out, r.Next(), 12);
        break;
      case 'm':
        codec::AppendInt(out, 100 + r.Below(9900));
        break;
      case 'd':
        codec::AppendInt(out, r.Below(64));
        break;
      case 's':
        AppendPadded(out, m.ctx.sku, 5);
        break;
      case 'u':
        AppendPadded(out, m.ctx.user, 6);
        break;
      case 'o':
        codec::AppendInt(out, m.ctx.order_id);
        break;
      case 'r':
        AppendUuid(out, m.ctx.request[0], m.ctx.request[1]);
        break;
      default:
        out += '%';
        out += *c;
    }
  }
}

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
  if (fresh) {
    // Log-uniform ranks: a few agents common, a long tail of rare ones.
    const double rank = std::exp(fresh_rng.Uniform() * std::log(double{kAgentsPerFamily}));
    ctx.ua_rank = std::min(static_cast<uint32_t>(rank) - 1, kAgentsPerFamily - 1);
    ctx.page = fresh_rng.Chance(0.6) ? 1 : 2 + fresh_rng.Below(8);
    ctx.zip = 10000 + fresh_rng.Below(90000);
    ctx.other_sku = static_cast<uint32_t>(20000.0 * fresh_rng.Uniform() * fresh_rng.Uniform());
  }
}

void TraceBuilder::AppendPath() {
  const std::string_view tmpl = ctx.route->route;
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
}

void TraceBuilder::AppendQuery() {
  static constexpr const char* kRefs[] = {"home", "search", "recs", "cart", "email", "ads"};
  static constexpr const char* kSorts[] = {"relevance", "price_asc", "price_desc", "newest",
                                           "rating"};
  switch (ctx.route->base->flow) {
    case Flow::kHome:  // a client's cache buster, in ms
      text += "_=";
      codec::AppendInt(text, static_cast<int64_t>(spans[ctx.first].start / 1'000'000));
      break;
    case Flow::kProduct:
      text += "ref=";
      text += kRefs[fresh_rng.Below(std::size(kRefs))];
      text += "&pos=";
      codec::AppendInt(text, 1 + fresh_rng.Below(48));
      break;
    case Flow::kBrowse:
      text += "page=";
      codec::AppendInt(text, ctx.page);
      text += "&sort=";
      text += kSorts[fresh_rng.Below(std::size(kSorts))];
      break;
    case Flow::kSearch:
      text += "q=";
      text += Words('+');
      text += "&page=";
      codec::AppendInt(text, ctx.page);
      break;
    case Flow::kSuggest:
      text += "q=";
      text += Words('+');
      text += "&limit=10";
      break;
    case Flow::kCartView:
    case Flow::kRecs:
    case Flow::kOrderList:
      text += "user_id=";
      AppendPadded(text, ctx.user, 6);
      if (ctx.route->base->flow == Flow::kOrderList) {
        text += "&page=";
        codec::AppendInt(text, ctx.page);
      }
      break;
    case Flow::kShipQuote:
      text += "zip=";
      codec::AppendInt(text, ctx.zip);
      text += "&weight_g=";
      codec::AppendInt(text, 100 + fresh_rng.Below(20000));
      break;
    case Flow::kOrderStatus:
      text += "include=items,shipping";
      break;
    default:
      break;
  }
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
    if (fresh) {
      AppendPath();
      text += '?';
      const size_t q = text.size();
      AppendQuery();
      if (text.size() == q) text.pop_back();
    } else {
      text += r.route;
    }
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
    AppendPath();
    Push("url.path", ValueType::kString, b);
  }
  if (r.base->flow == Flow::kSearch || r.base->flow == Flow::kSuggest) {
    const uint32_t b = Mark();
    if (fresh) {
      AppendQuery();
    } else {
      text += "q=";
      text += Words('+');
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
  if (fresh) {
    const uint32_t b = Mark();
    AppendUserAgent(text, ctx.ua, ctx.ua_rank);
    Push("user_agent.original", ValueType::kString, b);
  } else {
    AStr("user_agent.original", kUserAgents[ctx.ua]);
  }
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
  std::string filled;
  if (fresh) FillMessage(*this, fail.fresh, filled);
  const std::string_view message = fresh ? std::string_view(filled) : fail.status;
  AStr("exception.message", message);
  {
    const uint32_t b = Mark();
    text += fail.type;
    text += ": ";
    text += message;
    for (int k = 0; k < 6; ++k) {
      text += "\n\tat ";
      text += kServices[svc].code_namespace;
      text += k == 0 ? ".execute" : k < 3 ? ".handle" : ".invoke";
      text += '(';
      text += kServices[svc].name;
      text += ".src:";
      codec::AppendInt(text, 10 + rng.Below(900));
      text += ')';
      if (fresh) {
        // The frame's address: the same in one pod's process, another in the next.
        uint64_t x = static_cast<uint64_t>(svc) << 40 | static_cast<uint64_t>(s.pod) << 8 |
                     static_cast<uint64_t>(k);
        text += " [0x7f";
        AppendHex(text, SplitMix64(x), 10);
        text += ']';
      }
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
