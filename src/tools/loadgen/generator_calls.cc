// The spans of one call: the attributes of a gRPC pair, database, internal,
// third-party HTTP and kafka spans, and the statements of database calls.
#include "tools/loadgen/generator_builder.h"

#include <cstdio>
#include <ctime>

namespace spanhouse::loadgen::corpus {

void TraceBuilder::ThreadAttrs(Svc s) {
  AInt("thread.id", 1 + rng.Below(64));
  if (kServices[s].thread_prefix != nullptr) {
    const uint32_t b = Mark();
    text += kServices[s].thread_prefix;
    codec::AppendInt(text, rng.Below(32));
    Push("thread.name", ValueType::kString, b);
  }
}

void TraceBuilder::RpcAttrs(Svc callee, const RpcMethod& m, bool server, const Pod& peer) {
  AStr("rpc.system", "grpc");
  AStr("rpc.service", m.service);
  AStr("rpc.method", m.method);
  AInt("rpc.grpc.status_code", 0);
  AStr("server.address", kServices[callee].name);
  AInt("server.port", kServices[callee].port);
  AStr("network.peer.address", peer.ip);
  AInt("network.peer.port", server ? 32768 + rng.Below(28000) : kServices[callee].port);
  AStr("network.transport", "tcp");
  AStr("network.type", "ipv4");
}

uint64_t TraceBuilder::Leaf(uint32_t parent, Svc to, const RpcMethod& m, uint32_t fields,
                            uint64_t t, double work_us) {
  return Rpc(parent, to, m, fields, t, [&](uint32_t, uint64_t t1) { return t1 + Dur(work_us); });
}

uint64_t TraceBuilder::Db(uint32_t parent, const DbDef& db, std::string_view name,
                          std::string_view op, std::string_view table, const char* code_fn,
                          uint64_t t) {
  const Svc svc = static_cast<Svc>(spans[parent].svc);
  const uint32_t d = Open(svc, SpanKind::kClient, name, static_cast<int32_t>(parent), t);
  AStr("db.system", db.system);
  const std::string_view system = db.system;
  if (system == "redis") {
    AInt("db.redis.database_index", db.name[0] - '0');
  } else {
    AStr("db.name", db.name);
    AStr("db.user", db.user);
  }
  AStr("db.operation", op);
  AStr("db.statement", stmt);
  if (system == "postgresql") AStr("db.sql.table", table);
  if (system == "mongodb") AStr("db.mongodb.collection", table);
  AStr("server.address", db.address);
  AInt("server.port", db.port);
  AStr("network.peer.address", db.ip);
  AInt("network.peer.port", db.port);
  AStr("code.namespace", kServices[svc].code_namespace);
  AStr("code.function", code_fn);
  AInt("code.lineno", 20 + rng.Below(400));
  ThreadAttrs(svc);
  Seal(d, 0);
  const uint64_t end = t + Dur(db.median_us, 0.8);
  Close(d, end);
  return end;
}

uint64_t TraceBuilder::Internal(uint32_t parent, std::string_view name, const char* code_fn,
                                uint32_t fields, uint64_t t, double median_us) {
  const Svc svc = static_cast<Svc>(spans[parent].svc);
  const uint32_t d = Open(svc, SpanKind::kInternal, name, static_cast<int32_t>(parent), t);
  AStr("code.namespace", kServices[svc].code_namespace);
  AStr("code.function", code_fn);
  AInt("code.lineno", 10 + rng.Below(600));
  ThreadAttrs(svc);
  Seal(d, fields);
  const uint64_t end = t + Dur(median_us, 0.7);
  Close(d, end);
  return end;
}

uint64_t TraceBuilder::External(uint32_t parent, const char* method, const char* host,
                                std::string_view path, int status, uint64_t t, double median_us) {
  const Svc svc = static_cast<Svc>(spans[parent].svc);
  const uint32_t d = Open(svc, SpanKind::kClient, method, static_cast<int32_t>(parent), t);
  AStr("http.request.method", method);
  {
    const uint32_t b = Mark();
    text += "https://";
    text += host;
    text += path;
    Push("url.full", ValueType::kString, b);
  }
  AStr("server.address", host);
  AInt("server.port", 443);
  AIp("network.peer.address", static_cast<uint32_t>(rng.Next() >> 32) | 0x01000000u);
  AInt("network.peer.port", 443);
  AStr("network.protocol.version", "1.1");
  AInt("http.response.status_code", status);
  AInt("http.response.body.size", static_cast<int64_t>(rng.LogNormal(900, 0.5)));
  Seal(d, 0);
  const uint64_t end = t + Dur(median_us, 0.9);
  Close(d, end);
  return end;
}

void TraceBuilder::KafkaAttrs(bool consumer, uint32_t partition) {
  AStr("messaging.system", "kafka");
  AStr("messaging.destination.name", "orders");
  AStr("messaging.operation", consumer ? "process" : "publish");
  {
    const uint32_t b = Mark();
    AppendHex(text, ctx.request[0] ^ ctx.request[1], 16);
    Push("messaging.message.id", ValueType::kString, b);
  }
  {
    const uint32_t b = Mark();
    codec::AppendInt(text, ctx.order_id);
    Push("messaging.kafka.message.key", ValueType::kString, b);
  }
  AInt("messaging.kafka.destination.partition", partition);
  if (consumer) {
    AInt("messaging.kafka.message.offset", static_cast<int64_t>(rng.Next() >> 40));
    AStr("messaging.kafka.consumer.group", "order-consumers");
  }
  AStr("server.address", "kafka.shop.svc.cluster.local");
  AInt("server.port", 9092);
}

void TraceBuilder::Bind(std::initializer_list<std::string_view> lits) {
  if (!fresh) return;
  const std::string_view* v = lits.begin();
  const size_t n = lits.size();
  std::string out;
  out.reserve(stmt.size() + 64);
  size_t next = 0;  // the next `?`'s literal
  for (size_t i = 0; i < stmt.size();) {
    const char c = stmt[i];
    if (c == '$' && i + 1 < stmt.size() && stmt[i + 1] >= '1' && stmt[i + 1] <= '9') {
      const size_t k = static_cast<size_t>(stmt[i + 1] - '1');
      if (k < n) {
        out += v[k];
        i += 2;
        continue;
      }
    } else if (c == '?' && next < n) {
      out += v[next++];
      ++i;
      continue;
    }
    out += c;
    ++i;
  }
  stmt.swap(out);
}

std::string TraceBuilder::LitSku(uint32_t sku, bool quoted) {
  std::string s = quoted ? "'SKU-" : "SKU-";
  AppendPadded(s, sku, 5);
  if (quoted) s += '\'';
  return s;
}

std::string TraceBuilder::LitInt(int64_t v) {
  std::string s;
  codec::AppendInt(s, v);
  return s;
}

std::string TraceBuilder::LitPadded(uint64_t v, int width) {
  std::string s;
  AppendPadded(s, v, width);
  return s;
}

std::string TraceBuilder::LitText(std::string_view v) {
  std::string s = "'";
  s += v;
  s += '\'';
  return s;
}

std::string TraceBuilder::LitTime(uint32_t days) const {
  const uint64_t ns = spans[ctx.first].start - static_cast<uint64_t>(days) * 86400'000'000'000ull;
  const auto secs = static_cast<time_t>(ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[48];
  std::snprintf(buf, sizeof(buf), "'%04d-%02d-%02d %02d:%02d:%02d.%06u+00'", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<unsigned>(ns / 1000 % 1'000'000));
  return buf;
}

std::string TraceBuilder::Words(char sep) const {
  std::string s;
  uint32_t x = ctx.sku * 2654435761u;
  const int n = 1 + static_cast<int>(ctx.sku % 3);
  for (int i = 0; i < n; ++i) {
    if (i > 0) s += sep;
    s += kWords[(x >> (8 * i)) % std::size(kWords)];
  }
  return s;
}

void TraceBuilder::RedisKey(const char* cmd, const char* prefix, uint64_t id, int width) {
  stmt.assign(cmd);
  stmt += ' ';
  stmt += prefix;
  AppendPadded(stmt, id, width);
}

}  // namespace spanhouse::loadgen::corpus
