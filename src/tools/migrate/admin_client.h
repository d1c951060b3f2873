// What the migration commands share: a client of a spanhouse's query
// listener (/api/admin/...), and the times they take on the command line.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "net/http_client.h"

namespace spanhouse::migrate {

class AdminClient {
 public:
  // `url`: http(s)://host:port of the query listener; `token`: a bearer token
  // of auth.query_tokens, or "".
  static Status Open(const std::string& url, const std::string& token, const std::string& ca_file,
                     std::unique_ptr<AdminClient>* out);
  // GET `target` ("/api/admin/..."): the body of a 200, else the server's message.
  Status Get(const std::string& target, std::string* body);
  // POSTs NDJSON; 503 answers are retried (with the Retry-After delay) up to
  // `attempts` times.
  Status PostNdjson(const std::string& target, std::string body, std::string* answer,
                    int attempts = 30);

 private:
  AdminClient() = default;
  std::unique_ptr<net::HttpClient> client_;
  std::string base_;
};

// "2026-12-03T10:00:00Z" (or with a fraction, or without the Z: UTC) or unix
// seconds -> unix microseconds.
bool ParseTime(std::string_view text, uint64_t* unix_us);
// Unix microseconds as 2026-12-03T10:00:00Z.
std::string FormatTime(uint64_t unix_us);
// "3600", "90s", "15m", "1h", "1d" -> seconds.
bool ParseDuration(std::string_view text, uint64_t* seconds);
using net::UrlEncode;

}  // namespace spanhouse::migrate
