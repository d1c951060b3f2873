#include "server/listener_security.h"

#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

#include <fmt/format.h>

#include "net/http_server.h"
#include "ui/ui_server.h"

namespace spanhouse::server {

namespace {

Status LoadTls(const std::string& listener, const std::string& cert, const std::string& key,
               std::shared_ptr<const net::TlsContext>* out) {
  if (cert.empty()) return Status::Ok();  // Validate saw to "both or neither"
  Status st = net::TlsContext::Load(cert, key, out);
  if (!st.ok()) return Status::Invalid(listener + ": " + st.message());
  return st;
}

Status ReadPem(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in) return Status::Invalid("cannot read " + path);
  *out = ss.str();
  return Status::Ok();
}

Status LoadGuard(const std::string& listener, const std::string& key, const std::string& tokens,
                 std::vector<std::string> open_paths, auth::Guard::PathPredicate also_open,
                 std::unique_ptr<auth::Guard>* out) {
  auth::TokenSet set;
  if (Status st = auth::TokenSet::Parse(tokens, &set); !st.ok()) {
    return Status::Invalid("config key '" + key + "': " + st.message());
  }
  *out = std::make_unique<auth::Guard>(listener, std::move(set), std::move(open_paths), also_open);
  return Status::Ok();
}

// Loopback-only listeners are reachable from this machine alone, which is
// why they are the default and need neither tokens nor TLS.
void WarnIfExposed(const std::string& listener, const std::string& address,
                   const std::string& tokens_key, const std::string& tokens, bool tls,
                   std::vector<std::string>* out) {
  if (net::IsLoopbackAddress(address)) return;
  if (tokens.find_first_not_of(" \t,") == std::string::npos) {
    out->push_back(fmt::format(
        "{} listens on {}, reachable from other machines, and {} is empty: anyone who can "
        "connect is let in",
        listener, address, tokens_key));
  } else if (!tls) {
    out->push_back(fmt::format(
        "{} listens on {} without TLS: its bearer tokens cross the network in clear text", listener,
        address));
  }
}

}  // namespace

Status ListenerSecurity::Load(const Config& cfg, ListenerSecurity* out) {
  ListenerSecurity s;
  if (Status st = LoadGuard("otlp_http", "auth.ingest_tokens", cfg.auth.ingest_tokens, {}, nullptr,
                            &s.ingest);
      !st.ok()) {
    return st;
  }
  // The web UI's files and pages hold no data: a browser loads them without a
  // token, and the UI sends the token with its /api requests.
  if (Status st = LoadGuard("query", "auth.query_tokens", cfg.auth.query_tokens,
                            {"/healthz", "/readyz"}, ui::IsUiPath, &s.query);
      !st.ok()) {
    return st;
  }
  if (Status st =
          LoadTls("otlp_http", cfg.otlp_http.tls_cert, cfg.otlp_http.tls_key, &s.ingest_tls);
      !st.ok()) {
    return st;
  }
  if (!cfg.otlp_http.tls_cert.empty()) {
    for (const auto& [path, pem] : {std::pair{&cfg.otlp_http.tls_cert, &s.ingest_cert_pem},
                                    std::pair{&cfg.otlp_http.tls_key, &s.ingest_key_pem}}) {
      if (Status st = ReadPem(*path, pem); !st.ok()) {
        return Status::Invalid("otlp_grpc: " + st.message());
      }
    }
  }
  if (Status st = LoadTls("query", cfg.query.tls_cert, cfg.query.tls_key, &s.query_tls); !st.ok()) {
    return st;
  }
  for (const std::string& warning : Warnings(cfg)) spdlog::warn("{}", warning);
  *out = std::move(s);
  return Status::Ok();
}

std::vector<std::string> ListenerSecurity::Warnings(const Config& cfg) {
  std::vector<std::string> out;
  WarnIfExposed("otlp_http", cfg.otlp_http.listen, "auth.ingest_tokens", cfg.auth.ingest_tokens,
                !cfg.otlp_http.tls_cert.empty(), &out);
  // The other receivers share the OTLP/HTTP listener's tokens and certificate.
  for (const auto& [listener, address] :
       {std::pair{"otlp_grpc", &cfg.otlp_grpc.listen}, std::pair{"zipkin", &cfg.zipkin.listen}}) {
    if (address->empty()) continue;
    WarnIfExposed(listener, *address, "auth.ingest_tokens", cfg.auth.ingest_tokens,
                  !cfg.otlp_http.tls_cert.empty(), &out);
  }
  WarnIfExposed("query", cfg.query.listen, "auth.query_tokens", cfg.auth.query_tokens,
                !cfg.query.tls_cert.empty(), &out);
  return out;
}

void ListenerSecurity::AppendMetrics(std::string& out) const {
  auth::AppendMetrics(out, {ingest.get(), query.get()});
  out += "# TYPE spanhouse_tls_handshake_failures_total counter\n";
  const std::pair<const char*, const net::TlsContext*> tls[] = {{"otlp_http", ingest_tls.get()},
                                                                {"query", query_tls.get()}};
  for (const auto& [listener, ctx] : tls) {
    if (ctx == nullptr) continue;
    out += fmt::format("spanhouse_tls_handshake_failures_total{{listener=\"{}\"}} {}\n", listener,
                       ctx->handshake_failures());
  }
}

}  // namespace spanhouse::server
