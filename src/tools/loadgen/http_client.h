// A keep-alive HTTP/1.1 client for one connection, on Boost.Beast. Calls are
// blocking for the caller; inside, each runs the connection's own io_context
// so that connect, write and read all honour one timeout (plain sync socket
// calls cannot time out). Not thread-safe: one per sending thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace spanhouse::loadgen {

// http://host[:port][/path]. host may be a name, an IPv4 address or [IPv6].
struct HttpUrl {
  std::string host;
  uint16_t port = 80;
  std::string target = "/";  // path (and query)
  std::string host_header;   // host[:port] as written
};
// False (and `error` set) if `s` is not such a URL; https is refused.
bool ParseHttpUrl(std::string_view s, HttpUrl* out, std::string* error);

struct HttpResult {
  int status = 0;
  double retry_after_s = -1;  // Retry-After in seconds; -1 when absent
  std::string body;
  std::string error;  // set when the call failed below HTTP (connect, I/O, timeout)
};

class HttpClient {
 public:
  HttpClient(HttpUrl url, std::chrono::milliseconds timeout);
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
  // GET `target` on the same host.
  bool Get(std::string_view target, HttpResult* result);

  void Close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace spanhouse::loadgen
