// Who may use the listeners: the bearer-token guards (auth.*_tokens) and the
// TLS contexts (<listener>.tls_cert/tls_key) that serve hands to the OTLP
// receiver and the query API, loaded once at start-up.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "auth/bearer_auth.h"
#include "common/status.h"
#include "net/tls.h"
#include "server/config.h"

namespace spanhouse::server {

struct ListenerSecurity {
  std::unique_ptr<auth::Guard> ingest;  // OTLP/HTTP, OTLP/gRPC and Zipkin
  std::unique_ptr<auth::Guard> query;   // query API: all but /healthz, /readyz and the web UI
  std::shared_ptr<const net::TlsContext> ingest_tls;  // null: plain HTTP
  std::shared_ptr<const net::TlsContext> query_tls;
  // The ingest certificate chain and key as PEM text, for the OTLP/gRPC
  // listener (gRPC takes PEM, not an OpenSSL context); empty without TLS.
  std::string ingest_cert_pem;
  std::string ingest_key_pem;

  // Parses the tokens and loads the certificates: a file that cannot be read
  // fails start-up here, with its name. Warns about a listener reachable
  // from other machines without a token (or with tokens in clear text).
  static Status Load(const Config& cfg, ListenerSecurity* out);
  // Those warnings: one per listener bound beyond loopback with no token,
  // or with tokens but no TLS.
  static std::vector<std::string> Warnings(const Config& cfg);

  // Refusals by listener and reason, failed TLS handshakes: Prometheus text.
  void AppendMetrics(std::string& out) const;
};

}  // namespace spanhouse::server
