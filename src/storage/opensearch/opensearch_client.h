// An OpenSearch (or Elasticsearch) cluster over its REST API: the node URLs
// of one cluster, tried in turn (a node that cannot be reached or answers
// 502/503/504 sends the call to the next), keep-alive connections pooled per
// node so that several threads may call at once, basic or API-key auth, TLS
// (with a client certificate when the cluster asks for one).
//
// Most calls are POSTs (the REST API takes POST for _bulk, _search, _count,
// _msearch, _refresh, _delete_by_query and _template); creating an index
// (the first index behind rollover aliases) is a PUT.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "net/http_client.h"

namespace spanhouse::storage::opensearch {

struct OpenSearchOptions {
  std::vector<std::string> urls;  // http(s)://host:port of each node
  std::string user;               // basic auth when set
  std::string password;
  std::string api_key;        // "Authorization: ApiKey <api_key>" when set (base64 of id:key)
  std::string tls_ca_file;    // https: the CA certificates; "": the system's
  std::string tls_cert_file;  // https: a client certificate (PEM) and its key, or ""
  std::string tls_key_file;
  std::chrono::milliseconds timeout{30000};
  size_t max_answer_bytes = 256u << 20;
};

enum class SearchEngine { kOpenSearch, kElasticsearch };
std::string_view EngineName(SearchEngine e);  // "OpenSearch", "Elasticsearch"
// The name configuration and flags give it: "opensearch", "elasticsearch".
std::string_view EngineId(SearchEngine e);

struct EngineInfo {
  SearchEngine engine = SearchEngine::kOpenSearch;
  std::string version;  // "7.10.2"
  int major = 0;
};

// The engine of GET /'s version number and distribution, checked against
// those spanhouse supports (Elasticsearch 7.x, OpenSearch 1.x and 2.x);
// kInvalidArgument naming the engine and version otherwise.
Status CheckEngine(std::string_view version, std::string_view distribution, EngineInfo* out);

class OpenSearchClient {
 public:
  // Checks the URLs (nothing is contacted yet).
  static Status Create(const OpenSearchOptions& options, std::unique_ptr<OpenSearchClient>* out);
  ~OpenSearchClient();

  // POSTs `body` (JSON, or NDJSON for _bulk/_msearch) to `target` ("/_bulk").
  // OK with the answer for any HTTP status (the caller reads it); kUnavailable
  // when no node answered (or each answered 502/503/504).
  Status Post(std::string_view target, std::string body, net::HttpResult* result,
              std::string_view content_type = "application/json");
  // As Post, `body` lent to the call and handed back unchanged (a caller
  // that may send it again keeps it without a copy).
  Status Post(std::string_view target, std::string* body, net::HttpResult* result,
              std::string_view content_type = "application/json");
  // GET `target`, as Post.
  Status Get(std::string_view target, net::HttpResult* result);
  // Post, then a Status from the HTTP status: OK for 2xx; the cluster's
  // reason (its error.type and error.reason) otherwise: 401/403 (credentials
  // refused), 429 and 503 kUnavailable,
  // 404 kNotFound, another 4xx kInvalidArgument, 5xx kInternal.
  Status PostJson(std::string_view target, std::string body, std::string* answer);
  // As PostJson with another method (PUT, DELETE).
  Status SendJson(std::string_view method, std::string_view target, std::string body,
                  std::string* answer);

  // The cluster's version ("2.19.6") and distribution ("opensearch", or ""
  // for Elasticsearch), read from GET /.
  Status Version(std::string* version, std::string* distribution);
  // Version, then CheckEngine.
  Status DetectEngine(EngineInfo* out);

  uint64_t bytes_sent() const { return bytes_sent_.load(std::memory_order_relaxed); }
  const OpenSearchOptions& options() const { return opts_; }

 private:
  struct Node;
  explicit OpenSearchClient(OpenSearchOptions options);
  std::unique_ptr<net::HttpClient> Acquire(size_t node);
  void Release(size_t node, std::unique_ptr<net::HttpClient> client);
  Status Call(std::string_view method, std::string_view target, std::string* body,
              std::string_view content_type, net::HttpResult* result);

  const OpenSearchOptions opts_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::atomic<size_t> next_{0};  // the node a call starts with (round robin)
  std::string auth_;             // "Basic <base64>" or ""
  std::atomic<uint64_t> bytes_sent_{0};
};

// The reason in an error answer: "<error.type>: <error.reason>", or the
// start of the body when it has no such object.
std::string ErrorReason(std::string_view body);

}  // namespace spanhouse::storage::opensearch
