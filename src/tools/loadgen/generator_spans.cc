// The builder's primitives: random values, attributes, opening and closing
// spans.
#include "tools/loadgen/generator_builder.h"

#include <cstring>

namespace spanhouse::loadgen::corpus {

// ---- random values ----

TraceId TraceBuilder::NewTraceId() {
  TraceId id;
  uint64_t a, b;
  do {
    a = rng.Next();
    b = rng.Next();
  } while (a == 0 && b == 0);
  std::memcpy(id.data(), &a, 8);
  std::memcpy(id.data() + 8, &b, 8);
  return id;
}

SpanId TraceBuilder::NewSpanId() {
  SpanId id;
  uint64_t a;
  do a = rng.Next();
  while (a == 0);
  std::memcpy(id.data(), &a, 8);
  return id;
}

uint64_t TraceBuilder::Dur(double median_us, double sigma) {
  double us = rng.LogNormal(median_us, sigma);
  if (rng.Chance(0.005)) us *= 10;
  return static_cast<uint64_t>(us * kUs) + 1;
}

const Route& TraceBuilder::PickRoute() {
  const double u = rng.Uniform();
  for (const Route& r : world.routes) {
    if (u < r.cumulative) return r;
  }
  return world.routes.back();
}

uint16_t TraceBuilder::PodFor(Svc s) {
  if (ctx.pod[s] < 0) {
    const std::vector<uint16_t>& pool = pod_pool[s];
    ctx.pod[s] = pool.empty() ? static_cast<int32_t>(rng.Below(kServices[s].pods))
                              : pool[rng.Below(static_cast<uint32_t>(pool.size()))];
  }
  return static_cast<uint16_t>(ctx.pod[s]);
}

// ---- attributes ----

void TraceBuilder::ADouble(std::string_view key, double v) {
  const uint32_t b = Mark();
  codec::AppendDouble(text, v);
  Push(key, ValueType::kDouble, b);
}

void TraceBuilder::ABool(std::string_view key, bool v) {
  const uint32_t b = Mark();
  text += v ? "true" : "false";
  Push(key, ValueType::kBool, b);
}

void TraceBuilder::AIp(std::string_view key, uint32_t ip) {
  const uint32_t b = Mark();
  AppendIpv4(text, ip);
  Push(key, ValueType::kString, b);
}

void TraceBuilder::AUser(std::string_view key) {
  const uint32_t b = Mark();
  text += "user-";
  AppendPadded(text, ctx.user, 6);
  Push(key, ValueType::kString, b);
}

void TraceBuilder::ASku(std::string_view key) {
  const uint32_t b = Mark();
  text += "SKU-";
  AppendPadded(text, ctx.sku, 5);
  Push(key, ValueType::kString, b);
}

void TraceBuilder::AQuery(std::string_view key) {
  // 1-3 words drawn from the trace's sku, so a trace is self-consistent.
  const uint32_t b = Mark();
  text += Words(' ');
  Push(key, ValueType::kString, b);
}

void TraceBuilder::SetAttr(uint32_t i, std::string_view key, ValueType type,
                           std::string_view value) {
  for (uint32_t a = spans[i].attr_begin; a < spans[i].attr_end; ++a) {
    if (attrs[a].key == key) {
      const uint32_t b = Mark();
      text += value;
      attrs[a].type = type;
      attrs[a].off = b;
      attrs[a].len = static_cast<uint32_t>(text.size()) - b;
      return;
    }
  }
}

// ---- spans ----

uint32_t TraceBuilder::Open(Svc svc, SpanKind kind, std::string_view name, int32_t parent,
                            uint64_t start) {
  SpanRec s{};
  s.svc = svc;
  s.pod = PodFor(svc);
  s.parent = parent;
  s.trace_id = ctx.trace_id;
  s.id = NewSpanId();
  if (parent >= 0) {
    s.parent_id = spans[parent].id;
    spans[parent].has_child = true;
  }
  s.name = name;
  s.kind = kind;
  s.start = start;
  s.end = start;
  s.status = StatusCodeOtlp::kUnset;
  s.attr_begin = s.attr_end = static_cast<uint32_t>(attrs.size());
  s.event_begin = s.event_end = static_cast<uint32_t>(events.size());
  s.link_begin = s.link_end = static_cast<uint32_t>(links.size());
  spans.push_back(s);
  return static_cast<uint32_t>(spans.size() - 1);
}

void TraceBuilder::Seal(uint32_t i, uint32_t fields) {
  AUser("app.user_id");
  {
    const uint32_t b = Mark();
    AppendHex(text, ctx.session[0], 16);
    AppendHex(text, ctx.session[1], 16);
    Push("app.session_id", ValueType::kString, b);
  }
  {
    const uint32_t b = Mark();
    AppendUuid(text, ctx.request[0], ctx.request[1]);
    Push("app.request_id", ValueType::kString, b);
  }
  AStr("app.channel", kChannels[ctx.ua]);
  AStr("app.region", kRegions[ctx.region]);
  AInt("app.store_id", ctx.store);
  AStr("app.experiment_bucket", kBuckets[ctx.bucket]);
  AStr("app.client_version", kClientVersions[ctx.ua]);
  if (fields & kFSku) ASku("app.sku");
  if (fields & kFQty) AInt("app.cart_items", ctx.cart_items);
  if (fields & kFPrice) ADouble("app.price", ctx.price);
  if (fields & kFOrder) AInt("app.order_id", ctx.order_id);
  if (fields & kFFlag) ABool("app.feature_flag", ctx.flag);
  if (fields & kFQuery) AQuery("app.search.query");
  if (fields & kFCategory) AStr("app.category", kCategories[ctx.category]);
  spans[i].attr_end = static_cast<uint32_t>(attrs.size());
}

void TraceBuilder::Close(uint32_t i, uint64_t end) {
  spans[i].end = end;
  if (!rng.Chance(0.1)) return;
  const SpanRec& s = spans[i];
  spans[i].event_begin = static_cast<uint32_t>(events.size());
  EventRec e{};
  e.time = s.start + static_cast<uint64_t>(rng.Uniform() * static_cast<double>(end - s.start));
  target = &event_attrs;
  e.attr_begin = static_cast<uint32_t>(event_attrs.size());
  switch (rng.Below(4)) {
    case 0:
      e.name = "cache.miss";
      {
        const uint32_t b = Mark();
        text += "product:SKU-";
        AppendPadded(text, ctx.sku, 5);
        Push("cache.key", ValueType::kString, b);
      }
      AStr("cache.name", "redis-cache");
      break;
    case 1:
      e.name = "retry";
      AInt("retry.attempt", 1 + rng.Below(3));
      AStr("retry.reason", rng.Chance(0.5) ? "UNAVAILABLE" : "DEADLINE_EXCEEDED");
      AInt("retry.backoff_ms", 25 << rng.Below(4));
      break;
    case 2:
      e.name = "feature_flag.evaluation";
      AStr("feature_flag.key", "new-checkout-flow");
      AStr("feature_flag.provider_name", "flagd");
      AStr("feature_flag.variant", ctx.flag ? "on" : "off");
      break;
    default:
      e.name = "log";
      AStr("log.severity", rng.Chance(0.8) ? "INFO" : "WARN");
      {
        const uint32_t b = Mark();
        if (fresh) {  // as a request-scoped logger writes it
          text += "[request_id=";
          AppendUuid(text, ctx.request[0], ctx.request[1]);
          text += "] ";
        }
        text += "handled ";
        text += s.name;
        text += " for user-";
        AppendPadded(text, ctx.user, 6);
        text += " in ";
        codec::AppendInt(text, static_cast<int64_t>((end - s.start) / kUs));
        text += "us";
        Push("log.message", ValueType::kString, b);
      }
      break;
  }
  e.attr_end = static_cast<uint32_t>(event_attrs.size());
  target = &attrs;
  events.push_back(e);
  spans[i].event_end = static_cast<uint32_t>(events.size());
}

}  // namespace spanhouse::loadgen::corpus
