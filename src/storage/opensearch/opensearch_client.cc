#include "storage/opensearch/opensearch_client.h"

#include <simdjson.h>

#include <charconv>

#include "codec/value_text.h"

namespace spanhouse::storage::opensearch {

namespace {
// A field that may be absent: its lookup error is not one.
inline void Optional(simdjson::error_code /*absent*/) {}
}  // namespace

struct OpenSearchClient::Node {
  net::HttpUrl url;
  std::mutex mu;
  std::vector<std::unique_ptr<net::HttpClient>> idle;  // guarded by mu
};

OpenSearchClient::OpenSearchClient(OpenSearchOptions options) : opts_(std::move(options)) {}
OpenSearchClient::~OpenSearchClient() = default;

Status OpenSearchClient::Create(const OpenSearchOptions& options,
                                std::unique_ptr<OpenSearchClient>* out) {
  if (options.urls.empty()) return Status::Invalid("opensearch: no node URL");
  std::unique_ptr<OpenSearchClient> c(new OpenSearchClient(options));
  for (const std::string& u : options.urls) {
    auto node = std::make_unique<Node>();
    std::string error;
    if (!net::ParseHttpUrl(u, &node->url, &error, /*allow_https=*/true)) {
      return Status::Invalid("opensearch: " + error);
    }
    c->nodes_.push_back(std::move(node));
  }
  if (!options.api_key.empty() && !options.user.empty()) {
    return Status::Invalid("opensearch: give either a user (basic auth) or an API key, not both");
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return Status::Invalid("opensearch: a client certificate needs both its file and its key");
  }
  if (!options.user.empty()) {
    c->auth_ = "Basic ";
    codec::AppendBase64(c->auth_, options.user + ":" + options.password);
  } else if (!options.api_key.empty()) {
    // The key as the cluster's API answers it: base64 of "id:api_key".
    c->auth_ = "ApiKey " + options.api_key;
  }
  *out = std::move(c);
  return Status::Ok();
}

std::unique_ptr<net::HttpClient> OpenSearchClient::Acquire(size_t node) {
  Node& n = *nodes_[node];
  {
    std::lock_guard<std::mutex> lock(n.mu);
    if (!n.idle.empty()) {
      auto c = std::move(n.idle.back());
      n.idle.pop_back();
      return c;
    }
  }
  net::HttpClientOptions o;
  o.timeout = opts_.timeout;
  o.max_body_bytes = opts_.max_answer_bytes;
  o.tls_ca_file = opts_.tls_ca_file;
  o.tls_cert_file = opts_.tls_cert_file;
  o.tls_key_file = opts_.tls_key_file;
  if (!auth_.empty()) o.extra_headers.emplace_back("Authorization", auth_);
  return std::make_unique<net::HttpClient>(n.url, std::move(o));
}

void OpenSearchClient::Release(size_t node, std::unique_ptr<net::HttpClient> client) {
  Node& n = *nodes_[node];
  std::lock_guard<std::mutex> lock(n.mu);
  if (n.idle.size() < 16) n.idle.push_back(std::move(client));
}

Status OpenSearchClient::Call(std::string_view method, std::string_view target, std::string* body,
                              std::string_view content_type, net::HttpResult* result) {
  const size_t first = next_.fetch_add(1, std::memory_order_relaxed);
  std::string last_error;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const size_t node = (first + i) % nodes_.size();
    auto client = Acquire(node);
    net::HttpResult r;
    bool answered;
    if (method != "GET") {
      net::HttpHeaders headers{{"Content-Type", std::string(content_type)}};
      bytes_sent_.fetch_add(body->size(), std::memory_order_relaxed);
      answered = client->SendTo(method, target, body, headers, &r);
    } else {
      answered = client->Get(target, &r);
    }
    if (!answered) {
      last_error = nodes_[node]->url.host_header + ": " + r.error;
      continue;  // the client closed its connection; dropped here
    }
    Release(node, std::move(client));
    if (r.status == 502 || r.status == 503 || r.status == 504) {
      last_error = nodes_[node]->url.host_header + ": HTTP " + std::to_string(r.status) + " " +
                   ErrorReason(r.body);
      if (i + 1 < nodes_.size()) continue;
    }
    *result = std::move(r);
    return Status::Ok();
  }
  return Status::Unavailable("opensearch unreachable: " + last_error);
}

Status OpenSearchClient::Post(std::string_view target, std::string body, net::HttpResult* result,
                              std::string_view content_type) {
  return Call("POST", target, &body, content_type, result);
}

