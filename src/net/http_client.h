// A keep-alive HTTP/1.1 client for one connection, on Boost.Beast: the
// loadgen's senders and the remote ClickHouse connection use it (the latter
// also over TLS, https://, the server's certificate verified). Calls are
// blocking for the caller; inside, each runs the connection's own io_context
// so that connect, write and read all honour one timeout (plain sync socket
// calls cannot time out). Not thread-safe: one per sending thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spanhouse::net {

// http(s)://host[:port][/path]. host may be a name, an IPv4 address or [IPv6].
struct HttpUrl {
  std::string host;
  uint16_t port = 80;
  std::string target = "/";  // path (and query)
  std::string host_header;   // host[:port] as written
  bool tls = false;          // https
};
// False (and `error` set) if `s` is not such a URL; https only when
// `allow_https` (default port 443).
bool ParseHttpUrl(std::string_view s, HttpUrl* out, std::string* error, bool allow_https = false);

// `s` percent-encoded for a query string's name or value (only A-Z a-z 0-9 - _ . ~ left as is).
std::string UrlEncode(std::string_view s);

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpResult {
  int status = 0;
  double retry_after_s = -1;  // Retry-After in seconds; -1 when absent
  std::string body;
  std::string error;    // set when the call failed below HTTP (connect, I/O, timeout)
  HttpHeaders headers;  // the answer's, with HttpClientOptions::keep_headers
  // A header of the answer ("" when absent or not kept); case-insensitive.
  std::string_view Header(std::string_view name) const;
};

struct HttpClientOptions {
  std::chrono::milliseconds timeout{10000};  // connect, write and read, each call
  size_t max_body_bytes = 16u << 20;         // an answer's body; more fails the call
  bool keep_headers = false;                 // the answer's headers in HttpResult
  std::string user_agent = "spanhouse/0.1";
  // https: the CA certificates (PEM) the server's certificate must chain to;
  // "": the system's. The name in the URL must match the certificate.
  std::string tls_ca_file;
  // https: a client certificate chain (PEM, leaf first) and its key, for a
  // server that asks for one; "": none.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Sent with every request (e.g. Authorization).
  HttpHeaders extra_headers;
};

class HttpClient {
 public:
  HttpClient(HttpUrl url, std::chrono::milliseconds timeout)
      : HttpClient(std::move(url), [timeout] {
          HttpClientOptions o;
          o.timeout = timeout;
          return o;
        }()) {}
  HttpClient(HttpUrl url, HttpClientOptions options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // POSTs `body` to the URL's target, connecting first if needed. `body` is
  // lent to the request and handed back unchanged (its capacity is kept).
  // True when an HTTP answer came back (any status); false on a connection
  // error or timeout, after which the connection is closed and the next call
  // reconnects.
  bool Post(std::string* body, std::string_view content_type, std::string_view content_encoding,
            HttpResult* result);
  // POSTs `body` (lent, as above) to `target` with `headers` besides the
  // client's own (Host, User-Agent, Content-Length).
  bool PostTo(std::string_view target, std::string* body, const HttpHeaders& headers,
              HttpResult* result);
  // As PostTo with another method ("PUT", "DELETE"); an empty body is sent
  // without one.
  bool SendTo(std::string_view method, std::string_view target, std::string* body,
              const HttpHeaders& headers, HttpResult* result);
  // GET `target` on the same host.
  bool Get(std::string_view target, HttpResult* result);

  void Close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace spanhouse::net
