// A ClickHouse server outside this process, over its HTTP interface: one
// replica of a cluster's shard, or a single server. A SqlConnection like the
// embedded one, plus inserts whose rows travel as the request's body.
//
// Keep-alive, one statement at a time. Errors come as a non-200 status with
// the exception's text (and, on newer servers, X-ClickHouse-Exception-Code),
// or, once the answer has started, as the exception's text at the end of a
// 200 body; both become a Status whose message keeps the server's "Code: N"
// (insert_errors.h classes it: retry or dead letter). A server that cannot be
// reached, or answers with a bare 5xx, is kUnavailable.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codec/compressor.h"
#include "common/status.h"
#include "net/http_client.h"
#include "storage/clickhouse/sql_connection.h"

namespace spanhouse::storage {

struct RemoteOptions {
  std::string url;  // the HTTP interface: http://host:port, or https://host:port
  // https: the CA certificates (PEM) the server's certificate must chain to;
  // "": the system's.
  std::string tls_ca_file;
  // Insert bodies compressed: "none" or "gzip" (every version takes gzip
  // request bodies; 18.16 refuses zstd).
  std::string compression = "none";
  std::string user = "default";
  std::string password;
  std::string database;  // the statements' default database; "" for the server's
  std::chrono::milliseconds timeout{60000};
  size_t max_result_bytes = size_t{1} << 30;
};

class RemoteConnection final : public SqlConnection {
 public:
  // Connects and reads the server's version; fails with what went wrong
  // (nothing listening, a wrong password, no such database).
  static Status Open(const RemoteOptions& options, std::unique_ptr<RemoteConnection>* out);

  // `params` go as the server's query parameters ({name:Type}).
  Status Run(std::string_view sql, std::string_view format, QueryResult* result,
             const std::vector<QueryParam>& params) override;
  // The rows in `data` are the request's body; `settings` go in the URL (every
  // server version takes them there).
  Status Insert(std::string_view insert, std::string data,
                const std::vector<QueryParam>& settings = {}) override;
  void Close() override;
  uint64_t bytes_sent() const override { return bytes_sent_.load(); }

  const std::string& version() const { return version_; }  // e.g. "18.16.1"
  const std::string& url() const { return opts_.url; }

 private:
  explicit RemoteConnection(RemoteOptions options);
  // POSTs `body` with `query` (URL-encoded) in the query string, if any.
  Status Post(std::string_view query, std::string body, const std::vector<QueryParam>& params,
              const std::vector<QueryParam>& settings, QueryResult* result, bool compress = false);
  Status ErrorOf(const net::HttpResult& r) const;

  const RemoteOptions opts_;
  net::HttpUrl url_;
  std::string version_;
  // The server binds {name:Type} itself; else Run inlines the values.
  bool query_params_ = true;
  std::mutex mu_;                                  // one statement at a time
  std::unique_ptr<net::HttpClient> client_;        // guarded by mu_; null once closed
  std::unique_ptr<codec::Compressor> compressor_;  // guarded by mu_; null: none
  std::atomic<uint64_t> bytes_sent_{0};
};

// The server's exception at the end of a 200 body (it failed after it began
// answering), or "" when the body ends with none.
std::string TrailingException(std::string_view body);

using net::UrlEncode;

}  // namespace spanhouse::storage