Status OpenSearchClient::Post(std::string_view target, std::string* body, net::HttpResult* result,
                              std::string_view content_type) {
  return Call("POST", target, body, content_type, result);
}

Status OpenSearchClient::Get(std::string_view target, net::HttpResult* result) {
  std::string none;
  return Call("GET", target, &none, {}, result);
}

Status OpenSearchClient::PostJson(std::string_view target, std::string body, std::string* answer) {
  return SendJson("POST", target, std::move(body), answer);
}

Status OpenSearchClient::SendJson(std::string_view method, std::string_view target,
                                  std::string body, std::string* answer) {
  net::HttpResult r;
  SH_RETURN_IF_ERROR(Call(method, target, &body, "application/json", &r));
  if (r.status >= 200 && r.status < 300) {
    if (answer != nullptr) *answer = std::move(r.body);
    return Status::Ok();
  }
  std::string why = "opensearch " + std::string(target) + ": HTTP " + std::to_string(r.status) +
                    ": " + ErrorReason(r.body);
  // Credentials refused are the set-up's fault, not the request's: fixed,
  // the same request goes through (a sink keeps its spans meanwhile).
  if (r.status == 401 || r.status == 403) {
    return Status::Unavailable(why + " (the cluster refused the credentials)");
  }
  if (r.status == 429 || r.status == 503) return Status::Unavailable(why);
  if (r.status == 404) return {StatusCode::kNotFound, why};
  if (r.status >= 400 && r.status < 500) return Status::Invalid(why);
  return Status::Internal(why);
}

Status OpenSearchClient::Version(std::string* version, std::string* distribution) {
  net::HttpResult r;
  SH_RETURN_IF_ERROR(Get("/", &r));
  if (r.status != 200) {
    return Status::Unavailable("opensearch: GET / answered HTTP " + std::to_string(r.status) +
                               ": " + ErrorReason(r.body));
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view v, d;
  if (parser.parse(r.body).get(doc) != simdjson::SUCCESS ||
      doc["version"]["number"].get_string().get(v) != simdjson::SUCCESS) {
    return Status::Unavailable("opensearch: GET / did not answer with a version");
  }
  if (doc["version"]["distribution"].get_string().get(d) != simdjson::SUCCESS) d = "";
  *version = std::string(v);
  *distribution = std::string(d);
  return Status::Ok();
}

Status CheckEngine(std::string_view version, std::string_view distribution, EngineInfo* out) {
  EngineInfo e;
  e.version = std::string(version);
  e.engine =
      distribution == "opensearch" ? SearchEngine::kOpenSearch : SearchEngine::kElasticsearch;
  const auto parsed = std::from_chars(version.data(), version.data() + version.size(), e.major);
  if (parsed.ec != std::errc()) {
    return Status::Invalid("the cluster answered version '" + e.version + "', not a number");
  }
  const bool supported =
      e.engine == SearchEngine::kOpenSearch ? e.major == 1 || e.major == 2 : e.major == 7;
  if (!supported) {
    return Status::Invalid(
        std::string(EngineName(e.engine)) + " " + e.version +
        " is not supported: spanhouse reads and writes Jaeger's indices on Elasticsearch 7.x and "
        "OpenSearch 1.x and 2.x (the index templates it puts are the legacy _template kind, "
        "which Elasticsearch 8 deprecates and 6 types differently)");
  }
  *out = std::move(e);
  return Status::Ok();
}

Status OpenSearchClient::DetectEngine(EngineInfo* out) {
  std::string version, distribution;
  SH_RETURN_IF_ERROR(Version(&version, &distribution));
  return CheckEngine(version, distribution, out);
}

std::string_view EngineName(SearchEngine e) {
  return e == SearchEngine::kOpenSearch ? "OpenSearch" : "Elasticsearch";
}

std::string_view EngineId(SearchEngine e) {
  return e == SearchEngine::kOpenSearch ? "opensearch" : "elasticsearch";
}

std::string ErrorReason(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(body.data(), body.size()).get(doc) == simdjson::SUCCESS) {
    simdjson::dom::element err;
    if (doc["error"].get(err) == simdjson::SUCCESS) {
      std::string_view type, reason;
      if (err.is_string()) return std::string(err.get_string().value_unsafe());
      Optional(err["type"].get_string().get(type));
      Optional(err["reason"].get_string().get(reason));
      if (!type.empty() || !reason.empty()) return std::string(type) + ": " + std::string(reason);
    }
  }
  return std::string(body.substr(0, 300));
}

}  // namespace spanhouse::storage::opensearch
